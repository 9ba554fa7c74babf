// The host loop end to end on the embedded API server: real HTTP, real
// client-node informers, the examples' functions run in-process.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { applyManifests } from "../../src/host/manifests.js";
import { parseRequestTotals } from "../../src/apiserver/metrics.js";
import { REAL_APISERVER, startCluster, type TestCluster } from "../support/apiserver.js";
import { Host } from "../../src/host/host.js";
import { loadDocs } from "../../src/engine/docs.js";
import { createRunner } from "../../src/engine/runner.js";
import { apis, crd, kubeconfigFor, sleep, until } from "../support/cluster.js";
import { memoryLog } from "../support/log.js";
import { hostFor, nestedUp } from "../support/host.js";
import { ROOT } from "../support/spawn.js";

const EX = join(ROOT, "examples");
const BUCKETS = { group: "s3.aws.upbound.io", version: "v1beta1", plural: "buckets" };
const XBUCKETS = { group: "example.xfn.dev", version: "v1alpha1", plural: "xbuckets" };
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

async function setup(opts: { watchGcIntervalMs?: number; withXR?: boolean; dataFile?: string } = {}) {
  const c = await startCluster(opts.dataFile ? { dataFile: opts.dataFile } : {});
  const kc = kubeconfigFor(c);
  const mem = memoryLog();
  const runner = await createRunner(loadDocs(join(EX, "functions.yaml")), join(EX, "functions.yaml"), () => new Date());
  const host = new Host({
    kc,
    runner,
    log: mem.log,
    watchGcIntervalMs: opts.watchGcIntervalMs ?? 60_000,
    baseBackoffMs: 50,
    maxBackoffMs: 1000,
  });
  await host.start();
  const docs = [
    ...loadDocs(join(EX, "host")),
    ...loadDocs(join(EX, "composition.yaml")),
    ...(opts.withXR === false ? [] : loadDocs(join(EX, "xr.yaml"))),
  ];
  await applyManifests(kc, docs, mem.log);
  // The XR kind is served once the host has made its CRD and the API server established it: at once on the embedded
  // server, a second or more later on kube-apiserver.
  await until("the XR kind served", async () => (await fetch(`${c.url}/apis/example.xfn.dev/v1alpha1/xbuckets`)).ok, 30_000);
  return { c, kc, host, mem, ...apis(kc) };
}

/** setupWithEvents is setup, and the Events recorded on an XR. */
async function setupWithEvents() {
  const s = await setup();
  const events = async (name: string) =>
    ((await (await fetch(`${s.c.url}/api/v1/namespaces/default/events`)).json()) as any).items.filter(
      (e: any) => e.involvedObject?.name === name,
    ) as any[];
  return { ...s, events };
}

/** bareHost starts a cluster and a (not yet started) host with no functions. */
async function bareHost() {
  const c = await startCluster();
  const kc = kubeconfigFor(c);
  const mem = memoryLog();
  const host = new Host({ kc, runner: await createRunner([], "(none)", () => new Date()), log: mem.log });
  return { c, kc, mem, host };
}

/** fixtureHost starts a cluster and a (not yet started) host running the functions of test/fixtures/<name>. */
const fixtureHost = (name: string) => hostFor(join(ROOT, "test/fixtures", name));

async function teardown(host: Host, c: TestCluster) {
  await host.stop();
  await c.stop();
}

const xrOf = async (objects: ReturnType<typeof apis>["objects"]) =>
  (await objects.getClusterCustomObject({ ...XBUCKETS, name: "team-a" })) as any;
const pick = (c: any) => ({ status: c?.status, reason: c?.reason, message: c?.message });
const cond = (o: any, type: string) => (o?.status?.conditions ?? []).find((c: any) => c.type === type);
const listBuckets = async (objects: ReturnType<typeof apis>["objects"]) =>
  ((await objects.listClusterCustomObject(BUCKETS)) as { items: any[] }).items;

/** WIDGETS is a CRD of any fields, for the tests of --manifests. */
const WIDGETS = crd("example.org", "Widget", "widgets", "Cluster", [
  {
    name: "v1",
    served: true,
    storage: true,
    schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
  },
]);

const H = suite("host loop");

H(
  "xfn host --manifests and the host's own CRDs keep every field of a schema (client-node's models would drop x-kubernetes-* and default)",
  async () => {
    const { c, kc, mem, host } = await bareHost();
    const raw = async (path: string) => (await (await fetch(`${c.url}${path}`)).json()) as any;
    try {
      await host.start();
      const schema = {
        type: "object",
        "x-kubernetes-preserve-unknown-fields": true,
        properties: { spec: { type: "object", properties: { tier: { type: "string", enum: ["a", "b"], default: "a" } } } },
      };
      const things = crd("example.org", "Thing", "things", "Cluster", [
        { name: "v1", served: true, storage: true, schema: { openAPIV3Schema: schema } },
      ]);
      await applyManifests(kc, [{ obj: things, source: "test" }, ...loadDocs(join(EX, "host", "xrd.yaml"))], mem.log);
      assert.equal(
        (await raw("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.example.org")).spec.versions[0].schema.openAPIV3Schema,
        schema,
      );
      const xrds = await raw(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/compositeresourcedefinitions.apiextensions.crossplane.io",
      );
      assert.equal(
        xrds.spec.versions.map((v: any) => [
          v.name,
          v.schema.openAPIV3Schema["x-kubernetes-preserve-unknown-fields"],
          v.schema.openAPIV3Schema.properties.spec.properties.scope.default,
        ]),
        [
          ["v2", true, "Namespaced"],
          ["v1", true, "LegacyCluster"],
        ],
      );
      await until(
        "the XR kind's CRD",
        async () => (await raw("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/xbuckets.example.xfn.dev")).spec !== undefined,
      );
      const xrCrd = await raw("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/xbuckets.example.xfn.dev");
      // The XRD's own schema, with what Crossplane adds (engine/xcrd.ts), as a Crossplane cluster serves it.
      const spec = xrCrd.spec.versions[0].schema.openAPIV3Schema.properties.spec;
      assert.equal(spec.properties.region, { type: "string" });
      assert.equal(spec.properties.crossplane.properties.compositionUpdatePolicy.enum, ["Automatic", "Manual"]);
      assert.is(xrCrd.spec.versions[0].schema.openAPIV3Schema["x-kubernetes-preserve-unknown-fields"], undefined);
    } finally {
      await host.stop();
      await c.stop();
    }
  },
);

// On a real cluster an XR's kind is served a second or more after its XRD is applied (the host makes the CRD, the API server
// establishes it): found when `xfn host --manifests` ran against kube-apiserver v1.36.3 and exited on the XR's 404.
H("--manifests: an object whose kind is not served yet is applied once it is; one never served fails, naming the kind", async () => {
  const c = await startCluster();
  const kc = kubeconfigFor(c);
  const mem = memoryLog();
  try {
    const widgets = WIDGETS;
    const widget = { obj: { apiVersion: "example.org/v1", kind: "Widget", metadata: { name: "w" } }, source: "widget.yaml" };
    // The CRD arrives 700 ms later, from elsewhere (as the host's own XRD controller makes an XR's).
    const later = sleep(700).then(() => applyManifests(kc, [{ obj: widgets, source: "crd" }], mem.log));
    await applyManifests(kc, [widget], mem.log, 10_000);
    await later;
    assert.is(((await (await fetch(`${c.url}/apis/example.org/v1/widgets/w`)).json()) as any).metadata.name, "w");
    assert.ok(mem.text().includes("example.org/v1 Widget is not served yet: applying it again once it is"));
    // A kind nothing serves: refused after the wait, saying what to check.
    const gadget = { obj: { apiVersion: "example.org/v1", kind: "Gadget", metadata: { name: "g" } }, source: "gadget.yaml" };
    try {
      await applyManifests(kc, [gadget], mem.log, 600);
      assert.unreachable("applied a kind nothing serves");
    } catch (err) {
      assert.match(
        (err as Error).message,
        /^cannot apply gadget\.yaml: .*\(example\.org\/v1 Gadget was still not served after \d+ s: is its CRD or XRD among the manifests\?\)$/s,
      );
    }
  } finally {
    await c.stop();
  }
});

H(
  "--manifests: an apply the API server asks to send again (429, as kube-apiserver answers for a CRD just established) is sent again",
  async () => {
    const c = await startCluster();
    const mem = memoryLog();
    // In front of the API server: the first two applies of the widget get kube-apiserver's answer while its storage starts.
    let refused = 0;
    const target = new URL(c.url);
    const front = createServer((req, res) => {
      if (req.method === "PATCH" && req.url?.startsWith("/apis/example.org/v1/widgets/w") && refused < 2) {
        refused++;
        req.resume();
        res.writeHead(429, { "content-type": "application/json", "retry-after": "1" });
        res.end(
          JSON.stringify({
            kind: "Status",
            apiVersion: "v1",
            status: "Failure",
            message: "storage is (re)initializing",
            reason: "TooManyRequests",
            details: { retryAfterSeconds: 1 },
            code: 429,
          }),
        );
        return;
      }
      const up = httpRequest(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: { ...req.headers, host: target.host } },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      req.pipe(up);
    });
    await new Promise<void>((r) => front.listen(0, "127.0.0.1", r));
    const kc = kubeconfigFor(c, (front.address() as { port: number }).port);
    try {
      const widgets = WIDGETS;
      await applyManifests(kc, [{ obj: widgets, source: "crd" }], mem.log);
      await applyManifests(
        kc,
        [{ obj: { apiVersion: "example.org/v1", kind: "Widget", metadata: { name: "w" } }, source: "w.yaml" }],
        mem.log,
        10_000,
      );
      assert.is(refused, 2);
      assert.is(((await (await fetch(`${c.url}/apis/example.org/v1/widgets/w`)).json()) as any).metadata.name, "w");
      assert.match(mem.text(), "example.org/v1 Widget: the API server asks to come back (storage is (re)initializing): applying it again");
    } finally {
      front.closeAllConnections();
      await new Promise((r) => front.close(r));
      await c.stop();
    }
  },
);

H("stopped while it is still starting, the host leaves no watch and no timer running (found by a lane that would not exit)", async () => {
  const { c, host } = await bareHost();
  try {
    // Not awaited: stop() lands while start is installing Crossplane's CRDs.
    const starting = host.start().catch(() => undefined);
    await host.stop();
    await starting;
    assert.equal(host.watches.watching(), [], "no watch was started after the stop");
    assert.is((host as unknown as { gcTimer?: NodeJS.Timeout }).gcTimer, undefined, "no watch-collection timer was set after the stop");
  } finally {
    await c.stop();
  }
});

H(
  "the XR kind's CRD is the XRD's schema as Crossplane builds it: XRD defaults are applied to XRs; a version without a schema is refused with Crossplane's words",
  async () => {
    const { c, kc, mem, host } = await bareHost();
    try {
      await host.start();
      const version = (schema: boolean) => ({
        name: "v1",
        served: true,
        referenceable: true,
        ...(schema
          ? {
              schema: {
                openAPIV3Schema: {
                  type: "object",
                  properties: { spec: { type: "object", properties: { region: { type: "string", default: "eu-west-1" } } } },
                },
              },
            }
          : {}),
      });
      const xrd = (plural: string, kind: string, schema: boolean) => ({
        obj: {
          apiVersion: "apiextensions.crossplane.io/v2",
          kind: "CompositeResourceDefinition",
          metadata: { name: `${plural}.example.org` },
          spec: { group: "example.org", scope: "Cluster", names: { kind, plural }, versions: [version(schema)] },
        },
        source: "test",
      });
      await applyManifests(kc, [xrd("xdbs", "XDB", true), xrd("xcaches", "XCache", false)], mem.log);
      await until("the XR kind served", async () => (await fetch(`${c.url}/apis/example.org/v1/xdbs`)).ok, 10_000);
      await applyManifests(
        kc,
        [{ obj: { apiVersion: "example.org/v1", kind: "XDB", metadata: { name: "db" }, spec: {} }, source: "test" }],
        mem.log,
      );
      const db = (await (await fetch(`${c.url}/apis/example.org/v1/xdbs/db`)).json()) as any;
      assert.is(db.spec.region, "eu-west-1", "the XRD's default, applied by the API server");
      await until("the refusal", () =>
        mem.lines().some((l) => l["xrd"] === "xcaches.example.org" && /custom resource validation cannot be nil/.test(String(l["err"]))),
      );
      assert.not.ok((await fetch(`${c.url}/apis/example.org/v1/xcaches`)).ok, "no kind is served for it");
    } finally {
      await host.stop();
      await c.stop();
    }
  },
);

H("a v1 XRD's XRs are cluster-scoped; claims are not served, and the host says so", async () => {
  const { c, kc, mem, host } = await bareHost();
  try {
    await host.start();
    const xrd = {
      apiVersion: "apiextensions.crossplane.io/v1",
      kind: "CompositeResourceDefinition",
      metadata: { name: "xdbs.example.org" },
      spec: {
        group: "example.org",
        names: { kind: "XDB", plural: "xdbs" },
        claimNames: { kind: "DB", plural: "dbs" },
        versions: [
          {
            name: "v1",
            served: true,
            referenceable: true,
            schema: {
              openAPIV3Schema: { type: "object", properties: { spec: { type: "object", properties: { size: { type: "integer" } } } } },
            },
          },
        ],
      },
    };
    await applyManifests(kc, [{ obj: xrd, source: "test" }], mem.log);
    await until("the warning about claims", () =>
      mem.lines().some((l) => l["xrd"] === "xdbs.example.org" && l["claimKind"] === "DB" && /does not serve/.test(String(l["msg"]))),
    );
    const crd = (await (await fetch(`${c.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/xdbs.example.org`)).json()) as any;
    assert.is(crd.spec.scope, "Cluster", "v1 XRDs default to LegacyCluster");
  } finally {
    await host.stop();
    await c.stop();
  }
});

H("reconciles an XR: composes with owner references, records refs and status; provider readiness makes it Ready", async () => {
  const { c, host, objects } = await setup();
  try {
    // Only the logs bucket at first: the lifecycle step holds assets back until logs is ready.
    await until("the logs bucket", async () => (await listBuckets(objects)).length === 1, 10_000);
    const [logs] = await listBuckets(objects);
    assert.is(logs.metadata.annotations["crossplane.io/composition-resource-name"], "bucket-logs");
    assert.equal(logs.metadata.ownerReferences[0].blockOwnerDeletion, true);
    assert.is(logs.metadata.ownerReferences[0].kind, "XBuckets");
    await until("XR synced", async () => cond(await xrOf(objects), "Synced")?.status === "True");
    const xr = await xrOf(objects);
    assert.is(xr.spec.crossplane.resourceRefs[0].name, logs.metadata.name);
    assert.is(xr.status.bucketCount, 2);
    assert.is(cond(xr, "Ready").status, "False");
    // The "provider" makes the logs bucket ready: the XR reacts at once (realtime), assets is created.
    await objects.patchClusterCustomObjectStatus(
      { ...BUCKETS, name: logs.metadata.name, body: { status: { conditions: [{ type: "Ready", status: "True", reason: "Available" }] } } },
      merge,
    );
    await until("assets composed", async () => (await listBuckets(objects)).length === 2, 10_000);
    for (const b of await listBuckets(objects)) {
      if (b.metadata.annotations["crossplane.io/composition-resource-name"] === "bucket-assets") {
        await objects.patchClusterCustomObjectStatus(
          { ...BUCKETS, name: b.metadata.name, body: { status: { conditions: [{ type: "Ready", status: "True", reason: "Available" }] } } },
          merge,
        );
      }
    }
    await until("XR Ready", async () => cond(await xrOf(objects), "Ready")?.status === "True", 10_000);
    const ready = await xrOf(objects);
    assert.is(cond(ready, "Ready").reason, "Available");
    assert.equal(
      ready.spec.crossplane.resourceRefs.map((r: { name: string }) => r.name).sort(),
      (await listBuckets(objects)).map((b) => b.metadata.name).sort(),
      "both buckets are referenced",
    );
    // Healthy (crossplane #5643, which the host as controller writes): a provider error on a composed bucket turns it
    // False naming the bucket by its composition-resource-name; mended, True again.
    assert.equal(pick(cond(ready, "Healthy")), { status: "True", reason: "ReconcileSuccess", message: undefined });
    const assets = (await listBuckets(objects)).find(
      (b) => b.metadata.annotations["crossplane.io/composition-resource-name"] === "bucket-assets",
    )!;
    const synced = (status: string, reason: string) =>
      objects.patchClusterCustomObjectStatus(
        {
          ...BUCKETS,
          name: assets.metadata.name,
          body: {
            status: {
              conditions: [
                { type: "Ready", status: "True", reason: "Available" },
                { type: "Synced", status, reason },
              ],
            },
          },
        },
        merge,
      );
    await synced("False", "ReconcileError");
    await until("XR Healthy=False", async () => cond(await xrOf(objects), "Healthy")?.status === "False", 10_000);
    assert.equal(pick(cond(await xrOf(objects), "Healthy")), {
      status: "False",
      reason: "ReconcileError",
      message: "Unhealthy composed resources: bucket-assets",
    });
    await synced("True", "ReconcileSuccess");
    await until("XR Healthy=True", async () => cond(await xrOf(objects), "Healthy")?.status === "True", 10_000);
  } finally {
    await teardown(host, c);
  }
});

H(
  "XRs and composed resources are read from the watches' caches: a handful of XRs reconciled with almost no GETs, as the API server counts them",
  async () => {
    const { c, host, objects } = await setup();
    /** count is how many requests of a verb on these kinds the API server has answered (its /metrics, kube's or ours). */
    const count = async (verb: string, kinds: string[]) =>
      parseRequestTotals(await (await fetch(`${c.url}/metrics`)).text())
        .filter((t) => t.verb === verb && kinds.includes(t.resource) && t.subresource === "")
        .reduce((a, t) => a + t.n, 0);
    const gets = () => count("GET", ["xbuckets", "buckets"]);
    const patches = () => count("PATCH", ["xbuckets"]);
    try {
      await until("team-a synced", async () => cond(await xrOf(objects), "Synced")?.status === "True", 30_000);
      const before = await gets();
      const patchesBefore = await patches();
      const names = Array.from({ length: 6 }, (_, i) => `team-${i}`);
      for (const name of names)
        await objects.createClusterCustomObject({
          ...XBUCKETS,
          body: {
            apiVersion: "example.xfn.dev/v1alpha1",
            kind: "XBuckets",
            metadata: { name },
            spec: { region: "eu-west-1", buckets: [{ name: "logs" }] },
          },
        });
      // Waited on by listing (a LIST, not counted with the GETs).
      await until(
        "all synced",
        async () => {
          const items = ((await objects.listClusterCustomObject(XBUCKETS)) as { items: any[] }).items;
          return names.every(
            (n) =>
              cond(
                items.find((x) => x.metadata.name === n),
                "Synced",
              )?.status === "True",
          );
        },
        30_000,
      );
      // Each XR takes two or more reconciles (compose, then its own writes and its bucket's coming back); reading
      // fresh, each read the XR and its bucket: several GETs per XR (31-34 for these 6). From the caches only a read
      // racing the host's own write goes out.
      const n = (await gets()) - before;
      process.stderr.write(`host reads: ${n} GETs of XRs and buckets for ${names.length} XRs\n`);
      assert.ok(n / names.length <= 1, `${n} GETs of XRs and buckets for ${names.length} XRs`);
      // What Crossplane writes to a new XR in three updates (finalizer and label, Composition, references) goes in one patch.
      const p = (await patches()) - patchesBefore;
      process.stderr.write(`host writes: ${p} PATCHes of XRs for ${names.length} XRs\n`);
      assert.is(p, names.length, `${p} PATCHes of XRs for ${names.length} XRs`);
    } finally {
      await teardown(host, c);
    }
  },
);

H("the events Crossplane's XR reconciler writes of its own: the Composition selected, each composed resource not ready yet", async () => {
  const { c, host, objects, events } = await setupWithEvents();
  try {
    await until("a bucket", async () => (await listBuckets(objects)).length === 1, 10_000);
    const seen = async () => (await events("team-a")).map((e: any) => `${e.type} ${e.reason}: ${e.message}`);
    await until("the events", async () => (await seen()).some((e) => e.includes("is not yet ready")), 10_000);
    // Worded as crossplane v2.4.0's internal/controller/apiextensions/composite/reconciler.go words them; the real tier
    // (test/crossplane/functions.test.ts) compares the whole list with real Crossplane's.
    const all = await seen();
    assert.ok(all.includes("Normal SelectComposition: Successfully selected composition: xbuckets"), all.join("\n"));
    assert.ok(all.includes('Normal ComposeResources: Composed resource "bucket-logs" is not yet ready'), all.join("\n"));
    assert.not.ok(
      all.some((e) => e.includes('"bucket-assets" is not yet ready')),
      "bucket-assets is not composed yet",
    );
  } finally {
    await teardown(host, c);
  }
});
H(
  "kubectl delete --cascade=foreground: the XR says Kubernetes deletes its composed resources at once, and how to keep the order",
  async () => {
    const { c, host, objects, events } = await setupWithEvents();
    try {
      await until("a bucket", async () => (await listBuckets(objects)).length === 1, 10_000);
      const [b] = await listBuckets(objects);
      // The provider holds the bucket with its finalizer, so the XR stays while it is deleted.
      await objects.patchClusterCustomObject(
        { ...BUCKETS, name: b.metadata.name, body: { metadata: { finalizers: ["finalizer.managedresource.crossplane.io"] } } },
        merge,
      );
      await objects.deleteClusterCustomObject({ ...XBUCKETS, name: "team-a", propagationPolicy: "Foreground" });
      await until(
        "the Ready message",
        async () =>
          /deleted with --cascade=foreground: .*--cascade=background to keep the order/.test(
            cond(await xrOf(objects), "Ready")?.message ?? "",
          ),
        10_000,
      );
      assert.ok((await events("team-a")).some((e: any) => e.reason === "ForegroundDeletion" && e.type === "Warning"));
      await objects.patchClusterCustomObject({ ...BUCKETS, name: b.metadata.name, body: { metadata: { finalizers: [] } } }, merge);
    } finally {
      await teardown(host, c);
    }
  },
);

H("failure mode 2: deleting the XR says Deleting and names the blocker at once; removing the finalizer completes it", async () => {
  const { c, host, objects } = await setup();
  try {
    await until("a bucket", async () => (await listBuckets(objects)).length === 1, 10_000);
    const [b] = await listBuckets(objects);
    // The provider holds the bucket with its finalizer.
    await objects.patchClusterCustomObject(
      { ...BUCKETS, name: b.metadata.name, body: { metadata: { finalizers: ["finalizer.managedresource.crossplane.io"] } } },
      merge,
    );
    await objects.deleteClusterCustomObject({ ...XBUCKETS, name: "team-a" });
    await until(
      "Deleting naming the blocker",
      async () => {
        const r = cond(await xrOf(objects), "Ready");
        return r?.reason === "Deleting" && /bucket-logs \(finalizers: finalizer\.managedresource\.crossplane\.io\)/.test(r.message);
      },
      10_000,
    );
    const xr = await xrOf(objects);
    assert.equal(xr.status.deletion, {
      remaining: 1,
      deleted: 0,
      total: 1,
      since: xr.metadata.deletionTimestamp,
      order: [["bucket-logs"]],
    });
    await objects.patchClusterCustomObject({ ...BUCKETS, name: b.metadata.name, body: { metadata: { finalizers: [] } } }, merge);
    await until(
      "the XR to be gone",
      async () => {
        try {
          await xrOf(objects);
          return false;
        } catch (err) {
          return (err as { code: number }).code === 404;
        }
      },
      10_000,
    );
    assert.equal(await listBuckets(objects), []);
  } finally {
    await teardown(host, c);
  }
});

// Durable is the embedded server's --data-dir; kube-apiserver's etcd always is.
for (const durable of REAL_APISERVER ? [false] : [false, true]) {
  H(
    `the composed kind's CRD deleted under a live XR${durable ? " (a durable dev-cluster, --data-dir)" : ""}: the XR turns Synced=False within seconds, naming the kind`,
    async () => {
      const dir = durable ? mkdtempSync(join(tmpdir(), "xfn-host-crd-")) : undefined;
      const { c, host, objects, crds } = await setup(dir ? { dataFile: join(dir, "state.json") } : {});
      try {
        await until("a bucket", async () => (await listBuckets(objects)).length === 1, 10_000);
        await until("XR synced", async () => cond(await xrOf(objects), "Synced")?.status === "True", 10_000);
        await crds.deleteCustomResourceDefinition({ name: "buckets.s3.aws.upbound.io" });
        // Within seconds: the bucket's DELETED event starts the XR's reconcile (before, with --data-dir, only the resync did, ~1 min).
        await until("XR Synced=False", async () => cond(await xrOf(objects), "Synced")?.status === "False", 5_000);
        const message = cond(await xrOf(objects), "Synced").message;
        // In the API server's words: the embedded one's Status, kube-apiserver's plain "404 page not found" (docs/dev-cluster.md).
        assert.match(
          message,
          /^cannot apply Bucket \S+ \(resource bucket-logs\): (the server could not find the requested resource|404 page not found \(HTTP 404\))/,
          message,
        );
      } finally {
        await teardown(host, c);
        if (dir) rmSync(dir, { recursive: true, force: true });
      }
    },
  );
}

H("failure mode 1: the composed kind's CRD goes first, then the XRD; the controller stops cleanly, no error, no hang", async () => {
  const { c, host, objects, crds, mem } = await setup();
  try {
    await until("a bucket", async () => (await listBuckets(objects)).length === 1, 10_000);
    await until("the controller", () => host.controllerKinds().length === 1);
    await crds.deleteCustomResourceDefinition({ name: "buckets.s3.aws.upbound.io" });
    await sleep(300);
    await objects.deleteClusterCustomObject({
      group: "apiextensions.crossplane.io",
      version: "v2",
      plural: "compositeresourcedefinitions",
      name: "xbuckets.example.xfn.dev",
    });
    await until("the controller to stop", () => host.controllerKinds().length === 0, 5000);
    assert.match(mem.text(), /stopped XR controller/);
    const errors = mem.lines().filter((l) => l["level"] === "error");
    assert.equal(errors, []);
    assert.not.ok(
      host.watches.watching().some((k) => k.plural === "buckets" || k.plural === "xbuckets"),
      "no watch left on either kind",
    );
  } finally {
    await teardown(host, c);
  }
});

H("failure mode 3: an XR created long after its XRD, with watch collection running often, is reconciled without a loop", async () => {
  const { c, host, objects, kc, mem } = await setup({ watchGcIntervalMs: 50, withXR: false });
  try {
    await until("the controller", () => host.controllerKinds().length === 1);
    await sleep(500); // ten collection intervals
    await applyManifests(kc, loadDocs(join(EX, "xr.yaml")), mem.log);
    await until("XR synced", async () => cond(await xrOf(objects), "Synced")?.status === "True", 10_000);
    await sleep(1000);
    const runs = host.queue.processed.get("xbuckets.example.xfn.dev|/team-a") ?? 0;
    assert.ok(runs >= 1 && runs <= 8, `reconciled ${runs} times in about a second: no enqueue loop`);
    assert.ok(
      host.watches.watching().some((k) => k.plural === "xbuckets"),
      "the XR kind's watch is still there",
    );
  } finally {
    await teardown(host, c);
  }
});

H("failure mode 5: three nested levels converge, without a restart, once the deepest status appears", async () => {
  const h = await fixtureHost("nested");
  const { c, mem, host, objects } = h;
  const kind = (plural: string) => ({ group: "nest.example.org", version: "v1", plural });
  const list = async (k: { group: string; version: string; plural: string }) =>
    ((await objects.listClusterCustomObject(k)) as { items: any[] }).items;
  try {
    await host.start();
    await nestedUp(h);
    await sleep(500);
    assert.equal(await list(kind("xclusters")), [], "the cluster waits for the network's status");
    const platform = (await list(kind("xplatforms")))[0];
    assert.match(JSON.stringify(platform.status.waiting.cluster.for), /vpc\.status\.privateSubnet1ID/);
    // The deletion order the lifecycle steps record is not in this XRD's schema: dropped, as an update would be, and said once.
    const undeclared = mem.lines().filter((l) => String(l["msg"]).startsWith("the pipeline wrote status.deletion,"));
    assert.is(undeclared.length, 1, "one warning for the undeclared status.deletion");
    assert.is(platform.status.deletion, undefined);
    // The provider finally reports the subnet's ID: the network's status fills in, then the platform proceeds.
    const [subnet] = await list({ group: "ec2.example.org", version: "v1", plural: "subnets" });
    await objects.patchClusterCustomObjectStatus(
      {
        group: "ec2.example.org",
        version: "v1",
        plural: "subnets",
        name: subnet.metadata.name,
        body: { status: { atProvider: { id: "subnet-0a1b2c" } } },
      },
      merge,
    );
    await until(
      "the network's status",
      async () => (await list(kind("xnetworks")))[0]?.status?.privateSubnet1ID === "subnet-0a1b2c",
      10_000,
    );
    await until("the cluster to be created", async () => (await list(kind("xclusters"))).length === 1, 10_000);
    await until("the platform to stop waiting", async () => (await list(kind("xplatforms")))[0].status.waiting === undefined, 10_000);
    assert.not.ok(mem.text().includes("not found"), "no 'field not found' failure on the way");
  } finally {
    await host.stop();
    await c.stop();
  }
});

H(
  "chooses the Composition as Crossplane does (enforced, the XR's ref, the XRD's default, labels) and says on the XR why it cannot",
  async () => {
    const { c, host, objects, kc, mem } = await setup({ withXR: false });
    const XRDS = {
      group: "apiextensions.crossplane.io",
      version: "v2",
      plural: "compositeresourcedefinitions",
      name: "xbuckets.example.xfn.dev",
    };
    const comp = (name: string, labels: Record<string, string>, kind: string, region: string) => ({
      obj: {
        apiVersion: "apiextensions.crossplane.io/v1",
        kind: "Composition",
        metadata: { name, labels },
        spec: {
          compositeTypeRef: { apiVersion: "example.xfn.dev/v1alpha1", kind },
          mode: "Pipeline",
          pipeline: [
            {
              step: "compose",
              functionRef: { name: "function-hello" },
              input: { apiVersion: "hello.xfn.dev/v1alpha1", kind: "Input", defaultRegion: region },
            },
          ],
        },
      },
      source: "test",
    });
    const xr = (name: string, crossplane: Record<string, unknown> = {}) =>
      objects.createClusterCustomObject({
        ...XBUCKETS,
        body: {
          apiVersion: "example.xfn.dev/v1alpha1",
          kind: "XBuckets",
          metadata: { name },
          spec: { buckets: [{ name: "logs" }], crossplane },
        },
      });
    const syncedMessage = async (name: string) =>
      cond(await objects.getClusterCustomObject({ ...XBUCKETS, name }), "Synced")?.message ?? "";
    // The region of the bucket composed for an XR tells which Composition composed it.
    const regionOf = async (name: string) =>
      (await listBuckets(objects)).find((b) => b.metadata.ownerReferences?.[0]?.name === name)?.spec?.forProvider?.region;
    try {
      // examples/composition.yaml (xbuckets, default region us-east-1) and two more.
      await applyManifests(
        kc,
        [comp("xbuckets-south", { zone: "south" }, "XBuckets", "ap-south-1"), comp("for-xother", {}, "XOther", "eu-north-1")],
        mem.log,
      );
      // Before any XR: with only examples/composition.yaml seen, "ambiguous" would be composed by it.
      await until(
        "the host to see all three Compositions",
        () => host.watches.cached({ group: "apiextensions.crossplane.io", version: "v1", plural: "compositions" }).length === 3,
      );

      await xr("ambiguous");
      await xr("by-label", { compositionSelector: { matchLabels: { zone: "south" } } });
      await xr("no-match", { compositionSelector: { matchLabels: { zone: "mars" } } });
      await xr("wrong-kind", { compositionRef: { name: "for-xother" } });
      await xr("missing", { compositionRef: { name: "nowhere" } });
      // A malformed selector or reference never reaches the host: the XR's CRD (the XRD's, as Crossplane makes it) refuses it.
      const refusal = async (name: string, crossplane: Record<string, unknown>) => {
        try {
          await xr(name, crossplane);
        } catch (err) {
          return [(err as { code?: number }).code, JSON.parse((err as { body: string }).body).message];
        }
        return [201, "created"];
      };
      assert.equal(await refusal("bad-selector", { compositionSelector: { matchLabels: "zone=south" } }), [
        422,
        'XBuckets.example.xfn.dev "bad-selector" is invalid: spec.crossplane.compositionSelector.matchLabels: Invalid value: "string": spec.crossplane.compositionSelector.matchLabels in body must be of type object: "string"',
      ]);
      assert.equal(await refusal("bad-ref", { compositionRef: "xbuckets" }), [
        422,
        'XBuckets.example.xfn.dev "bad-ref" is invalid: spec.crossplane.compositionRef: Invalid value: "string": spec.crossplane.compositionRef in body must be of type object: "string"',
      ]);
      await until("by-label composed by xbuckets-south", async () => (await regionOf("by-label")) === "ap-south-1", 10_000);
      await until(
        "ambiguous says why",
        async () =>
          /2 Compositions for example\.xfn\.dev\/v1alpha1 XBuckets \(xbuckets, xbuckets-south\)/.test(await syncedMessage("ambiguous")),
        10_000,
      );
      await until(
        "no-match says why",
        async () =>
          (await syncedMessage("no-match")).includes('no Composition for example.xfn.dev/v1alpha1 XBuckets with labels {"zone":"mars"}'),
        10_000,
      );
      await until(
        "wrong-kind says why",
        async () =>
          (await syncedMessage("wrong-kind")).includes(
            'Composition "for-xother" composes example.xfn.dev/v1alpha1 XOther, not example.xfn.dev/v1alpha1 XBuckets',
          ),
        10_000,
      );
      await until("missing says why", async () => (await syncedMessage("missing")).includes('Composition "nowhere" not found'), 10_000);
      assert.is(await regionOf("ambiguous"), undefined, "nothing composed while no Composition is chosen");
      const refOf = async (name: string) =>
        ((await objects.getClusterCustomObject({ ...XBUCKETS, name })) as any).spec.crossplane?.compositionRef?.name;
      assert.is(await refOf("by-label"), "xbuckets-south", "the choice is recorded on the XR, as Crossplane does");
      assert.is(await refOf("ambiguous"), undefined);

      // The XRD's default settles the XR that chose nothing (it is retried with backoff).
      await objects.patchClusterCustomObject({ ...XRDS, body: { spec: { defaultCompositionRef: { name: "xbuckets-south" } } } }, merge);
      await until("ambiguous composed by the default", async () => (await regionOf("ambiguous")) === "ap-south-1", 10_000);
      await until(
        "ambiguous synced",
        async () => cond(await objects.getClusterCustomObject({ ...XBUCKETS, name: "ambiguous" }), "Synced")?.status === "True",
        10_000,
      );
      assert.is(await refOf("ambiguous"), "xbuckets-south");

      // An enforced Composition wins over the XR's own choice.
      await objects.patchClusterCustomObject({ ...XRDS, body: { spec: { enforcedCompositionRef: { name: "xbuckets-south" } } } }, merge);
      await xr("enforced", { compositionRef: { name: "xbuckets" } });
      await until("enforced composed by xbuckets-south", async () => (await regionOf("enforced")) === "ap-south-1", 10_000);
      assert.is(await refOf("enforced"), "xbuckets-south", "the enforced Composition replaces the XR's own choice");
    } finally {
      await teardown(host, c);
    }
  },
);

H("a composed resource named __proto__ is observed like any other: its status reaches the function", async () => {
  const { c, kc, mem, host, objects } = await fixtureHost("proto-name");
  const STORES = { group: "example.org", version: "v1", plural: "xstores" };
  const BUCKETS_NS = { group: "storage.example.org", version: "v1", plural: "buckets" };
  const buckets = async () =>
    ((await objects.listNamespacedCustomObject({ ...BUCKETS_NS, namespace: "team-a" })) as { items: any[] }).items;
  try {
    await host.start();
    await applyManifests(
      kc,
      [
        ...loadDocs(join(ROOT, "test/fixtures/namespaced/manifests.yaml")),
        { obj: { apiVersion: "v1", kind: "Namespace", metadata: { name: "team-a" } }, source: "test" },
        {
          obj: { apiVersion: "example.org/v1", kind: "XStore", metadata: { name: "shop", namespace: "team-a" }, spec: {} },
          source: "test",
        },
      ],
      mem.log,
    );
    await until("the bucket", async () => (await buckets()).length === 1, 10_000);
    const [b] = await buckets();
    assert.is(b.metadata.annotations["crossplane.io/composition-resource-name"], "__proto__");
    await objects.patchNamespacedCustomObjectStatus(
      {
        ...BUCKETS_NS,
        namespace: "team-a",
        name: b.metadata.name,
        body: { status: { atProvider: { id: "bkt-1" }, conditions: [{ type: "Ready", status: "True", reason: "Available" }] } },
      },
      merge,
    );
    await until(
      "the XR Ready with the bucket's ID",
      async () => {
        const x = (await objects.getNamespacedCustomObject({ ...STORES, namespace: "team-a", name: "shop" })) as any;
        return x.status?.bucketID === "bkt-1" && cond(x, "Ready")?.status === "True";
      },
      10_000,
    );
    assert.is((await buckets()).length, 1, "observed, so not composed twice");
  } finally {
    await teardown(host, c);
  }
});

H(
  "namespaced XRs (a v2 XRD's default): composed in the XR's namespace, two XRs of one name kept apart, status and deletion per namespace",
  async () => {
    const { c, kc, mem, host, objects, dir } = await fixtureHost("namespaced");
    const STORES = { group: "example.org", version: "v1", plural: "xstores" };
    const BUCKETS_NS = { group: "storage.example.org", version: "v1", plural: "buckets" };
    const buckets = async (namespace: string) =>
      ((await objects.listNamespacedCustomObject({ ...BUCKETS_NS, namespace })) as { items: any[] }).items;
    const store = (namespace: string) => objects.getNamespacedCustomObject({ ...STORES, namespace, name: "shop" }) as Promise<any>;
    try {
      await host.start();
      const xr = (namespace: string, size: number) => ({
        obj: { apiVersion: "example.org/v1", kind: "XStore", metadata: { name: "shop", namespace }, spec: { size } },
        source: "test",
      });
      const ns = (name: string) => ({ obj: { apiVersion: "v1", kind: "Namespace", metadata: { name } }, source: "test" });
      await applyManifests(
        kc,
        [...loadDocs(join(dir, "manifests.yaml")), ns("team-a"), ns("team-b"), xr("team-a", 1), xr("team-b", 2)],
        mem.log,
      );
      await until(
        "a bucket in each namespace",
        async () => (await buckets("team-a")).length === 1 && (await buckets("team-b")).length === 1,
        10_000,
      );
      const [a] = await buckets("team-a");
      const [b] = await buckets("team-b");
      assert.is(a.spec.size, 1);
      assert.is(b.spec.size, 2);
      const owner = a.metadata.ownerReferences[0];
      assert.equal([owner.kind, owner.name, owner.uid, owner.controller], ["XStore", "shop", (await store("team-a")).metadata.uid, true]);
      // A namespaced XR's references carry no namespace, as Crossplane writes them: its resources are in its own.
      assert.equal((await store("team-a")).spec.crossplane.resourceRefs, [
        { apiVersion: "storage.example.org/v1", kind: "Bucket", name: a.metadata.name },
      ]);

      // The provider reports team-a's bucket: team-a's XR hears of it at once; team-b's does not.
      await objects.patchNamespacedCustomObjectStatus(
        {
          ...BUCKETS_NS,
          namespace: "team-a",
          name: a.metadata.name,
          body: { status: { atProvider: { id: "bkt-a" }, conditions: [{ type: "Ready", status: "True", reason: "Available" }] } },
        },
        merge,
      );
      await until(
        "team-a's XR Ready with the bucket's ID",
        async () => {
          const x = await store("team-a");
          return x.status?.bucketID === "bkt-a" && cond(x, "Ready")?.status === "True";
        },
        10_000,
      );
      assert.is((await store("team-b")).status?.bucketID, undefined);

      // Deleting team-a's XR takes only team-a's bucket. This Composition has no
      // deletion step, so the host deletes everything at once and says so; the
      // provider's finalizer holds the bucket for a while.
      await objects.patchNamespacedCustomObject(
        { ...BUCKETS_NS, namespace: "team-a", name: a.metadata.name, body: { metadata: { finalizers: ["example.org/hold"] } } },
        merge,
      );
      await objects.deleteNamespacedCustomObject({ ...STORES, namespace: "team-a", name: "shop" });
      await until(
        "team-a's XR to say it is deleting the bucket",
        async () => {
          const r = cond(await store("team-a"), "Ready");
          return r?.reason === "Deleting" && r.message === "deleting 1 composed resource: bucket (finalizers: example.org/hold)";
        },
        10_000,
      );
      assert.ok((await buckets("team-a"))[0].metadata.deletionTimestamp, "the bucket's deletion was requested");
      await objects.patchNamespacedCustomObject(
        { ...BUCKETS_NS, namespace: "team-a", name: a.metadata.name, body: { metadata: { finalizers: null } } },
        merge,
      );
      await until(
        "team-a's bucket and XR gone",
        async () => {
          if ((await buckets("team-a")).length > 0) return false;
          try {
            await store("team-a");
            return false;
          } catch (err) {
            return (err as { code: number }).code === 404;
          }
        },
        10_000,
      );
      assert.is((await buckets("team-b")).length, 1);
      assert.is(cond(await store("team-b"), "Synced")?.status, "True");
    } finally {
      await host.stop();
      await c.stop();
    }
  },
);

H.run();
