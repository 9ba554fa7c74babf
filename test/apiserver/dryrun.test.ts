// dryRun=All on every write of the embedded API server, as kube-apiserver
// does it (kubernetes b5258a5 staging/src/k8s.io/apiserver/pkg/registry/
// generic/registry/dryrun.go, DryRunnableStorage; apimachinery's
// ValidateDryRun): admitted, defaulted, validated and answered as the write
// would be, and nothing stored, no watch event, no log record, no garbage
// collection. Over HTTP, and with the real kubectl (kubectl diff,
// --dry-run=server).
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster, type DevCluster } from "../../src/apiserver/server.js";
import { crd } from "../support/cluster.js";
import { needs } from "../support/needs.js";

const D = suite("dev-cluster: dry runs");
const DK = needs(D, "kubectl");

let scratch: string;
D.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-dryrun-"));
});
D.after(() => rmSync(scratch, { recursive: true, force: true }));

const BASE = "/apis/example.org/v1/namespaces/default/widgets";
const SCHEMA = {
  type: "object",
  properties: {
    spec: {
      type: "object",
      properties: { size: { type: "integer", minimum: 1 }, color: { type: "string", default: "blue" } },
    },
    status: { type: "object", properties: { phase: { type: "string" } } },
  },
};
const widget = (name: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: "example.org/v1",
  kind: "Widget",
  metadata: { name, labels: { app: "demo" }, ...extra },
  spec: { size: 1 },
});

/** cluster starts a dev-cluster (with a data file, so log records can be counted) serving Widgets with a default and a minimum. */
async function cluster(): Promise<{
  c: DevCluster;
  wal: string;
  call: (method: string, path: string, body?: unknown, type?: string) => Promise<any>;
}> {
  const dataFile = join(mkdtempSync(join(scratch, "data-")), "state.json");
  const c = await startDevCluster({ dataFile, compactAfter: 1_000_000 });
  const call = async (method: string, path: string, body?: unknown, type = "application/json") => {
    const r = await fetch(`${c.url}${path}`, {
      method,
      headers: { "Content-Type": type },
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
    });
    // A path nothing serves answers kube-apiserver's plain-text 404 page, not JSON.
    const text = await r.text();
    return { status: r.status, body: (r.headers.get("content-type")?.startsWith("application/json") ? JSON.parse(text) : text) as any };
  };
  const versions = [{ name: "v1", served: true, storage: true, subresources: { status: {} }, schema: { openAPIV3Schema: SCHEMA } }];
  assert.is(
    (
      await call(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd("example.org", "Widget", "widgets", "Namespaced", versions),
      )
    ).status,
    201,
  );
  for (let i = 0; ; i++) {
    if ((await call("GET", BASE)).status === 200) break;
    if (i > 200) throw new Error("widgets never served");
    await new Promise((r) => setTimeout(r, 10));
  }
  return { c, call, wal: `${dataFile}.wal` };
}

/** unchanged takes what a watch, the store and the log hold, and checks later that nothing was added. */
async function unchanged({ c, call, wal }: Awaited<ReturnType<typeof cluster>>) {
  const rv = c.store.rv;
  const list = JSON.stringify((await call("GET", BASE)).body.items);
  const log = statSync(wal).size;
  return async (what: string) => {
    assert.is(c.store.rv, rv, `${what}: no new resourceVersion`);
    assert.is(JSON.stringify((await call("GET", BASE)).body.items), list, `${what}: the objects are as they were`);
    assert.is(statSync(wal).size, log, `${what}: no log record`);
  };
}

D(
  "create: the object as it would be stored (defaulted, uid, creationTimestamp, generation; no resourceVersion), and nothing kept",
  async () => {
    const k = await cluster();
    const { c, call } = k;
    try {
      const check = await unchanged(k);
      const dry = await call("POST", `${BASE}?dryRun=All`, widget("w1"));
      assert.is(dry.status, 201, JSON.stringify(dry.body));
      assert.is(dry.body.spec.color, "blue", "defaulted");
      assert.match(dry.body.metadata.uid, /^[0-9a-f-]{36}$/);
      assert.ok(dry.body.metadata.creationTimestamp);
      assert.is(dry.body.metadata.generation, 1);
      assert.is(dry.body.metadata.resourceVersion, undefined, "storage assigns resourceVersions; a dry run has none");
      await check("dry-run create");
      assert.is((await call("GET", `${BASE}/w1`)).status, 404);
      // Refused as the write would be.
      const bad = await call("POST", `${BASE}?dryRun=All`, { ...widget("w2"), spec: { size: 0 } });
      const real = await call("POST", BASE, { ...widget("w2"), spec: { size: 0 } });
      assert.is(bad.status, 422);
      assert.equal(bad.body, real.body);
      // A name that exists is a conflict, as in DryRunnableStorage.Create.
      assert.is((await call("POST", BASE, widget("w3"))).status, 201);
      const again = await call("POST", `${BASE}?dryRun=All`, widget("w3"));
      assert.is(again.status, 409);
      assert.match(again.body.message, /widgets\.example\.org "w3" already exists/);
    } finally {
      await c.stop();
    }
  },
);

D("update, merge and JSON patch, apply, status: answered at the version they replace; nothing kept", async () => {
  const k = await cluster();
  const { c, call } = k;
  try {
    const created = (await call("POST", BASE, widget("w1"))).body;
    const rv = created.metadata.resourceVersion;
    const check = await unchanged(k);
    const put = await call("PUT", `${BASE}/w1?dryRun=All`, { ...created, spec: { size: 5 } });
    assert.is(put.status, 200);
    assert.equal([put.body.spec, put.body.metadata.resourceVersion, put.body.metadata.generation], [{ size: 5, color: "blue" }, rv, 2]);
    const merge = await call("PATCH", `${BASE}/w1?dryRun=All`, { spec: { size: 7 } }, "application/merge-patch+json");
    assert.equal([merge.status, merge.body.spec.size], [200, 7]);
    const json = await call(
      "PATCH",
      `${BASE}/w1?dryRun=All`,
      [{ op: "replace", path: "/spec/size", value: 9 }],
      "application/json-patch+json",
    );
    assert.equal([json.status, json.body.spec.size], [200, 9]);
    // force: the create's manager owns spec.size (kube's field manager records non-apply writes too).
    const apply = await call(
      "PATCH",
      `${BASE}/w1?dryRun=All&fieldManager=me&force=true`,
      { apiVersion: "example.org/v1", kind: "Widget", metadata: { name: "w1" }, spec: { size: 3 } },
      "application/apply-patch+yaml",
    );
    assert.equal([apply.status, apply.body.spec.size], [200, 3]);
    assert.ok(
      apply.body.metadata.managedFields.some((f: any) => f.manager === "me"),
      "the apply's managed fields, as they would be",
    );
    const newApply = await call(
      "PATCH",
      `/apis/example.org/v1/namespaces/default/widgets/w9?dryRun=All&fieldManager=me`,
      { apiVersion: "example.org/v1", kind: "Widget", metadata: { name: "w9" }, spec: { size: 3 } },
      "application/apply-patch+yaml",
    );
    assert.is(newApply.status, 201, "an apply that would create");
    const status = await call("PATCH", `${BASE}/w1/status?dryRun=All`, { status: { phase: "Ready" } }, "application/merge-patch+json");
    assert.equal([status.status, status.body.status], [200, { phase: "Ready" }]);
    const invalid = await call("PATCH", `${BASE}/w1?dryRun=All`, { spec: { size: -1 } }, "application/merge-patch+json");
    assert.is(invalid.status, 422);
    await check("dry-run updates");
    assert.equal((await call("GET", `${BASE}/w1`)).body.spec, { size: 1, color: "blue" });
    assert.is((await call("GET", `${BASE}/w9`)).status, 404);
  } finally {
    await c.stop();
  }
});

D("delete and deletecollection: answered as they would be, finalizers set down; nothing removed, no dependent collected", async () => {
  const k = await cluster();
  const { c, call } = k;
  try {
    const owner = (await call("POST", BASE, widget("owner"))).body;
    const held = (await call("POST", BASE, widget("held", { finalizers: ["example.org/hold"] }))).body;
    const ref = { apiVersion: "example.org/v1", kind: "Widget", name: "owner", uid: owner.metadata.uid };
    assert.is((await call("POST", BASE, widget("child", { ownerReferences: [ref] }))).status, 201);
    const check = await unchanged(k);
    const gone = await call("DELETE", `${BASE}/owner?dryRun=All`);
    // Removed at once: a Status naming it, as kube-apiserver answers (dry run or not; the differential tier's kubectl/configmap).
    assert.equal(
      [gone.status, gone.body.kind, gone.body.status, gone.body.details],
      [200, "Status", "Success", { name: "owner", group: "example.org", kind: "widgets", uid: owner.metadata.uid }],
    );
    const holding = await call("DELETE", `${BASE}/held?dryRun=All`);
    assert.is(holding.status, 200);
    assert.ok(holding.body.metadata.deletionTimestamp, "as it would stay: being deleted");
    assert.is(holding.body.metadata.resourceVersion, held.metadata.resourceVersion);
    // DeleteOptions in the body, as kubectl sends them.
    const options = await call("DELETE", `${BASE}/owner`, { kind: "DeleteOptions", apiVersion: "v1", dryRun: ["All"] });
    assert.equal([options.status, options.body.details.name], [200, "owner"]);
    const foreground = await call("DELETE", `${BASE}/owner?dryRun=All&propagationPolicy=Foreground`);
    assert.equal(foreground.body.metadata.finalizers, ["foregroundDeletion"]);
    const all = await call("DELETE", `${BASE}?dryRun=All&labelSelector=app%3Ddemo`);
    assert.is(all.status, 200);
    assert.equal(all.body.items.map((i: any) => i.metadata.name).sort(), ["child", "held", "owner"]);
    await new Promise((r) => setTimeout(r, 100)); // time for a garbage collection that must not come
    await check("dry-run deletes");
    // For real: the collection is deleted, the owner's dependent with it.
    const real = await call("DELETE", `${BASE}?labelSelector=app%3Ddemo`);
    assert.equal(real.body.items.map((i: any) => i.metadata.name).sort(), ["child", "held", "owner"]);
    assert.equal(
      (await call("GET", BASE)).body.items.map((i: any) => i.metadata.name),
      ["held"],
      "held by its finalizer",
    );
  } finally {
    await c.stop();
  }
});

D("a CRD created in a dry run serves nothing; a watch sees no dry-run write", async () => {
  const k = await cluster();
  const { c, call } = k;
  try {
    const ctrl = new AbortController();
    const events: string[] = [];
    const watch = fetch(`${c.url}${BASE}?watch=true&resourceVersion=${c.store.rv}`, { signal: ctrl.signal }).then(async (r) => {
      const reader = r.body!.getReader();
      let text = "";
      for (;;) {
        const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
        if (done) return;
        text += Buffer.from(value!).toString();
        for (const line of text.split("\n").slice(0, -1)) events.push(JSON.parse(line).type + " " + JSON.parse(line).object.metadata.name);
        text = text.slice(text.lastIndexOf("\n") + 1);
      }
    });
    await call("POST", `${BASE}?dryRun=All`, widget("ghost"));
    const gadgets = crd("example.org", "Gadget", "gadgets", "Namespaced");
    assert.is((await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=All", gadgets)).status, 201);
    await call("POST", BASE, widget("real"));
    for (let i = 0; i < 200 && events.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(events, ["ADDED real"], "the first event is the real write");
    assert.is((await call("GET", "/apis/example.org/v1/namespaces/default/gadgets")).status, 404);
    assert.is((await call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.org")).status, 404);
    ctrl.abort();
    await watch.catch(() => {});
  } finally {
    await c.stop();
  }
});

D("dryRun other than All is 422 on the write's options, as kube-apiserver's ValidateDryRun says", async () => {
  const k = await cluster();
  const { c, call } = k;
  try {
    const bad = await call("POST", `${BASE}?dryRun=true`, widget("w1"));
    assert.is(bad.status, 422);
    assert.is(
      bad.body.message,
      'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"true"}: supported values: "All"',
    );
    const del = await call("DELETE", `${BASE}/w1?dryRun=All&dryRun=x`);
    assert.is(del.status, 422);
    assert.match(del.body.message, /^DeleteOptions\.meta\.k8s\.io "" is invalid: dryRun: Unsupported value: \[\]string\{"All", "x"\}/);
    assert.is((await call("GET", `${BASE}/w1`)).status, 404);
  } finally {
    await c.stop();
  }
});

DK("kubectl diff and --dry-run=server (create, apply, apply --server-side, delete) leave the cluster as it was", async () => {
  const k = await cluster();
  const { c, call } = k;
  try {
    const kubeconfig = join(scratch, "kubeconfig");
    writeFileSync(kubeconfig, c.kubeconfig());
    // Not execFileSync: the API server runs in this process, and must keep answering.
    const kubectl = async (...args: string[]) =>
      (
        await promisify(execFile)("kubectl", ["--kubeconfig", kubeconfig, "--cache-dir", join(scratch, "cache"), ...args], {
          encoding: "utf8",
        })
      ).stdout;
    const file = join(scratch, "w.json");
    writeFileSync(file, JSON.stringify(widget("k1")));
    assert.match(await kubectl("create", "-f", file, "--dry-run=server"), /widget\.example\.org\/k1 created \(server dry run\)/);
    assert.match(await kubectl("apply", "-f", file, "--dry-run=server"), /widget\.example\.org\/k1 created \(server dry run\)/);
    assert.match(await kubectl("apply", "--server-side", "-f", file, "--dry-run=server"), /serverside-applied \(server dry run\)/);
    assert.is((await call("GET", `${BASE}/k1`)).status, 404);
    await kubectl("apply", "-f", file);
    const check = await unchanged(k);
    writeFileSync(file, JSON.stringify({ ...widget("k1"), spec: { size: 4 } }));
    let diff = "";
    try {
      await kubectl("diff", "-f", file);
    } catch (err) {
      diff = String((err as { stdout?: string }).stdout); // exit code 1: there is a difference
    }
    assert.match(diff, /-\s+size: 1\n\+\s+size: 4/);
    assert.match(await kubectl("delete", "widget", "k1", "--dry-run=server"), /widget\.example\.org "k1" deleted \(server dry run\)/);
    await check("kubectl diff and dry runs");
  } finally {
    await c.stop();
  }
});

D.run();
