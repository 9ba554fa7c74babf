// A function that misbehaves in odd ways still gets a Fatal result, never an
// INTERNAL status, and the response always echoes the tag Crossplane sent.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { RunFunctionRequestSchema, RunFunctionResponseSchema, Severity } from "../../src/gen/fn/v1/run_function_pb.js";
import type { RunFunction } from "../../src/function.js";
import * as sdkRequest from "../../src/sdk/request.js";
import * as response from "../../src/sdk/response.js";
import { createHandler, messageOf } from "../../src/server/handler.js";
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

R("messageOf never throws", () => {
  const revoked = Proxy.revocable({}, {});
  revoked.revoke();
  assert.type(messageOf(revoked.proxy), "string");
  assert.is(messageOf(new Error("plain")), "plain");
  assert.is(messageOf(7), "7");
});

R.run();
