// The summary step (what each step did, on the XR) and the health roll-up
// (crossplane #5643's Healthy, which Crossplane v2.4.0 reserves and does not
// write: the rules are the proposal's, read 2026-11-30, and steps/health.ts
// says which; there is no Crossplane code to take an answer from).
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { Severity, Status, type RunFunctionResponse } from "../../src/gen/fn/v1/run_function_pb.js";
import { step, type Step } from "../../src/pipeline.js";
import * as response from "../../src/sdk/response.js";
import { dependencies, rollUp, summary, whyUnhealthy, HEALTH_TYPE, NOT_SYNCED, SUMMARY_TYPE } from "../../src/steps/index.js";
import { run, type Spec } from "../support/steps.js";

const S = suite("step summary and the health roll-up");

const cond = (type: string, status: string, reason?: string): JsonObject => ({ type, status, ...(reason ? { reason } : {}) });
const obj = (...conditions: JsonObject[]): JsonObject => ({
  apiVersion: "s3/v1",
  kind: "Bucket",
  metadata: { name: "x" },
  status: { conditions },
});

const healthCases: Record<string, { synced?: object; composed: Record<string, object>; status: string; message?: string }> = {
  "nothing composed, never synced": { composed: {}, status: "True" },
  "all synced and ready": {
    synced: cond("Synced", "True"),
    composed: { a: obj(cond("Synced", "True"), cond("Ready", "True")) },
    status: "True",
  },
  "creating is time, not an error": { composed: { a: obj(cond("Synced", "True"), cond("Ready", "False", "Creating")) }, status: "True" },
  "no conditions yet is no error": { composed: { a: obj() }, status: "True" },
  "a composed resource not synced": {
    composed: { b: obj(cond("Synced", "False", "ReconcileError")), a: obj(cond("Synced", "True")) },
    status: "False",
    message: "Unhealthy composed resources: b",
  },
  "unavailable is a failure": {
    composed: { a: obj(cond("Synced", "True"), cond("Ready", "False", "Unavailable")) },
    status: "False",
    message: "Unhealthy composed resources: a",
  },
  "a nested XR's Healthy and a function's roll-up both count": {
    composed: { n1: obj(cond("Healthy", "False")), n2: obj(cond(HEALTH_TYPE, "False")), ok: obj(cond("Healthy", "True")) },
    status: "False",
    message: "Unhealthy composed resources: n1, n2",
  },
  "paused is no error": {
    synced: cond("Synced", "False", "ReconcilePaused"),
    composed: { a: obj(cond("Synced", "False", "ReconcilePaused")) },
    status: "True",
  },
  "the XR not synced trumps its composed resources": {
    synced: cond("Synced", "False", "ReconcileError"),
    composed: { a: obj(cond("Synced", "False")) },
    status: "False",
    message: NOT_SYNCED,
  },
  "many names: the first three and how many more, as Crossplane's unready list": {
    composed: Object.fromEntries(["e", "d", "c", "b", "a"].map((n) => [n, obj(cond("Synced", "False"))])),
    status: "False",
    message: "Unhealthy composed resources: a, b, c, and 2 more",
  },
};
for (const [name, c] of Object.entries(healthCases)) {
  S(`rollUp: ${name}`, () => {
    const h = rollUp(c.synced, Object.entries(c.composed) as [string, never][]);
    assert.is(h.status, c.status);
    assert.is(h.reason, c.status === "True" ? "ReconcileSuccess" : "ReconcileError");
    assert.is(h.message, c.message);
  });
}

S("whyUnhealthy names the cause", () => {
  assert.is(whyUnhealthy(obj(cond("Synced", "False"))), "not synced");
  assert.is(whyUnhealthy(obj(cond("Ready", "False", "Unavailable"))), "unavailable");
  assert.is(whyUnhealthy(obj(cond("Healthy", "False"))), "unhealthy");
  assert.is(whyUnhealthy(obj(cond("Ready", "False", "Creating"))), undefined);
});

// A small pipeline: compose two buckets, change one, hold one back, drop one, warn.
const compose = step("compose", (ctx) => {
  for (const n of ["logs", "assets", "old"]) response.setDesiredComposedResource(ctx.rsp, n, { apiVersion: "s3/v1", kind: "Bucket" });
});
const tag = step("tag", (ctx) => {
  (ctx.rsp.desired!.resources["logs"]!.resource!["metadata"] as object) = { labels: { team: "a" } };
  delete ctx.rsp.desired!.resources["old"];
  response.warning(ctx.rsp, "careful");
});
const quiet = step("quiet", () => {});
const boom = step("boom", () => {
  throw new Error("cannot read\n  the thing");
});

const summaryOf = (rsp: RunFunctionResponse, type = SUMMARY_TYPE) => rsp.conditions.find((c) => c.type === type);

S("each step's part: what it composed, changed, removed, held, warned; Waiting while something waits", () => {
  const deps = dependencies({ assets: { dependsOn: ["logs"] } });
  const rsp = run([compose, tag, deps, quiet, summary()], { observed: { logs: obj(cond("Synced", "True")) } });
  const c = summaryOf(rsp)!;
  assert.is(c.status, Status.CONDITION_TRUE);
  assert.is(c.reason, "Waiting");
  assert.is(
    c.message,
    "4 steps: compose: composed assets, logs, and old; tag: changed logs, removed old, 1 warning; " +
      "dependencies: held assets (for logs to be ready), set the XR's status.waiting; quiet: no change",
  );
  // The held resource, not created yet, is left out after the last step, as before.
  assert.not.ok(rsp.desired!.resources["assets"]);
  // An Event says the same, the first time.
  const ev = rsp.results.find((r) => r.reason === SUMMARY_TYPE)!;
  assert.is(ev.severity, Severity.NORMAL);
  assert.is(ev.message, c.message);
  // And the roll-up: everything observed is synced.
  const h = summaryOf(rsp, HEALTH_TYPE)!;
  assert.is(h.status, Status.CONDITION_TRUE);
  assert.is(h.reason, "ReconcileSuccess");
});

S("what a step set on the XR: its status fields by name, its readiness", () => {
  const xrStep = step("xr", (ctx) => {
    response.setDesiredCompositeField(ctx.rsp, "status.b", 1);
    response.setDesiredCompositeField(ctx.rsp, "status.a.deep", "x");
    response.setCompositeReady(ctx.rsp, false);
  });
  const same = step("same", (ctx) => response.setDesiredCompositeField(ctx.rsp, "status.b", 1));
  const m = summaryOf(run([xrStep, same, summary()], {}))!.message;
  assert.is(m, "2 steps: xr: set the XR's readiness, status.a, and status.b; same: no change");
});

S("every step ran and nothing waits: Completed; the same text on the XR already: no Event", () => {
  const rsp = run([compose, quiet, summary()], {});
  const c = summaryOf(rsp)!;
  assert.is(c.reason, "Completed");
  assert.is(c.message, "2 steps: compose: composed assets, logs, and old; quiet: no change");
  // Next reconcile: the XR carries that condition, so no Event again (an Event marks a change, not every reconcile).
  const xr: Spec["xr"] = {
    apiVersion: "x/v1",
    kind: "XNet",
    metadata: { name: "net" },
    status: { conditions: [cond(SUMMARY_TYPE, "True", "Completed")] },
  };
  (xr["status"] as { conditions: { message?: string | undefined }[] }).conditions[0]!.message = c.message;
  const again = run([compose, quiet, summary()], { xr });
  assert.is(summaryOf(again)!.message, c.message);
  assert.is(again.results.filter((r) => r.reason === SUMMARY_TYPE).length, 0);
  // event: false: never an Event.
  assert.is(run([compose, summary({ event: false })], {}).results.length, 0);
});

S("a step fails: False, StepFailed, the error on one line, the rest not run; its Event before the Fatal result", () => {
  // The summary speaks of the steps before it (tag, after it, is not its to report, as when none fails).
  const rsp = run([compose, boom, quiet, summary(), tag], {});
  const c = summaryOf(rsp)!;
  assert.is(c.status, Status.CONDITION_FALSE);
  assert.is(c.reason, "StepFailed");
  assert.is(c.message, "2 of 3 steps ran: compose: composed assets, logs, and old; boom: failed: cannot read the thing; quiet: not run");
  // Crossplane emits a response's results only up to its first Fatal one (v2.4.0 composition_functions.go).
  assert.equal(
    rsp.results.map((r) => [r.severity, r.reason]),
    [
      [Severity.WARNING, SUMMARY_TYPE],
      [Severity.FATAL, "StepFailed"],
    ],
  );
  // A step returning a Promise fails the same way.
  const later = Object.assign(async () => {}, { stepName: "later" }) as unknown as Step;
  assert.match(summaryOf(run([later, summary()], {}))!.message ?? "", /^1 of 1 steps ran: later: failed: returned a Promise/);
});

S("without a summary step the pipeline keeps no trail, and a failure still stops at once", () => {
  let seen: unknown;
  const peek = step("peek", (ctx) => (seen = ctx.trail.length));
  run([compose, peek], {});
  assert.is(seen, 0);
  let ran = false;
  run([boom, step("after", () => (ran = true))], {});
  assert.not.ok(ran);
});

S("options: the condition types, health off; a system type is refused naming why", () => {
  const rsp = run([compose, summary({ type: "WhatRan", health: "Composed" })], { observed: { logs: obj(cond("Synced", "False")) } });
  assert.ok(summaryOf(rsp, "WhatRan"));
  const h = summaryOf(rsp, "Composed")!;
  assert.is(h.status, Status.CONDITION_FALSE);
  assert.is(h.message, "Unhealthy composed resources: logs");
  assert.not.ok(summaryOf(run([compose, summary({ health: false })], {}), HEALTH_TYPE));
  assert.throws(() => summary({ health: "Healthy" }), /summary: health "Healthy" is a condition type Crossplane keeps for itself/);
  assert.throws(() => summary({ type: "Synced" }), /summary: type "Synced" is a condition type Crossplane keeps/);
  assert.throws(() => summary({ type: "" }), /summary: type must be a condition type, not ""/);
});

S("a summary that would be long is clipped to MAX_SUMMARY", () => {
  const many = Array.from({ length: 200 }, (_, i) => step(`step-number-${i}`, () => {}));
  const m = summaryOf(run([...many, summary()], {}))!.message ?? "";
  assert.is(m.length, 1024);
  assert.ok(m.endsWith("..."));
});

S.run();
