// The host loop under faults: an API server restart, watches cut past their
// history, a provider wiping an external name, a function down for a while.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import hello from "../../functions/hello/index.js";
import { applyManifests } from "../../src/host/manifests.js";
import { startDevCluster, type DevCluster } from "../../src/apiserver/server.js";
import { Host } from "../../src/host/host.js";
import { loadDocs } from "../../src/engine/docs.js";
import { createRunner } from "../../src/engine/runner.js";
import { serve, type RunningServer } from "../../src/server/server.js";
import { apis, kubeconfigFor, sleep, until } from "../support/cluster.js";
import { memoryLog } from "../support/log.js";
import { startProxy } from "../support/proxy.js";
import { ROOT } from "../support/spawn.js";

const EX = join(ROOT, "examples");
const BUCKETS = { group: "s3.aws.upbound.io", version: "v1beta1", plural: "buckets" };
const XBUCKETS = { group: "example.xfn.dev", version: "v1alpha1", plural: "xbuckets" };
const EXT = "crossplane.io/external-name";
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

const F = suite("host loop under faults");
let scratch: string;
F.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-faults-"));
});
F.after(() => rmSync(scratch, { recursive: true, force: true }));

F("API server restart, cut watches (410) and a provider wiping the annotation: the external name survives", async () => {
  const data = join(scratch, "state.json");
  let c: DevCluster = await startDevCluster({ dataFile: data, historySize: 50 });
  const port = c.port;
  const kc = kubeconfigFor(c);
  const mem = memoryLog();
  const host = new Host({
    kc,
    runner: await createRunner(loadDocs(join(EX, "functions.yaml")), join(EX, "functions.yaml"), () => new Date()),
    log: mem.log,
    baseBackoffMs: 50,
    maxBackoffMs: 500,
  });
  const { objects } = apis(kc);
  const bucket = async () =>
    ((await objects.listClusterCustomObject(BUCKETS)) as { items: any[] }).items.find(
      (b) => b.metadata.annotations["crossplane.io/composition-resource-name"] === "bucket-logs",
    );
  const xr = async () => (await objects.getClusterCustomObject({ ...XBUCKETS, name: "team-a" })) as any;
  try {
    await host.start();
    await applyManifests(
      kc,
      [...loadDocs(join(EX, "host")), ...loadDocs(join(EX, "composition.yaml")), ...loadDocs(join(EX, "xr.yaml"))],
      mem.log,
    );
    await until("the logs bucket", async () => (await bucket()) !== undefined, 10_000);
    const name = (await bucket()).metadata.name;
    // The provider creates it in the cloud and records the external name.
    await objects.patchClusterCustomObject({ ...BUCKETS, name, body: { metadata: { annotations: { [EXT]: "team-a-logs-4f9a" } } } }, merge);
    await until(
      "the name recorded in the XR",
      async () => (await xr()).status?.externalNames?.["bucket-logs"] === "team-a-logs-4f9a",
      10_000,
    );

    // Watches are cut and the history compacted: resuming gets 410 Gone and relists.
    c.store.closeAllWatches();
    c.store.compact();
    // The API server restarts (state kept with --data).
    await c.stop();
    await sleep(300);
    c = await startDevCluster({ dataFile: data, port, historySize: 50 });
    // The provider restarts without late-initialization and loses the annotation.
    await objects.patchClusterCustomObject({ ...BUCKETS, name, body: { metadata: { annotations: { [EXT]: null } } } }, merge);
    await until("the annotation put back", async () => (await bucket())?.metadata.annotations[EXT] === "team-a-logs-4f9a", 15_000);
    assert.is((await xr()).status.externalNames["bucket-logs"], "team-a-logs-4f9a");
    assert.is(((await objects.listClusterCustomObject(BUCKETS)) as { items: unknown[] }).items.length <= 2, true, "no duplicate bucket");
  } finally {
    await host.stop();
    await c.stop();
  }
});

F("a function down for a while: Synced=False with the reason, then convergence once it is back", async () => {
  const c = await startDevCluster();
  const kc = kubeconfigFor(c);
  const mem = memoryLog();
  let fn: RunningServer | undefined = await serve(hello, { address: "127.0.0.1:0", insecure: true }, memoryLog().log);
  const port = fn.port;
  await fn.stop(100);
  fn = undefined;
  const functions = join(scratch, "functions.yaml");
  writeFileSync(
    functions,
    `apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-hello\n  annotations:\n    render.crossplane.io/runtime: Development\n    render.crossplane.io/runtime-development-target: 127.0.0.1:${port}\n---\n` +
      `apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-lifecycle\n  annotations:\n    render.xfn.dev/module: ${join(ROOT, "functions/lifecycle")}\n`,
  );
  const host = new Host({
    kc,
    runner: await createRunner(loadDocs(functions), functions, () => new Date()),
    log: mem.log,
    baseBackoffMs: 50,
    maxBackoffMs: 400,
    functionTimeoutMs: 2000,
  });
  const { objects } = apis(kc);
  const synced = async () =>
    ((await objects.getClusterCustomObject({ ...XBUCKETS, name: "team-a" }).catch(() => undefined)) as any)?.status?.conditions?.find(
      (x: any) => x.type === "Synced",
    );
  try {
    await host.start();
    await applyManifests(
      kc,
      [...loadDocs(join(EX, "host")), ...loadDocs(join(EX, "composition.yaml")), ...loadDocs(join(EX, "xr.yaml"))],
      mem.log,
    );
    await until("Synced=False naming the function", async () => (await synced())?.status === "False", 10_000);
    assert.match((await synced()).message, /cannot run Function "function-hello"/);
    fn = await serve(hello, { address: `127.0.0.1:${port}`, insecure: true }, memoryLog().log);
    await until("Synced=True once it is back", async () => (await synced())?.status === "True", 15_000);
    assert.is(((await objects.listClusterCustomObject(BUCKETS)) as { items: unknown[] }).items.length, 1);
  } finally {
    await host.stop();
    await fn?.stop(100);
    await c.stop();
  }
});

/**
 * cutOff starts a host behind a proxy, reconciles one XR, silences every
 * connection the host has open (as a dropped NAT entry would), creates a
 * second XR and waits for the host to reconcile it; it returns the host's log.
 */
async function cutOff(
  dev: { bookmarkIntervalMs?: number },
  watch: { watchTimeoutMs: [number, number]; watchGraceMs?: number; watchIdleMs?: number },
) {
  const TRUTH = join(ROOT, "test/fixtures/truth");
  const c = await startDevCluster(dev);
  const proxy = await startProxy(c.port);
  const kc = kubeconfigFor(c, proxy.port);
  const mem = memoryLog();
  const host = new Host({
    kc,
    runner: await createRunner(loadDocs(join(TRUTH, "functions.yaml")), join(TRUTH, "functions.yaml"), () => new Date()),
    log: mem.log,
    baseBackoffMs: 50,
    maxBackoffMs: 400,
    maxWatchBackoffMs: 400,
    requestTimeoutMs: 2000,
    ...watch,
  });
  const direct = kubeconfigFor(c);
  const volume = (name: string) =>
    applyManifests(
      direct,
      [{ obj: { apiVersion: "example.org/v1", kind: "XVolume", metadata: { name }, spec: { disks: [{ name: "a" }] } }, source: "test" }],
      mem.log,
    );
  const synced = async (name: string) =>
    (((await (await fetch(`${c.url}/apis/example.org/v1/xvolumes/${name}`)).json()) as any).status?.conditions ?? []).some(
      (x: any) => x.type === "Synced" && x.status === "True",
    );
  try {
    await host.start();
    await applyManifests(direct, loadDocs(join(TRUTH, "manifests.yaml")), mem.log);
    await until("the XR kind served", async () => (await fetch(`${c.url}/apis/example.org/v1/xvolumes`)).ok, 10_000);
    await volume("first");
    await until("the first XR reconciled", () => synced("first"), 10_000);
    // The host runs a while (long enough for a few bookmarks where they come often) ...
    await sleep(600);
    // ... then every connection the host has open now goes silent; new ones get through.
    assert.ok(proxy.freeze() >= 3, "the host's watches were open (XRDs, Compositions, XRs, ...)");
    await volume("second");
    await until("the XR created after the cut reconciled", () => synced("second"), 10_000).catch((err: Error) => {
      throw new Error(`${err.message}; the host logged:\n${mem.text()}`);
    });
    return mem.text();
  } finally {
    await host.stop();
    await proxy.close();
    await c.stop();
  }
}

F(
  "the host's connections go silent (a dropped NAT entry): its watches are given up and renewed, and an XR created meanwhile is reconciled",
  async () => {
    const log = await cutOff({}, { watchTimeoutMs: [1500, 1500], watchGraceMs: 500 });
    assert.match(log, /the watch of example\.org\/v1\/xvolumes is still open 0\.5 s past the 2 s the server was asked to end it in/);
  },
);

F("with bookmarks coming, a silent watch is given up at the idle time, long before its timeout", async () => {
  // The server sends bookmarks every 200 ms (kube-apiserver: every minute); the watches last a minute.
  const log = await cutOff({ bookmarkIntervalMs: 200 }, { watchTimeoutMs: [60_000, 60_000], watchIdleMs: 1500 });
  assert.match(log, /the watch of example\.org\/v1\/xvolumes has been silent for 1\.5 s, though the server sends bookmarks on it/);
  assert.not.match(log, /is still open/);
});

F.run();
