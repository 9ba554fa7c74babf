// The watch engine against the embedded API server.
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster, type DevCluster } from "../../src/apiserver/server.js";
import { WatchManager, type WatchEvent } from "../../src/host/watches.js";
import { apis, crd, kubeconfigFor, sleep, until, typed } from "../support/cluster.js";
import { memoryLog } from "../support/log.js";
import { startProxy } from "../support/proxy.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const BUCKETS = { group: "s3.example.org", version: "v1", plural: "buckets" };
const bucket = (name: string) => ({ apiVersion: "s3.example.org/v1", kind: "Bucket", metadata: { name }, spec: {} });

async function setup(opts = {}) {
  const c = await startDevCluster(opts);
  const kc = kubeconfigFor(c);
  const { crds, objects } = apis(kc);
  await crds.createCustomResourceDefinition({ body: typed(crd("s3.example.org", "Bucket", "buckets")) as never });
  const mem = memoryLog();
  const w = new WatchManager(kc, mem.log, { initialBackoffMs: 50, maxBackoffMs: 400 });
  return { c, kc, crds, objects, w, mem };
}

const names = (evs: WatchEvent[], type?: string) =>
  evs.filter((e) => !type || e.type === type).map((e) => `${e.type} ${e.object.metadata?.name}`);
const W = suite("watch engine");

W("owners share one informer; the last release stops it; a late owner sees what exists", async () => {
  const { c, objects, w } = await setup();
  try {
    const a: WatchEvent[] = [];
    const b: WatchEvent[] = [];
    const ha = w.ensure(BUCKETS, "xr-a", (e) => a.push(e));
    await w.synced(BUCKETS);
    await objects.createClusterCustomObject({ ...BUCKETS, body: bucket("one") });
    await until("a sees one", () => names(a).includes("add one"));
    const hb = w.ensure(BUCKETS, "xr-b", (e) => b.push(e));
    assert.equal(names(b), ["add one"], "the late owner is told what exists");
    assert.is(w.watching().length, 1);
    assert.equal(w.owners(BUCKETS).sort(), ["xr-a", "xr-b"]);
    await w.release(ha);
    await objects.createClusterCustomObject({ ...BUCKETS, body: bucket("two") });
    await until("b still sees events", () => names(b).includes("add two"));
    assert.not.ok(names(a).includes("add two"), "a released handler gets nothing");
    await w.release(hb);
    assert.equal(w.watching(), []);
    await w.release(hb); // twice is harmless
  } finally {
    await w.stopAll();
    await c.stop();
  }
});

W(
  "get reads the informer's copy once listed; not a kind not watched, an object not cached, nor one the host wrote until its watch brings that write",
  async () => {
    const { c, objects, w } = await setup();
    try {
      assert.is(w.get(BUCKETS, "one"), undefined, "a kind not watched");
      await objects.createClusterCustomObject({ ...BUCKETS, body: bucket("one") });
      const events: WatchEvent[] = [];
      const h = w.ensure(BUCKETS, "xr", (e) => events.push(e));
      await w.synced(BUCKETS);
      assert.is(w.get(BUCKETS, "one")?.metadata?.name, "one");
      assert.is(w.get(BUCKETS, "none"), undefined, "not in the cache: the API server says whether it is there");
      // A write of the host's own: until the watch brings it, reads go to the API server.
      const merge = (await import("@kubernetes/client-node")).setHeaderOptions("Content-Type", "application/merge-patch+json");
      // Counted before the write: its event may come in before the answer is read (seen in CI: then the copy is the written one).
      const before = events.length;
      const answer = (await objects.patchClusterCustomObject({ ...BUCKETS, name: "one", body: { spec: { v: 1 } } }, merge)) as never as {
        metadata: { resourceVersion: string };
      };
      w.wrote(BUCKETS, answer as never);
      // Not yet brought (the event may have come already: then the copy is the written one).
      const now = w.get(BUCKETS, "one");
      if (events.length === before) assert.is(now, undefined);
      else assert.is(now?.metadata?.resourceVersion, answer.metadata.resourceVersion);
      await until("the watch brings the write", () => events.length > before);
      assert.is(w.get(BUCKETS, "one")?.metadata?.resourceVersion, answer.metadata.resourceVersion);
      await w.release(h);
      assert.is(w.get(BUCKETS, "one"), undefined, "released: nothing cached");
    } finally {
      await w.stopAll();
      await c.stop();
    }
  },
);

W("releasing a kind nobody watches creates nothing", async () => {
  const { c, w } = await setup();
  try {
    await w.release({ kind: { group: "gone.example.org", version: "v1", plural: "ghosts" }, owner: "x", id: 999 });
    assert.equal(w.watching(), []);
  } finally {
    await c.stop();
  }
});

W("failure mode 1: the composed kind's CRD is deleted first; releasing its watch is a clean, prompt no-op", async () => {
  const { c, crds, objects, w, mem } = await setup();
  try {
    const seen: WatchEvent[] = [];
    const h = w.ensure(BUCKETS, "xr-a", (e) => seen.push(e));
    await w.synced(BUCKETS);
    await objects.createClusterCustomObject({ ...BUCKETS, body: bucket("one") });
    await until("add one", () => names(seen).includes("add one"));
    // The provider is uninstalled: its CRD goes, with its objects and watches.
    await crds.deleteCustomResourceDefinition({ name: "buckets.s3.example.org" });
    await until("the delete event", () => names(seen).includes("delete one"));
    await sleep(200); // let the informer fail and retry against the missing kind
    const released = await Promise.race([w.release(h).then(() => "released"), sleep(5000).then(() => "hung")]);
    assert.is(released, "released");
    assert.equal(w.watching(), []);
    assert.not.ok(mem.text().includes('"level":"error"'), "no error logged");
  } finally {
    await w.stopAll();
    await c.stop();
  }
});

W("a failed informer (API server restarted) restarts with backoff and misses nothing", async () => {
  const dir = mkdtempSync(join(tmpdir(), "xfn-watch-"));
  const data = join(dir, "state.json");
  const { c, w, mem, objects } = await setup({ dataFile: data });
  const port = c.port;
  let c2: DevCluster | undefined;
  try {
    const seen: WatchEvent[] = [];
    w.ensure(BUCKETS, "xr-a", (e) => seen.push(e));
    await w.synced(BUCKETS);
    await objects.createClusterCustomObject({ ...BUCKETS, body: bucket("before") });
    await until("add before", () => names(seen).includes("add before"));
    await c.stop();
    await until("the watch to fail", () => mem.text().includes("watch failed; restarting"));
    c2 = await startDevCluster({ dataFile: data, port });
    await apis(kubeconfigFor(c2)).objects.createClusterCustomObject({ ...BUCKETS, body: bucket("after") });
    await until("add after, following the restart", () => names(seen).includes("add after"), 10_000);
    assert.is(names(seen, "add").filter((n) => n === "add before").length, 1, "nothing replayed twice as new");
  } finally {
    await w.stopAll();
    await c2?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

W("a watch whose connection goes silent is restarted once it outlives the timeout it asked for, and misses nothing", async () => {
  const c = await startDevCluster();
  const direct = apis(kubeconfigFor(c)).objects;
  await apis(kubeconfigFor(c)).crds.createCustomResourceDefinition({ body: typed(crd("s3.example.org", "Bucket", "buckets")) as never });
  const proxy = await startProxy(c.port);
  const kc = kubeconfigFor(c, proxy.port);
  const mem = memoryLog();
  const w = new WatchManager(kc, mem.log, { initialBackoffMs: 50, maxBackoffMs: 400, watchTimeoutMs: [1000, 1000], watchGraceMs: 500 });
  try {
    const seen: WatchEvent[] = [];
    w.ensure(BUCKETS, "xr-a", (e) => seen.push(e));
    await w.synced(BUCKETS);
    await direct.createClusterCustomObject({ ...BUCKETS, body: bucket("before") });
    await until("add before", () => names(seen).includes("add before"));
    // The server ends each watch after the second asked for; the informer
    // watches again from where it was, without listing or replaying.
    await sleep(2500);
    assert.is(names(seen).filter((n) => n === "add before").length, 1, "nothing replayed");
    assert.not.ok(mem.text().includes("watch failed"), "a watch the server ends on time is no failure");
    assert.ok(proxy.freeze() >= 1, "the watch's connection was open");
    await direct.createClusterCustomObject({ ...BUCKETS, body: bucket("after") });
    await until("add after, once the silent watch is given up", () => names(seen).includes("add after"), 5000);
    assert.match(mem.text(), /watch of s3\.example\.org\/v1\/buckets is still open 0\.5 s past the 1 s the server was asked to end it in/);
  } finally {
    await w.stopAll();
    await proxy.close();
    await c.stop();
  }
});

W.run();
