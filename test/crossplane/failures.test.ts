// The failure modes of ../shared/docs/design.md under real Crossplane (issue
// 58, item 5), with the tier's test provider (crossplane-runtime v2.4.0's
// managed reconciler) reconciling what Crossplane composes, and xfn's
// functions installed from their .xpkg: test/crossplane/fixtures/compose
// composes what a scenario asks for, functions/lifecycle follows it.
//
// Failure mode 4, the external name lost on a provider restart: an Instance
// whose cloud ID the provider learns after its create returns, under a policy
// without LateInitialize. Two XRs, the same pipeline but for one setting:
// without externalNames.fromFields the ID is only ever in the Instance's
// status, and a restarted provider creates a second cloud resource (what
// Crossplane and crossplane-runtime do on their own); with it, lifecycle reads
// the ID there and Crossplane writes it to the Instance, and the restart
// creates nothing.
//
// Issue 58, item 6: Crossplane runs with its Pipeline Inspector on, emitting
// every step to `xfn inspect` in the lifecycle function's own image, run by
// podman as docs/inspect.md runs the sidecar (user 2000, read-only, the socket
// and the cases in folders shared as a pod's emptyDirs). The last test checks
// that every scenario's steps were written, that `xfn test --function`
// replays all of them green, and that no secret of the secrets scenario (a
// step's credentials, a managed resource's connection details, a Secret
// inside a composed provider-kubernetes Object) is in any file written.
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { stringify } from "yaml";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { crd } from "../support/cluster.js";
import { needs } from "../support/needs.js";
import { runAsSidecar, type Container } from "../support/podman.js";
import { ROOT, run } from "../support/spawn.js";
import { eventually as eventuallyOn, startControlPlane, type ControlPlane } from "./controlplane.js";
import { startCrossplane, type Crossplane } from "./crossplane.js";
import { buildXpkg, installFunction, kubectl, kubectlApply, startRegistry, type InstalledFunction, type Registry } from "./functions.js";
import { INSTANCES, installProviderCrds, startProvider, type Provider } from "./provider.js";

const F = suite("the failure modes under real Crossplane, with the test provider and xfn's functions");
const G = needs(F, "go1.26", "podman");
let work: string;
let cp: ControlPlane | undefined;
let xp: Crossplane | undefined;
let registry: Registry | undefined;
let provider: Provider | undefined;
const installed: InstalledFunction[] = [];
let sidecar: Container | undefined;
/** The Pipeline Inspector's folders, shared with its container as a pod's emptyDirs (world-writable, as those are). */
let inspector: { socketDir: string; cases: string };

G.before(async () => {
  work = mkdtempSync(join(tmpdir(), "xfn-crossplane-failures-"));
  const [plane, xpkgs] = await Promise.all([
    startControlPlane(),
    (async () => ({
      compose: await buildXpkg("compose", work, "test/crossplane/fixtures/compose"),
      lifecycle: await buildXpkg("lifecycle", work),
    }))(),
  ]);
  cp = plane;
  inspector = { socketDir: join(work, "inspector/socket"), cases: join(work, "inspector/cases") };
  for (const d of Object.values(inspector)) {
    mkdirSync(d, { recursive: true });
    chmodSync(d, 0o777); // past the umask
  }
  // --debug: Crossplane logs a reconcile's error only at debug level (failure mode 1 reads them).
  xp = await startCrossplane(cp, undefined, { inspectorSocket: join(inspector.socketDir, "socket"), args: ["--debug"] });
  registry = await startRegistry(join(work, "registry"));
  for (const [name, xpkg] of Object.entries(xpkgs))
    installed.push(
      await installFunction(cp, registry, `function-${name}`, xpkg, {
        work,
        clientCertsDir: xp.clientCertsDir,
        crossplaneLog: () => xp!.logTail(),
      }),
    );
  // The sidecar, from the image Crossplane already pulled for function-lifecycle, as docs/inspect.md runs it.
  sidecar = await runAsSidecar(
    installed.find((f) => f.name === "function-lifecycle")!.ref,
    ["node", "/function/inspect.mjs", "--socket=/var/run/pipeline-inspector/socket", "--dir=/inspected"],
    { [inspector.socketDir]: "/var/run/pipeline-inspector", [inspector.cases]: "/inspected" },
  );
  for (const until = Date.now() + 30_000; !existsSync(join(inspector.socketDir, "socket")); await sleep(200))
    if (Date.now() > until) throw new Error(`the Pipeline Inspector sidecar did not listen within 30 s; its log:\n${await sidecar.logs()}`);
  await installProviderCrds(cp);
  provider = await startProvider(cp, { poll: "1s", readyAfter: "2s", creationGracePeriod: "1s" });
  await kubectlApply(cp, LATE_XRD);
  await kubectl(cp, "wait", "--for=condition=Established", "--timeout=90s", `xrd/${LATE_XRD.metadata.name}`);
  lateXrdEstablishedAt = Date.now();
});
G.after(async () => {
  await provider?.stop();
  // Before the functions: their stop removes the image the sidecar runs.
  await sidecar?.stop(5).catch(() => {});
  await sidecar?.remove();
  for (const f of installed) await f.stop();
  await registry?.stop();
  await xp?.stop();
  await cp?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

interface Obj {
  metadata: { name: string; uid: string; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown> & { atProvider?: { id?: string }; conditions?: { type: string; status: string; message?: string }[] };
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const getJson = async <T = Obj>(...args: string[]): Promise<T> => JSON.parse(await kubectl(cp!, "get", ...args, "-o", "json")) as T;

/** eventually is controlplane's eventually with this suite's logs. */
const eventually = <T>(what: string, check: () => Promise<T | undefined | false | null | "" | 0>, ms = 90_000) =>
  eventuallyOn(what, check, ms, () => `Crossplane's log ends:\n${xp!.logTail(20)}\nthe provider's log ends:\n${provider!.logTail(20)}`);

/** sum adds up a Prometheus counter's samples whose labels include every one of want. */
function sum(text: string, metric: string, want: Record<string, string>): number {
  let n = 0;
  for (const m of text.matchAll(new RegExp(`^${metric}\\{([^}]*)\\} (\\S+)$`, "gm"))) {
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(want).every(([k, v]) => labels[k] === v)) n += Number(m[2]);
  }
  return n;
}

/**
 * calls counts function-lifecycle's calls both ways: the requests Crossplane
 * sent it (its function_run_function_request_total) and those the function
 * answered (xfn's xfn_function_requests_total, from its container's metrics).
 */
async function calls(): Promise<{ sent: number; answered: number }> {
  const lifecycle = installed.find((f) => f.name === "function-lifecycle")!;
  const [xpText, fnText] = await Promise.all([
    fetch(`http://127.0.0.1:${xp!.metricsPort}/metrics`).then((r) => r.text()),
    fetch(`http://127.0.0.1:${lifecycle.container.metricsPort}/metrics`).then((r) => r.text()),
  ]);
  return {
    sent: sum(xpText, "function_run_function_request_total", { function_name: "function-lifecycle" }),
    answered: sum(fnText, "xfn_function_requests_total", {}),
  };
}

/**
 * counted runs what a failure mode does and answers how long it took and how
 * many calls of function-lifecycle it cost, both ways, once Crossplane's count
 * of calls sent and the function's of calls answered agree again.
 */
async function counted<T>(run: () => Promise<T>): Promise<{ value: T; seconds: number; sent: number; answered: number }> {
  const before = await calls();
  const started = Date.now();
  const value = await run();
  const seconds = (Date.now() - started) / 1000;
  const after = await eventually("Crossplane's count of calls sent and the function's of calls answered agreeing", async () => {
    const c = await calls();
    return c.sent === c.answered ? c : undefined;
  });
  return { value, seconds, sent: after.sent - before.sent, answered: after.answered - before.answered };
}

/**
 * idleCalls answers how many calls of function-lifecycle Crossplane sends in
 * ms with nothing changing (after 2 s for what is in flight), and the counts
 * at its start.
 */
async function idleCalls(ms = 10_000): Promise<{ idle: number; settled: { sent: number; answered: number } }> {
  await sleep(2_000);
  const settled = await calls();
  await sleep(ms);
  return { idle: (await calls()).sent - settled.sent, settled };
}

/** xrd is a cluster-scoped XRD of example.xfn.dev declaring what functions/lifecycle records (without it, the API server drops it). */
const xrd = (kind: string, plural: string, status: Record<string, object> = {}) => ({
  apiVersion: "apiextensions.crossplane.io/v2",
  kind: "CompositeResourceDefinition",
  metadata: { name: `${plural}.example.xfn.dev` },
  spec: {
    group: "example.xfn.dev",
    names: { kind, plural },
    scope: "Cluster",
    versions: [
      {
        name: "v1alpha1",
        served: true,
        referenceable: true,
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: { type: "object", properties: { size: { type: "string" } } },
              status: {
                type: "object",
                properties: { externalNames: { type: "object", additionalProperties: { type: "string" } }, ...status },
              },
            },
          },
        },
      },
    ],
  },
});
const XRD = xrd("XDatabase", "xdatabases");
/** The XRD of failure mode 3: established in before(), its first XR created more than 60 s later. */
const LATE_XRD = xrd("XCache", "xcaches");
let lateXrdEstablishedAt = 0;

/** A Bucket: its name is its external name (crossplane-runtime's NameAsExternalName), the default policy. */
const BUCKET = { bucket: { apiVersion: "s3.aws.upbound.io/v1beta1", kind: "Bucket", spec: { forProvider: { region: "eu-west-1" } } } };

/** An Instance under a policy without LateInitialize: the cloud names it, and the name arrives late. */
const INSTANCE = {
  instance: {
    apiVersion: "rds.aws.upbound.io/v1beta1",
    kind: "Instance",
    spec: {
      managementPolicies: ["Observe", "Create", "Update", "Delete"],
      forProvider: { region: "eu-west-1", instanceClass: "db.t3.micro" },
    },
  },
};

/** composition composes resources (by default one late-named Instance) for kind, then runs lifecycle with its input. */
const composition = (
  name: string,
  lifecycle: Record<string, unknown>,
  resources: Record<string, object> = INSTANCE,
  kind = "XDatabase",
) => ({
  apiVersion: "apiextensions.crossplane.io/v1",
  kind: "Composition",
  metadata: { name },
  spec: {
    compositeTypeRef: { apiVersion: "example.xfn.dev/v1alpha1", kind },
    mode: "Pipeline",
    pipeline: [
      {
        step: "compose",
        functionRef: { name: "function-compose" },
        input: {
          apiVersion: "compose.xfn.dev/v1alpha1",
          kind: "Input",
          resources,
        },
      },
      {
        step: "lifecycle",
        functionRef: { name: "function-lifecycle" },
        input: { apiVersion: "lifecycle.xfn.dev/v1alpha1", kind: "Lifecycle", ...lifecycle },
      },
    ],
  },
});

const xr = (name: string, compositionName: string, kind = "XDatabase") => ({
  apiVersion: "example.xfn.dev/v1alpha1",
  kind,
  metadata: { name },
  spec: { size: "small", crossplane: { compositionRef: { name: compositionName } } },
});

/** instanceOf is the Instance Crossplane composed for an XR. */
async function instanceOf(xrName: string): Promise<Obj | undefined> {
  const list = await getJson<{ items: Obj[] }>(INSTANCES, "-l", `crossplane.io/composite=${xrName}`);
  return list.items[0];
}

G(
  "failure mode 4: a cloud ID learned late survives a provider restart only with lifecycle's externalNames.fromFields; without it the restart creates a second",
  async () => {
    await kubectlApply(cp!, XRD);
    await kubectl(cp!, "wait", "--for=condition=Established", "--timeout=90s", `xrd/${XRD.metadata.name}`);
    await kubectlApply(cp!, composition("db-plain", {}));
    await kubectlApply(cp!, composition("db-kept", { externalNames: { fromFields: { instance: "status.atProvider.id" } } }));
    await eventually("the XDatabase kind served", async () => (await kubectl(cp!, "get", "xdatabases")) !== undefined);
    const started = Date.now();
    await kubectlApply(cp!, xr("plain", "db-plain"));
    await kubectlApply(cp!, xr("kept", "db-kept"));

    // Both created once, both ready, the ID in the Instance's status.
    const plain = await eventually("the plain XR's Instance ready with its cloud ID in status", async () => {
      const i = await instanceOf("plain");
      return i?.status?.atProvider?.id && i.status.conditions?.some((c) => c.type === "Ready" && c.status === "True") ? i : undefined;
    });
    // With fromFields, Crossplane writes the ID to the Instance, and the XR records it.
    const kept = await eventually("the kept XR's Instance named by its cloud ID, and the name recorded in the XR", async () => {
      const i = await instanceOf("kept");
      const id = i?.status?.atProvider?.id;
      if (!id || i.metadata.annotations?.["crossplane.io/external-name"] !== id) return undefined;
      const x = await getJson("xdatabases", "kept");
      return (x.status?.["externalNames"] as Record<string, string> | undefined)?.["instance"] === id ? i : undefined;
    });
    const persistedIn = (Date.now() - started) / 1000;
    // No endless reconcile once both are settled: over 10 s, Crossplane calls the pipeline only when something changes.
    // (A late-init that rewrote the spec on every poll, or a status that never settled, would call it on each poll.)
    const { idle, settled } = await idleCalls();
    process.stderr.write(
      `failure mode 4: ${settled.sent} pipeline calls to converge both XRs (the function answered ${settled.answered}); ${idle} in the next 10 s\n`,
    );
    assert.ok(idle <= 2, `${idle} calls of function-lifecycle in 10 s with nothing changing`);
    const after10s = await calls();
    assert.is(after10s.answered, after10s.sent, "Crossplane's count of calls sent and the function's of calls answered differ");
    // Without it, nothing ever writes the ID to the Instance.
    assert.is((await instanceOf("plain"))?.metadata.annotations?.["crossplane.io/external-name"], undefined);
    const creates = (uid: string) => provider!.ops().filter((o) => o.op === "create" && o.token === uid).length;
    assert.is(creates(plain.metadata.uid), 1);
    assert.is(creates(kept.metadata.uid), 1);

    // The provider restarts (a crash, an upgrade, an evicted pod): its memory of the IDs is gone.
    await provider!.kill();
    await provider!.start();
    await eventually(
      "the restarted provider creating a second cloud resource for the plain XR's Instance",
      async () => creates(plain.metadata.uid) === 2,
    );
    await sleep(5_000); // five polls of the kept one
    assert.is(creates(kept.metadata.uid), 1, "the restarted provider created the kept XR's Instance again");
    assert.is(provider!.objects("Instance").filter((o) => o.token === kept.metadata.uid).length, 1);
    const after = await instanceOf("kept");
    assert.is(after?.metadata.annotations?.["crossplane.io/external-name"], kept.status!.atProvider!.id);
    process.stderr.write(`failure mode 4: the cloud ID reached the Instance ${persistedIn.toFixed(1)} s after the XRs were applied\n`);
  },
);

G(
  "failure mode 4, a provider killed between the cloud's create and its record: one cloud resource, the Bucket refuses to guess, and the XR carries lifecycle's warning",
  async () => {
    await kubectlApply(cp!, composition("db-bucket", {}, BUCKET));
    provider!.set("crash-after-create", "");
    await kubectlApply(cp!, xr("crashed", "db-bucket"));
    assert.is(await provider!.exited(90_000), 3);
    await provider!.start();
    const bucketOf = async () =>
      (await getJson<{ items: Obj[] }>("buckets.s3.aws.upbound.io", "-l", "crossplane.io/composite=crashed")).items[0];
    const bucket = await eventually("the Bucket refusing to go on", async () => {
      const b = await bucketOf();
      return /cannot determine creation result/.test(b?.status?.conditions?.find((c) => c.type === "Synced")?.message ?? "")
        ? b
        : undefined;
    });
    // Crossplane turns lifecycle's Warning result into an event on the XR, with the result's reason.
    const warning = await eventually("lifecycle's warning on the XR", async () => {
      const events = await getJson<{ items: { reason: string; type: string; message: string; involvedObject: { kind: string } }[] }>(
        "events",
        "-A",
        "--field-selector",
        "involvedObject.name=crashed",
      );
      return events.items.find((e) => e.involvedObject.kind === "XDatabase" && e.reason === "ExternalCreateIncomplete");
    });
    assert.is(warning.type, "Warning");
    assert.match(warning.message, /bucket: the provider began creating it at \S+ and recorded no result; check the cloud/);
    await sleep(3_000);
    assert.is(provider!.ops().filter((o) => o.op === "create" && o.token === bucket.metadata.uid).length, 1);
  },
);

/** Failure mode 5's XRDs: an inner XR publishing its Instance's cloud ID, and an outer XR composing it and a Bucket that waits for that ID. */
const INNER_XRD = xrd("XNetwork", "xnetworks", { networkId: { type: "string" } });
// Both fields lifecycle writes with dependencies configured: status.deletion's order is written on every run, and an
// undeclared field fails Crossplane's server-side apply of the whole status ("field not declared in schema").
const OUTER_XRD = xrd("XPlatform", "xplatforms", {
  deletion: {
    type: "object",
    properties: {
      remaining: { type: "integer" },
      deleted: { type: "integer" },
      total: { type: "integer" },
      since: { type: "string", format: "date-time" },
      order: { type: "array", items: { type: "array", items: { type: "string" } } },
    },
  },
  waiting: {
    type: "object",
    additionalProperties: {
      type: "object",
      properties: { for: { type: "array", items: { type: "string" } }, since: { type: "string", format: "date-time" } },
    },
  },
});

G("failure mode 5: a nested XR's status reaches its parent with no restart: the dependent waits, says so, then is composed", async () => {
  for (const x of [INNER_XRD, OUTER_XRD]) {
    await kubectlApply(cp!, x);
    await kubectl(cp!, "wait", "--for=condition=Established", "--timeout=90s", `xrd/${x.metadata.name}`);
  }
  // The inner XR publishes its Instance's cloud ID as status.networkId once the provider has it.
  const network = composition(
    "network",
    {},
    { instance: { ...INSTANCE.instance, spec: { forProvider: INSTANCE.instance.spec.forProvider } } },
    "XNetwork",
  );
  (network.spec.pipeline[0]!.input as Record<string, unknown>)["status"] = {
    networkId: { from: "instance", fieldPath: "status.atProvider.id" },
  };
  await kubectlApply(cp!, network);
  await kubectlApply(
    cp!,
    composition(
      "platform",
      { dependencies: { bucket: { waitFor: ["network.status.networkId"] } } },
      {
        network: {
          apiVersion: "example.xfn.dev/v1alpha1",
          kind: "XNetwork",
          spec: { size: "small", crossplane: { compositionRef: { name: "network" } } },
        },
        ...BUCKET,
      },
      "XPlatform",
    ),
  );
  await eventually("the XPlatform kind served", async () => (await kubectl(cp!, "get", "xplatforms")) !== undefined);
  const converged = await counted(async () => {
    await kubectlApply(cp!, xr("top", "platform", "XPlatform"));

    // The dependent waits, and the XR says what for (lifecycle's Normal result, an event on the XR).
    const waited = await eventually("the outer XR saying the bucket waits for the nested XR's status", async () => {
      const events = await getJson<{ items: { reason: string; message: string; involvedObject: { kind: string } }[] }>(
        "events",
        "-A",
        "--field-selector",
        "involvedObject.name=top",
      );
      const found = events.items.find(
        (e) => e.involvedObject.kind === "XPlatform" && /bucket: waiting for network\.status\.networkId/.test(e.message),
      );
      if (!found)
        throw new Error(`the XR's events: ${JSON.stringify(events.items.map((e) => [e.involvedObject.kind, e.reason, e.message]))}`);
      return found;
    });
    // Then, with no restart of anything, the nested XR's status arrives and the bucket is composed; everything ready.
    const top = await eventually(
      "the outer XR ready with its bucket composed",
      async () => {
        const x = await getJson("xplatforms", "top");
        const ready = x.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
        const buckets = await getJson<{ items: Obj[] }>("buckets.s3.aws.upbound.io", "-l", "crossplane.io/composite=top");
        return ready && buckets.items.length === 1 ? x : undefined;
      },
      120_000,
    );
    return { waited, top };
  });
  const { waited, top } = converged.value;
  assert.is(top.status?.["waiting"], undefined);
  const inner = (await getJson<{ items: Obj[] }>("xnetworks", "-l", "crossplane.io/composite=top")).items[0]!;
  // Crossplane labels what a nested XR composes with its root XR's name.
  const instance = (await getJson<{ items: Obj[] }>(INSTANCES, "-l", "crossplane.io/composite=top")).items[0]!;
  assert.ok(instance.status?.atProvider?.id);
  assert.is(inner.status?.["networkId"], instance.status!.atProvider!.id);
  assert.is(waited.reason, "Waiting");
  // Settled, nothing calls it again: lifecycle's status (status.deletion's order, written on every run) does not
  // change on each call, which would make each status write Crossplane's next reason to call.
  const { idle } = await idleCalls();
  process.stderr.write(
    `failure mode 5: the nested XR's status reached its parent; ready ${converged.seconds.toFixed(1)} s after the XR was applied, ${converged.sent} calls of function-lifecycle (the function answered ${converged.answered}); ${idle} in the next 10 s\n`,
  );
  assert.ok(converged.sent > 0);
  assert.ok(idle <= 2, `${idle} calls of function-lifecycle in 10 s with nothing changing`);
});

G(
  "failure mode 2: foreground deletion held by a managed resource the cloud will not delete: what the XR shows meanwhile, and that it goes once the cloud does",
  async () => {
    const STORE_XRD = xrd("XStore", "xstores");
    await kubectlApply(cp!, STORE_XRD);
    await kubectl(cp!, "wait", "--for=condition=Established", "--timeout=90s", `xrd/${STORE_XRD.metadata.name}`);
    await kubectlApply(cp!, composition("store", {}, BUCKET, "XStore"));
    await eventually("the XStore kind served", async () => (await kubectl(cp!, "get", "xstores")) !== undefined);
    await kubectlApply(cp!, xr("held", "store", "XStore"));
    await eventually("the XR ready", async () =>
      (await getJson("xstores", "held")).status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
    );
    const bucketOf = async () =>
      (await getJson<{ items: Obj[] }>("buckets.s3.aws.upbound.io", "-l", "crossplane.io/composite=held")).items[0];
    const bucket = (await bucketOf())!;

    provider!.set("fail-delete", "the bucket is not empty");
    const holding = await calls();
    const deleted = Date.now();
    await kubectl(cp!, "delete", "xstores", "held", "--cascade=foreground", "--wait=false");
    const held = await eventually("the Bucket held by the cloud's refusal", async () => {
      const b = await bucketOf();
      return b && /the bucket is not empty/.test(b.status?.conditions?.find((c) => c.type === "Synced")?.message ?? "") ? b : undefined;
    });
    assert.ok((held.metadata as { deletionTimestamp?: string }).deletionTimestamp, "the Bucket is not being deleted");
    await sleep(5_000);
    const xrHeld = await getJson<Obj & { metadata: { finalizers?: string[]; deletionTimestamp?: string } }>("xstores", "held");
    assert.ok(xrHeld.metadata.deletionTimestamp);
    assert.ok(xrHeld.metadata.finalizers?.includes("foregroundDeletion"), JSON.stringify(xrHeld.metadata.finalizers));
    // What real Crossplane v2.4.0 shows meanwhile: Ready=False, reason Deleting, with no word of what holds it. The
    // pipeline is not called while an XR is deleted (docs/crossplane.md, section 2), so lifecycle's deletion step
    // cannot say more here; under xfn host it does. Should Crossplane start to say more, this fails and the docs change.
    const ready = xrHeld.status?.conditions?.find((c) => c.type === "Ready") as { status: string; reason?: string; message?: string };
    assert.equal([ready.status, ready.reason, ready.message ?? ""], ["False", "Deleting", ""]);

    const whileHeld = (await calls()).sent - holding.sent;
    const heldFor = (Date.now() - deleted) / 1000;

    const released = await counted(async () => {
      provider!.set("fail-delete", undefined);
      await eventually(
        "the XR gone once the cloud deletes the bucket",
        async () => !(await kubectl(cp!, "get", "xstores", "-o", "name")).includes("held"),
      );
    });
    assert.is(provider!.objects("Bucket").filter((o) => o.token === bucket.metadata.uid).length, 0);
    // Crossplane called the pipeline for this XR only before its deletion: no request the inspector wrote for it
    // carries a deletionTimestamp. (The metrics count every XR's calls; this one's are told apart by its steps.)
    assert.ok(stepsOf("XStore._.held").length > 0, "no step of the XR was written");
    const during = stepsOf("XStore._.held").filter((d) => /deletionTimestamp/.test(read(d, "request.yaml")));
    assert.is(during.length, 0, during.join(" "));
    process.stderr.write(
      `failure mode 2: held ${heldFor.toFixed(1)} s by the cloud with ${whileHeld} calls of function-lifecycle (for any XR), then gone ${released.seconds.toFixed(1)} s after the cloud let go, with ${released.sent}; none for the XR being deleted\n`,
    );
  },
);

G("failure mode 3: the first XR of an XRD established more than 60 s earlier is reconciled, composed and ready", async () => {
  await kubectlApply(cp!, composition("cache", {}, BUCKET, "XCache"));
  const wait = lateXrdEstablishedAt + 65_000 - Date.now();
  if (wait > 0) await sleep(wait);
  const created = (Date.now() - lateXrdEstablishedAt) / 1000;
  const ready = await counted(async () => {
    await kubectlApply(cp!, xr("late", "cache", "XCache"));
    await eventually("the late XR synced and ready", async () => {
      const x = await getJson("xcaches", "late");
      const is = (t: string) => x.status?.conditions?.some((c) => c.type === t && c.status === "True");
      return is("Synced") && is("Ready");
    });
  });
  assert.ok(created > 60);
  // Its watches held: the pipeline was called for it, and its steps were written.
  assert.ok(ready.sent > 0);
  process.stderr.write(
    `failure mode 3: an XR created ${created.toFixed(0)} s after its XRD was ready was ready ${ready.seconds.toFixed(1)} s later, with ${ready.sent} calls of function-lifecycle (the function answered ${ready.answered})\n`,
  );
});

/** The secrets of the secrets scenario, each of which must never reach a file the Pipeline Inspector writes. */
const SECRETS = { credential: `cred-${randomBytes(8).toString("hex")}`, token: `token-${randomBytes(8).toString("hex")}`, password: "" };

/** provider-kubernetes' cluster-scoped Object, its manifest free-form: only its CRD, no provider (nothing reconciles it). */
const OBJECT_CRD = crd("kubernetes.crossplane.io", "Object", "objects", "Cluster", [
  {
    name: "v1alpha2",
    served: true,
    storage: true,
    subresources: { status: {} },
    schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
  },
]);

G(
  "secrets in a pipeline: a step's credentials, an Instance's connection details and a Secret inside a composed Object reach the functions",
  async () => {
    await kubectlApply(cp!, OBJECT_CRD);
    await kubectl(cp!, "wait", "--for=condition=Established", "--timeout=60s", `crd/${OBJECT_CRD.metadata.name}`);
    await kubectlApply(cp!, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "db-credentials", namespace: "crossplane-system" },
      stringData: { password: SECRETS.credential },
    });
    const vault = composition(
      "db-secrets",
      {},
      {
        instance: {
          ...INSTANCE.instance,
          spec: { ...INSTANCE.instance.spec, writeConnectionSecretToRef: { namespace: "crossplane-system", name: "vault-instance" } },
        },
        token: {
          apiVersion: "kubernetes.crossplane.io/v1alpha2",
          kind: "Object",
          spec: {
            forProvider: {
              manifest: {
                apiVersion: "v1",
                kind: "Secret",
                metadata: { name: "app-token", namespace: "default" },
                stringData: { token: SECRETS.token },
              },
            },
          },
        },
      },
    );
    (vault.spec.pipeline[0] as Record<string, unknown>)["credentials"] = [
      { name: "db", source: "Secret", secretRef: { namespace: "crossplane-system", name: "db-credentials" } },
    ];
    await kubectlApply(cp!, vault);
    await kubectlApply(cp!, xr("vault", "db-secrets"));
    // The provider publishes the Instance's password; Crossplane reads it into the next request as a connection detail.
    const published = await eventually("the Instance's connection details published", async () => {
      const secret = await getJson<{ data?: Record<string, string> }>("secret", "-n", "crossplane-system", "vault-instance").catch(
        () => undefined,
      );
      if (secret?.data?.["password"]) return secret.data["password"];
      const x = await getJson("xdatabases", "vault").catch((e: Error) => e.message);
      const i = await instanceOf("vault").catch((e: Error) => e.message);
      throw new Error(`no connection Secret yet; the XR: ${JSON.stringify(x)}\nits Instance: ${JSON.stringify(i)}`);
    });
    SECRETS.password = Buffer.from(published, "base64").toString();
    assert.ok(provider!.objects("Instance").some((o) => o.password === SECRETS.password));
    // A step the inspector wrote with that connection detail's key: the next reconcile saw it.
    await eventually("a step written whose request has the Instance's password among its connection details", async () =>
      stepsOf("XDatabase._.vault").some((d) => /connectionDetails:\n\s+endpoint: .*\n\s+password:/.test(read(d, "request.yaml"))),
    );
    // Gone again: failure mode 1 deletes its XRD with only what it is about in it.
    const deleting = Date.now();
    await kubectl(cp!, "delete", "xdatabases", "vault", "--wait=true", "--timeout=150s");
    await eventually("the vault XR's composed resources gone", async () => !(await instanceOf("vault")));
    process.stderr.write(
      `secrets: the XR and what it composed were gone ${((Date.now() - deleting) / 1000).toFixed(1)} s after its deletion\n`,
    );
  },
);

G(
  "failure mode 1: the provider's CRDs deleted, then the XRD: the XRD and its XRs go; what Crossplane's reconciles wait on meanwhile is recorded",
  async () => {
    // What replaying the inspected steps needs (the last test), taken before this test deletes it: the kinds' schemas as
    // the cluster serves them, which Crossplane answered functions/lifecycle's schema requirement from.
    const crds = JSON.parse(await kubectl(cp!, "get", "crd", "-o", "json")) as { items: object[] };
    writeFileSync(join(work, "inspector/schemas.yaml"), crds.items.map((c) => stringify(c)).join("---\n"));
    const before = xp!.logTail(1_000_000).split("\n").length;
    // The crash test's Bucket still refuses to go on; an operator who checked the cloud lets it (else it could not be deleted).
    await kubectl(cp!, "annotate", "buckets.s3.aws.upbound.io", "--all", "crossplane.io/external-create-pending-");
    // The provider is uninstalled: its CRDs go, each managed resource deleted (and its cloud resource with it) first.
    await kubectl(cp!, "delete", "crd", INSTANCES, "buckets.s3.aws.upbound.io", "--wait=true", "--timeout=120s");
    // Then the XRD, while XRs of it still exist whose composed kinds are gone.
    let xrsGone = 0;
    const gone = await counted(async () => {
      const deleted = Date.now();
      await kubectl(cp!, "delete", "xrd", XRD.metadata.name, "--wait=false");
      await eventually(
        "the XRD and its XR kind gone",
        async () => {
          const left = await kubectl(cp!, "get", "xrd,crd", "-o", "name");
          if (
            !xrsGone &&
            (!left.includes("crd/xdatabases.example.xfn.dev") || !(await kubectl(cp!, "get", "xdatabases", "-o", "name")).trim())
          )
            xrsGone = (Date.now() - deleted) / 1000;
          return !left.includes(XRD.metadata.name) && !left.includes("crd/xdatabases.example.xfn.dev");
        },
        180_000,
      );
    });
    // What real Crossplane v2.4.0 does here, recorded rather than asserted (it varies from run to run): a reconcile of an
    // XR whose composed kind's CRD is gone reads the composed resource through Crossplane's cache, which starts an
    // informer for the kind that can never sync, and waits for it until its 2-minute timeout ("cannot get existing
    // composed resources: ... Timeout: failed waiting for *unstructured.Unstructured Informer to sync": failure mode 1,
    // hit on the read rather than on stopping the watch). Meanwhile the XRD's reconciler, which lists the XRs from the
    // same cache, says it is waiting for XRs the API server no longer has, requeued by its backoff (1 s doubling to
    // 60 s). The log is at --debug; the events are there at every level.
    const stuck = /cannot stop watch|failed waiting for \S* ?Informer to sync/i;
    const blocked = xp!
      .logTail(1_000_000)
      .split("\n")
      .slice(before)
      .filter((l) => stuck.test(l) && !/crossplane\.events|Event\(/.test(l));
    const events = await getJson<{
      items: { type: string; reason: string; message: string; count?: number; involvedObject: { kind: string; name: string } }[];
    }>("events", "-A");
    const warned = new Set(
      events.items
        .filter((e) => e.type === "Warning" && stuck.test(e.message))
        .map((e) => `${e.involvedObject.kind}/${e.involvedObject.name}`),
    );
    const waits = events.items
      .filter((e) => e.involvedObject.name === XRD.metadata.name && e.message === "waiting for defined composite resources to be deleted")
      .reduce((n, e) => n + (e.count ?? 1), 0);
    // With its XRs gone nothing calls the pipeline for them, and nothing else runs: no retry loop of a stale watch.
    const { idle } = await idleCalls();
    process.stderr.write(
      `failure mode 1: its XRs were gone ${xrsGone.toFixed(1)} s and the XRD ${gone.seconds.toFixed(1)} s after the XRD's deletion ` +
        `(it said it waited for XRs ${waits} times); ${blocked.length} reconciles ended waiting for an informer that cannot sync` +
        `${warned.size ? ` (Warning events on ${[...warned].sort().join(", ")})` : ""}; ` +
        `${gone.sent} calls of function-lifecycle, ${idle} in the next 10 s\n`,
    );
    assert.ok(idle <= 2, `${idle} calls of function-lifecycle in 10 s after the XRD went`);
  },
);

/** read is a file of a step folder, or "" when there is none. */
const read = (dir: string, file: string) => (existsSync(join(dir, file)) ? readFileSync(join(dir, file), "utf8") : "");

/** stepsOf lists the step folders the inspector wrote for an XR folder (<Kind>.<namespace or _>.<name>), every reconcile. */
function stepsOf(xrFolder: string): string[] {
  const at = join(inspector.cases, xrFolder);
  if (!existsSync(at)) return [];
  return readdirSync(at)
    .flatMap((reconcile) => readdirSync(join(at, reconcile)).map((step) => join(at, reconcile, step)))
    .filter((d) => existsSync(join(d, "inspected.yaml")));
}

G(
  "the Pipeline Inspector for real: every scenario's steps written by the sidecar, replayed green by xfn test, and no secret in any of it",
  async () => {
    const folders = readdirSync(inspector.cases);
    const nested = folders.filter((f) => f.startsWith("XNetwork._.top-"));
    assert.is(nested.length, 1, folders.join(" "));
    const xrs = ["XDatabase._.plain", "XDatabase._.kept", "XDatabase._.crashed", "XDatabase._.vault", "XPlatform._.top", nested[0]!];
    xrs.push("XStore._.held", "XCache._.late");
    let steps = 0;
    let replayable = 0;
    for (const x of xrs) {
      const found = stepsOf(x);
      const names = new Set(found.map((d) => d.split("/").pop()));
      assert.equal([...names].sort(), ["00-compose", "01-lifecycle"], `${x}: ${[...names].join(" ")}`);
      for (const d of found) {
        const meta = read(d, "inspected.yaml");
        assert.match(meta, d.endsWith("00-compose") ? "function: function-compose" : "function: function-lifecycle");
        if (existsSync(join(d, "expected.yaml"))) replayable++;
      }
      steps += found.length;
    }
    const all = readdirSync(inspector.cases, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
    // Each step written whole: a call that failed has no expected.yaml, and none failed.
    assert.is(replayable, steps);
    // Nothing the sidecar dropped of what reached it. Crossplane gives each emit 100 ms (crossplane v2.4.0
    // internal/xfn/inspected/socket.go) and goes on without it, counting it in its
    // function_run_function_pipeline_inspector_errors_total: on a loaded machine a request can be lost that way, and
    // its response then arrives alone. Only such drops are allowed, and no more of them than Crossplane's count.
    const drops = new Map<string, number>();
    for (const line of (await sidecar!.logs()).split("\n").filter((l) => l.includes("dropped a call"))) {
      const d = JSON.parse(line) as { why: string; times: number };
      drops.set(d.why, Math.max(drops.get(d.why) ?? 0, d.times));
    }
    const emitErrors = sum(
      await fetch(`http://127.0.0.1:${xp!.metricsPort}/metrics`).then((r) => r.text()),
      "function_run_function_pipeline_inspector_errors_total",
      {},
    );
    const dropped = [...drops.values()].reduce((a, b) => a + b, 0);
    for (const why of drops.keys()) assert.ok(["response without its request", "no response came"].includes(why), `dropped: ${why}`);
    assert.ok(
      dropped <= emitErrors,
      `the sidecar dropped ${dropped} calls (${JSON.stringify([...drops])}); Crossplane failed ${emitErrors} emits`,
    );

    // Replayed where they lie, each Function's steps by its local module.
    const replay = await run(
      [
        "test",
        inspector.cases,
        "--function",
        `function-compose=${join(ROOT, "test/crossplane/fixtures/compose")}`,
        "--function",
        `function-lifecycle=${join(ROOT, "functions/lifecycle")}`,
        // functions/lifecycle asks for the XR kind's schema; Crossplane's answer is not in what was recorded.
        "--required-schemas",
        join(work, "inspector/schemas.yaml"),
      ],
      { timeoutMs: 600_000 },
    );
    const total = all.filter((e) => e.name === "expected.yaml").length;
    assert.is(
      replay.code,
      0,
      replay.stdout
        .split("\n")
        .filter((l) => !l.startsWith("ok"))
        .join("\n") + replay.stderr,
    );
    assert.match(replay.stdout, `${total} passed, 0 failed`);

    // No secret anywhere in what was written: raw, or base64 as a Secret's data and a connection detail carry it.
    const text = all.map((e) => readFileSync(join(e.parentPath, e.name), "utf8")).join("\n");
    for (const [what, value] of Object.entries(SECRETS)) {
      assert.ok(value, what);
      for (const form of [value, Buffer.from(value).toString("base64")])
        assert.not.ok(text.includes(form), `the ${what} is in a written file`);
    }
    // Each was there, and kept its key: what the function saw is a redaction, not a gap.
    const vault = stepsOf("XDatabase._.vault").filter((d) => d.endsWith("00-compose"));
    const request = vault.map((d) => read(d, "request.yaml")).join("\n");
    const redacted = Buffer.from("[REDACTED]").toString("base64");
    assert.match(
      request,
      new RegExp(`credentials:\\n\\s+db:\\n\\s+credentialData:\\n\\s+data:\\n\\s+password: ${redacted.replace(/[+/=]/g, "\\$&")}`),
    );
    assert.match(request, new RegExp(`password: ${redacted.replace(/[+/=]/g, "\\$&")}`));
    assert.match(request, /stringData:\n\s+token: "?\[REDACTED\]"?/);
    process.stderr.write(
      `pipeline inspector: ${steps} steps of ${xrs.length} XRs written; ${total} cases replayed green; ${emitErrors} emits Crossplane gave up on, ${dropped} calls dropped\n`,
    );
  },
);

F.run();
