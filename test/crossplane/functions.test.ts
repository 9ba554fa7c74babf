// xfn's example functions under real Crossplane (issue 58, item 3): each
// built into its .xpkg by `xfn package --xpkg`, pushed to a local registry,
// installed with a pkg.crossplane.io/v1 Function, unpacked by Crossplane's own
// package manager, run from the package's image as the runtime runs a function
// (test/crossplane/functions.ts says what stands in for the runtime, and why),
// and called by Crossplane over its mTLS: examples/composition.yaml's pipeline
// (functions/hello, then functions/lifecycle) composes an XR's buckets in
// dependency order.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import { until } from "../support/cluster.js";
import { needs } from "../support/needs.js";
import { ROOT, XFN } from "../support/spawn.js";
import { startControlPlane, type ControlPlane } from "./controlplane.js";
import { startCrossplane, type Crossplane } from "./crossplane.js";
import type { JsonObject } from "@bufbuild/protobuf";
import { dependencies } from "../../src/steps/index.js";
import { run as runSteps } from "../support/steps.js";
import { buildXpkg, installFunction, kubectl, kubectlApply, startRegistry, type InstalledFunction, type Registry } from "./functions.js";

const X = suite("xfn's functions under real Crossplane: installed from their .xpkg, called over Crossplane's mTLS");
const G = needs(X, "go1.26", "podman");
let work: string;
let cp: ControlPlane | undefined;
/** A second real control plane, where xfn host runs the same composition (issue 58, item 7). */
let hosted: ControlPlane | undefined;
let xp: Crossplane | undefined;
let registry: Registry | undefined;
const installed: InstalledFunction[] = [];

G.before(async () => {
  work = mkdtempSync(join(tmpdir(), "xfn-crossplane-fn-"));
  const [plane, other, xpkgs] = await Promise.all([
    startControlPlane(),
    startControlPlane(),
    (async () => ({ hello: await buildXpkg("hello", work), lifecycle: await buildXpkg("lifecycle", work) }))(),
  ]);
  cp = plane;
  hosted = other;
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
G("bad input: a file that is no image is refused at the push, naming the file and the reference", async () => {
  const junk = join(work, "junk.xpkg");
  writeFileSync(junk, "not a tarball\n");
  const err = await installFunction(cp!, registry!, "function-junk", junk, {
    work,
    clientCertsDir: xp!.clientCertsDir,
    crossplaneLog: () => xp!.logTail(),
  }).then(
    () => undefined,
    (e: Error) => e,
  );
  assert.ok(err, "it was installed");
  assert.match(err.message, `crane push ${junk} ${registry!.host}/xfn/function-junk:v0.1.0: `);
  assert.match(err.message, /tar|archive|header|EOF/i);
});

G(
  "bad input: an image that is no package (a function's runtime image) is not installed, and the failure names Crossplane's reason",
  async () => {
    const err = await installFunction(cp!, registry!, "function-nopackage", join(work, "hello-runtime.tar"), {
      work,
      clientCertsDir: xp!.clientCertsDir,
      crossplaneLog: () => xp!.logTail(),
      timeoutMs: 60_000,
    }).then(
      (f) => (installed.push(f), undefined),
      (e: Error) => e,
    );
    assert.ok(err, "it was installed");
    assert.match(
      err.message,
      /^Crossplane cannot install 127\.0\.0\.1:\d+\/xfn\/function-nopackage:v0\.1\.0 as the Function function-nopackage/,
    );
    assert.match(err.message, /\n {2}Installed=False \(UnpackingPackage\): cannot unpack package: .*package\.yaml not found in package/);
    await kubectl(cp!, "delete", "function", "function-nopackage", "--wait=false");
  },
);

G.after(async () => {
  for (const f of installed) await f.stop();
  await registry?.stop();
  await xp?.stop();
  await Promise.all([cp?.stop(), hosted?.stop()]);
  if (work) rmSync(work, { recursive: true, force: true });
});

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
interface Obj {
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: object[];
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown> & { conditions?: Condition[] };
}
const getOn = async <T = Obj>(plane: ControlPlane, ...args: string[]): Promise<T> =>
  JSON.parse(await kubectl(plane, "get", ...args, "-o", "json")) as T;
const getJson = <T = Obj>(...args: string[]): Promise<T> => getOn<T>(cp!, ...args);
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
async function applyExample(plane: ControlPlane, file: string): Promise<void> {
  for (const doc of parseAllDocuments(readFileSync(file.startsWith("/") ? file : join(ROOT, file), "utf8"))) {
    const o = doc.toJS() as Obj & { metadata: { uid?: string } };
    delete o.metadata.uid;
    await kubectlApply(plane, o);
  }
}

/** buckets are the XR's composed Buckets, by their composition-resource-name. */
async function buckets(plane: ControlPlane = cp!): Promise<Map<string, Obj>> {
  const list = await getOn<{ items: Obj[] }>(plane, "buckets.s3.aws.upbound.io");
  return new Map(list.items.map((b) => [b.metadata.annotations?.["crossplane.io/composition-resource-name"] ?? "?", b]));
}

/** markReady says, as a provider would, that a composed Bucket is ready. */
async function markReady(plane: ControlPlane, name: string): Promise<void> {
  const at = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  await kubectl(
    plane,
    "patch",
    "buckets.s3.aws.upbound.io",
    name,
    "--subresource=status",
    "--type=merge",
    "-p",
    JSON.stringify({ status: { conditions: [{ type: "Ready", status: "True", reason: "Available", lastTransitionTime: at }] } }),
  );
}

/**
 * view is what xfn host must write as Crossplane does, of the composed
 * Buckets and of the XR: what differs by run (uids, names made from
 * generateName, times, resourceVersions, managed fields) is left out, and so
 * is what docs/host.md lists as not done by the host: CompositionRevisions
 * (spec.crossplane.compositionRevisionRef, compositionUpdatePolicy) and the
 * Responsive condition of Crossplane's watch circuit breaker; and Healthy,
 * which the host writes and Crossplane v2.4.0 does not (checked on its own). Conditions are
 * compared by type, whatever their order in the list.
 */
/** untimed is a status with its conditions' transition times left out (the test writes the Buckets' own, on each plane). */
const untimed = (status: Obj["status"]) =>
  status && { ...status, conditions: status.conditions?.map((c) => ({ ...c, lastTransitionTime: "<time>" })) };

function view(bs: Map<string, Obj>, xr: Obj): unknown {
  const names = new Map([...bs].map(([k, b]) => [b.metadata.name, k]));
  const meta = (o: Obj) => {
    const m = o.metadata as Obj["metadata"] & { generateName?: string; finalizers?: string[] };
    return {
      generateName: m.generateName,
      name: m.generateName && new RegExp(`^${m.generateName}[a-z0-9]+$`).test(m.name) ? `${m.generateName}<random>` : m.name,
      labels: m.labels,
      annotations: Object.fromEntries(
        Object.entries(m.annotations ?? {}).filter(([k]) => k !== "kubectl.kubernetes.io/last-applied-configuration"),
      ),
      ownerReferences: (m.ownerReferences as Record<string, unknown>[] | undefined)?.map((r) => ({ ...r, uid: "<uid>" })),
      finalizers: m.finalizers,
    };
  };
  const { conditions = [], ...rest } = xr.status ?? {};
  const waiting = structuredClone(rest["waiting"]) as Record<string, { since?: string }> | undefined;
  if (waiting) for (const w of Object.values(waiting)) w.since = "<time>";
  const crossplane = (xr.spec?.["crossplane"] ?? {}) as { compositionRef?: unknown; resourceRefs?: { name: string }[] };
  return {
    buckets: Object.fromEntries(
      [...bs].sort(([a], [b]) => a.localeCompare(b)).map(([k, b]) => [k, { ...meta(b), spec: b.spec, status: untimed(b.status) }]),
    ),
    xr: {
      ...meta(xr),
      compositionRef: crossplane.compositionRef,
      // Both sort their references by apiVersion, kind and name, and the names are random: compared as sets.
      resourceRefs: (crossplane.resourceRefs ?? [])
        .map((r) => ({ ...r, name: names.get(r.name) ?? r.name }))
        .sort((a, b) => a.name.localeCompare(b.name)),
      status: { ...rest, ...(waiting ? { waiting } : {}) },
      conditions: Object.fromEntries(
        conditions
          .filter((c) => c.type !== "Responsive" && c.type !== "Healthy")
          .map((c) => [c.type, { status: c.status, reason: c.reason, message: c.message }])
          .sort(([a], [b]) => String(a).localeCompare(String(b))),
      ),
    },
  };
}

/**
 * CROSSPLANE_OWN_EVENTS are the events of Crossplane's XR reconciler
 * (crossplane v2.4.0, internal/controller/apiextensions/composite/
 * reconciler.go) that xfn host does not write: the CompositionRevision chosen
 * (the host has none, docs/host.md). The rest it writes as Crossplane does:
 * the Composition selected, each composed resource not ready yet, and the
 * pipeline's results.
 */
const CROSSPLANE_OWN_EVENTS = /^Normal SelectComposition: Selected composition revision: /;

/** xrEvents are the events on the XR team-a: "type reason: message", sorted, each once. */
async function xrEvents(plane: ControlPlane): Promise<string[]> {
  const list = await getOn<{ items: { type: string; reason: string; message: string; involvedObject: { kind: string; name: string } }[] }>(
    plane,
    "events",
    "-A",
  );
  const mine = list.items.filter((e) => e.involvedObject.kind === "XBuckets" && e.involvedObject.name === "team-a");
  return [...new Set(mine.map((e) => `${e.type} ${e.reason}: ${e.message}`))].sort();
}

/** within resolves as p does, or fails with why() after ms; its timer never outlives it. */
async function within<T>(p: Promise<T>, ms: number, why: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(why())), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * deletionOrder deletes the XR team-a and answers, for each composed Bucket,
 * how many ms after the delete the API server said it was gone (a watch's
 * DELETED event: their order exactly, however close), in that order.
 */
async function deletionOrder(
  plane: ControlPlane,
  opts: { xr?: string; cascade?: "background" | "foreground"; during?: () => Promise<void> } = {},
): Promise<Record<string, number>> {
  const xr = opts.xr ?? "team-a";
  const names = new Map(
    [...(await buckets(plane))]
      .filter(([, b]) => b.metadata.labels?.["crossplane.io/composite"] === xr)
      .map(([k, b]) => [b.metadata.name, k]),
  );
  const watch = spawn(
    plane.kubectl,
    ["--kubeconfig", plane.kubeconfig, "get", "buckets.s3.aws.upbound.io", "--watch", "--output-watch-events", "-o", "json"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const gone: Record<string, number> = {};
  let started = 0;
  let out = "";
  let resolveAll: () => void;
  const all = new Promise<void>((r) => (resolveAll = r));
  // The watch begins with an ADDED event for each object there: once every Bucket's is in, it is watching.
  const listed = new Set<string>();
  let resolveListed: () => void;
  const watching = new Promise<void>((r) => (resolveListed = r));
  watch.stdout!.setEncoding("utf8");
  watch.stdout!.on("data", (d: string) => {
    out += d;
    // kubectl prints one event per line, as compact JSON.
    for (let end = out.indexOf("\n"); end >= 0; end = out.indexOf("\n")) {
      const e = JSON.parse(out.slice(0, end)) as { type: string; object: Obj };
      out = out.slice(end + 1);
      const key = names.get(e.object.metadata.name);
      if (e.type === "ADDED" && key) listed.add(key);
      if (listed.size === names.size) resolveListed();
      if (e.type === "DELETED" && key && gone[key] === undefined) gone[key] = Date.now() - started;
      if (Object.keys(gone).length === names.size) resolveAll();
    }
  });
  try {
    let errText = "";
    watch.stderr!.on("data", (d) => (errText += d));
    await within(watching, 30_000, () => `the watch of Buckets did not list them within 30 s: ${errText}`);
    started = Date.now();
    await kubectl(plane, "delete", "xbuckets", xr, "--wait=false", `--cascade=${opts.cascade ?? "background"}`);
    await Promise.all([
      within(all, 90_000, () => `not every Bucket was deleted within 90 s; gone: ${JSON.stringify(gone)}`),
      opts.during?.(),
    ]);
    return gone;
  } finally {
    watch.kill();
  }
}

G(
  "real Crossplane runs hello then lifecycle over mTLS: the XR's buckets are composed in dependency order; xfn host writes what Crossplane writes",
  async () => {
    // The example Composition, its lifecycle step asked for the summary (issue 61 point 3): what each step did, and the
    // composed resources' health, as conditions and Events on the XR, which Crossplane must keep as the host does.
    const composition = join(work, "composition.yaml");
    const doc = parseYaml(readFileSync(join(ROOT, "examples/composition.yaml"), "utf8")) as {
      spec: { pipeline: { step: string; input: Record<string, unknown> }[] };
    };
    doc.spec.pipeline.find((p) => p.step === "lifecycle")!.input["summary"] = {};
    // Without Crossplane Usages, which xfn host composes none of (it orders deletion itself): they have a test of their own below.
    doc.spec.pipeline.find((p) => p.step === "lifecycle")!.input["usages"] = { enabled: false };
    writeFileSync(composition, JSON.stringify(doc));
    const examples = ["examples/host/crds.yaml", "examples/host/xrd.yaml", composition, "examples/xr.yaml"];
    await applyExample(cp!, "examples/host/crds.yaml");
    await applyExample(cp!, "examples/host/xrd.yaml");
    await wait("the XRD established", async () => isTrue(await getJson("xrd", "xbuckets.example.xfn.dev"), "Established"));
    await applyExample(cp!, composition);
    await applyExample(cp!, "examples/xr.yaml");

    // The same under xfn host, on the second control plane: the functions run from their source (examples/functions.yaml).
    const host = spawn(
      process.execPath,
      [
        XFN,
        "host",
        "--kubeconfig",
        hosted!.kubeconfig,
        "--functions",
        join(ROOT, "examples/functions.yaml"),
        ...examples.flatMap((f) => ["--manifests", f.startsWith("/") ? f : join(ROOT, f)]),
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let hostLog = "";
    host.stdout!.on("data", (d) => (hostLog += d));
    host.stderr!.on("data", (d) => (hostLog += d));
    const both = (what: string, check: (plane: ControlPlane) => Promise<boolean>) =>
      Promise.all([
        wait(what, () => check(cp!)),
        until(`${what} (xfn host)`, () => check(hosted!).catch(() => false), 90_000).catch((err: Error) => {
          throw new Error(`${err.message}\nxfn host's log ends:\n${hostLog.slice(-3000)}`);
        }),
      ]);
    try {
      // hello asked for both buckets; lifecycle holds back assets until logs is ready, and says so in the XR's status.
      await both("the XR synced, with bucket-logs composed", async (plane) => {
        const xr = await getOn(plane, "xbuckets", "team-a");
        return isTrue(xr, "Synced") && (await buckets(plane)).has("bucket-logs") && xr.status?.["waiting"] !== undefined;
      });
      const xr = await getJson("xbuckets", "team-a");
      assert.is(xr.status?.["bucketCount"], 2);
      assert.equal((xr.status?.["waiting"] as Record<string, { for: string[] }>)["bucket-assets"]?.for, ["bucket-logs to be ready"]);
      assert.is((xr.status?.conditions ?? []).find((c) => c.type === "Ready")?.status, "False");
      assert.ok(![...(await buckets()).keys()].includes("bucket-assets"), "bucket-assets composed before bucket-logs was ready");
      const logs = (await buckets()).get("bucket-logs")!;
      assert.is(logs.metadata.labels?.["crossplane.io/composite"], "team-a");
      assert.is(logs.metadata.labels?.["hello.xfn.dev/bucket"], "logs");
      assert.equal(logs.spec, { forProvider: { region: "eu-west-1" } });
      // Real Crossplane's answer, read in this run, is the expected one.
      assert.equal(view(await buckets(hosted!), await getOn(hosted!, "xbuckets", "team-a")), view(await buckets(), xr));
      // The summary under real Crossplane: what each lifecycle step did, and the roll-up, on the XR. Healthy itself is
      // Crossplane's (v2.4.0 writes none); xfn host writes it.
      const c = (o: Obj, type: string) => (o.status?.conditions ?? []).find((x) => x.type === type);
      assert.is(c(xr, "PipelineSummary")?.reason, "Waiting", JSON.stringify(xr.status?.conditions));
      // docs/pipelines.md shows this message, as Crossplane keeps it.
      const shown = /^Message: +([\s\S]*?)\n```/m.exec(readFileSync(join(ROOT, "docs/pipelines.md"), "utf8"))![1]!.replace(/\s+/g, " ");
      assert.is(c(xr, "PipelineSummary")!.message, shown);
      assert.equal([c(xr, "ResourcesHealthy")?.status, c(xr, "ResourcesHealthy")?.reason], ["True", "ReconcileSuccess"]);
      assert.is(c(xr, "Healthy"), undefined);
      const hostXR = await getOn(hosted!, "xbuckets", "team-a");
      assert.equal([c(hostXR, "Healthy")?.status, c(hostXR, "Healthy")?.reason], ["True", "ReconcileSuccess"]);

      // A provider would now say bucket-logs is ready: Crossplane sees it (its watch on composed resources), calls the pipeline again, and assets follows.
      await markReady(cp!, logs.metadata.name);
      await markReady(hosted!, (await buckets(hosted!)).get("bucket-logs")!.metadata.name);
      await both("bucket-assets composed and the XR's waiting list gone", async (plane) => {
        const xr = await getOn(plane, "xbuckets", "team-a");
        return (await buckets(plane)).has("bucket-assets") && xr.status?.["waiting"] === undefined;
      });
      assert.equal((await buckets()).get("bucket-assets")!.spec, { forProvider: { region: "us-east-1" } });
      await wait("the summary says every step completed", async () => {
        const now = await getJson("xbuckets", "team-a");
        return (now.status?.conditions ?? []).some((x) => x.type === "PipelineSummary" && x.reason === "Completed");
      });
      assert.equal(
        view(await buckets(hosted!), await getOn(hosted!, "xbuckets", "team-a")),
        view(await buckets(), await getJson("xbuckets", "team-a")),
      );

      // Events on the XR: the functions' results, as each wrote them.
      const [real, ours] = await Promise.all([xrEvents(cp!), xrEvents(hosted!)]);
      process.stderr.write(`the XR's events under Crossplane:\n  ${real.join("\n  ")}\nunder xfn host:\n  ${ours.join("\n  ")}\n`);
      assert.equal(
        ours,
        real.filter((e) => !CROSSPLANE_OWN_EVENTS.test(e)),
      );

      // Deleted: when each composed Bucket goes. Crossplane does not call the pipeline for an XR being deleted, so the
      // garbage collector takes both at once; xfn host runs lifecycle's deletion step, which deletes bucket-assets (it
      // depends on bucket-logs) first and bucket-logs only once it is gone.
      const [underCrossplane, underHost] = await Promise.all([deletionOrder(cp!), deletionOrder(hosted!)]);
      process.stderr.write(
        `deletion order: Crossplane ${JSON.stringify(underCrossplane)}; xfn host ${JSON.stringify(underHost)} (ms after the delete)\n`,
      );
      assert.equal(Object.keys(underHost), ["bucket-assets", "bucket-logs"]);
      assert.ok(underHost["bucket-logs"]! > underHost["bucket-assets"]!, JSON.stringify(underHost));
      assert.equal(Object.keys(underCrossplane).sort(), ["bucket-assets", "bucket-logs"]);
    } finally {
      host.kill("SIGTERM");
      await new Promise((r) => host.once("exit", r));
    }

    // Both functions were called by Crossplane, and answered: their own metrics count the calls.
    for (const f of installed) {
      const text = await (await fetch(`http://127.0.0.1:${f.container.metricsPort}/metrics`)).text();
      const ok = [...text.matchAll(/^xfn_function_requests_total\{[^}]*code="OK"[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
      assert.ok(ok >= 2, `${f.name} answered ${ok} calls:\n${text.slice(0, 2000)}`);
    }
  },
);

G(
  "Usages under real Crossplane (issue 61 point 1): composed once both ends exist, released when switched off, and the XR deleted dependents first, its status saying so",
  async () => {
    const doc = parseYaml(readFileSync(join(ROOT, "examples/composition.yaml"), "utf8")) as Obj & {
      spec: { pipeline: { step: string; input: Record<string, unknown> }[] };
    };
    doc.metadata.name = "xbuckets-ordered";
    const lifecycle = doc.spec.pipeline.find((p) => p.step === "lifecycle")!;
    await kubectlApply(cp!, doc);
    const xr = parseYaml(readFileSync(join(ROOT, "examples/xr.yaml"), "utf8")) as Obj & { metadata: { uid?: string } };
    delete xr.metadata.uid;
    xr.metadata.name = "team-b";
    xr.spec!["crossplane"] = { compositionRef: { name: "xbuckets-ordered" } };
    await kubectlApply(cp!, xr);

    const mine = async () => new Map([...(await buckets())].filter(([, b]) => b.metadata.labels?.["crossplane.io/composite"] === "team-b"));
    const usages = async () =>
      (await getJson<{ items: (Obj & { spec: Record<string, unknown> })[] }>("clusterusages")).items.filter(
        (u) => u.metadata.labels?.["crossplane.io/composite"] === "team-b",
      );
    const inUse = async () => (await mine()).get("bucket-logs")?.metadata.labels?.["crossplane.io/in-use"];
    const ordered = async () => (await getJson("xbuckets", "team-b")).status?.conditions?.find((c) => c.type === "DeletionOrdered");
    const usageReady = async () => {
      const u = await usages();
      return u.length === 1 && isTrue(u[0]!, "Ready") && (await inUse()) === "true";
    };

    await wait("team-b's bucket-logs composed", async () => (await mine()).has("bucket-logs"));
    assert.equal(await usages(), [], "a Usage before its user exists");
    await markReady(cp!, (await mine()).get("bucket-logs")!.metadata.name);
    await wait("team-b's bucket-assets composed", async () => (await mine()).has("bucket-assets"));
    // Both exist: the Usage of bucket-logs by bucket-assets; Crossplane's Usage controller labels bucket-logs in use.
    await wait("the Usage ready and bucket-logs in use", usageReady);
    const names = Object.fromEntries([...(await mine())].map(([k, b]) => [k, b.metadata.name]));
    const [usage] = await usages();
    assert.is(usage!.metadata.annotations?.["crossplane.io/composition-resource-name"], "usage-of-bucket-logs-by-bucket-assets");
    assert.equal(usage!.spec, {
      of: { apiVersion: "s3.aws.upbound.io/v1beta1", kind: "Bucket", resourceRef: { name: names["bucket-logs"] } },
      by: { apiVersion: "s3.aws.upbound.io/v1beta1", kind: "Bucket", resourceRef: { name: names["bucket-assets"] } },
      replayDeletion: true,
    });
    await wait("DeletionOrdered True", async () => (await ordered())?.status === "True");
    assert.equal(
      { reason: (await ordered())!.reason, message: (await ordered())!.message },
      { reason: "Ordered", message: "On deletion, Crossplane deletes bucket-logs after bucket-assets" },
    );

    // Switched off: the Usage is released (applied without its user) and removed, bucket-logs no longer in use, nothing else touched.
    lifecycle.input["usages"] = { enabled: false };
    await kubectlApply(cp!, doc);
    await wait(
      "the Usage gone and bucket-logs no longer in use",
      async () => (await usages()).length === 0 && (await inUse()) === undefined,
    );
    assert.equal(Object.fromEntries([...(await mine())].map(([k, b]) => [k, b.metadata.name])), names);
    await wait("DeletionOrdered False", async () => (await ordered())?.reason === "NotOrdered");
    assert.is((await ordered())!.message, "Usages are off for this pipeline: Crossplane deletes the composed resources all at once");

    // On again (the default): composed again.
    delete lifecycle.input["usages"];
    await kubectlApply(cp!, doc);
    await wait("the Usage composed again", usageReady);

    // Crossplane's webhook refuses to delete what is in use, naming the Usage's user.
    const refused = await kubectl(cp!, "delete", "buckets.s3.aws.upbound.io", names["bucket-logs"]!, "--wait=false").then(
      () => "deleted",
      (err: Error) => err.message,
    );
    assert.match(
      refused,
      new RegExp(
        `admission webhook "nousages\\.protection\\.crossplane\\.io" denied the request: This resource is in-use by 1 usage\\(s\\), ` +
          `including the \\*v1beta1\\.ClusterUsage "[a-z0-9-]+" by resource Bucket/${names["bucket-assets"]}\\.`,
      ),
    );

    // Deleted in the foreground: the XR stays until its composed resources are gone, saying in its status what waits for
    // what, while the garbage collector's delete of bucket-logs is refused until bucket-assets is gone and its Usage with it.
    // bucket-assets is held by a finalizer of the test's for 3 s (a provider deleting the real bucket): all that while,
    // bucket-logs stays, not even marked for deletion (without the Usage the collector deletes it at once: team-a above).
    const HOLD = "xfn.dev/test-hold";
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    await kubectl(
      cp!,
      "patch",
      "buckets.s3.aws.upbound.io",
      names["bucket-assets"]!,
      "--type=merge",
      "-p",
      JSON.stringify({ metadata: { finalizers: [HOLD] } }),
    );
    const deletedAt = (o: Obj | undefined) => (o?.metadata as { deletionTimestamp?: string } | undefined)?.deletionTimestamp;
    let deleting: Obj | undefined;
    let heldFor = 0;
    const during = async () => {
      await wait("the XR and bucket-assets being deleted", async () => {
        const now = await getJson("xbuckets", "team-b");
        if (deletedAt(now)) deleting ??= now;
        return deletedAt(now) !== undefined && deletedAt((await mine()).get("bucket-assets")) !== undefined;
      });
      const since = Date.now();
      while (Date.now() - since < 3_000) {
        const logsNow = (await mine()).get("bucket-logs");
        assert.ok(
          logsNow && !deletedAt(logsNow),
          `bucket-logs went while bucket-assets, which uses it, was still there: ${JSON.stringify(logsNow?.metadata)}`,
        );
        heldFor = Date.now() - since;
        await sleep(200);
      }
      await kubectl(
        cp!,
        "patch",
        "buckets.s3.aws.upbound.io",
        names["bucket-assets"]!,
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
      );
    };
    const gone = await deletionOrder(cp!, { xr: "team-b", cascade: "foreground", during });
    process.stderr.write(`deletion order under Crossplane with Usages: ${JSON.stringify(gone)} (ms after the delete)\n`);
    assert.equal(Object.keys(gone), ["bucket-assets", "bucket-logs"]);
    assert.ok(gone["bucket-logs"]! > gone["bucket-assets"]!, JSON.stringify(gone));
    assert.ok(heldFor >= 2_800, `held for ${heldFor} ms`);
    assert.ok(deleting, "the XR was not seen being deleted");
    const said = (deleting.status?.conditions ?? []).find((c) => c.type === "DeletionOrdered");
    assert.equal([said?.status, said?.message], ["True", "On deletion, Crossplane deletes bucket-logs after bucket-assets"]);
    await wait("the Usage gone with the XR", async () => (await usages()).length === 0);
  },
);

G("the Usages the step composes for namespaced resources, as Crossplane's Usage controller and webhook take them", async () => {
  // Two ConfigMaps in each of two namespaces stand for composed resources: the step's Usage for a namespaced user of a
  // resource in its namespace, and in another (a cluster-scoped XR's resources may be in any).
  for (const ns of ["usage-a", "usage-b"]) await kubectl(cp!, "create", "namespace", ns);
  const cm = async (ns: string, name: string) => {
    await kubectl(cp!, "-n", ns, "create", "configmap", name);
    return JSON.parse(await kubectl(cp!, "-n", ns, "get", "configmap", name, "-o", "json")) as Obj;
  };
  const cases = [
    { what: "same namespace", used: await cm("usage-a", "db"), user: await cm("usage-a", "app") },
    { what: "another namespace", used: await cm("usage-b", "db"), user: await cm("usage-a", "web") },
  ];
  for (const { what, used, user } of cases) {
    const rsp = runSteps([dependencies({ user: { dependsOn: ["used"] } })], {
      observed: { used: used as unknown as JsonObject, user: user as unknown as JsonObject },
      desired: { used: {}, user: {} },
      capabilities: true,
    });
    const usage = rsp.desired!.resources["usage-of-used-by-user"]!.resource! as unknown as Obj;
    usage.metadata.name = `xfn-${what.replaceAll(" ", "-")}`;
    await kubectlApply(cp!, usage);
    const got = () => getJson("usages.protection.crossplane.io", "-n", usage.metadata.namespace!, usage.metadata.name);
    await wait(`${what}: the Usage ready`, async () => isTrue(await got(), "Ready"));
    const [usedNs, usedName] = [used.metadata.namespace!, used.metadata.name];
    const refused = await kubectl(cp!, "-n", usedNs, "delete", "configmap", usedName, "--wait=false").then(
      () => "deleted",
      (err: Error) => err.message,
    );
    assert.match(refused, /denied the request: This resource is in-use by 1 usage\(s\), including the \*v1beta1\.Usage /, what);
    // Its user gone, the Usage goes with it (Crossplane's controller made the user its owner).
    await kubectl(cp!, "-n", user.metadata.namespace!, "delete", "configmap", user.metadata.name);
    await wait(
      `${what}: the Usage gone with its user`,
      async () =>
        await got().then(
          () => false,
          (e: Error) => /NotFound/.test(e.message),
        ),
    );
    // The refused delete is replayed (replayDeletion): Crossplane deletes the used one once its Usage is gone.
    await wait(`${what}: ${usedName} deleted by Crossplane's replay`, () =>
      kubectl(cp!, "-n", usedNs, "get", "configmap", usedName).then(
        () => false,
        (e: Error) => /NotFound/.test(e.message),
      ),
    );
  }
});

X.run();
