// A function that misbehaves in odd ways still gets a Fatal result, never an
// INTERNAL status, and the response always echoes the tag Crossplane sent.
import { fromBinary, toBinary, type JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { RunFunctionRequestSchema, RunFunctionResponseSchema, Severity } from "../../src/gen/fn/v1/run_function_pb.js";
import type { RunFunction } from "../../src/function.js";
import { runInNewContext } from "node:vm";
import * as sdkRequest from "../../src/sdk/request.js";
import * as response from "../../src/sdk/response.js";
import { createHandler, runningCalls, soleCall, unpollute } from "../../src/server/handler.js";
import { messageOf } from "../../src/sdk/errors.js";
import { encodeRequest } from "../../src/wire/codec.js";
import { memoryLog } from "../support/log.js";
import { request } from "../support/requests.js";

const R = suite("server: odd failures");

async function call(fn: RunFunction) {
  const h = createHandler(fn, { maxConcurrency: 1, maxQueue: 1, maxResponseBytes: 4 << 20 }, memoryLog().log);
  const res = await h.handle(toBinary(RunFunctionRequestSchema, request()), { version: "v1", deadline: Date.now() + 10_000 });
  if (!("ok" in res)) throw new Error(`gRPC status ${res.code}: ${res.details}`);
  return fromBinary(RunFunctionResponseSchema, res.ok);
}

const throwers: Record<string, { reason: string; fn: RunFunction; want: RegExp }> = {
  NullPrototype: {
    reason: "String() throws on an object with no prototype",
    fn: () => {
      throw Object.create(null);
    },
    want: /function failed: a thrown \[object Object\] that cannot be shown as text/,
  },
  MessageGetterThrows: {
    reason: "an Error whose message getter throws",
    fn: () => {
      const e = new Error("x");
      Object.defineProperty(e, "message", {
        get() {
          throw new Error("no message for you");
        },
      });
      throw e;
    },
    want: /function failed: a thrown \[object Error\] that cannot be shown as text/,
  },
  Symbol: {
    reason: "a Symbol",
    fn: () => {
      throw Symbol("odd");
    },
    want: /function failed: Symbol\(odd\)/,
  },
  CauseChain: {
    reason: "an SDK error says what it was doing, its cause why: both reach the result",
    fn: (req) =>
      sdkRequest.getInput(req, () => {
        throw new Error("spec.size: expected a number", { cause: new Error("got the string ten") });
      }),
    want: /function failed: cannot parse function input: spec\.size: expected a number: got the string ten/,
  },
  CauseCycle: {
    reason: "causes that point back at each other end",
    fn: () => {
      const a = new Error("a");
      const b = new Error("b", { cause: a });
      (a as { cause?: unknown }).cause = b;
      throw a;
    },
    want: /^function failed: a: b$/,
  },
  CauseGetterThrows: {
    reason: "a cause getter that throws leaves the message",
    fn: () => {
      const e = new Error("outer");
      Object.defineProperty(e, "cause", {
        get() {
          throw new Error("no");
        },
      });
      throw e;
    },
    want: /^function failed: outer$/,
  },
  RejectsWithNullPrototype: {
    reason: "an async function rejecting with such an object",
    fn: async () => Promise.reject(Object.create(null)),
    want: /cannot be shown as text/,
  },
};
for (const [name, tc] of Object.entries(throwers)) {
  R(`a Fatal result, not INTERNAL: ${name}`, async () => {
    const rsp = await call(tc.fn);
    assert.is(rsp.results[0]?.severity, Severity.FATAL, tc.reason);
    assert.match(rsp.results[0]?.message ?? "", tc.want, tc.reason);
    assert.is(rsp.meta?.tag, "tag-1");
  });
}

R("a function that changes req.meta.tag does not change the tag echoed, returned or thrown", async () => {
  const changed = await call((req) => {
    req.meta!.tag = "mine";
    return response.to(req);
  });
  assert.is(changed.meta?.tag, "tag-1");
  const dropped = await call((req) => {
    delete req.meta;
    const rsp = response.to(req);
    delete rsp.meta;
    return rsp;
  });
  assert.is(dropped.meta?.tag, "tag-1");
  const thrown = await call((req) => {
    req.meta!.tag = "mine";
    throw new Error("then failed");
  });
  assert.is(thrown.meta?.tag, "tag-1");
  assert.is(thrown.results[0]?.severity, Severity.FATAL);
});

/** merge is the naive deep merge behind most prototype pollution: a "__proto__" key in src reaches Object.prototype. */
function merge(target: Record<string, unknown>, src: Record<string, unknown>): Record<string, unknown> {
  for (const k in src) {
    const v = src[k];
    if (typeof v === "object" && v !== null) merge((target[k] ??= {}) as Record<string, unknown>, v as Record<string, unknown>);
    else target[k] = v;
  }
  return target;
}

R(
  "a function polluting Object.prototype (a merge of input with a __proto__ key) fails its own call naming the key; later calls are whole",
  async () => {
    const mem = memoryLog();
    const h = createHandler(
      (req) => {
        const rsp = response.to(req);
        const spec = sdkRequest.getObservedCompositeResource(req)!["spec"] as Record<string, unknown>;
        response.setDesiredCompositeStatus(rsp, merge({}, (spec["patch"] as Record<string, unknown>) ?? {}));
        return rsp;
      },
      { maxConcurrency: 1, maxQueue: 1, maxResponseBytes: 4 << 20 },
      mem.log,
    );
    const run = async (patch: string) => {
      // xfn's encoder writes an own "__proto__" key as it is (protobuf-es's fromJson would make it the prototype).
      const req = request();
      req.observed!.composite!.resource = JSON.parse(`{"kind": "X", "spec": {"patch": ${patch}}}`) as JsonObject;
      const res = await h.handle(encodeRequest(req), { version: "v1", deadline: Date.now() + 10_000 });
      if (!("ok" in res)) throw new Error(`gRPC status ${res.code}: ${res.details}`);
      return fromBinary(RunFunctionResponseSchema, res.ok);
    };
    try {
      // The decoder keeps "__proto__" from the wire as an ordinary key; the function's merge does the rest.
      const polluting = await run('{"__proto__": {"polluted": "yes"}, "size": 1}');
      assert.is(polluting.results.length, 1);
      assert.is(polluting.results[0]!.severity, Severity.FATAL);
      assert.match(polluting.results[0]!.message, /^the function added "polluted" to Object\.prototype, which every object inherits/);
      assert.is(polluting.desired, undefined, "the response made while polluted is not used");
      assert.not.ok("polluted" in {}, "removed");
      assert.ok(mem.lines().some((l) => l["level"] === "error" && String(l["msg"]).includes('"polluted"')));
      // Before: every later call failed to encode ("invalid int32: undefined") or carried the key.
      const after = await run('{"size": 2}');
      assert.equal(after.results, []);
      assert.equal(after.desired?.composite?.resource, { status: { size: 2 } });
    } finally {
      delete (Object.prototype as Record<string, unknown>)["polluted"];
    }
  },
);

R("unpollute removes only what was added since its baseline", () => {
  const proto = Object.prototype as Record<string, unknown>;
  const before = new Set(Object.keys(Object.prototype));
  assert.is(unpollute(before), undefined);
  try {
    proto["added1"] = 1;
    proto["added2"] = 2;
    assert.equal(unpollute(before), ["added1", "added2"]);
    assert.equal(Object.keys(Object.prototype), []);
    proto["kept"] = 3; // in the baseline: the module put it there as it loaded
    assert.is(unpollute(new Set(["kept"])), undefined);
    assert.is(({} as Record<string, unknown>)["kept"], 3);
  } finally {
    delete proto["added1"];
    delete proto["added2"];
    delete proto["kept"];
  }
});

R("soleCall names the call running its function when it is the only one, and no call when two are", async () => {
  // Another test file of this process may still be finishing a call (its host stopped, its last call not yet
  // answered): wait for a quiet thread, and name what never ends.
  for (const until = Date.now() + 10_000; runningCalls().length && Date.now() < until;) await new Promise((r) => setTimeout(r, 20));
  assert.equal(runningCalls(), [], "calls still running in this thread before the test");
  const seen: Array<Record<string, unknown> | undefined> = [];
  let release: () => void = () => {};
  const gate = new Promise<void>((r) => (release = r));
  const h = createHandler(
    async (req) => {
      seen.push(soleCall());
      if (sdkRequest.getObservedCompositeResource(req)!["kind"] === "Two") await gate;
      seen.push(soleCall());
      return response.to(req);
    },
    { maxConcurrency: 4, maxQueue: 4, maxResponseBytes: 4 << 20 },
    memoryLog().log,
  );
  const bytes = (kind: string, tag: string) =>
    toBinary(
      RunFunctionRequestSchema,
      request({ meta: { tag }, observed: { composite: { resource: { kind, metadata: { name: "n" } } } } }),
    );
  const info = { version: "v1" as const, deadline: Date.now() + 10_000 };
  await h.handle(bytes("One", "alone"), info);
  assert.equal(seen.splice(0), [
    { tag: "alone", version: "v1", xr: "One/n" },
    { tag: "alone", version: "v1", xr: "One/n" },
  ]);
  const both = [h.handle(bytes("Two", "first"), info), h.handle(bytes("Two", "second"), info)];
  await new Promise((r) => setTimeout(r, 20));
  release();
  await Promise.all(both);
  assert.equal(seen[1], undefined, "two running: neither named");
  assert.equal(soleCall(), undefined, "none running after");
});

R(
  "a call answered in time but using more than half of the time it had is logged as slow; a quick one, or one with time to spare, is not",
  async () => {
    const mem = memoryLog();
    const h = createHandler(
      async (req) => {
        const ms = Number((sdkRequest.getObservedCompositeResource(req)!["spec"] as Record<string, unknown>)["ms"]);
        await new Promise((r) => setTimeout(r, ms));
        return response.to(req);
      },
      { maxConcurrency: 2, maxQueue: 2, maxResponseBytes: 4 << 20 },
      mem.log,
    );
    const run = async (ms: number, deadlineMs: number) => {
      const req = request({ observed: { composite: { resource: { kind: "X", metadata: { name: "x" }, spec: { ms } } } } });
      const res = await h.handle(toBinary(RunFunctionRequestSchema, req), { version: "v1", deadline: Date.now() + deadlineMs });
      assert.ok("ok" in res, "answered");
    };
    const slow = () => mem.lines().filter((l) => String(l["msg"]).startsWith("slow call"));
    await run(1200, 2000);
    assert.is(slow().length, 1);
    assert.match(
      String(slow()[0]!["msg"]),
      /^slow call: it took 1\.[2-9] s of the 2 s it had \(the caller's deadline\); past that it is ended$/,
    );
    // Node's timers keep millisecond time: a 1200 ms wait can measure a fraction under it.
    assert.ok((slow()[0]!["durationMs"] as number) >= 1190, `took ${slow()[0]!["durationMs"]} ms`);
    assert.is(slow()[0]!["xr"], "X/x");
    await run(1200, 10_000); // time to spare
    await run(50, 60); // most of its time, but quick
    await run(1100, Infinity); // no deadline
    assert.is(slow().length, 1);
    // The server's --timeout (as the pool, or the server in process, says it is) is named as such.
    const req = request({ observed: { composite: { resource: { kind: "X", metadata: { name: "x" }, spec: { ms: 1200 } } } } });
    await h.handle(toBinary(RunFunctionRequestSchema, req), { version: "v1", deadline: Date.now() + 2000, timeoutMs: 2000 });
    assert.match(String(slow()[1]!["msg"]), /^slow call: it took 1\.[2-9] s of the 2 s it had \(the server's --timeout\)/);
  },
);

R("a full queue logs its first refusal at once and sums up the rest, then keeps serving", async () => {
  const mem = memoryLog();
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const h = createHandler(
    async (req) => {
      await gate;
      return response.to(req);
    },
    { maxConcurrency: 1, maxQueue: 1, maxResponseBytes: 4 << 20, refusedReportMs: 100 },
    mem.log,
  );
  const send = (tag: string) =>
    h.handle(toBinary(RunFunctionRequestSchema, request({ meta: { tag } })), { version: "v1", deadline: Date.now() + 10_000 });
  const running = send("a");
  await new Promise((r) => setTimeout(r, 10));
  const queued = send("b");
  await new Promise((r) => setTimeout(r, 10));
  const refused = await Promise.all(["c", "d", "e", "f", "g"].map(send));
  for (const r of refused) assert.equal(r, { code: 8, details: "server busy: 1 requests running and 1 queued (limit 1); retry later" });
  const warned = () => mem.lines().filter((l) => l["level"] === "warn");
  assert.equal(
    warned().map((l) => [l["msg"], l["tag"], l["refused"]]),
    [["server busy: 1 requests running and 1 queued (limit 1); retry later", "c", undefined]],
    "one line for the first refusal, with its call's tag",
  );
  await new Promise((r) => setTimeout(r, 250));
  assert.equal(
    warned().map((l) => [l["msg"], l["refused"]]),
    [
      ["server busy: 1 requests running and 1 queued (limit 1); retry later", undefined],
      ["refused 4 more calls in the last 0.1 s; the latest: server busy: 1 requests running and 1 queued (limit 1); retry later", 4],
    ],
  );
  release();
  for (const r of await Promise.all([running, queued])) assert.ok("ok" in r, JSON.stringify(r));
  assert.ok("ok" in (await send("h")), "the queue has room again");
});

R("messageOf never throws", () => {
  const revoked = Proxy.revocable({}, {});
  revoked.revoke();
  assert.type(messageOf(revoked.proxy), "string");
  assert.is(messageOf(new Error("plain")), "plain");
  assert.is(messageOf(7), "7");
  // An error made in another realm is not an instanceof this realm's Error, and still says its message.
  assert.is(messageOf(runInNewContext('new Error("from a vm context")')), "from a vm context");
  assert.is(messageOf(undefined), "undefined");
});

R.run();
