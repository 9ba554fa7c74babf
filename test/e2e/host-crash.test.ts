// Failure mode 1 at its hardest: `xfn host` killed with SIGKILL while it
// reconciles 200 XRs, then started again. Crossplane records its composed
// references before it applies and finds its resources again by them, so
// nothing is composed twice, nothing is orphaned, and no external name changes
// (composition_functions.go, crossplane/crossplane 2d040d2). The API server
// (embedded, in this process; in the real-Crossplane tier, kube-apiserver:
// test/support/apiserver.ts) outlives the host, as a cluster does.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { loadDocs } from "../../src/engine/docs.js";
import { startCluster } from "../support/apiserver.js";
import { applyManifests } from "../../src/host/manifests.js";
import { kubeconfigFor, sleep, until } from "../support/cluster.js";
import { memoryLog } from "../support/log.js";
import { ROOT, XFN } from "../support/spawn.js";

const K = suite("host: killed mid-way (SIGKILL), started again");

const N = 200;
const EX = join(ROOT, "examples");
const EXTERNAL_NAME = "crossplane.io/external-name";

K(`SIGKILL while reconciling ${N} XRs: after a restart, no bucket composed twice, none orphaned, no external name changed`, async () => {
  const c = await startCluster();
  const dir = mkdtempSync(join(tmpdir(), "xfn-crash-"));
  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(kubeconfig, c.kubeconfig());
  const kc = kubeconfigFor(c);
  const mem = memoryLog();
  const get = async (path: string) => (await (await fetch(`${c.url}${path}`)).json()) as any;
  const buckets = async () => ((await get("/apis/s3.aws.upbound.io/v1beta1/buckets")).items ?? []) as any[];
  const xrs = async () => ((await get("/apis/example.xfn.dev/v1alpha1/xbuckets")).items ?? []) as any[];
  /** orphans names the buckets whose controlling XR does not reference them. */
  const orphans = async () => {
    const owners = new Map((await xrs()).map((x) => [x.metadata.uid as string, x]));
    return (await buckets())
      .filter((b) => {
        const owner = owners.get(b.metadata.ownerReferences?.find((o: any) => o.controller)?.uid);
        return !(owner?.spec.crossplane?.resourceRefs ?? []).some((r: any) => r.name === b.metadata.name);
      })
      .map((b) => b.metadata.name as string);
  };
  const host = (): ChildProcess =>
    spawn(
      process.execPath,
      [XFN, "host", "--kubeconfig", kubeconfig, "--functions", join(EX, "functions.yaml"), "--metrics-address", "off"],
      {
        cwd: ROOT,
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
  // A provider: it gives each bucket an external name once, as a provider does when it creates the cloud resource.
  let providing = true;
  const given = new Map<string, string>();
  const provider = (async () => {
    while (providing) {
      for (const b of await buckets().catch(() => [])) {
        if (b.metadata.annotations?.[EXTERNAL_NAME]) continue;
        const name = `bkt-${Math.random().toString(36).slice(2, 10)}`;
        const r = await fetch(`${c.url}/apis/s3.aws.upbound.io/v1beta1/buckets/${b.metadata.name}`, {
          method: "PATCH",
          headers: { "content-type": "application/merge-patch+json" },
          body: JSON.stringify({ metadata: { annotations: { [EXTERNAL_NAME]: name } } }),
        });
        if (r.ok) given.set(b.metadata.uid, name);
      }
      await sleep(50);
    }
  })();
  let first: ChildProcess | undefined;
  let second: ChildProcess | undefined;
  try {
    first = host();
    // The host installs Crossplane's kinds first.
    await until("the XRD kind served", async () => (await fetch(`${c.url}/apis/apiextensions.crossplane.io/v2`)).ok, 20_000);
    await applyManifests(kc, [...loadDocs(join(EX, "host")), ...loadDocs(join(EX, "composition.yaml"))], mem.log);
    await until("the XR kind served", async () => (await fetch(`${c.url}/apis/example.xfn.dev/v1alpha1/xbuckets`)).ok, 20_000);
    const xr = (i: number) => ({
      obj: {
        apiVersion: "example.xfn.dev/v1alpha1",
        kind: "XBuckets",
        metadata: { name: `team-${i}` },
        spec: { buckets: [{ name: "logs" }] },
      },
      source: "test",
    });
    await applyManifests(
      kc,
      Array.from({ length: N }, (_, i) => xr(i)),
      mem.log,
    );
    // Killed once a part of the XRs have their bucket: some reconciles are surely between apply and status.
    await until("a part of the buckets", async () => (await buckets()).length >= N / 4, 60_000);
    first.kill("SIGKILL");
    await new Promise((r) => first!.once("exit", r));
    await until(
      "every bucket there given its external name",
      async () => (await buckets()).every((b) => given.has(b.metadata.uid)),
      10_000,
    );
    const before = new Map((await buckets()).map((b) => [b.metadata.uid as string, b.metadata.annotations[EXTERNAL_NAME] as string]));
    assert.ok(before.size >= N / 4 && before.size < N, `killed mid-way: ${before.size} of ${N} buckets`);
    // Right after the kill, before any restart: every bucket the killed host applied is referenced by its XR.
    const unreferenced = await orphans();
    assert.equal(unreferenced, [], `${unreferenced.length} buckets the killed host applied were not referenced by their XR`);

    second = host();
    await until(
      "every XR synced, with its bucket",
      async () => {
        const all = await xrs();
        return (
          all.length === N &&
          all.every((x) => (x.status?.conditions ?? []).some((k: any) => k.type === "Synced" && k.status === "True")) &&
          (await buckets()).length >= N
        );
      },
      120_000,
    );
    const after = await buckets();
    assert.is(after.length, N, "one bucket per XR: none composed twice");
    assert.equal(await orphans(), [], "every bucket is referenced by its XR");
    for (const [uid, name] of before) {
      const now = after.find((b) => b.metadata.uid === uid);
      assert.ok(now, `the bucket ${uid} made before the kill is still the one there`);
      assert.is(now.metadata.annotations[EXTERNAL_NAME], name, "its external name did not change");
    }
  } finally {
    providing = false;
    await provider;
    for (const p of [first, second]) if (p && p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
    await c.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

K.run();
