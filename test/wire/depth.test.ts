// Deeply nested JSON (CRD schemas arrive as required resources and schemas)
// is served, not refused at 49 levels: up to 2,000 levels through the real
// server and client, and past that a clear error naming the limit.
import type { JsonValue } from "@bufbuild/protobuf";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { Severity } from "../../src/gen/fn/v1/run_function_pb.js";
import * as request from "../../src/sdk/request.js";
import * as response from "../../src/sdk/response.js";
import { serve, type RunningServer } from "../../src/server/server.js";
import { decodeResponse } from "../../src/wire/codec.js";
import { varintBytes } from "../support/wire.js";
import { rawClient } from "../support/client.js";
import { memoryLog } from "../support/log.js";

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
 * stack near 1,000 levels, and xfn's refuses past 2,000.
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

/**
 * outputDepth walks a response's output Struct without recursion (protobuf-es
 * decodes only some 500 levels before its stack runs out) and says how deep
 * it nests, and whether the response has results.
 */
function outputDepth(bytes: Uint8Array): { depth: number; results: boolean } {
  const top = new BinaryReader(bytes);
  let output: Uint8Array | undefined;
  let results = false;
  while (top.pos < top.len) {
    const [no, wt] = top.tag();
    if (no === 7) output = top.bytes();
    else {
      if (no === 3) results = true;
      top.skip(wt);
    }
  }
  let depth = 0;
  let struct = output;
  while (struct) {
    const r = new BinaryReader(struct);
    struct = undefined;
    while (r.pos < r.len) {
      const [no, wt] = r.tag();
      if (no !== 1) {
        r.skip(wt);
        continue;
      }
      depth++;
      const entry = new BinaryReader(r.bytes());
      while (entry.pos < entry.len) {
        const [eno, ewt] = entry.tag();
        if (eno !== 2) {
          entry.skip(ewt);
          continue;
        }
        const value = new BinaryReader(entry.bytes());
        while (value.pos < value.len) {
          const [vno, vwt] = value.tag();
          if (vno === 5) struct = value.bytes();
          else value.skip(vwt);
        }
      }
    }
  }
  return { depth, results };
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

N("1,500 levels go through the server and the client intact", async () => {
  const c = rawClient(srv.port);
  try {
    assert.equal(outputDepth(await c.call(requestBytes(1500))), { depth: 1500, results: false });
  } finally {
    c.close();
  }
});

N("past 2,000 levels: a Fatal result naming the limit, and the server keeps serving", async () => {
  const c = rawClient(srv.port);
  try {
    const rsp = decodeResponse(await c.call(requestBytes(2100)));
    assert.is(rsp.results[0]?.severity, Severity.FATAL);
    assert.match(rsp.results[0]?.message ?? "", /nested more than 2000 levels deep/);
    assert.is(depthOf(decodeResponse(await c.call(requestBytes(300))).output), 300, "protobuf-es decodes this deep");
  } finally {
    c.close();
  }
});

N.run();
