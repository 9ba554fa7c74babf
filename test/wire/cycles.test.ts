// A value that contains itself cannot be encoded. The error names where the
// cycle first closes and how far up the object it repeats is, in a message of
// a few dozen characters: it used to name a path 5,000 steps long (25 KB in
// the Fatal result's message, which Crossplane puts in the XR's events).
// Shared objects that are not cycles still encode, once per place.
import { create, type JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { RunFunctionResponseSchema, Severity } from "../../src/gen/fn/v1/run_function_pb.js";
import { EncodingError } from "../../src/sdk/errors.js";
import * as response from "../../src/sdk/response.js";
import { serve } from "../../src/server/server.js";
import { decodeResponse, encodeResponse } from "../../src/wire/codec.js";
import { rawClient } from "../support/client.js";
import { memoryLog } from "../support/log.js";
import { request as req } from "../support/requests.js";

const C = suite("wire: cycles");

type Obj = Record<string, unknown>;

/** Each case builds a value with a cycle; path is where it first closes, up how many levels the repeated object is. */
const cycles: Record<string, { build: () => Obj; path: string; up: number }> = {
  "an object that holds itself": {
    build: () => {
      const o: Obj = { name: "x" };
      o["self"] = o;
      return o;
    },
    path: ".self",
    up: 1,
  },
  "through an object and a list": {
    build: () => {
      const o: Obj = { name: "x" };
      o["self"] = { list: [o] };
      return o;
    },
    path: ".self.list[0]",
    up: 3,
  },
  "a list that holds itself": {
    build: () => {
      const l: unknown[] = [1];
      l.push(l);
      return { l };
    },
    path: ".l[1]",
    up: 1,
  },
  "below the top": {
    build: () => {
      const x: Obj = { k: 1 };
      x["d"] = x;
      return { a: { b: { c: x } } };
    },
    path: ".a.b.c.d",
    up: 1,
  },
  "back to the top from four levels down": {
    build: () => {
      const root: Obj = {};
      root["a"] = { b: { c: { d: root } } };
      return root;
    },
    path: ".a.b.c.d",
    up: 4,
  },
  "past the depth where the codec stops recursing": {
    build: () => {
      const root: Obj = {};
      let at = root;
      for (let i = 0; i < 700; i++) at = at["n"] = {} as Obj;
      const x: Obj = {};
      x["self"] = x;
      at["x"] = x;
      return root;
    },
    path: `${".n".repeat(700)}.x.self`,
    up: 1,
  },
};

/** shortened is the path as a message writes it: up to 24 steps whole, else the first 16 and last 4. */
function shortened(path: string): string {
  const steps = path.match(/\.[a-z]+|\[\d+\]/g)!;
  return steps.length <= 24 ? path : `${steps.slice(0, 16).join("")}...(${steps.length - 20} more)...${steps.slice(-4).join("")}`;
}

for (const [name, tc] of Object.entries(cycles)) {
  const detail = `is the same object as the value ${tc.up} level${tc.up === 1 ? "" : "s"} up, which holds it: a cycle, which JSON cannot hold`;

  C(`a setter refuses ${name}, naming where it closes`, () => {
    const rsp = response.to(req());
    let caught: unknown;
    try {
      response.setOutput(rsp, tc.build() as JsonObject);
    } catch (err) {
      caught = err;
    }
    assert.ok(caught instanceof EncodingError, String(caught));
    assert.is(caught.message, `cannot set the output: the value at ${shortened(tc.path)} ${detail}`);
    assert.is(caught.path, tc.path);
    assert.is((caught.cause as Error).message, detail, "the cause says the same");
  });

  C(`encoding a response refuses ${name} put there directly, naming where it closes`, () => {
    const rsp = create(RunFunctionResponseSchema, { output: tc.build() as JsonObject });
    assert.throws(
      () => encodeResponse(rsp),
      (err: Error) => err.message === `output${shortened(tc.path)} ${detail}`,
    );
  });
}

C("an object shared by several places is not a cycle: it is written at each", () => {
  const shared = { k: 1, list: ["a"] };
  const out = { x: shared, y: { z: shared }, l: [shared, shared] };
  const rsp = response.to(req());
  response.setOutput(rsp, out);
  assert.equal(decodeResponse(encodeResponse(rsp)).output, JSON.parse(JSON.stringify(out)));
});

C("deep data that is not a cycle says so, with the path shortened in the middle", () => {
  const root: Obj = {};
  let at = root;
  for (let i = 0; i < 5100; i++) at = at["n"] = {} as Obj;
  let caught: unknown;
  try {
    response.setOutput(response.to(req()), root);
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof EncodingError, String(caught));
  assert.match(
    caught.message,
    /^cannot set the output: the value at (\.n){16}\.\.\.\(\d+ more\)\.\.\.(\.n){4} is nested more than 5000 deep$/,
  );
  assert.ok(!/cycle/.test(caught.message));
  assert.is(caught.path, ".n".repeat(caught.path.length / 2), "the whole path is kept on the error");
  assert.ok(caught.path.length > 10000);
});

C("through the server: a function returning a cycle gets a short Fatal result, and the server serves on", async () => {
  const mem = memoryLog();
  const srv = await serve(
    (r) => {
      const rsp = response.to(r);
      if (r.meta?.tag === "cycle") {
        const o: Obj = { apiVersion: "v1", kind: "K" };
        o["spec"] = { owner: o };
        rsp.desired!.composite = { resource: o as JsonObject, connectionDetails: {}, ready: 0 } as never;
      }
      return rsp;
    },
    { address: "127.0.0.1:0", insecure: true },
    mem.log,
  );
  const c = rawClient(srv.port);
  try {
    const bad = await c.run(req({ meta: { tag: "cycle" } }));
    assert.is(bad.results[0]?.severity, Severity.FATAL);
    assert.is(
      bad.results[0]?.message,
      "cannot encode the function's response: desired.composite.resource.spec.owner is the same object as the value 2 levels up, which holds it: a cycle, which JSON cannot hold",
    );
    const good = await c.run(req({ meta: { tag: "fine" } }));
    assert.equal(good.results, []);
  } finally {
    c.close();
    await srv.stop(1000);
  }
});

C.run();
