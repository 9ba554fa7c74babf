import { suite } from "uvu";
import * as assert from "uvu/assert";
import { Ready } from "../../src/gen/fn/v1/run_function_pb.js";
import { readiness, type ReadinessCheck } from "../../src/steps/index.js";
import { messages, readyCondition, run } from "../support/steps.js";

const R = suite("step readiness");

const observed = {
  kind: "DB",
  status: {
    conditions: [
      { type: "Ready", status: "False", reason: "Creating", message: "still booting" },
      { type: "Synced", status: "True" },
    ],
    atProvider: { endpoint: "db.example", port: 5432, public: false, empty: "", list: [] },
  },
};

const cases: Record<string, { check: ReadinessCheck; ready: boolean; why?: RegExp }> = {
  MatchConditionDefaultFails: {
    check: { type: "MatchCondition" },
    ready: false,
    why: /Ready is False \(Creating: still booting\), want True/,
  },
  MatchConditionSynced: { check: { type: "MatchCondition", matchCondition: { type: "Synced", status: "True" } }, ready: true },
  MatchConditionMissing: {
    check: { type: "MatchCondition", matchCondition: { type: "Healthy", status: "True" } },
    ready: false,
    why: /no Healthy condition yet/,
  },
  NonEmptyPresent: { check: { type: "NonEmpty", fieldPath: "status.atProvider.endpoint" }, ready: true },
  NonEmptyEmptyString: {
    check: { type: "NonEmpty", fieldPath: "status.atProvider.empty" },
    ready: false,
    why: /status\.atProvider\.empty is empty/,
  },
  NonEmptyEmptyList: { check: { type: "NonEmpty", fieldPath: "status.atProvider.list" }, ready: false },
  NonEmptyMissing: { check: { type: "NonEmpty", fieldPath: "status.atProvider.nope" }, ready: false },
  MatchStringYes: { check: { type: "MatchString", fieldPath: "status.atProvider.endpoint", matchString: "db.example" }, ready: true },
  MatchStringNo: {
    check: { type: "MatchString", fieldPath: "status.atProvider.endpoint", matchString: "x" },
    ready: false,
    why: /is "db\.example", want "x"/,
  },
  MatchIntegerYes: { check: { type: "MatchInteger", fieldPath: "status.atProvider.port", matchInteger: 5432 }, ready: true },
  MatchIntegerNo: {
    check: { type: "MatchInteger", fieldPath: "status.atProvider.port", matchInteger: 1 },
    ready: false,
    why: /is 5432, want 1/,
  },
  MatchFalseYes: { check: { type: "MatchFalse", fieldPath: "status.atProvider.public" }, ready: true },
  MatchTrueNo: { check: { type: "MatchTrue", fieldPath: "status.atProvider.public" }, ready: false, why: /is false, want true/ },
  None: { check: { type: "None" }, ready: true },
};
for (const [name, tc] of Object.entries(cases)) {
  R(name, () => {
    const rsp = run([readiness({ checks: { db: [tc.check] } })], { observed: { db: observed }, desired: { db: { kind: "DB" } } });
    assert.is(rsp.desired!.resources["db"]!.ready, tc.ready ? Ready.TRUE : Ready.FALSE);
    const msgs = messages(rsp);
    if (tc.ready) assert.equal(msgs, []);
    else assert.match(msgs[0]!, tc.why ?? /not ready: db/);
  });
}

R("all checks must pass", () => {
  const rsp = run(
    [readiness({ checks: { db: [{ type: "None" }, { type: "MatchInteger", fieldPath: "status.atProvider.port", matchInteger: 1 }] } })],
    {
      observed: { db: observed },
      desired: { db: {} },
    },
  );
  assert.is(rsp.desired!.resources["db"]!.ready, Ready.FALSE);
});

R("only unspecified readiness is decided; not-created resources are not ready; the default check is Ready=True", () => {
  const rsp = run([readiness()], {
    observed: { ok: { ...readyCondition("True") }, forced: { ...readyCondition("False") }, off: { ...readyCondition("True") } },
    desired: { ok: {}, forced: {}, off: {}, fresh: {} },
    desiredReady: { forced: "READY_TRUE", off: "READY_FALSE" },
  });
  const r = rsp.desired!.resources;
  assert.equal(
    [r["ok"]!.ready, r["forced"]!.ready, r["off"]!.ready, r["fresh"]!.ready],
    [Ready.TRUE, Ready.TRUE, Ready.FALSE, Ready.FALSE],
  );
  assert.equal(messages(rsp), ["not ready: fresh (not created yet), off (marked not ready by an earlier step)"]);
});

R("an unknown check type or a bad field path is refused at construction", () => {
  assert.throws(
    () => readiness({ checks: { db: [{ type: "Sometimes" } as never] } }),
    /checks\.db\[0\]: unknown check type "Sometimes"; expected one of MatchCondition/,
  );
  assert.throws(() => readiness({ checks: { db: [{ type: "NonEmpty", fieldPath: "a[" }] } }), /unterminated "\[" at position 1/);
});

R.run();
