// managedFields for every write, as kube-apiserver's field manager keeps them
// (k8s.io/apiserver pkg/endpoints/handlers/fieldmanager, structured-merge-diff):
// a create, update or patch records its manager (the fieldManager parameter,
// else the User-Agent's first part) with operation Update as the owner of the
// fields it set or changed, status writes under the status subresource, and a
// later server-side apply of such a field to another value conflicts with it,
// naming the manager "using" the version it wrote. Over HTTP and with kubectl.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster, type DevCluster } from "../../src/apiserver/server.js";
import { caller, crd, kubectlFor } from "../support/cluster.js";
import { needs } from "../support/needs.js";

const M = suite("dev-cluster: managedFields for every write");
const MK = needs(M, "kubectl");

let scratch: string;
M.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-managed-"));
});
M.after(() => rmSync(scratch, { recursive: true, force: true }));

const CM = "/api/v1/namespaces/default/configmaps";
/** writes calls c with a content type and a User-Agent (which names the writer when no fieldManager does). */
const writes = (c: DevCluster) => {
  const call = caller(c);
  return (method: string, path: string, body: unknown, type = "application/json", agent = "test-agent/1.0") =>
    call(method, path, body, { "Content-Type": type, "User-Agent": agent });
};
/** owners sums up managedFields as "manager/operation[/subresource]: field, field". */
const owners = (o: any): Record<string, string> => {
  const out: Record<string, string> = {};
  const walk = (f: any, prefix: string[]): string[] => {
    const keys = Object.keys(f ?? {}).filter((k) => k.startsWith("f:"));
    if (keys.length === 0) return [prefix.join(".")];
    return keys.flatMap((k) => walk(f[k], [...prefix, k.slice(2)]));
  };
  for (const e of o.metadata.managedFields ?? [])
    out[[e.manager, e.operation, ...(e.subresource ? [e.subresource] : [])].join("/")] = walk(e.fieldsV1, []).sort().join(", ");
  return out;
};

M("create, update and patch record their managers as owners of what they changed; apply conflicts with them", async () => {
  const c = await startDevCluster();
  const call = writes(c);
  try {
    const made = await call("POST", `${CM}?fieldManager=creator`, {
      metadata: { name: "cm", labels: { a: "1" } },
      data: { x: "1", keep: "k" },
    });
    assert.is(made.status, 201);
    assert.equal(owners(made.body), { "creator/Update": "data.keep, data.x, metadata.labels.a" });
    const e = made.body.metadata.managedFields[0];
    assert.equal([e.apiVersion, e.fieldsType, typeof e.time], ["v1", "FieldsV1", "string"]);
    // An update takes what it changed (x, and the new y); the creator keeps what it alone set.
    const put = await call("PUT", `${CM}/cm?fieldManager=editor`, { ...made.body, data: { x: "2", y: "3", keep: "k" } });
    assert.equal(owners(put.body), { "creator/Update": "data.keep, metadata.labels.a", "editor/Update": "data.x, data.y" });
    // Without fieldManager, the User-Agent names the writer; a removed field is no one's.
    const patched = await call(
      "PATCH",
      `${CM}/cm`,
      { data: { y: null } },
      "application/merge-patch+json",
      "kubectl-patch/v1.31.0 (linux/amd64)",
    );
    assert.equal(owners(patched.body), { "creator/Update": "data.keep, metadata.labels.a", "editor/Update": "data.x" });
    // A write that changes nothing records nothing.
    const same = await call("PATCH", `${CM}/cm?fieldManager=idle`, { data: { x: "2" } }, "application/merge-patch+json");
    assert.is(owners(same.body)["idle/Update"], undefined);
    // An apply of editor's field to another value conflicts, naming editor with the version it wrote.
    const applied = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cm" }, data: { x: "9" } };
    const conflict = await call("PATCH", `${CM}/cm?fieldManager=applier`, applied, "application/apply-patch+yaml");
    assert.is(conflict.status, 409);
    assert.is(conflict.body.message, 'Apply failed with 1 conflict: conflict with "editor" using v1: .data.x');
    // Agreeing with the value is no conflict (both own it); forcing another value takes it from every other owner.
    assert.is(
      (await call("PATCH", `${CM}/cm?fieldManager=agree`, { ...applied, data: { x: "2" } }, "application/apply-patch+yaml")).status,
      200,
    );
    const forced = await call("PATCH", `${CM}/cm?fieldManager=applier&force=true`, applied, "application/apply-patch+yaml");
    assert.is(forced.status, 200);
    assert.equal(owners(forced.body), {
      "creator/Update": "data.keep, metadata.labels.a",
      "applier/Apply": "data.x",
    });
  } finally {
    await c.stop();
  }
});

M(
  "ownership is indexed: 20,000 fields owned by one manager and applied over by another conflict, or are forced, field by field",
  async () => {
    const c = await startDevCluster();
    const call = writes(c);
    try {
      const data = (v: string) => Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, v]));
      assert.is((await call("POST", `${CM}?fieldManager=creator`, { metadata: { name: "big" }, data: data("a") })).status, 201);
      const applied = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "big" }, data: data("b") };
      const refused = await call("PATCH", `${CM}/big?fieldManager=applier`, applied, "application/apply-patch+yaml");
      assert.is(refused.status, 409);
      assert.match(refused.body.message, /^Apply failed with 20000 conflicts: conflict with "creator" using v1: \.data\.k0; /);
      const forced = await call("PATCH", `${CM}/big?fieldManager=applier&force=true`, applied, "application/apply-patch+yaml");
      assert.is(forced.status, 200);
      // The creator keeps the data map itself, which its create added (fieldsV1 "."): an apply owns fields only.
      // Apply before Update: the order kube keeps entries in (apimachinery v0.36.3 sortEncodedManagedFields).
      assert.equal(Object.keys(owners(forced.body)), ["applier/Apply", "creator/Update"]);
      const updated = await call("PUT", `${CM}/big?fieldManager=editor`, { ...forced.body, data: data("c") });
      assert.equal(Object.keys(owners(updated.body)), ["creator/Update", "editor/Update"]);
    } finally {
      await c.stop();
    }
  },
);

M("a status write is recorded under the status subresource", async () => {
  const c = await startDevCluster();
  const call = writes(c);
  try {
    await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd("example.org", "Widget", "widgets", "Namespaced"));
    const base = "/apis/example.org/v1/namespaces/default/widgets";
    await call("POST", `${base}?fieldManager=owner`, {
      apiVersion: "example.org/v1",
      kind: "Widget",
      metadata: { name: "w" },
      spec: { size: 1 },
    });
    const st = await call(
      "PATCH",
      `${base}/w/status?fieldManager=controller`,
      { status: { phase: "Ready" } },
      "application/merge-patch+json",
    );
    assert.equal(owners(st.body), { "owner/Update": "spec.size", "controller/Update/status": "status.phase" });
  } finally {
    await c.stop();
  }
});

MK("kubectl apply --server-side conflicts with what kubectl create wrote, as on a real cluster", async () => {
  const c = await startDevCluster();
  const kubectl = kubectlFor(c, scratch);
  try {
    assert.is((await kubectl("create", "configmap", "k", "--from-literal=x=1")).code, 0);
    const file = join(scratch, "k.yaml");
    writeFileSync(file, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: k\ndata:\n  x: '2'\n");
    const r = await kubectl("apply", "--server-side", "-f", file);
    assert.is.not(r.code, 0);
    assert.match(r.out, /conflict with "kubectl-create" using v1: \.data\.x/);
    assert.is((await kubectl("apply", "--server-side", "--force-conflicts", "-f", file)).code, 0);
    const got = await kubectl("get", "configmap", "k", "--show-managed-fields", "-o", "jsonpath={.metadata.managedFields[*].manager}");
    assert.match(got.out, /kubectl/);
  } finally {
    await c.stop();
  }
});

M(
  "an apply of an empty map leaves the keys others own, conflicts with none of them, and removes the applier's own others dropped",
  async () => {
    // Found by the differential tier (kubectl/apply#5) against kube-apiserver v1.36.3, which answers 200: an empty map
    // applied is a member of the map itself (structured-merge-diff v6.3.3 typed/tofieldset.go, visitMapItems), and
    // merged into the live map it changes none of its keys, so none conflicts.
    const c = await startDevCluster();
    const call = writes(c);
    const apply = "application/apply-patch+yaml";
    try {
      const cfg = (data: Record<string, string>) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg" }, data });
      assert.is((await call("PATCH", `${CM}/cfg?fieldManager=kubectl`, cfg({ k: "v", j: "w" }), apply)).status, 201);
      assert.is((await call("PATCH", `${CM}/cfg?fieldManager=other&force=true`, cfg({ k: "theirs" }), apply)).status, 200);
      const emptied = await call("PATCH", `${CM}/cfg?fieldManager=kubectl`, cfg({}), apply);
      assert.is(emptied.status, 200, JSON.stringify(emptied.body));
      assert.equal(emptied.body.data, { k: "theirs" });
      // Owning the map itself takes none of its keys: another manager's change to one is no conflict with kubectl.
      const later = await call("PATCH", `${CM}/cfg?fieldManager=third`, cfg({ n: "1" }), apply);
      assert.is(later.status, 200, JSON.stringify(later.body));
      // A value where kubectl owns a scalar still conflicts.
      const scalar = await call(
        "PATCH",
        `${CM}/cfg?fieldManager=kubectl`,
        { ...cfg({}), metadata: { name: "cfg", labels: { a: "1" } } },
        apply,
      );
      assert.is(scalar.status, 200);
      const taken = await call(
        "PATCH",
        `${CM}/cfg?fieldManager=fourth`,
        { ...cfg({}), metadata: { name: "cfg", labels: { a: "2" } } },
        apply,
      );
      assert.is(taken.status, 409);
    } finally {
      await c.stop();
    }
  },
);

M("keys added to a map another writer made leave it the map's owner; a write that owns nothing records no managedFields", async () => {
  // As kube-apiserver v1.36.3 answered the generated differential (test/crossplane/differential/generated.ts):
  // the creator keeps spec's and the map's own members ("." and f:size {}), the updater owns the keys it added;
  // an object whose spec is null owns nothing, and kube writes no managedFields at all (not an empty list).
  const c = await startDevCluster();
  const call = writes(c);
  try {
    const schema = {
      type: "object",
      properties: { spec: { type: "object", properties: { size: { type: "object", additionalProperties: { type: "number" } } } } },
    };
    const made = await call(
      "POST",
      "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
      crd("m.xfn.dev", "Thing", "things", "Namespaced", [{ name: "v1", served: true, storage: true, schema: { openAPIV3Schema: schema } }]),
    );
    assert.is(made.status, 201);
    const things = "/apis/m.xfn.dev/v1/namespaces/default/things";
    const created = await call("POST", `${things}?fieldManager=creator`, {
      apiVersion: "m.xfn.dev/v1",
      kind: "Thing",
      metadata: { name: "t" },
      spec: { size: {} },
    });
    assert.is(created.status, 201, JSON.stringify(created.body));
    const patched = await call(
      "PATCH",
      `${things}/t?fieldManager=updater`,
      { spec: { size: { k: 1, key: 2 } } },
      "application/merge-patch+json",
    );
    const creator = patched.body.metadata.managedFields.find((e: any) => e.manager === "creator");
    const updater = patched.body.metadata.managedFields.find((e: any) => e.manager === "updater");
    assert.equal(creator?.fieldsV1, { "f:spec": { ".": {}, "f:size": {} } });
    assert.equal(updater?.fieldsV1, { "f:spec": { "f:size": { "f:k": {}, "f:key": {} } } });
    const empty = await call("POST", `${things}?fieldManager=creator`, {
      apiVersion: "m.xfn.dev/v1",
      kind: "Thing",
      metadata: { name: "e" },
      spec: null,
    });
    assert.is(empty.status, 201, JSON.stringify(empty.body));
    assert.is(empty.body.metadata.managedFields, undefined);
  } finally {
    await c.stop();
  }
});

M.run();
