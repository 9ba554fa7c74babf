// Deeply nested JSON (CRD schemas arrive as required resources and schemas)
// is served as deep as Crossplane's own Go decoder takes it: 10,000 nested
// messages, 5,000 levels of JSON, through the real server and xfn's client,
// and past that a clear error naming the limit. (It was 49 levels once, then
// 2,000, where the codec's recursion would run out of stack.)
import { create, type JsonValue } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { dial } from "../../src/client/client.js";
import { RunFunctionRequestSchema, RunFunctionResponseSchema, Severity } from "../../src/gen/fn/v1/run_function_pb.js";
import * as request from "../../src/sdk/request.js";
import * as response from "../../src/sdk/response.js";
import { serve, type RunningServer } from "../../src/server/server.js";
import { decodeResponse, encodeRequest, encodeResponse } from "../../src/wire/codec.js";
import { varintBytes } from "../support/wire.js";
import { rawClient } from "../support/client.js";
import { memoryLog } from "../support/log.js";
import { nest } from "../support/requests.js";

const N = suite("wire: deep nesting");

function depthOf(v: JsonValue | undefined): number {
  let n = 0;
  while (typeof v === "object" && v !== null && !Array.isArray(v)) {
    v = v["a"];
    n++;
  }
  return n;
}

/**
 * requestBytes is a RunFunctionRequest whose input nests `levels` deep, built
 * by hand from the inside out: protobuf-es's recursive encoder runs out of
 * stack near 1,000 levels, and xfn's refuses past 5,000.
 */
function requestBytes(levels: number): Uint8Array {
  // One length-delimited field; Buffer.concat keeps the inside-out copying native.
  const ld = (tag: number, body: Uint8Array) => Buffer.concat([Buffer.from([tag, ...varintBytes(body.length)]), body]);
  let value: Uint8Array = ld(0x1a, Buffer.from("leaf")); // Value.string_value
  let struct: Uint8Array = new Uint8Array();
  for (let i = 0; i < levels; i++) {
    struct = ld(0x0a, Buffer.concat([ld(0x0a, Buffer.from("a")), ld(0x12, value)])); // Struct.fields: key "a", value
    value = ld(0x2a, struct); // Value.struct_value
  }
  return ld(0x22, struct); // RunFunctionRequest.input
}

let srv: RunningServer;
N.before(async () => {
  srv = await serve(
    (req) => {
      const rsp = response.to(req);
      response.setOutput(rsp, request.getInput(req));
      return rsp;
    },
    { address: "127.0.0.1:0", insecure: true },
    memoryLog().log,
  );
});
N.after(() => srv.stop(1000));

N("5,000 levels, as deep as Crossplane's Go decoder allows, go through the server and back intact", async () => {
  const c = rawClient(srv.port);
  try {
    const rsp = decodeResponse(await c.call(requestBytes(5000)));
    assert.equal(rsp.results, []);
    assert.is(depthOf(rsp.output), 5000);
  } finally {
    c.close();
  }
});

N("past 5,000 levels: a Fatal result naming the limit, and the server keeps serving", async () => {
  const c = rawClient(srv.port);
  try {
    const rsp = decodeResponse(await c.call(requestBytes(5001)));
    assert.is(rsp.results[0]?.severity, Severity.FATAL);
    assert.match(rsp.results[0]?.message ?? "", /nested more than 5000 levels deep/);
    assert.is(depthOf(decodeResponse(await c.call(requestBytes(300))).output), 300);
  } finally {
    c.close();
  }
});

N("xfn's own client (xfn call, render, test) sends and reads 5,000 levels", async () => {
  const c = dial(`127.0.0.1:${srv.port}`, { insecure: true });
  try {
    const rsp = await c.run(create(RunFunctionRequestSchema, { input: nest(5000) }));
    assert.is(depthOf(rsp.output), 5000);
  } finally {
    c.close();
  }
});

N("encoding refuses past 5,000 levels, naming the limit and where (the path shortened in the middle)", () => {
  let msg = "";
  try {
    encodeRequest(create(RunFunctionRequestSchema, { input: nest(5002) }));
  } catch (err) {
    msg = (err as Error).message;
  }
  assert.is(
    msg,
    `cannot encode RunFunctionRequest: input${".a".repeat(16)}...(4981 more)...${".a".repeat(4)} is nested more than 5000 deep`,
  );
  assert.is(depthOf(decodeResponse(encodeResponse(create(RunFunctionResponseSchema, { output: nest(5000) }))).output), 5000);
});

N.run();
