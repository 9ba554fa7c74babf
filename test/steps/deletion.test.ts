import { suite } from "uvu";
import * as assert from "uvu/assert";
import { Ready, Severity, Status, Target } from "../../src/gen/fn/v1/run_function_pb.js";
import { deletion } from "../../src/steps/index.js";
import { messages, run } from "../support/steps.js";

const X = suite("step deletion");
const deletingXR = (since = "2026-06-01T11:50:00Z", status = {}) => ({
  kind: "XNet",
  metadata: { name: "net", deletionTimestamp: since },
  status,
});
const mr = (extra: Record<string, unknown> = {}) => ({
  kind: "MR",
  metadata: { name: "m", finalizers: ["finalizer.managedresource.crossplane.io"], ...extra },
});

X("does nothing while the XR is not being deleted", () => {
  const rsp = run([deletion()], { observed: { a: mr() }, desired: { a: { kind: "MR" } } });
  assert.equal(rsp.conditions, []);
  assert.equal(Object.keys(rsp.desired!.resources), ["a"]);
});

X("with dependencies, records the deletion order on every run, dependents first, and keeps it while deleting", () => {
  const dependencies = { subnet: { dependsOn: ["vpc"] }, cluster: { dependsOn: ["subnet", "role"] }, app: { dependsOn: ["cluster"] } };
  const names = ["app", "cluster", "role", "subnet", "vpc", "bucket"];
  const live = run([deletion({ dependencies })], {
    observed: Object.fromEntries(names.map((n) => [n, mr()])),
    desired: Object.fromEntries(names.map((n) => [n, { kind: "MR" }])),
  });
  assert.equal((live.desired!.composite!.resource!["status"] as any).deletion, {
    order: [["app", "bucket"], ["cluster"], ["role", "subnet"], ["vpc"]],
  });
  assert.equal(live.conditions, [], "not deleting: nothing else");
  const deleting = run([deletion({ dependencies })], { xr: deletingXR(), observed: { subnet: mr(), vpc: mr() } });
  assert.equal((deleting.desired!.composite!.resource!["status"] as any).deletion.order, [["subnet"], ["vpc"]]);
  const none = run([deletion()], { observed: { a: mr() }, desired: { a: { kind: "MR" } } });
  assert.is(none.desired!.composite?.resource, undefined, "without dependencies it records nothing");
});

X("says Deleting at once, names what remains and its finalizers, records progress", () => {
  const rsp = run([deletion()], {
    xr: deletingXR(),
    observed: { bucket: mr(), db: { kind: "DB", metadata: { name: "d" } } },
    desired: { bucket: {}, db: {} },
  });
  const c = rsp.conditions[0]!;
  assert.equal([c.type, c.status, c.reason, c.target], ["Ready", Status.CONDITION_FALSE, "Deleting", Target.COMPOSITE_AND_CLAIM]);
  assert.is(c.message, "deleting: waiting for bucket (finalizers: finalizer.managedresource.crossplane.io), db");
  assert.is(rsp.desired!.composite!.ready, Ready.FALSE);
  assert.equal((rsp.desired!.composite!.resource!["status"] as any).deletion, {
    remaining: 2,
    deleted: 0,
    total: 2,
    since: "2026-06-01T11:50:00Z",
  });
  assert.equal(Object.keys(rsp.desired!.resources), [], "without dependencies everything goes at once");
});

X("progress keeps the total recorded on an earlier reconcile", () => {
  const rsp = run([deletion()], { xr: deletingXR(undefined, { deletion: { total: 3 } }), observed: { db: mr() } });
  assert.equal((rsp.desired!.composite!.resource!["status"] as any).deletion, {
    remaining: 1,
    deleted: 2,
    total: 3,
    since: "2026-06-01T11:50:00Z",
  });
  const done = run([deletion()], { xr: deletingXR(undefined, { deletion: { total: 3 } }) });
  assert.is(done.conditions[0]!.message, "deleting: all composed resources are gone");
});

X("a resource blocking longer than stuckAfter is a Warning quoting its own Ready and Synced", () => {
  const stuck = {
    ...mr({ deletionTimestamp: "2026-06-01T11:52:48Z" }),
    status: {
      conditions: [
        { type: "Ready", status: "False", reason: "Deleting" },
        { type: "Synced", status: "False", reason: "ReconcileError", message: "cannot delete: AccessDenied" },
      ],
    },
  };
  const rsp = run([deletion()], { xr: deletingXR(), observed: { bucket: stuck } });
  const w = rsp.results.filter((r) => r.severity === Severity.WARNING);
  assert.is(w.length, 1);
  assert.is(
    w[0]!.message,
    "bucket has blocked deletion for 7m12s, longer than 5m0s: finalizers: finalizer.managedresource.crossplane.io; Ready=False Deleting; Synced=False ReconcileError: cannot delete: AccessDenied",
  );
  assert.is(w[0]!.target, Target.COMPOSITE_AND_CLAIM);
  assert.equal(messages(run([deletion({ stuckAfter: "10m" })], { xr: deletingXR(), observed: { bucket: stuck } }), Severity.WARNING), []);
});

X("not yet asked to delete, a resource's wait counts from the XR's deletion", () => {
  const rsp = run([deletion({ stuckAfter: "1m" })], { xr: deletingXR("2026-06-01T11:00:00Z"), observed: { db: mr() } });
  assert.match(messages(rsp, Severity.WARNING)[0]!, /^db has blocked deletion for 1h0m0s, longer than 1m0s/);
});

X("with dependencies, dependents are deleted first, in waves", () => {
  const deps = { subnet: { dependsOn: ["vpc"] }, cluster: { waitFor: ["subnet:status.atProvider.id"] } };
  const all = { vpc: mr(), subnet: mr(), cluster: mr() };
  const first = run([deletion({ dependencies: deps })], {
    xr: deletingXR(),
    observed: all,
    desired: { vpc: { kind: "VPC" }, subnet: { kind: "Subnet" }, cluster: {} },
  });
  assert.equal(Object.keys(first.desired!.resources).sort(), ["subnet", "vpc"]);
  assert.equal(first.desired!.resources["vpc"]!.resource, { kind: "VPC" });
  assert.match(first.conditions[0]!.message!, /deleting later: subnet \(after cluster\), vpc \(after subnet\)/);

  const second = run([deletion({ dependencies: deps })], { xr: deletingXR(), observed: { vpc: mr(), subnet: mr() } });
  assert.equal(Object.keys(second.desired!.resources), ["vpc"]);
  assert.equal(
    second.desired!.resources["vpc"]!.resource,
    { kind: "MR", metadata: { name: "m" } },
    "kept as observed when no earlier desired state",
  );

  const third = run([deletion({ dependencies: deps })], { xr: deletingXR(), observed: { vpc: mr() } });
  assert.equal(Object.keys(third.desired!.resources), []);
});

X("a resource already being deleted is not kept, even if dependents remain", () => {
  const rsp = run([deletion({ dependencies: { subnet: { dependsOn: ["vpc"] } } })], {
    xr: deletingXR(),
    observed: { vpc: mr({ deletionTimestamp: "2026-06-01T11:59:00Z" }), subnet: mr() },
  });
  assert.equal(Object.keys(rsp.desired!.resources), []);
});

X("a bad stuckAfter is refused", () => {
  assert.throws(() => deletion({ stuckAfter: "5 minutes" }), /"5 minutes" is not a duration/);
});

X.run();
