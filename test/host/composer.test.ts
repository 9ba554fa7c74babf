// xfn host composes as Crossplane's composer does, end to end on the embedded
// API server: the same names, namespaces, refusals, events and conditions that
// xfn render gives (src/engine/composed.ts is shared). Written from
// crossplane/crossplane 2d040d2daf4e001799c4154a4a09b9e1f40d7fde
// (internal/controller/apiextensions/composite: composition_functions.go,
// reconciler.go; internal/names).
import { createHash } from "node:crypto";
import { join } from "node:path";
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { loadDocs } from "../../src/engine/docs.js";
import { createRunner, type Runner } from "../../src/engine/runner.js";
import { startDevCluster } from "../../src/apiserver/server.js";
import { Host } from "../../src/host/host.js";
import { applyManifests } from "../../src/host/manifests.js";
import { apis, kubeconfigFor, until } from "../support/cluster.js";
import { memoryLog } from "../support/log.js";
import { startProxy, type Proxy } from "../support/proxy.js";
import { ROOT } from "../support/spawn.js";

const DIR = join(ROOT, "test/fixtures/composer");
const STORES = { group: "example.org", version: "v1", plural: "xstores" };
const BUCKETS = { group: "storage.example.org", version: "v1", plural: "buckets" };

const C = suite("host: composes as Crossplane's composer");

async function setup() {
  const c = await startDevCluster();
  const kc = kubeconfigFor(c);
  const mem = memoryLog();
  const inner = await createRunner(loadDocs(join(DIR, "functions.yaml")), join(DIR, "functions.yaml"), () => new Date());
  // Every call the host makes, with the XR it was for and the required resources it carried.
  const calls: Array<{ xr: string; required: string[] }> = [];
  const runner: Runner = {
    run(name, req, deadline) {
      calls.push({
        xr: String(req.observed?.composite?.resource?.["metadata"] && (req.observed.composite.resource["metadata"] as any).name),
        required: Object.keys(req.requiredResources),
      });
      return inner.run(name, req, deadline);
    },
    close: () => inner.close(),
  };
  const host = new Host({ kc, runner, log: mem.log, baseBackoffMs: 50, maxBackoffMs: 500 });
  await host.start();
  await applyManifests(kc, loadDocs(join(DIR, "manifests.yaml")), mem.log);
  const { objects } = apis(kc);
  const xr = (name: string) => objects.getNamespacedCustomObject({ ...STORES, namespace: "team-a", name }) as Promise<any>;
  const create = (name: string, kase: string) =>
    applyManifests(
      kc,
      [
        {
          obj: { apiVersion: "example.org/v1", kind: "XStore", metadata: { name, namespace: "team-a" }, spec: { case: kase } },
          source: "test",
        },
      ],
      mem.log,
    );
  const events = async (name: string) =>
    ((await (await fetch(`${c.url}/api/v1/namespaces/team-a/events?fieldSelector=involvedObject.name%3D${name}`)).json()) as any)
      .items as any[];
  const cond = (o: any, type: string) => (o?.status?.conditions ?? []).find((x: any) => x.type === type);
  return { c, kc, host, objects, xr, create, events, cond, mem, calls };
}

C(
  "a bucket is named from its generateName, the XR's uid and its name in the pipeline; moved into the XR's namespace with a Warning; a result of unknown severity is a Warning that says so",
  async () => {
    const { c, host, objects, xr, create, events, calls } = await setup();
    try {
      await create("shop", "ok");
      await until(
        "the bucket",
        async () => ((await objects.listNamespacedCustomObject({ ...BUCKETS, namespace: "team-a" })) as any).items.length === 1,
        10_000,
      );
      const [bucket] = ((await objects.listNamespacedCustomObject({ ...BUCKETS, namespace: "team-a" })) as any).items;
      const x = await xr("shop");
      assert.is(x.metadata.labels["crossplane.io/composite"], "shop", "the XR is labelled first, as Crossplane's controller does");
      const hash = createHash("sha256").update(`${x.metadata.uid}bucket`).digest("hex").slice(0, 12);
      assert.is(bucket.metadata.name, `shop-${hash}`);
      assert.is(bucket.metadata.generateName, "shop-");
      assert.equal(x.spec.crossplane.resourceRefs, [{ apiVersion: "storage.example.org/v1", kind: "Bucket", name: bucket.metadata.name }]);
      // Named before it was observed, the same once observed: later reconciles apply nothing.
      const applies = async () => (await host.metrics.writes.get()).values.find((v) => v.labels["what"] === "apply")?.value ?? 0;
      const before = calls.length;
      const applied = await applies();
      for (const n of ["1", "2"])
        await objects.patchNamespacedCustomObject(
          { ...STORES, namespace: "team-a", name: "shop", body: { metadata: { annotations: { poke: n } } } },
          setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
        );
      await until("two more reconciles", async () => calls.length >= before + 2, 10_000);
      assert.is(await applies(), applied, "no apply of an unchanged bucket");
      await until("the events", async () => (await events("shop")).length >= 2, 10_000);
      const msgs = (await events("shop")).map((e) => `${e.type} ${e.reason} ${e.message}`);
      assert.ok(
        msgs.includes(
          'Warning NamespaceOverridden cannot create composed resource "bucket" in namespace "elsewhere", using XR namespace "team-a" instead',
        ),
        msgs.join("\n"),
      );
      assert.ok(
        msgs.includes('Warning Odd Pipeline step "compose" returned a result of unknown severity (assuming warning): from the future'),
        msgs.join("\n"),
      );
    } finally {
      await host.stop();
      await c.stop();
    }
  },
);

C("a namespaced XR composing a cluster-scoped kind, or a bucket with an invalid name: Synced=False, nothing applied", async () => {
  const { c, host, objects, xr, create, cond } = await setup();
  try {
    await create("cluster", "cluster");
    await create("badname", "badname");
    await until(
      "both refused",
      async () => cond(await xr("cluster"), "Synced")?.status === "False" && cond(await xr("badname"), "Synced")?.status === "False",
      10_000,
    );
    assert.is(
      cond(await xr("cluster"), "Synced").message,
      'cannot compose resources: cannot apply cluster scoped composed resource "zone" (a Zone named ) for a namespaced composite resource.',
    );
    assert.is(
      cond(await xr("badname"), "Synced").message,
      'cannot compose resources: cannot apply composed resource "bucket" because it has an invalid name "Not_Valid". Must be a valid RFC 1123 subdomain name.',
    );
    assert.equal(
      ((await objects.listClusterCustomObject({ group: "storage.example.org", version: "v1", plural: "zones" })) as any).items,
      [],
    );
  } finally {
    await host.stop();
    await c.stop();
  }
});

C("a composed resource or an XR status the API server refuses: Synced=False naming the field, in the API server's words", async () => {
  const { c, host, objects, xr, create, cond, events } = await setup();
  try {
    await create("invalid", "invalid");
    await create("unknown", "unknown");
    await create("badstatus", "badstatus");
    const refused = async (name: string) => cond(await xr(name), "Synced")?.status === "False";
    await until(
      "all three refused",
      async () => (await refused("invalid")) && (await refused("unknown")) && (await refused("badstatus")),
      10_000,
    );
    // Validation (422 Invalid, as kube-apiserver validates a custom resource).
    const invalid = cond(await xr("invalid"), "Synced").message as string;
    assert.match(
      invalid,
      /^cannot apply Bucket invalid-[0-9a-f]{12} \(resource bucket\): Bucket\.storage\.example\.org "invalid-[0-9a-f]{12}" is invalid: /,
    );
    assert.ok(invalid.endsWith("spec.size: Invalid value: 99: spec.size in body should be less than or equal to 10"), invalid);
    // Server-side apply reads the object against the schema first (structured-merge-diff's words).
    const unknown = cond(await xr("unknown"), "Synced").message as string;
    assert.match(
      unknown,
      /^cannot apply Bucket unknown-[0-9a-f]{12} \(resource bucket\): failed to create typed patch object \(team-a\/unknown-[0-9a-f]{12}; storage\.example\.org\/v1, Kind=Bucket\): /,
    );
    assert.ok(
      unknown.endsWith("errors:\n  .spec.size: expected numeric (int or float), got string\n  .spec.colour: field not declared in schema"),
      unknown,
    );
    assert.equal(((await objects.listNamespacedCustomObject({ ...BUCKETS, namespace: "team-a" })) as any).items, []);
    const x = await xr("badstatus");
    assert.is(
      cond(x, "Synced").message,
      'cannot update the composite resource\'s status: XStore.example.org "badstatus" is invalid: status.phase: Unsupported value: "Sideways": supported values: "Pending", "Ready"',
    );
    assert.is(x.status.phase, undefined, "the refused status is not written");
    await until("the Warning", async () => (await events("badstatus")).some((e: any) => e.message.includes("status.phase")), 10_000);
  } finally {
    await host.stop();
    await c.stop();
  }
});

C("a Fatal result: the results before it as Events, its step's conditions written, the XR's other custom conditions Unknown", async () => {
  const { c, host, objects, xr, create, cond, events } = await setup();
  try {
    await create("doomed", "fatal");
    await until("Synced=False", async () => cond(await xr("doomed"), "Synced")?.status === "False", 10_000);
    const x = await xr("doomed");
    assert.is(cond(x, "Synced").message, 'cannot compose resources: pipeline step "compose" returned a fatal result: oh no');
    assert.equal([cond(x, "DatabaseReady")?.status, cond(x, "DatabaseReady")?.reason], ["False", "Creating"]);
    await until("events", async () => (await events("doomed")).length >= 2, 10_000);
    const msgs = (await events("doomed")).map((e) => e.message);
    assert.ok(msgs.includes('Pipeline step "compose": before the fatal one'), msgs.join("\n"));
    assert.not.ok(
      msgs.some((m) => m.includes("after the fatal one")),
      msgs.join("\n"),
    );
    // A condition some earlier reconcile set: nothing can say what it is now.
    const conditions = [
      ...x.status.conditions,
      { type: "Other", status: "True", reason: "Fine", lastTransitionTime: "2026-01-01T00:00:00Z" },
    ];
    await objects.patchNamespacedCustomObjectStatus(
      { ...STORES, namespace: "team-a", name: "doomed", body: { status: { conditions } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await until("Other turns Unknown", async () => cond(await xr("doomed"), "Other")?.status === "Unknown", 10_000);
    const other = cond(await xr("doomed"), "Other");
    assert.equal(
      [other.reason, other.message],
      ["FatalError", "A fatal error occurred before the status of this condition could be determined."],
    );
  } finally {
    await host.stop();
    await c.stop();
  }
});

C(
  "a step's requirements are seeded from its last run, as Crossplane's tracker seeds them: one call per reconcile once settled",
  async () => {
    const { c, kc, host, objects, xr, create, cond, mem, calls } = await setup();
    try {
      await applyManifests(
        kc,
        [
          {
            obj: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cm", namespace: "team-a" }, data: { size: "3" } },
            source: "test",
          },
        ],
        mem.log,
      );
      await create("needs", "require");
      await until("the status from the ConfigMap", async () => (await xr("needs")).status?.size === "3", 10_000);
      // By name with no namespace: a cluster-scoped name, so team-a's ConfigMap is not it (Crossplane's Get finds none).
      await create("noname", "noname");
      await until("no ConfigMap named without a namespace", async () => (await xr("noname")).status?.size === "none", 10_000);
      // Two more reconciles, each brought by a change to the XR.
      for (const n of ["1", "2"]) {
        const before = calls.filter((x) => x.xr === "needs").length;
        await objects.patchNamespacedCustomObject(
          { ...STORES, namespace: "team-a", name: "needs", body: { metadata: { annotations: { poke: n } } } },
          setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
        );
        await until(`reconcile ${n}`, async () => calls.filter((x) => x.xr === "needs").length > before, 10_000);
      }
      await until("settled", async () => cond(await xr("needs"), "Synced")?.status === "True", 10_000);
      const mine = calls.filter((x) => x.xr === "needs");
      assert.ok(mine.length >= 4, JSON.stringify(mine));
      // Only the very first call went without the ConfigMap; every later one was seeded with it.
      assert.equal(
        mine.map((x) => x.required.includes("cm")),
        [false, ...mine.slice(1).map(() => true)],
        JSON.stringify(mine),
      );
    } finally {
      await host.stop();
      await c.stop();
    }
  },
);

// A change to a required resource reconciles the XRs that required it (crossplane PR #7572: the dependency
// tracker of internal/controller/apiextensions/composite/dependency at 2d040d2d, whose own table is in
// test/host/dependencies.test.ts). Without it, the XR would see the change at its next poll, a minute on.
C("a change to a ConfigMap a step required by name reconciles the XR; the watch goes with the last XR that required it", async () => {
  const { c, kc, host, objects, xr, create, mem } = await setup();
  const cm = (size: string) => ({
    obj: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cm", namespace: "team-a" }, data: { size } },
    source: "test",
  });
  try {
    await applyManifests(kc, [cm("3")], mem.log);
    await create("needs", "require");
    await until("the status from the ConfigMap", async () => (await xr("needs")).status?.size === "3", 10_000);
    const watched = () => host.watches.watching().some((k) => k.group === "" && k.plural === "configmaps");
    assert.ok(watched(), "ConfigMaps are watched");
    await applyManifests(kc, [cm("7")], mem.log);
    await until("the status from the changed ConfigMap", async () => (await xr("needs")).status?.size === "7", 10_000);
    await objects.deleteNamespacedCustomObject({ ...STORES, namespace: "team-a", name: "needs" });
    await until("the XR gone and the ConfigMaps' watch with it", async () => !watched(), 10_000);
  } finally {
    await host.stop();
    await c.stop();
  }
});

C("a ConfigMap that comes to match a step's labels, in any namespace, reconciles the XR; one that does not match does not", async () => {
  const { c, kc, host, xr, create, mem, calls } = await setup();
  const cm = (name: string, namespace: string, tier: string) => ({
    obj: { apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace, labels: { tier } }, data: {} },
    source: "test",
  });
  const mine = () => calls.filter((x) => x.xr === "gold").length;
  try {
    await create("gold", "labels");
    await until("no gold ConfigMap yet", async () => (await xr("gold")).status?.size === "0", 10_000);
    await applyManifests(kc, [cm("one", "default", "gold")], mem.log);
    await until("one gold ConfigMap, in another namespace", async () => (await xr("gold")).status?.size === "1", 10_000);
    // Settled: no call for a second; then a silver ConfigMap brings none.
    let last = mine();
    await until(
      "settled",
      async () => {
        await new Promise((r) => setTimeout(r, 1_000));
        const now = mine();
        const still = now === last;
        last = now;
        return still;
      },
      15_000,
    );
    await applyManifests(kc, [cm("two", "team-a", "silver")], mem.log);
    await new Promise((r) => setTimeout(r, 1_500));
    assert.is(mine(), last, "a ConfigMap the labels do not match reconciles nothing");
    await applyManifests(kc, [cm("two", "team-a", "gold")], mem.log);
    await until("relabelled gold: two", async () => (await xr("gold")).status?.size === "2", 10_000);
  } finally {
    await host.stop();
    await c.stop();
  }
});

C(
  "killed right after a composed resource is applied, the host finds it again: it was referenced before it was applied (composition_functions.go: no orphan, observed next time, never created twice)",
  async () => {
    const c = await startDevCluster();
    const direct = kubeconfigFor(c);
    let crashed = false;
    // The host talks through a proxy that goes silent right after it forwards the first apply of a Bucket:
    // the API server applies it, and the host never hears back, as if it were killed at that moment.
    const proxy: Proxy = await startProxy(c.port, "127.0.0.1", (line) => {
      if (!crashed && /^PATCH \/apis\/storage\.example\.org\/v1\/namespaces\/team-a\/buckets\//.test(line)) {
        crashed = true;
        proxy.blackhole();
      }
    });
    const mem = memoryLog();
    const runner = () => createRunner(loadDocs(join(DIR, "functions.yaml")), join(DIR, "functions.yaml"), () => new Date());
    const killed = new Host({ kc: kubeconfigFor(c, proxy.port), runner: await runner(), log: mem.log, requestTimeoutMs: 1000 });
    let restarted: Host | undefined;
    const { objects } = apis(direct);
    const buckets = async () => ((await objects.listNamespacedCustomObject({ ...BUCKETS, namespace: "team-a" })) as any).items as any[];
    const xr = () => objects.getNamespacedCustomObject({ ...STORES, namespace: "team-a", name: "shop" }) as Promise<any>;
    try {
      await killed.start();
      await applyManifests(direct, loadDocs(join(DIR, "manifests.yaml")), mem.log);
      const shop = { apiVersion: "example.org/v1", kind: "XStore", metadata: { name: "shop", namespace: "team-a" }, spec: { case: "ok" } };
      await until("the XR kind served", async () => (await fetch(`${c.url}/apis/example.org/v1/xstores`)).ok, 10_000);
      await applyManifests(direct, [{ obj: shop, source: "test" }], mem.log);
      await until("the bucket applied, and the host cut off", async () => crashed && (await buckets()).length === 1, 10_000);
      const [bucket] = await buckets();
      assert.equal(
        (await xr()).spec.crossplane.resourceRefs,
        [{ apiVersion: "storage.example.org/v1", kind: "Bucket", name: bucket.metadata.name }],
        "the XR referenced the bucket before the host applied it",
      );
      // A new host, as the restarted process.
      restarted = new Host({ kc: direct, runner: await runner(), log: mem.log, baseBackoffMs: 50, maxBackoffMs: 500 });
      await restarted.start();
      await until(
        "the XR reconciled by the new host",
        async () => ((await xr()).status?.conditions ?? []).some((x: any) => x.type === "Synced" && x.status === "True"),
        10_000,
      );
      const after = await buckets();
      assert.equal(
        after.map((b) => [b.metadata.name, b.metadata.uid]),
        [[bucket.metadata.name, bucket.metadata.uid]],
        "the same bucket, never a second",
      );
    } finally {
      await restarted?.stop();
      await proxy.close();
      await killed.crash();
      await c.stop();
    }
  },
);

C.run();
