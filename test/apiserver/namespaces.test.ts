// Namespaces as kube-apiserver and its namespace controller keep them, ported
// from kubernetes/kubernetes: pkg/registry/core/namespace/strategy.go
// (04a46264: PrepareForCreate, PrepareForUpdate), storage/storage.go
// (94341df3: Delete), pkg/controller/namespace/deletion/
// namespaced_resources_deleter.go (023feb4a) and status_condition_utils.go
// (0355f448: the conditions and their texts), and apiserver's
// admission/plugin/namespace/lifecycle/admission.go (04791b49: creates in a
// terminating namespace, immortal namespaces). Over HTTP and with the real
// kubectl.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster } from "../../src/apiserver/server.js";
import { caller, crd, kubectlFor } from "../support/cluster.js";
import { needs } from "../support/needs.js";

const N = suite("dev-cluster: namespaces");
const NK = needs(N, "kubectl");

let scratch: string;
N.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-ns-"));
});
N.after(() => rmSync(scratch, { recursive: true, force: true }));

const NS = "/api/v1/namespaces";
const ns = (name: string, spec?: unknown) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name }, ...(spec ? { spec } : {}) });
const cm = (name: string, extra: Record<string, unknown> = {}) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, ...extra } });
const widget = (name: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: "example.org/v1",
  kind: "Widget",
  metadata: { name, ...extra },
});
const condition = (o: any, type: string) => (o.status.conditions as any[]).find((c) => c.type === type);

/** cluster serves Widgets (namespaced) besides the built-ins. */
async function cluster(dataFile?: string) {
  const c = await startDevCluster(dataFile ? { dataFile } : {});
  const call = caller(c);
  const made = await call(
    "POST",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    crd("example.org", "Widget", "widgets", "Namespaced"),
  );
  assert.ok([201, 409].includes(made.status), JSON.stringify(made.body));
  return { c, call };
}

N("a namespace is created Active, with the kubernetes finalizer and its name label; updates keep both", async () => {
  const { c, call } = await cluster();
  try {
    const made = await call("POST", NS, ns("team-a", { finalizers: ["example.org/audit"] }));
    assert.is(made.status, 201);
    assert.equal(made.body.status, { phase: "Active" });
    assert.equal(made.body.spec.finalizers, ["example.org/audit", "kubernetes"]);
    assert.is(made.body.metadata.labels["kubernetes.io/metadata.name"], "team-a");
    // Core kinds keep no generation (their strategies set none); custom resources do.
    assert.is(made.body.metadata.generation, undefined);
    assert.is((await call("POST", `${NS}/team-a/configmaps`, cm("x"))).body.metadata.generation, undefined);
    assert.is((await call("POST", "/apis/example.org/v1/namespaces/team-a/widgets", widget("w"))).body.metadata.generation, 1);
    // A client can change neither the finalizers nor the name label, nor the phase, by an update.
    const put = await call("PUT", `${NS}/team-a`, {
      ...ns("team-a", { finalizers: [] }),
      metadata: { name: "team-a", labels: { "kubernetes.io/metadata.name": "other", team: "a" } },
      status: { phase: "Terminating" },
    });
    assert.is(put.status, 200, JSON.stringify(put.body));
    assert.equal(put.body.spec.finalizers, ["example.org/audit", "kubernetes"]);
    assert.equal(put.body.metadata.labels, { "kubernetes.io/metadata.name": "team-a", team: "a" });
    assert.is(put.body.status.phase, "Active");
    // A bare finalizer name must be a standard one.
    const bad = await call("POST", NS, ns("team-b", { finalizers: ["audit"] }));
    assert.is(bad.status, 422);
    assert.match(
      bad.body.message,
      /spec\.finalizers: Invalid value: "audit": name is neither a standard finalizer name nor is it fully qualified/,
    );
  } finally {
    await c.stop();
  }
});

N("deleting a namespace deletes what is in it, honours finalizers, refuses new content, then the namespace goes", async () => {
  const { c, call } = await cluster();
  try {
    await call("POST", NS, ns("doomed"));
    for (const n of ["a", "b"]) assert.is((await call("POST", `${NS}/doomed/configmaps`, cm(n))).status, 201);
    assert.is(
      (await call("POST", "/apis/example.org/v1/namespaces/doomed/widgets", widget("held", { finalizers: ["example.org/hold"] }))).status,
      201,
    );
    assert.is((await call("POST", "/apis/example.org/v1/namespaces/doomed/widgets", widget("free"))).status, 201);
    // Something of the same name elsewhere is left alone.
    assert.is((await call("POST", `${NS}/default/configmaps`, cm("a"))).status, 201);
    const events: string[] = [];
    const stopWatch = new AbortController();
    const w = await fetch(`${c.url}${NS}?watch=true&fieldSelector=metadata.name%3Ddoomed&resourceVersion=${c.store.rv}`, {
      signal: stopWatch.signal,
    });
    const reading = (async () => {
      const text = new TextDecoder();
      for await (const chunk of w.body as any)
        for (const line of text.decode(chunk).split("\n").filter(Boolean)) events.push(JSON.parse(line).type);
    })().catch(() => {});

    const del = await call("DELETE", `${NS}/doomed`);
    assert.is(del.status, 200);
    assert.is(del.body.status.phase, "Terminating");
    assert.ok(del.body.metadata.deletionTimestamp);
    // The contents without finalizers are gone; the held one is deleting.
    assert.equal((await call("GET", `${NS}/doomed/configmaps`)).body.items, []);
    const held = await call("GET", "/apis/example.org/v1/namespaces/doomed/widgets");
    assert.equal(
      held.body.items.map((o: any) => o.metadata.name),
      ["held"],
    );
    assert.ok(held.body.items[0].metadata.deletionTimestamp);
    assert.is((await call("GET", `${NS}/default/configmaps/a`)).status, 200);
    // The namespace waits, saying why, as the namespace controller says it.
    const waiting = (await call("GET", `${NS}/doomed`)).body;
    assert.equal(waiting.spec.finalizers, ["kubernetes"]);
    assert.equal(condition(waiting, "NamespaceContentRemaining"), {
      type: "NamespaceContentRemaining",
      status: "True",
      reason: "SomeResourcesRemain",
      message: "Some resources are remaining: widgets.example.org has 1 resource instances",
      lastTransitionTime: condition(waiting, "NamespaceContentRemaining").lastTransitionTime,
    });
    assert.is(
      condition(waiting, "NamespaceFinalizersRemaining").message,
      "Some finalizers are remaining: example.org/hold in 1 resource instances",
    );
    assert.is(condition(waiting, "NamespaceDeletionContentFailure").status, "False");
    assert.is(condition(waiting, "NamespaceDeletionContentFailure").reason, "ContentDeleted");
    assert.is(waiting.status.conditions.length, 5);
    // Nothing new may be created in it; updates to what is there still go.
    const refused = await call("POST", `${NS}/doomed/configmaps`, cm("late"));
    assert.is(refused.status, 403);
    assert.is(refused.body.reason, "Forbidden");
    assert.is(
      refused.body.message,
      'configmaps "late" is forbidden: unable to create new content in namespace doomed because it is being terminated',
    );
    assert.equal(refused.body.details, {
      name: "late",
      group: "",
      kind: "configmaps",
      causes: [{ reason: "NamespaceTerminating", message: "namespace doomed is being terminated", field: "metadata.namespace" }],
    });
    const generated = await call("POST", "/apis/example.org/v1/namespaces/doomed/widgets", {
      ...widget(""),
      metadata: { generateName: "w-" },
    });
    assert.is(
      generated.body.message,
      "widgets.example.org is forbidden: unable to create new content in namespace doomed because it is being terminated",
    );
    // Deleting it again answers it as it is.
    const again = await call("DELETE", `${NS}/doomed`);
    assert.is(again.status, 200);
    assert.is(again.body.status.phase, "Terminating");
    // The last finalizer goes: so does the widget, then the namespace.
    const last = held.body.items[0];
    const freed = await call("PUT", "/apis/example.org/v1/namespaces/doomed/widgets/held", {
      ...last,
      metadata: { ...last.metadata, finalizers: [] },
    });
    assert.is(freed.status, 200, JSON.stringify(freed.body));
    assert.is((await call("GET", `${NS}/doomed`)).status, 404);
    // A namespace of the same name starts empty.
    await call("POST", NS, ns("doomed"));
    assert.equal((await call("GET", `${NS}/doomed/configmaps`)).body.items, []);
    assert.equal((await call("GET", "/apis/example.org/v1/namespaces/doomed/widgets")).body.items, []);
    await new Promise((r) => setTimeout(r, 100));
    stopWatch.abort();
    await reading;
    assert.equal(events.slice(0, 1), ["MODIFIED"]);
    assert.ok(events.includes("DELETED"), events.join(" "));
    assert.is(events.at(-1), "ADDED");
  } finally {
    await c.stop();
  }
});

N("a namespace with finalizers of its own waits for PUT finalize; default and kube-system may not be deleted", async () => {
  const { c, call } = await cluster();
  try {
    await call("POST", NS, ns("slow", { finalizers: ["example.org/wait"] }));
    await call("POST", `${NS}/slow/configmaps`, cm("x"));
    assert.is((await call("DELETE", `${NS}/slow`)).status, 200);
    const waiting = (await call("GET", `${NS}/slow`)).body;
    assert.equal(waiting.spec.finalizers, ["example.org/wait"], "the controller took its own finalizer off once empty");
    assert.is(waiting.status.phase, "Terminating");
    assert.is(condition(waiting, "NamespaceContentRemaining").status, "False");
    assert.is((await call("GET", `${NS}/slow/configmaps/x`)).status, 404);
    // finalize takes only PUT.
    assert.is((await call("POST", `${NS}/slow/finalize`, waiting)).status, 405);
    const done = await call("PUT", `${NS}/slow/finalize`, { ...waiting, spec: { finalizers: [] } });
    assert.is(done.status, 200, JSON.stringify(done.body));
    assert.is((await call("GET", `${NS}/slow`)).status, 404);
    for (const name of ["default", "kube-system"]) {
      const r = await call("DELETE", `${NS}/${name}`);
      assert.is(r.status, 403);
      assert.is(r.body.message, `namespaces "${name}" is forbidden: this namespace may not be deleted`);
      assert.is((await call("GET", `${NS}/${name}`)).body.status.phase, "Active");
    }
    // A dry run deletes nothing.
    await call("POST", NS, ns("kept"));
    const dry = await call("DELETE", `${NS}/kept?dryRun=All`);
    assert.is(dry.body.status.phase, "Terminating");
    assert.is((await call("GET", `${NS}/kept`)).body.status.phase, "Active");
  } finally {
    await c.stop();
  }
});

N("a terminating namespace is finished after a restart", async () => {
  const dataFile = join(mkdtempSync(join(scratch, "data-")), "state.json");
  let { c, call } = await cluster(dataFile);
  await call("POST", NS, ns("restart"));
  await call("POST", "/apis/example.org/v1/namespaces/restart/widgets", widget("held", { finalizers: ["example.org/hold"] }));
  await call("DELETE", `${NS}/restart`);
  await c.stop();
  ({ c, call } = await cluster(dataFile));
  try {
    assert.is((await call("GET", `${NS}/restart`)).body.status.phase, "Terminating");
    assert.is((await call("POST", `${NS}/restart/configmaps`, cm("late"))).status, 403);
    const held = (await call("GET", "/apis/example.org/v1/namespaces/restart/widgets/held")).body;
    await call("PUT", "/apis/example.org/v1/namespaces/restart/widgets/held", { ...held, metadata: { ...held.metadata, finalizers: [] } });
    assert.is((await call("GET", `${NS}/restart`)).status, 404);
  } finally {
    await c.stop();
  }
});

NK("kubectl delete namespace waits for its contents; kubectl create in a terminating one is refused", async () => {
  const { c, call } = await cluster();
  const kubectl = kubectlFor(c, scratch);
  try {
    assert.match((await kubectl("create", "namespace", "k1")).out, /namespace\/k1 created/);
    await kubectl("create", "configmap", "c1", "-n", "k1", "--from-literal=a=b");
    await call("POST", "/apis/example.org/v1/namespaces/k1/widgets", widget("held", { finalizers: ["example.org/hold"] }));
    // --wait=false: the namespace stays, Terminating, while the widget holds it.
    assert.match((await kubectl("delete", "namespace", "k1", "--wait=false")).out, /namespace "k1" deleted/);
    assert.match((await kubectl("get", "namespace", "k1")).out, /k1\s+Terminating/);
    const refused = await kubectl("create", "configmap", "c2", "-n", "k1");
    assert.is.not(refused.code, 0);
    assert.match(refused.out, /configmaps "c2" is forbidden: unable to create new content in namespace k1 because it is being terminated/);
    assert.match(
      (await kubectl("patch", "widget", "held", "-n", "k1", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')).out,
      /patched/,
    );
    assert.match((await kubectl("get", "namespace", "k1")).out, /NotFound|not found/);
    const immortal = await kubectl("delete", "namespace", "default");
    assert.match(immortal.out, /namespaces "default" is forbidden: this namespace may not be deleted/);
  } finally {
    await c.stop();
  }
});

N.run();
