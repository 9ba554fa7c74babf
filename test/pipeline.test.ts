import { suite } from "uvu";
import * as assert from "uvu/assert";
import { Ready, Severity } from "../src/gen/fn/v1/run_function_pb.js";
import { freeze, pipeline, runSteps, step, type Step, type StepContext } from "../src/pipeline.js";
import * as response from "../src/sdk/response.js";
import { memoryLog } from "./support/log.js";
import { request } from "./support/requests.js";

const now = new Date("2026-01-01T00:00:00Z");
const P = suite("pipeline");

P("steps run in order over one response; a later step sees an earlier one's work", () => {
  const seen: string[] = [];
  const rsp = runSteps(
    [
      step("first", (ctx) => response.setDesiredComposedResource(ctx.rsp, "a", { kind: "A" })),
      step("second", (ctx) => seen.push(...Object.keys(ctx.rsp.desired!.resources))),
    ],
    request(),
    now,
  );
  assert.equal(seen, ["a"]);
  assert.equal(Object.keys(rsp.desired!.resources), ["a"]);
});

P("a throwing step becomes a Fatal result naming the step; later steps do not run", () => {
  let ran = false;
  const rsp = runSteps(
    [
      step("boom", () => {
        throw new Error("bad thing");
      }),
      step("after", () => (ran = true)),
    ],
    request(),
    now,
  );
  assert.not.ok(ran);
  assert.equal(
    rsp.results.map((r) => [r.severity, r.message, r.reason]),
    [[Severity.FATAL, "step boom: bad thing", "StepFailed"]],
  );
});

P("a step returning a Promise (an async step) is a Fatal result naming it, not a silent loss of its later writes", async () => {
  // Before: the pipeline went on without waiting, returned success with only
  // what the step did before its first await, and a rejection went unhandled
  // (on a worker thread that ended the worker and every call it held).
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on("unhandledRejection", onUnhandled);
  try {
    let ran = false;
    const asyncSteps = [
      async (ctx: StepContext) => {
        response.setDesiredCompositeStatus(ctx.rsp, { early: true });
        await Promise.resolve();
        response.setDesiredCompositeStatus(ctx.rsp, { late: true });
      },
      async () => {
        await Promise.resolve();
        throw new Error("failed after an await");
      },
      // A thenable that is not a Promise, whose then throws: still refused, nothing unhandled.
      () => ({
        then() {
          throw new Error("a then that throws");
        },
      }),
    ];
    for (const s of asyncSteps) {
      const rsp = runSteps([step("fetchThings", s as never), step("after", () => (ran = true))], request(), now);
      assert.equal(
        rsp.results.map((r) => [r.severity, r.reason]),
        [[Severity.FATAL, "StepFailed"]],
      );
      assert.match(rsp.results[0]!.message, /^step fetchThings: returned a Promise: a pipeline step must be synchronous/);
      assert.match(rsp.results[0]!.message, /what it does after an await would be lost/);
    }
    assert.not.ok(ran, "no step runs after an async one");
    // The same through pipeline(), as xfn serve runs it, for a bare async function too.
    const fn = pipeline((async () => {}) as never);
    const rsp = await fn(request(), { now: () => now } as never);
    assert.match(rsp.results[0]!.message, /^step 1: returned a Promise/);
    // Let the rejections settle: none may go unhandled.
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(unhandled, []);
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
});

P("step() refuses an async function at compile time; other return values are fine", () => {
  // @ts-expect-error: a step must be synchronous (tsc fails on an unused directive if this compiles).
  const bad = step("async", async () => {});
  const fine = [
    step("returnsResource", (ctx) => response.setDesiredComposedResource(ctx.rsp, "a", { kind: "A" })),
    step("returnsNothing", (ctx) => {
      response.setDesiredCompositeStatus(ctx.rsp, { ok: true });
    }),
    step("destructures", ({ rsp }) => response.normal(rsp, "hello")),
  ];
  const rsp = runSteps(fine, request(), now);
  assert.equal(Object.keys(rsp.desired!.resources), ["a"]);
  assert.is(rsp.results.map((r) => r.message).join(), "hello");
  assert.match(runSteps([bad], request(), now).results[0]!.message, /returned a Promise/);
});

P("an unnamed step is named by its function name, or its position", () => {
  function mine(): void {
    throw new Error("x");
  }
  assert.is(runSteps([mine], request(), now).results[0]!.message, "step mine: x");
  assert.is(
    runSteps(
      [
        () => {},
        (() => {
          throw new Error("y");
        }) as never,
      ],
      request(),
      now,
    ).results[0]!.message,
    "step 2: y",
  );
});

P("a held resource that does not exist yet is not created, and a Normal result says why", () => {
  const rsp = runSteps(
    [
      step("compose", (ctx) => response.setDesiredComposedResource(ctx.rsp, "subnet", { kind: "Subnet" })),
      step("gate", (ctx) => {
        ctx.hold("subnet", "vpc.status.atProvider.id");
        ctx.hold("subnet", "vpc.status.atProvider.id");
      }),
    ],
    request(),
    now,
  );
  assert.equal(rsp.desired!.resources, {});
  assert.equal(
    rsp.results.map((r) => r.message),
    ["subnet: waiting for vpc.status.atProvider.id; not creating it yet"],
  );
});

P("a held resource that exists keeps its last desired state (the request's), never deleted", () => {
  const rsp = runSteps(
    [
      step("compose", (ctx) => response.setDesiredComposedResource(ctx.rsp, "subnet", { kind: "Subnet", spec: { vpcId: null } })),
      step("gate", (ctx) => ctx.hold("subnet", "vpc to be ready")),
    ],
    request({
      observed: {
        composite: { resource: { kind: "X" } },
        resources: { subnet: { resource: { kind: "Subnet", spec: { vpcId: "v-1", extra: 1 } } } },
      },
      desired: { resources: { subnet: { resource: { kind: "Subnet", spec: { vpcId: "v-1" } } } } },
    }),
    now,
  );
  assert.equal(rsp.desired!.resources["subnet"]!.resource, { kind: "Subnet", spec: { vpcId: "v-1" } });
  assert.is(rsp.desired!.resources["subnet"]!.ready, Ready.FALSE);
  assert.match(rsp.results[0]!.message, /subnet: waiting for vpc to be ready; keeping it as it is/);
});

P("an existing held resource with no earlier desired state is kept as observed (spec and identity only)", () => {
  const observedSubnet = {
    apiVersion: "ec2/v1",
    kind: "Subnet",
    metadata: { name: "s-1", labels: { a: "b" }, uid: "u", resourceVersion: "7" },
    spec: { vpcId: "v-1" },
    status: { atProvider: { id: "s" } },
  };
  const rsp = runSteps(
    [
      step("compose", (ctx) => response.setDesiredComposedResource(ctx.rsp, "subnet", { kind: "Subnet" })),
      step("gate", (ctx) => ctx.hold("subnet", "x")),
    ],
    request({ observed: { composite: { resource: {} }, resources: { subnet: { resource: observedSubnet } } } }),
    now,
  );
  assert.equal(rsp.desired!.resources["subnet"]!.resource, freeze(observedSubnet));
  assert.equal(freeze(observedSubnet), {
    apiVersion: "ec2/v1",
    kind: "Subnet",
    metadata: { name: "s-1", labels: { a: "b" } },
    spec: { vpcId: "v-1" },
  });
});

P("requeueAfter lowers the TTL to the smallest asked for, never raises it", () => {
  const rsp = runSteps(
    [step("a", (ctx) => ctx.requeueAfter(30)), step("b", (ctx) => ctx.requeueAfter(10)), step("c", (ctx) => ctx.requeueAfter(120))],
    request(),
    now,
  );
  assert.is(response.getTTLSeconds(rsp), 10);
  assert.is(response.getTTLSeconds(runSteps([step("x", (ctx) => ctx.requeueAfter(300))], request(), now)), 60);
});

P("a step's own setTTL is one ask among the steps': the shortest wins, an override replaces what came before", () => {
  const ttl = (...steps: Step[]) => response.getTTLSeconds(runSteps(steps, request(), now));
  const set = (name: string, s: number, override = false) => step(name, (ctx) => response.setTTL(ctx.rsp, s, { override }));
  const cases: [string, Step[], number][] = [
    ["no step asks: the default", [step("none", () => {})], response.DEFAULT_TTL_SECONDS],
    ["one step lengthens it", [set("slow", 300)], 300],
    // function-auto-ready #170/#171, function-kcl #392: a later step's TTL reset an earlier one's.
    ["a later, longer TTL does not undo a shorter one", [set("fast", 10), set("slow", 300)], 10],
    [
      "nor does the same step setting it twice",
      [step("twice", (ctx) => (response.setTTL(ctx.rsp, 10), response.setTTL(ctx.rsp, 300)))],
      10,
    ],
    ["an ask equal to the default still counts", [set("sixty", 60), set("slow", 300)], 60],
    ["a requeue shortens a step's TTL", [set("slow", 300), step("wait", (ctx) => ctx.requeueAfter(5))], 5],
    ["a requeue alone never lengthens the default", [step("wait", (ctx) => ctx.requeueAfter(300))], 60],
    ["0 (no limit) is no ask beside a positive one", [set("none", 0), set("fast", 20)], 20],
    ["0 alone: no limit", [set("none", 0)], 0],
    ["an override replaces earlier asks", [set("fast", 10), step("wait", (ctx) => ctx.requeueAfter(5)), set("final", 120, true)], 120],
    ["later asks still shorten an override", [set("final", 120, true), set("fast", 30)], 30],
    ["but not lengthen it", [set("final", 120, true), set("slow", 600)], 120],
    [
      "an override keeps its own step's requeue",
      [step("both", (ctx) => (ctx.requeueAfter(7), response.setTTL(ctx.rsp, 120, { override: true })))],
      7,
    ],
  ];
  for (const [what, steps, want] of cases) assert.is(ttl(...steps), want, what);
});

P("pipeline() serves through RunFunction with the context's clock, and rejects non-functions", async () => {
  let seen: Date | undefined;
  const fn = pipeline(step("clock", (ctx) => (seen = ctx.now)));
  await fn(request(), { signal: new AbortController().signal, log: memoryLog().log, now: () => now });
  assert.equal(seen, now);
  assert.throws(
    () =>
      pipeline(
        step("ok", () => {}),
        "nope" as never,
      ),
    /step 2 is string, not a function/,
  );
});

P.run();
