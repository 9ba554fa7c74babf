// xfn's example functions under real Crossplane (issue 58, item 3): each
// built into its .xpkg by `xfn package --xpkg`, pushed to a local registry,
// installed with a pkg.crossplane.io/v1 Function, unpacked by Crossplane's own
// package manager, run from the package's image as the runtime runs a function
// (test/crossplane/functions.ts says what stands in for the runtime, and why),
// and called by Crossplane over its mTLS: examples/composition.yaml's pipeline
// (functions/hello, then functions/lifecycle) composes an XR's buckets in
// dependency order.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import { until } from "../support/cluster.js";
import { needs } from "../support/needs.js";
import { ROOT } from "../support/spawn.js";
import { startControlPlane, type ControlPlane } from "./controlplane.js";
import { startCrossplane, type Crossplane } from "./crossplane.js";
import { buildXpkg, installFunction, kubectl, kubectlApply, startRegistry, type InstalledFunction, type Registry } from "./functions.js";

const X = suite("xfn's functions under real Crossplane: installed from their .xpkg, called over Crossplane's mTLS");
const G = needs(X, "go1.26", "podman");
let work: string;
let cp: ControlPlane | undefined;
let xp: Crossplane | undefined;
let registry: Registry | undefined;
const installed: InstalledFunction[] = [];

G.before(async () => {
  work = mkdtempSync(join(tmpdir(), "xfn-crossplane-fn-"));
  const [plane, xpkgs] = await Promise.all([
    startControlPlane(),
    (async () => ({ hello: await buildXpkg("hello", work), lifecycle: await buildXpkg("lifecycle", work) }))(),
  ]);
  cp = plane;
  xp = await startCrossplane(cp);
  registry = await startRegistry(join(work, "registry"));
  for (const [name, xpkg] of Object.entries(xpkgs))
    installed.push(
      await installFunction(cp, registry, `function-${name}`, xpkg, {
        work,
        clientCertsDir: xp.clientCertsDir,
        crossplaneLog: () => xp!.logTail(),
      }),
    );
});
G.after(async () => {
  for (const f of installed) await f.stop();
  await registry?.stop();
  await xp?.stop();
  await cp?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
interface Obj {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string>; ownerReferences?: object[] };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown> & { conditions?: Condition[] };
}
const getJson = async <T = Obj>(...args: string[]): Promise<T> => JSON.parse(await kubectl(cp!, "get", ...args, "-o", "json")) as T;
const isTrue = (o: Obj, type: string) => (o.status?.conditions ?? []).some((c) => c.type === type && c.status === "True");
const wait = (what: string, check: () => Promise<boolean>, ms = 90_000) =>
  until(what, () => check().catch(() => false), ms).catch((err: Error) => {
    throw new Error(`${err.message}\nCrossplane's log ends:\n${xp!.logTail()}`);
  });

G(
  "Crossplane's package manager unpacks each .xpkg from the registry: an active healthy revision; its input CRD, as the xpkg spec says, not installed",
  async () => {
    for (const f of installed) {
      const fn = await getJson("function", f.name);
      assert.ok(isTrue(fn, "Installed") && isTrue(fn, "Healthy"), JSON.stringify(fn.status));
      const rev = await getJson<Obj & { spec: { desiredState: string; image: string } }>("functionrevision", f.revision);
      assert.is(rev.spec.desiredState, "Active");
      assert.is(rev.status?.["resolvedImage"], f.ref);
      assert.ok(isTrue(rev, "RevisionHealthy"), JSON.stringify(rev.status));
      // The registry holds what was pushed, under the reference the Function names.
      const [repo, tag] = f.ref.slice(registry!.host.length + 1).split(":");
      const tags = (await (await fetch(`http://${registry!.host}/v2/${repo}/tags/list`)).json()) as { tags: string[] };
      assert.equal(tags.tags, [tag]);
    }
    // Each package carries its input's CRD, which Crossplane does not install: the xpkg specification says a
    // Function package's objects are not installed (crossplane v2.4.0 SetupFunctionRevision: an establisher that
    // filters every object out). The revision owns no object, and no such CRD exists.
    for (const [fn, file] of [
      ["function-hello", "functions/hello/package/input/hello.xfn.dev_inputs.yaml"],
      ["function-lifecycle", "functions/lifecycle/package/input/lifecycle.xfn.dev_lifecycles.yaml"],
    ] as const) {
      const name = (parseYaml(readFileSync(join(ROOT, file), "utf8")) as Obj).metadata.name;
      const found = await kubectl(cp!, "get", "crd", name).then(
        () => "found",
        (err: Error) => err.message,
      );
      assert.match(found, /NotFound/);
      const rev = await getJson("functionrevision", installed.find((f) => f.name === fn)!.revision);
      assert.is(rev.status?.["objectRefs"], undefined);
    }
  },
);

/** The example manifests, as a user applies them: the Bucket CRD, the XRD, the Composition and the XR (its uid is the API server's to give). */
async function applyExample(file: string): Promise<void> {
  for (const doc of parseAllDocuments(readFileSync(join(ROOT, file), "utf8"))) {
    const o = doc.toJS() as Obj & { metadata: { uid?: string } };
    delete o.metadata.uid;
    await kubectlApply(cp!, o);
  }
}

/** buckets are the XR's composed Buckets, by their composition-resource-name. */
async function buckets(): Promise<Map<string, Obj>> {
  const list = await getJson<{ items: Obj[] }>("buckets.s3.aws.upbound.io");
  return new Map(list.items.map((b) => [b.metadata.annotations?.["crossplane.io/composition-resource-name"] ?? "?", b]));
}

G("real Crossplane runs hello then lifecycle over mTLS: the XR's buckets are composed in dependency order", async () => {
  await applyExample("examples/host/crds.yaml");
  await applyExample("examples/host/xrd.yaml");
  await wait("the XRD established", async () => isTrue(await getJson("xrd", "xbuckets.example.xfn.dev"), "Established"));
  await applyExample("examples/composition.yaml");
  await applyExample("examples/xr.yaml");

  // hello asked for both buckets; lifecycle holds back assets until logs is ready, and says so in the XR's status.
  await wait("the XR synced, with bucket-logs composed", async () => {
    const xr = await getJson("xbuckets", "team-a");
    return isTrue(xr, "Synced") && (await buckets()).has("bucket-logs");
  });
  const xr = await getJson("xbuckets", "team-a");
  assert.is(xr.status?.["bucketCount"], 2);
  assert.equal((xr.status?.["waiting"] as Record<string, { for: string[] }>)["bucket-assets"]?.for, ["bucket-logs to be ready"]);
  const ready = (xr.status?.conditions ?? []).find((c) => c.type === "Ready");
  assert.is(ready?.status, "False");
  assert.ok(![...(await buckets()).keys()].includes("bucket-assets"), "bucket-assets composed before bucket-logs was ready");
  const logs = (await buckets()).get("bucket-logs")!;
  assert.is(logs.metadata.labels?.["crossplane.io/composite"], "team-a");
  assert.is(logs.metadata.labels?.["hello.xfn.dev/bucket"], "logs");
  assert.equal(logs.spec, { forProvider: { region: "eu-west-1" } });
  assert.equal(
    (logs.metadata.ownerReferences as { kind: string; name: string; controller: boolean }[]).map((o) => [o.kind, o.name, o.controller]),
    [["XBuckets", "team-a", true]],
  );

  // A provider would now say bucket-logs is ready: Crossplane sees it (its watch on composed resources), calls the pipeline again, and assets follows.
  await kubectl(
    cp!,
    "patch",
    "buckets.s3.aws.upbound.io",
    logs.metadata.name,
    "--subresource=status",
    "--type=merge",
    "-p",
    JSON.stringify({
      status: {
        conditions: [
          { type: "Ready", status: "True", reason: "Available", lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, "Z") },
        ],
      },
    }),
  );
  await wait("bucket-assets composed once bucket-logs is ready", async () => (await buckets()).has("bucket-assets"));
  assert.equal((await buckets()).get("bucket-assets")!.spec, { forProvider: { region: "us-east-1" } });
  await wait("the XR's waiting list emptied", async () => {
    const w = (await getJson("xbuckets", "team-a")).status?.["waiting"] as Record<string, unknown> | undefined;
    return !w || !("bucket-assets" in w);
  });

  // Both functions were called by Crossplane, and answered: their own metrics count the calls.
  for (const f of installed) {
    const text = await (await fetch(`http://127.0.0.1:${f.container.metricsPort}/metrics`)).text();
    const ok = [...text.matchAll(/^xfn_function_requests_total\{[^}]*code="OK"[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
    assert.ok(ok >= 2, `${f.name} answered ${ok} calls:\n${text.slice(0, 2000)}`);
  }
});

X.run();
