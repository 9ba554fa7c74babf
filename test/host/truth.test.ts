// The host loop tells the truth and stays quiet: failures reach Synced and
// Events, reconciles that change nothing write nothing, XRDs are deleted as
// Crossplane deletes them, a deletion goes on without its function, a name a
// terminating resource still holds is not taken, kubectl shows READY and SYNCED.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster, type DevCluster } from "../../src/apiserver/server.js";
import { loadDocs } from "../../src/engine/docs.js";
import { createRunner, type Runner } from "../../src/engine/runner.js";
import { Host } from "../../src/host/host.js";
import { applyManifests } from "../../src/host/manifests.js";
import { startMetricsServer } from "../../src/metrics.js";
import { apis, kubeconfigFor, sleep, until } from "../support/cluster.js";
import { memoryLog } from "../support/log.js";
import { needs } from "../support/needs.js";
import { ROOT } from "../support/spawn.js";

const DIR = join(ROOT, "test/fixtures/truth");
const EX = join(ROOT, "examples");
const DISKS = { group: "compute.example.org", version: "v1", plural: "disks" };
const XVOLUMES = { group: "example.org", version: "v1", plural: "xvolumes" };
const BUCKETS = { group: "s3.aws.upbound.io", version: "v1beta1", plural: "buckets" };
const XBUCKETS = { group: "example.xfn.dev", version: "v1alpha1", plural: "xbuckets" };
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const cond = (o: any, type: string) => (o?.status?.conditions ?? []).find((c: any) => c.type === type);

/** A runner that can be made to fail every call, as when a function is down. */
function switchable(inner: Runner): Runner & { down: boolean } {
  const r = {
    down: false,
    run: (fn: string, req: never, deadline: number) =>
      r.down ? Promise.reject(new Error(`cannot reach function ${fn}: connection refused`)) : inner.run(fn, req, deadline),
    close: () => inner.close(),
  };
  return r;
}

async function start(functions: string, manifests: string[], opts: { debug?: boolean } = {}) {
  const c = await startDevCluster();
  const kc = kubeconfigFor(c);
  const mem = memoryLog(opts.debug ?? true);
  const runner = switchable(await createRunner(loadDocs(functions), functions, () => new Date()));
  const host = new Host({ kc, runner, log: mem.log, baseBackoffMs: 50, maxBackoffMs: 500, maxWatchBackoffMs: 2000 });
  await host.start();
  await applyManifests(
    kc,
    manifests.flatMap((m) => loadDocs(m)),
    mem.log,
  );
  return { c, kc, mem, host, runner, ...apis(kc) };
}
type Started = Awaited<ReturnType<typeof start>>;
const stop = async (host: Host, c: DevCluster) => {
  await host.stop();
  await c.stop();
};
const volume = (name: string, spec: JsonObject) => ({
  obj: { apiVersion: "example.org/v1", kind: "XVolume", metadata: { name }, spec },
  source: "test",
});

const T = suite("host loop: truthful and quiet");
/** The tests that read the cluster with the real kubectl. */
const TK = needs(T, "kubectl");

T("a composed kind whose CRD is deleted: Synced=False naming it, an Event; its watch restarts back off", async () => {
  const { c, kc, mem, host, objects, crds } = await start(join(DIR, "functions.yaml"), [join(DIR, "manifests.yaml")]);
  try {
    await applyManifests(kc, [volume("v1", { disks: [{ name: "data" }] })], mem.log);
    await until(
      "Synced=True",
      async () => cond(await objects.getClusterCustomObject({ ...XVOLUMES, name: "v1" }), "Synced")?.status === "True",
      10_000,
    );
    const restartsBefore = (await host.metrics.watchRestarts.get()).values[0]?.value ?? 0;
    await crds.deleteCustomResourceDefinition({ name: "disks.compute.example.org" });
    await objects.patchClusterCustomObject({ ...XVOLUMES, name: "v1", body: { spec: { touched: "yes" } } }, merge);
    await until(
      "Synced=False naming the kind",
      async () => {
        const s = cond(await objects.getClusterCustomObject({ ...XVOLUMES, name: "v1" }), "Synced");
        return s?.status === "False" && /cannot apply Disk .* \(resource data\)/.test(s.message);
      },
      10_000,
    );
    const events = (await (await fetch(`${c.url}/api/v1/events?fieldSelector=involvedObject.name%3Dv1`)).json()) as any;
    assert.ok(
      events.items.some((e: any) => e.type === "Warning" && /cannot apply Disk/.test(e.message) && e.source.component === "xfn-host"),
      JSON.stringify(events.items.map((e: any) => e.message)),
    );
    // The disks watch keeps failing: its restarts slow down (200, 400, 800, 1600, 2000 ms), not every
    // 200 ms. Each failure logs the wait before the next try: the waits double, up to the limit, which
    // is what the code decides, whatever the machine's load does to when the tries happen.
    const waits = () =>
      mem
        .lines()
        .filter((l) => String(l["msg"]).startsWith("watch failed") && String(l["kind"]).includes("disks"))
        .map((l) => Number(l["retryInMs"]));
    await until("four failures of the disks watch", () => waits().length >= 4, 20_000);
    assert.equal(waits().slice(0, 4), [200, 400, 800, 1600]);
    const restarts = ((await host.metrics.watchRestarts.get()).values[0]?.value ?? 0) - restartsBefore;
    assert.ok(restarts >= 4, `the metric counts each restart (${restarts})`);
    const warned = mem.lines().filter((l) => l["msg"] === "watch failed; restarting with backoff" && String(l["kind"]).includes("disks"));
    assert.is(warned.length, 1, "logged once while the error stays the same");
  } finally {
    await stop(host, c);
  }
});

T("a reconcile that changes nothing writes nothing; --debug logs each reconcile; /metrics reports it", async () => {
  const { c, kc, mem, host, objects } = await start(join(DIR, "functions.yaml"), [join(DIR, "manifests.yaml")]);
  const metrics = await startMetricsServer("127.0.0.1:0", host.metrics.registry, mem.log);
  try {
    await applyManifests(kc, [volume("quiet", { disks: [{ name: "a" }, { name: "b" }] })], mem.log);
    await until("two disks", async () => ((await objects.listClusterCustomObject(DISKS)) as any).items.length === 2, 10_000);
    for (const d of ((await objects.listClusterCustomObject(DISKS)) as any).items)
      await objects.patchClusterCustomObjectStatus(
        { ...DISKS, name: d.metadata.name, body: { status: { conditions: [{ type: "Ready", status: "True", reason: "Available" }] } } },
        merge,
      );
    await until(
      "Ready",
      async () => cond(await objects.getClusterCustomObject({ ...XVOLUMES, name: "quiet" }), "Ready")?.status === "True",
      10_000,
    );
    await sleep(500);
    await host.queue.idle();
    const rv = c.store.rv;
    const runs = host.queue.processed.get("xvolumes.example.org|/quiet") ?? 0;
    for (let i = 0; i < 3; i++) {
      host.queue.add("xvolumes.example.org|/quiet");
      await until("the reconcile", () => (host.queue.processed.get("xvolumes.example.org|/quiet") ?? 0) > runs + i);
      await host.queue.idle();
    }
    assert.is(c.store.rv, rv, "no write: the resourceVersion did not move");
    const reconciled = mem.lines().filter((l) => l["msg"] === "reconciled" && String(l["xr"]).includes("quiet"));
    const last = reconciled.at(-1)!;
    assert.equal([last["applied"], last["skipped"], last["status"], last["events"]], [0, 2, false, 0]);
    const text = await (await fetch(`http://127.0.0.1:${metrics.port}/metrics`)).text();
    assert.match(text, /xfn_host_reconciles_total\{result="success"\} \d+/);
    assert.match(text, /xfn_host_api_writes_skipped_total\{what="apply"\} \d+/);
    assert.match(text, /xfn_host_queue_depth \d+/);
    assert.match(text, /xfn_host_watches [1-9]/);
    assert.match(text, /xfn_host_function_calls_total\{function="disks",result="ok"\} \d+/);
  } finally {
    await metrics.stop();
    await stop(host, c);
  }
});

T("function results become Events on the XR, and a Warning reaches its Ready message", async () => {
  const { c, kc, mem, host, objects } = await start(join(DIR, "functions.yaml"), [join(DIR, "manifests.yaml")]);
  try {
    await loudVolume(c, kc, mem, objects);
  } finally {
    await stop(host, c);
  }
});

TK("kubectl shows an XR's SYNCED and READY, and kubectl describe its Events", async () => {
  const { c, kc, mem, host, objects } = await start(join(DIR, "functions.yaml"), [join(DIR, "manifests.yaml")]);
  const scratch = mkdtempSync(join(tmpdir(), "xfn-truth-"));
  try {
    await loudVolume(c, kc, mem, objects);
    const kubeconfig = join(scratch, "kubeconfig");
    writeFileSync(kubeconfig, c.kubeconfig());
    // Not execFileSync: the API server runs in this process, and must keep answering.
    const kubectl = async (...args: string[]) =>
      (await promisify(execFile)("kubectl", ["--kubeconfig", kubeconfig, "--cache-dir", join(scratch, "cache"), ...args])).stdout;
    const table = await kubectl("get", "xvolumes");
    assert.match(table, /^NAME\s+SYNCED\s+READY\s+COMPOSITION\s+AGE\s*\nloud\s+True\s+False\s+xvolumes\s+\d+s/, table);
    const described = await kubectl("describe", "xvolume", "loud");
    assert.match(described, /Events:[\s\S]*Warning\s+DiskWarning\s+.*xfn-host\s+Pipeline step "compose": quota almost used/, described);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
    await stop(host, c);
  }
});

/** loudVolume makes an XR whose function warns, and waits for the warning in Ready and both results as Events. */
async function loudVolume(c: Started["c"], kc: Started["kc"], mem: Started["mem"], objects: Started["objects"]): Promise<void> {
  await applyManifests(kc, [volume("loud", { disks: [{ name: "a" }], warn: "quota almost used" })], mem.log);
  await until(
    "the warning in Ready",
    async () =>
      /compose: quota almost used/.test(cond(await objects.getClusterCustomObject({ ...XVOLUMES, name: "loud" }), "Ready")?.message ?? ""),
    10_000,
  );
  const seen = async () =>
    ((await (await fetch(`${c.url}/api/v1/events?fieldSelector=involvedObject.name%3Dloud`)).json()) as any).items.map(
      (e: any) => `${e.type} ${e.reason} ${e.source.component} ${e.message}`,
    ) as string[];
  await until("both results as Events", async () => {
    const s = await seen();
    return (
      s.includes('Warning DiskWarning xfn-host Pipeline step "compose": quota almost used') &&
      s.includes('Normal Composed xfn-host Pipeline step "compose": composed 1 disks')
    );
  });
}

T("a resource waits while a terminating one still holds its external name, then is created", async () => {
  const { c, kc, mem, host, objects } = await start(join(DIR, "functions.yaml"), [join(DIR, "manifests.yaml")]);
  try {
    // The old disk, held by its provider's finalizer, still being deleted.
    await objects.createClusterCustomObject({
      ...DISKS,
      body: {
        apiVersion: "compute.example.org/v1",
        kind: "Disk",
        metadata: { name: "old-disk", finalizers: ["example.org/provider"], annotations: { "crossplane.io/external-name": "vol-0abc" } },
        spec: {},
      },
    });
    await objects.deleteClusterCustomObject({ ...DISKS, name: "old-disk" });
    await applyManifests(kc, [volume("again", { disks: [{ name: "data", externalName: "vol-0abc" }] })], mem.log);
    await until(
      "Ready=False saying what it waits for",
      async () =>
        /data: external name "vol-0abc" is still held by Disk old-disk, which is being deleted/.test(
          cond(await objects.getClusterCustomObject({ ...XVOLUMES, name: "again" }), "Ready")?.message ?? "",
        ),
      10_000,
    );
    const names = async () => ((await objects.listClusterCustomObject(DISKS)) as any).items.map((d: any) => d.metadata.name);
    assert.equal(await names(), ["old-disk"], "not created while the name is held");
    const events = (await (await fetch(`${c.url}/api/v1/events?fieldSelector=involvedObject.name%3Dagain`)).json()) as any;
    assert.ok(events.items.some((e: any) => e.reason === "ExternalNameInUse"));
    await objects.patchClusterCustomObject({ ...DISKS, name: "old-disk", body: { metadata: { finalizers: [] } } }, merge);
    await until(
      "the new disk, once the old one is gone",
      async () => (await names()).length === 1 && (await names())[0] !== "old-disk",
      10_000,
    );
  } finally {
    await stop(host, c);
  }
});

T("deleting an XRD deletes its XRs, then its CRD, then the XRD goes; a deleted XR CRD is created again", async () => {
  const { c, kc, mem, host, objects, crds } = await start(join(DIR, "functions.yaml"), [join(DIR, "manifests.yaml")]);
  const xrdPath = {
    group: "apiextensions.crossplane.io",
    version: "v2",
    plural: "compositeresourcedefinitions",
    name: "xvolumes.example.org",
  };
  try {
    await applyManifests(kc, [volume("v1", { disks: [{ name: "a" }] }), volume("v2", { disks: [{ name: "b" }] })], mem.log);
    await until("two disks", async () => ((await objects.listClusterCustomObject(DISKS)) as any).items.length === 2, 10_000);
    const xrd = (await objects.getClusterCustomObject(xrdPath)) as any;
    assert.ok(xrd.metadata.finalizers.includes("defined.apiextensions.crossplane.io"));

    // Until it is deleted, nothing says it was: the host's own first apply is not a deletion.
    assert.not.match(mem.text(), /CRD was deleted/);
    // Someone deletes the XR kind's CRD: the host serves the kind again.
    await crds.deleteCustomResourceDefinition({ name: "xvolumes.example.org" });
    await until(
      "the XR CRD again",
      async () => (await crds.readCustomResourceDefinition({ name: "xvolumes.example.org" }).catch(() => undefined)) !== undefined,
      10_000,
    );
    assert.match(mem.text(), /the XR kind's CRD was deleted; creating it again/);
    const crd = await crds.readCustomResourceDefinition({ name: "xvolumes.example.org" });
    assert.equal(
      crd.spec.versions[0]!.additionalPrinterColumns!.map((col) => col.name),
      ["SYNCED", "READY", "COMPOSITION", "COMPOSITIONREVISION", "AGE"],
    );

    await applyManifests(kc, [volume("v3", { disks: [{ name: "c" }] })], mem.log);
    await until("the new XR's disk", async () => ((await objects.listClusterCustomObject(DISKS)) as any).items.length === 1, 10_000);
    await objects.deleteClusterCustomObject(xrdPath);
    await until("the XRD gone", async () => (await objects.getClusterCustomObject(xrdPath).catch(() => undefined)) === undefined, 15_000);
    assert.equal(((await objects.listClusterCustomObject(DISKS)) as any).items, [], "its XRs' composed resources went with them");
    assert.is(await crds.readCustomResourceDefinition({ name: "xvolumes.example.org" }).catch(() => "gone"), "gone");
    assert.equal(host.controllerKinds(), []);
  } finally {
    await stop(host, c);
  }
});

T(
  "an XRD is Established once the host serves its XR kind, as Crossplane's; while it is deleted, Established=False (Terminating)",
  async () => {
    const { c, kc, mem, host, objects } = await start(join(DIR, "functions.yaml"), [join(DIR, "manifests.yaml")]);
    const xrdPath = {
      group: "apiextensions.crossplane.io",
      version: "v2",
      plural: "compositeresourcedefinitions",
      name: "xvolumes.example.org",
    };
    const xrd = async () => (await objects.getClusterCustomObject(xrdPath)) as any;
    try {
      await until("Established", async () => cond(await xrd(), "Established")?.status === "True", 10_000);
      const served = await xrd();
      assert.equal(
        { ...cond(served, "Established"), lastTransitionTime: "t" },
        {
          type: "Established",
          status: "True",
          reason: "WatchingCompositeResource",
          observedGeneration: served.metadata.generation,
          lastTransitionTime: "t",
        },
      );
      assert.equal(served.status.controllers, {
        compositeResourceClaimType: { apiVersion: "", kind: "" },
        compositeResourceType: { apiVersion: "example.org/v1", kind: "XVolume" },
      });
      assert.is(cond(served, "Offered"), undefined, "an XRD that offers no claims has no Offered");
      // Written once: reconciling the XRD again changes nothing.
      const rv = served.metadata.resourceVersion;
      await sleep(300);
      assert.is((await xrd()).metadata.resourceVersion, rv);

      // An XR held by its composed disk's finalizer keeps the XRD deleting.
      await applyManifests(kc, [volume("held", { disks: [{ name: "a" }] })], mem.log);
      await until("a disk", async () => ((await objects.listClusterCustomObject(DISKS)) as any).items.length === 1, 10_000);
      const [disk] = ((await objects.listClusterCustomObject(DISKS)) as any).items;
      await objects.patchClusterCustomObject(
        { ...DISKS, name: disk.metadata.name, body: { metadata: { finalizers: ["example.org/hold"] } } },
        merge,
      );
      await objects.deleteClusterCustomObject(xrdPath);
      await until("Terminating", async () => cond(await xrd(), "Established")?.reason === "TerminatingCompositeResource", 10_000);
      assert.is(cond(await xrd(), "Established").status, "False");
      await objects.patchClusterCustomObject({ ...DISKS, name: disk.metadata.name, body: { metadata: { finalizers: [] } } }, merge);
      await until("the XRD gone", async () => (await objects.getClusterCustomObject(xrdPath).catch(() => undefined)) === undefined, 15_000);
    } finally {
      await stop(host, c);
    }
  },
);

TK("kubectl wait --for=condition=Established on an XRD the host serves; kubectl get xrd shows ESTABLISHED and OFFERED", async () => {
  const { c, host } = await start(join(DIR, "functions.yaml"), [join(DIR, "manifests.yaml")]);
  const scratch = mkdtempSync(join(tmpdir(), "xfn-truth-"));
  try {
    const kubeconfig = join(scratch, "kubeconfig");
    writeFileSync(kubeconfig, c.kubeconfig());
    const kubectl = async (...args: string[]) =>
      (await promisify(execFile)("kubectl", ["--kubeconfig", kubeconfig, "--cache-dir", join(scratch, "cache"), ...args])).stdout;
    assert.match(
      await kubectl("wait", "--for=condition=Established", "xrd/xvolumes.example.org", "--timeout=20s"),
      /xvolumes\.example\.org condition met/,
    );
    const table = await kubectl("get", "xrd");
    assert.match(table, /^NAME\s+ESTABLISHED\s+OFFERED\s+AGE\s*\nxvolumes\.example\.org\s+True\s+\S*\s*\d+s/, table);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
    await stop(host, c);
  }
});

T("while the function is down, only Synced changes: the status it wrote (external names among it) stays", async () => {
  const { c, host, runner, objects } = await start(join(EX, "functions.yaml"), [
    join(EX, "host"),
    join(EX, "composition.yaml"),
    join(EX, "xr.yaml"),
  ]);
  const xr = async () => (await objects.getClusterCustomObject({ ...XBUCKETS, name: "team-a" })) as any;
  try {
    // The provider learns the cloud ID and records it as the external name.
    await until("a bucket", async () => ((await objects.listClusterCustomObject(BUCKETS)) as any).items.length > 0, 10_000);
    const [bucket] = ((await objects.listClusterCustomObject(BUCKETS)) as any).items;
    await objects.patchClusterCustomObject(
      { ...BUCKETS, name: bucket.metadata.name, body: { metadata: { annotations: { "crossplane.io/external-name": "logs-7f3a" } } } },
      merge,
    );
    await until(
      "the external name recorded",
      async () => Object.values((await xr()).status?.externalNames ?? {}).includes("logs-7f3a"),
      10_000,
    );
    await host.queue.idle();
    const before = (await xr()).status;
    runner.down = true;
    await objects.patchClusterCustomObject({ ...XBUCKETS, name: "team-a", body: { spec: { touched: "yes" } } }, merge);
    await until("Synced=False", async () => cond(await xr(), "Synced")?.status === "False", 10_000);
    const after = (await xr()).status;
    assert.match(cond({ status: after }, "Synced").message, /connection refused/);
    const { conditions: _a, ...kept } = after;
    const { conditions: _b, ...was } = before;
    assert.equal(kept, was, "every status field but the conditions is as it was");
  } finally {
    await stop(host, c);
  }
});

T("an XR deleted while its function is down is deleted in the order the pipeline recorded, dependents first", async () => {
  const { c, host, runner, objects } = await start(join(EX, "functions.yaml"), [
    join(EX, "host"),
    join(EX, "composition.yaml"),
    join(EX, "xr.yaml"),
  ]);
  const buckets = async () => ((await objects.listClusterCustomObject(BUCKETS)) as any).items as any[];
  const byResource = async (rn: string) =>
    (await buckets()).find((b) => b.metadata.annotations["crossplane.io/composition-resource-name"] === rn);
  try {
    await until("the logs bucket", async () => (await byResource("bucket-logs")) !== undefined, 10_000);
    const logs = await byResource("bucket-logs");
    await objects.patchClusterCustomObjectStatus(
      { ...BUCKETS, name: logs.metadata.name, body: { status: { conditions: [{ type: "Ready", status: "True", reason: "Available" }] } } },
      merge,
    );
    await until("the assets bucket (after logs is ready)", async () => (await byResource("bucket-assets")) !== undefined, 10_000);
    const assets = await byResource("bucket-assets");
    await objects.patchClusterCustomObject(
      { ...BUCKETS, name: assets.metadata.name, body: { metadata: { finalizers: ["example.org/provider"] } } },
      merge,
    );
    const xr = async () => (await objects.getClusterCustomObject({ ...XBUCKETS, name: "team-a" })) as any;
    await until(
      "the order recorded",
      async () => JSON.stringify((await xr()).status?.deletion?.order) === '[["bucket-assets"],["bucket-logs"]]',
      10_000,
    );

    runner.down = true;
    await objects.deleteClusterCustomObject({ ...XBUCKETS, name: "team-a" });
    await until("assets deleting", async () => Boolean((await byResource("bucket-assets"))?.metadata.deletionTimestamp), 10_000);
    await sleep(1500);
    assert.not.ok((await byResource("bucket-logs")).metadata.deletionTimestamp, "logs waits while assets, which depends on it, remains");
    const ready = cond(await xr(), "Ready");
    assert.is(ready.reason, "Deleting");
    assert.match(
      ready.message,
      /deleting without the pipeline \(cannot compose resources: cannot run Composition pipeline step "[^"]+": .*connection refused\), in the order the pipeline recorded: deleting 1 composed resource: bucket-assets \(finalizers: example\.org\/provider\); deleting later: bucket-logs/,
    );
    assert.match(cond(await xr(), "Synced").message, /connection refused/);
    await objects.patchClusterCustomObject({ ...BUCKETS, name: assets.metadata.name, body: { metadata: { finalizers: [] } } }, merge);
    await until(
      "the XR gone, the function still down",
      async () => (await objects.getClusterCustomObject({ ...XBUCKETS, name: "team-a" }).catch(() => undefined)) === undefined,
      15_000,
    );
    assert.equal(await buckets(), []);
  } finally {
    await stop(host, c);
  }
});

T.run();
