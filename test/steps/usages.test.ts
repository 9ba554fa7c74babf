// The Usages the dependencies step composes so that Crossplane deletes
// dependents first (issue 61 point 1; src/steps/usages.ts). What Crossplane
// does with them (its webhook refusing, the Usage waiting for its user, the
// deletion replayed) is checked under real Crossplane in
// test/crossplane/functions.test.ts; here: which Usage is composed, released,
// dropped or kept, from the request alone.
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { Ready, Severity, Status, type RunFunctionResponse } from "../../src/gen/fn/v1/run_function_pb.js";
import { freeze } from "../../src/pipeline.js";
import { deletion, dependencies, releaseUsages, DELETION_ORDER_TYPE, HOST_CONTEXT_KEY } from "../../src/steps/index.js";
import { messages, run as runSpec, type Spec } from "../support/steps.js";

const U = suite("step dependencies: Crossplane Usages");

/** run runs the steps as Crossplane v2.2 and later call them: listing their capabilities (unless the spec says). */
const run: typeof runSpec = (steps, spec) => runSpec(steps, { capabilities: true, ...spec });

const ready = { conditions: [{ type: "Ready", status: "True", reason: "Available" }] };
/** A composed resource as Crossplane observes it: its generated name, in namespace ns ("" for cluster-scoped). */
const obj = (kind: string, name: string, ns = "team-a", extra: JsonObject = {}): JsonObject => ({
  apiVersion: "s3.example.org/v1",
  kind,
  metadata: { name, ...(ns ? { namespace: ns } : {}) },
  status: ready,
  ...extra,
});
const logs = obj("Bucket", "team-a-x7k2p");
const assets = obj("Bucket", "team-a-q9z4m");
const KEY = "usage-of-logs-by-assets";
const dep = { assets: { dependsOn: ["logs"] } };
const both = { logs: { kind: "Bucket" }, assets: { kind: "Bucket" } };

/** usageAsObserved is the Usage as Crossplane observes it once composed: named, and Ready once its controller labelled what it protects. */
const usageAsObserved = (desired: JsonObject, isReady: boolean, extra: JsonObject = {}): JsonObject => ({
  ...desired,
  metadata: { ...(desired["metadata"] as JsonObject), name: "team-a-u1v2w", ...extra },
  ...(isReady ? { status: { conditions: [{ type: "Ready", status: "True", reason: "Available" }] } } : {}),
});

const resource = (rsp: RunFunctionResponse, name: string) => rsp.desired!.resources[name]?.resource;
const condition = (rsp: RunFunctionResponse) => {
  const c = rsp.conditions.find((x) => x.type === DELETION_ORDER_TYPE);
  return c && { status: Status[c.status], reason: c.reason, message: c.message };
};
const xrWith = (conditionType?: string): JsonObject => ({
  apiVersion: "example.org/v1",
  kind: "XBuckets",
  metadata: { name: "team-a", namespace: "team-a" },
  ...(conditionType ? { status: { conditions: [{ type: conditionType, status: "True", reason: "Ordered" }] } } : {}),
});

U("both ends exist: a Usage of the dependency by its dependent, named by them, ready once Crossplane says so", () => {
  const spec: Spec = { xr: xrWith(), observed: { logs, assets }, desired: both };
  const first = run([dependencies(dep)], spec);
  assert.equal(resource(first, KEY), {
    apiVersion: "protection.crossplane.io/v1beta1",
    kind: "Usage",
    metadata: { namespace: "team-a", annotations: { "usage.xfn.dev/of": "logs", "usage.xfn.dev/by": "assets" } },
    spec: {
      of: { apiVersion: "s3.example.org/v1", kind: "Bucket", resourceRef: { name: "team-a-x7k2p" } },
      by: { apiVersion: "s3.example.org/v1", kind: "Bucket", resourceRef: { name: "team-a-q9z4m" } },
      replayDeletion: true,
    },
  });
  // Ready for the XR's sake whatever its own condition (a Crossplane with webhooks off never makes it so); the condition tells.
  assert.is(first.desired!.resources[KEY]!.ready, Ready.TRUE);
  assert.equal(condition(first), {
    status: "CONDITION_FALSE",
    reason: "Pending",
    message: "Not ordered yet: logs after assets (its Usage is not ready yet; Crossplane runs Usages with its webhooks on)",
  });

  // The same on the next reconcile, with the Usage observed and ready: the same key, the same object.
  const next = run([dependencies(dep)], { ...spec, observed: { logs, assets, [KEY]: usageAsObserved(resource(first, KEY)!, true) } });
  assert.equal(resource(next, KEY), resource(first, KEY));
  assert.equal(condition(next), {
    status: "CONDITION_TRUE",
    reason: "Ordered",
    message: "On deletion, Crossplane deletes logs after assets",
  });
});

U("scope: a ClusterUsage between cluster-scoped resources; a namespaced Usage where either end is namespaced", () => {
  const cases: Array<[string, JsonObject, JsonObject, JsonObject]> = [
    [
      "both cluster-scoped",
      obj("Bucket", "l", ""),
      obj("Bucket", "a", ""),
      { kind: "ClusterUsage", metadata: {}, of: { resourceRef: { name: "l" } } },
    ],
    [
      "a cluster-scoped user of a namespaced resource: in the used one's namespace",
      obj("Bucket", "l", "ns-1"),
      obj("Bucket", "a", ""),
      { kind: "Usage", metadata: { namespace: "ns-1" }, of: { resourceRef: { name: "l" } } },
    ],
    [
      "a namespaced user of a cluster-scoped resource",
      obj("Bucket", "l", ""),
      obj("Bucket", "a", "ns-2"),
      { kind: "Usage", metadata: { namespace: "ns-2" }, of: { resourceRef: { name: "l" } } },
    ],
    [
      "another namespace (a cluster-scoped XR's resources): the used one's namespace named",
      obj("Bucket", "l", "ns-1"),
      obj("Bucket", "a", "ns-2"),
      { kind: "Usage", metadata: { namespace: "ns-2" }, of: { resourceRef: { name: "l", namespace: "ns-1" } } },
    ],
  ];
  for (const [what, used, user, want] of cases) {
    const rsp = run([dependencies(dep)], { observed: { logs: used, assets: user }, desired: both });
    const u = resource(rsp, KEY)!;
    const spec = u["spec"] as JsonObject;
    const { annotations, ...meta } = u["metadata"] as JsonObject;
    assert.ok(annotations, what);
    assert.equal(
      { kind: u["kind"], metadata: meta, of: { resourceRef: (spec["of"] as JsonObject)["resourceRef"] } },
      { kind: want["kind"], metadata: want["metadata"], of: want["of"] },
      what,
    );
  }
});

U("every kind of dependency orders: dependsOn, waitFor and waitUntil; a wait on the XR does not", () => {
  const rsp = run(
    [
      dependencies({
        web: { dependsOn: ["db"], waitFor: ["net.status.id", "xr.status.zone"] },
        job: { waitUntil: ["cache.status.ready == true"] },
        // A resource an expression names counts once the configuration names it.
        cache: {},
      }),
    ],
    {
      xr: { ...xrWith(), status: { zone: "z1" } },
      observed: {
        db: obj("DB", "d"),
        net: obj("Net", "n", "team-a", { status: { ...ready, id: "n-1" } }),
        web: obj("Web", "w"),
        cache: obj("Cache", "c", "team-a", { status: { ...ready, ready: true } }),
        job: obj("Job", "j"),
      },
      desired: { db: {}, net: {}, web: {}, cache: {}, job: {} },
    },
  );
  assert.equal(
    Object.keys(rsp.desired!.resources)
      .filter((k) => k.startsWith("usage-"))
      .sort(),
    ["usage-of-cache-by-job", "usage-of-db-by-web", "usage-of-net-by-web"],
  );
});

U(
  "by default only for a caller that lists its capabilities (Crossplane v2.2+: protection.crossplane.io exists); enabled: true for others",
  () => {
    const spec: Spec = { xr: xrWith(), observed: { logs, assets }, desired: both, capabilities: false };
    assert.not.ok(resource(run([dependencies(dep)], spec), KEY));
    assert.ok(resource(run([dependencies(dep, { usages: { enabled: true } })], spec), KEY));
    // One said before, now from such a caller: the condition says why there are none.
    const said = run([dependencies(dep)], { ...spec, xr: xrWith(DELETION_ORDER_TYPE) });
    assert.equal(condition(said), {
      status: "CONDITION_FALSE",
      reason: "NotOrdered",
      message:
        "No Usages: the caller does not list its capabilities (a Crossplane before v2.2, which may have none); usages enabled: true turns them on",
    });
  },
);

U("a dependent not created yet: no Usage; the condition, once there is one, says which ordering waits for it", () => {
  const spec: Spec = { xr: xrWith(), observed: { logs: obj("Bucket", "l", "team-a", { status: {} }) }, desired: both };
  const rsp = run([dependencies(dep)], spec);
  assert.equal(Object.keys(rsp.desired!.resources), ["logs"]);
  // Nothing ordered yet and nothing said before: nothing to say (status.waiting says assets waits).
  assert.is(condition(rsp), undefined);
  const again = run([dependencies(dep)], { ...spec, xr: xrWith(DELETION_ORDER_TYPE) });
  assert.equal(condition(again), {
    status: "CONDITION_FALSE",
    reason: "Pending",
    message: "Not ordered yet: logs after assets (assets does not exist yet)",
  });
});

U("switched off: none composed; one composed before is released while its user stays, then dropped; the condition says so", () => {
  const composed = resource(run([dependencies(dep)], { observed: { logs, assets }, desired: both }), KEY)!;
  const off = dependencies(dep, { usages: false });
  const before = usageAsObserved(composed, true);
  const first = run([off], { xr: xrWith(DELETION_ORDER_TYPE), observed: { logs, assets, [KEY]: before }, desired: both });
  // Without `by`, Crossplane deletes it at once when it goes; with it, the Usage would wait for assets, and logs stay in use.
  assert.equal(resource(first, KEY), {
    apiVersion: "protection.crossplane.io/v1beta1",
    kind: "Usage",
    metadata: { name: "team-a-u1v2w", namespace: "team-a", annotations: { "usage.xfn.dev/of": "logs", "usage.xfn.dev/by": "assets" } },
    spec: { of: (composed["spec"] as JsonObject)["of"]!, reason: "released: assets no longer depends on logs", replayDeletion: true },
  });
  assert.equal(condition(first), {
    status: "CONDITION_FALSE",
    reason: "NotOrdered",
    message: "Usages are off for this pipeline: Crossplane deletes the composed resources all at once",
  });
  // Observed released: dropped, so Crossplane deletes it.
  const second = run([off], { observed: { logs, assets, [KEY]: usageAsObserved(resource(first, KEY)!, true) }, desired: both });
  assert.equal(Object.keys(second.desired!.resources).sort(), ["assets", "logs"]);
  // Never on: no condition at all.
  assert.is(condition(second), undefined);
  // The same when the dependency is dropped from the configuration (edge gone, both resources stay).
  const unconfigured = run([dependencies({})], { observed: { logs, assets, [KEY]: before }, desired: both });
  assert.not.ok((resource(unconfigured, KEY)!["spec"] as JsonObject)["by"]);
});

U("the user goes: its Usage is dropped and waits for it in Crossplane, and what it used is kept until the Usage is gone", () => {
  const composed = usageAsObserved(resource(run([dependencies(dep)], { observed: { logs, assets }, desired: both }), KEY)!, true);
  // assets left desired state (another function no longer composes it).
  const userGone = run([dependencies(dep)], { observed: { logs, assets, [KEY]: composed }, desired: { logs: { kind: "Bucket" } } });
  assert.equal(Object.keys(userGone.desired!.resources), ["logs"]);

  // Both left desired state: logs stays, as it is, until the Usage (waiting for assets) is gone.
  const inUse = {
    ...logs,
    metadata: {
      ...(logs["metadata"] as JsonObject),
      labels: { "crossplane.io/in-use": "true", app: "x" },
      annotations: { "usage.crossplane.io/deletion-attempt-with-policy": "Background" },
    },
    spec: { region: "eu" },
  };
  const bothGone = run([dependencies(dep)], { observed: { logs: inUse, assets, [KEY]: composed }, desired: {} });
  assert.equal(Object.keys(bothGone.desired!.resources), ["logs"]);
  // Kept as observed, without Crossplane's own bookkeeping of the Usage (its controller takes the label off).
  assert.equal(resource(bothGone, "logs"), {
    apiVersion: "s3.example.org/v1",
    kind: "Bucket",
    metadata: { name: "team-a-x7k2p", namespace: "team-a", labels: { app: "x" } },
    spec: { region: "eu" },
  });
  assert.is(bothGone.desired!.resources["logs"]!.ready, Ready.TRUE);
  assert.ok(messages(bothGone, Severity.NORMAL).includes(`logs: keeping it until the Usage ${KEY} is gone`), messages(bothGone).join("\n"));
  // The Usage gone: logs goes.
  const after = run([dependencies(dep)], { observed: { logs: inUse }, desired: {} });
  assert.equal(Object.keys(after.desired!.resources), []);
});

U("what is used leaves desired state while its user still depends on it: kept, with its Usage, and the XR is told", () => {
  const composed = usageAsObserved(resource(run([dependencies(dep)], { observed: { logs, assets }, desired: both }), KEY)!, true);
  const rsp = run([dependencies(dep)], { observed: { logs, assets, [KEY]: composed }, desired: { assets: { kind: "Bucket" } } });
  assert.equal(Object.keys(rsp.desired!.resources).sort(), ["assets", "logs", KEY]);
  assert.ok(
    messages(rsp, Severity.NORMAL).includes(
      `logs: no longer desired, but assets depends on it; keeping it while it does (the Usage ${KEY} protects it)`,
    ),
    messages(rsp).join("\n"),
  );
});

U("under xfn host (its context key): no Usage, one composed before dropped, nothing kept for it", () => {
  const composed = usageAsObserved(resource(run([dependencies(dep)], { observed: { logs, assets }, desired: both }), KEY)!, true);
  const host = { [HOST_CONTEXT_KEY]: { ordersDeletion: true } };
  const rsp = run([dependencies(dep)], { context: host, xr: xrWith(), observed: { logs, assets }, desired: both });
  assert.equal(Object.keys(rsp.desired!.resources).sort(), ["assets", "logs"]);
  assert.is(condition(rsp), undefined);
  const adopted = run([dependencies(dep)], {
    context: host,
    xr: xrWith(DELETION_ORDER_TYPE),
    observed: { logs, assets, [KEY]: composed },
    desired: {},
  });
  assert.equal(Object.keys(adopted.desired!.resources), []);
  assert.equal(condition(adopted)?.message, "xfn host deletes in dependency order itself: no Usages");
});

U(
  "options: replayDeletion off; a composed resource already named as the Usage is left, with a Warning; an XR being deleted is the deletion step's",
  () => {
    const noReplay = run([dependencies(dep, { usages: { replayDeletion: false } })], { observed: { logs, assets }, desired: both });
    assert.is((resource(noReplay, KEY)!["spec"] as JsonObject)["replayDeletion"], false);

    const taken = run([dependencies(dep)], { observed: { logs, assets }, desired: { ...both, [KEY]: { kind: "ConfigMap" } } });
    assert.equal(resource(taken, KEY), { kind: "ConfigMap" });
    assert.equal(messages(taken, Severity.WARNING), [
      `cannot compose the Usage ${KEY} (of logs by assets): a composed resource of that name exists`,
    ]);
    // Two edges whose names run together into one key: the first keeps it, the second is named.
    const twins = run([dependencies({ c: { dependsOn: ["a-by-b"] }, "b-by-c": { dependsOn: ["a"] } })], {
      observed: { a: obj("A", "a1"), "a-by-b": obj("A", "a2"), c: obj("C", "c1"), "b-by-c": obj("C", "c2") },
      desired: { a: {}, "a-by-b": {}, c: {}, "b-by-c": {} },
    });
    const annotations = resource(twins, "usage-of-a-by-b-by-c")!["metadata"] as JsonObject;
    assert.equal((annotations["annotations"] as JsonObject)["usage.xfn.dev/of"], "a");
    assert.equal(messages(twins, Severity.WARNING), [
      "cannot compose the Usage usage-of-a-by-b-by-c (of a-by-b by c): the Usage of a by b-by-c has that name too",
    ]);

    const deleting = run([dependencies(dep)], {
      xr: { ...xrWith(), metadata: { name: "team-a", deletionTimestamp: "2026-06-01T11:00:00Z" } },
      observed: { logs, assets },
      desired: both,
    });
    assert.not.ok(resource(deleting, KEY));
  },
);

U("the deletion step's recorded order leaves the Usages out; releaseUsages releases without any dependency configured", () => {
  const rsp = run([dependencies(dep), deletion({ dependencies: dep })], { observed: { logs, assets }, desired: both });
  assert.ok(resource(rsp, KEY));
  const status = rsp.desired!.composite!.resource!["status"] as JsonObject;
  assert.equal((status["deletion"] as JsonObject)["order"], [["assets"], ["logs"]]);

  const composed = usageAsObserved(resource(rsp, KEY)!, true);
  const released = run([releaseUsages()], { observed: { logs, assets, [KEY]: composed }, desired: both });
  assert.is((resource(released, KEY)!["spec"] as JsonObject)["by"], undefined);
  // Nothing of its own observed: it does nothing.
  const quiet = run([releaseUsages()], { observed: { logs, assets }, desired: both });
  assert.equal(Object.keys(quiet.desired!.resources).sort(), ["assets", "logs"]);
  assert.equal(quiet.results, []);
  assert.equal(quiet.conditions, []);
});

U("freeze drops only Crossplane's Usage label and annotation", () => {
  const o = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: "c",
      labels: { "crossplane.io/in-use": "true" },
      annotations: { "usage.crossplane.io/deletion-attempt-with-policy": "Foreground", keep: "me" },
    },
  };
  assert.equal(freeze(o), { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", annotations: { keep: "me" } } });
  // The observed object is not changed.
  assert.is(o.metadata.labels["crossplane.io/in-use"], "true");
});

U.run();
