// What kubectl reads from the embedded API server besides objects: the
// built-in kinds' table columns (kubernetes pkg/printers/internalversion/
// printers.go at 008dafe0, and the newer event columns), lists in pages
// (apiserver pkg/storage/continue.go and etcd3/store.go GetList: limit,
// continue, remainingItemCount, the 410 for an expired token), malformed
// query parameters, a CRD's categories, and the access reviews behind kubectl
// auth can-i and whoami (kubernetes/api authorization/v1, authentication/v1),
// and OpenAPI v3 for kubectl explain (the documents client-go's openapi3
// root reads, and the PATCH operations kubectl's QueryParamVerifierV3 looks
// for fieldValidation in), over HTTP and with the real kubectl.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster } from "../../src/apiserver/server.js";
import { caller, crd, kubectlFor } from "../support/cluster.js";
import { needs } from "../support/needs.js";

const D = suite("dev-cluster: what kubectl reads");
const DK = needs(D, "kubectl");

let scratch: string;
D.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-discovery-"));
});
D.after(() => rmSync(scratch, { recursive: true, force: true }));

const TABLE = { Accept: "application/json;as=Table;v=v1;g=meta.k8s.io" };

/** fill writes one object of each built-in kind kubectl shows columns for. */
async function fill(call: ReturnType<typeof caller>) {
  await call("POST", "/api/v1/namespaces", { metadata: { name: "shop" } });
  await call("POST", "/api/v1/namespaces/shop/configmaps", {
    metadata: { name: "cfg" },
    data: { a: "1", b: "2" },
    binaryData: { c: "AA==" },
  });
  await call("POST", "/api/v1/namespaces/shop/secrets", { metadata: { name: "creds" }, stringData: { user: "u", pass: "p" } });
  await call("POST", "/api/v1/namespaces/shop/secrets", {
    metadata: { name: "tls" },
    type: "kubernetes.io/tls",
    data: { "tls.crt": "", "tls.key": "" },
  });
  await call("POST", "/apis/coordination.k8s.io/v1/namespaces/shop/leases", {
    metadata: { name: "leader" },
    spec: { holderIdentity: "pod-1" },
  });
  await call("POST", "/api/v1/namespaces/shop/events", {
    metadata: { name: "w1.1" },
    involvedObject: { kind: "Widget", name: "w1", namespace: "shop", fieldPath: "spec.size" },
    reason: "Composed",
    message: "  composed 3 resources  ",
    type: "Normal",
    source: { component: "xfn-host", host: "node-a" },
    count: 4,
    firstTimestamp: new Date(Date.now() - 20 * 60_000).toISOString().replace(/\.\d+Z$/, "Z"),
    lastTimestamp: new Date(Date.now() - 5_000).toISOString().replace(/\.\d+Z$/, "Z"),
  });
  await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd("example.org", "Widget", "widgets", "Namespaced"));
}

D("built-in kinds are printed with kube-apiserver's columns, every column (the server prints wide)", async () => {
  const c = await startDevCluster();
  const call = caller(c);
  try {
    await fill(call);
    const get = async (path: string) => {
      const r = await call("GET", path, undefined, TABLE);
      assert.is(r.status, 200, JSON.stringify(r.body));
      return {
        names: r.body.columnDefinitions.map((d: any) => `${d.name}${d.priority ? "*" : ""}`),
        cells: r.body.rows.map((x: any) => x.cells),
      };
    };
    const ns = await get("/api/v1/namespaces/shop");
    assert.equal(ns.names, ["Name", "Status", "Age"]);
    assert.equal(ns.cells[0].slice(0, 2), ["shop", "Active"]);
    assert.match(ns.cells[0][2], /^\d+s$/);
    const cms = await get("/api/v1/namespaces/shop/configmaps");
    assert.equal(cms.names, ["Name", "Data", "Age"]);
    assert.equal(cms.cells[0].slice(0, 2), ["cfg", 3]);
    const secrets = await get("/api/v1/namespaces/shop/secrets");
    assert.equal(secrets.names, ["Name", "Type", "Data", "Age"]);
    assert.equal(
      secrets.cells.map((x: any[]) => x.slice(0, 3)),
      [
        ["creds", "Opaque", 2],
        ["tls", "kubernetes.io/tls", 2],
      ],
    );
    const leases = await get("/apis/coordination.k8s.io/v1/namespaces/shop/leases");
    assert.equal(leases.names, ["Name", "Holder", "Age"]);
    assert.equal(leases.cells[0].slice(0, 2), ["leader", "pod-1"]);
    const events = await get("/api/v1/namespaces/shop/events");
    assert.equal(events.names, [
      "Last Seen",
      "Type",
      "Reason",
      "Object",
      "Subobject*",
      "Source*",
      "Message",
      "First Seen*",
      "Count*",
      "Name*",
    ]);
    const [last, ...rest] = events.cells[0];
    assert.match(last, /^\d+s$/);
    assert.equal(rest.slice(0, 6), ["Normal", "Composed", "widget/w1", "spec.size", "xfn-host, node-a", "composed 3 resources"]);
    assert.equal(rest.slice(6), ["20m", 4, "w1.1"]);
    const crds = await get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
    assert.equal(crds.names, ["Name", "Created At"]);
    assert.equal(crds.cells[0][0], "widgets.example.org");
    assert.match(crds.cells[0][1], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  } finally {
    await c.stop();
  }
});

DK("kubectl get prints the built-in kinds' columns", async () => {
  const c = await startDevCluster();
  const kubectl = kubectlFor(c, scratch);
  try {
    await fill(caller(c));
    const header = async (args: string[], want: RegExp) => {
      const r = await kubectl("get", ...args);
      assert.is(r.code, 0, r.out);
      assert.match(r.out.split("\n")[0]!, want);
      return r.out;
    };
    assert.match(await header(["namespaces"], /^NAME\s+STATUS\s+AGE$/), /^shop\s+Active\s+\d+s$/m);
    assert.match(await header(["configmaps", "-n", "shop"], /^NAME\s+DATA\s+AGE$/), /^cfg\s+3\s+\d+s$/m);
    assert.match(await header(["secrets", "-n", "shop"], /^NAME\s+TYPE\s+DATA\s+AGE$/), /^tls\s+kubernetes\.io\/tls\s+2\s+\d+s$/m);
    assert.match(await header(["leases", "-n", "shop"], /^NAME\s+HOLDER\s+AGE$/), /^leader\s+pod-1\s+\d+s$/m);
    assert.match(
      await header(["events", "-n", "shop"], /^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE$/),
      /Normal\s+Composed\s+widget\/w1\s+composed 3 resources/,
    );
    await header(
      ["events", "-n", "shop", "-o", "wide"],
      /^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+SUBOBJECT\s+SOURCE\s+MESSAGE\s+FIRST SEEN\s+COUNT\s+NAME$/,
    );
    assert.match(await header(["crds"], /^NAME\s+CREATED AT$/), /^widgets\.example\.org\s+\d{4}-\d\d-\d\dT/m);
  } finally {
    await c.stop();
  }
});

D("limit and continue page a list from one snapshot; remainingItemCount without selectors; 410 for an expired token", async () => {
  const c = await startDevCluster();
  const call = caller(c);
  try {
    const base = "/api/v1/namespaces/default/configmaps";
    for (let i = 0; i < 7; i++) await call("POST", base, { metadata: { name: `cm-${i}`, labels: { even: String(i % 2 === 0) } } });
    const first = await call("GET", `${base}?limit=3`);
    assert.equal(
      first.body.items.map((o: any) => o.metadata.name),
      ["cm-0", "cm-1", "cm-2"],
    );
    assert.is(first.body.metadata.remainingItemCount, 4);
    const rv = first.body.metadata.resourceVersion;
    // Changes after the first page do not show in the pages that follow it.
    await call("DELETE", `${base}/cm-4`);
    await call("POST", base, { metadata: { name: "cm-35" } });
    const second = await call("GET", `${base}?limit=3&continue=${first.body.metadata.continue}`);
    assert.equal(
      second.body.items.map((o: any) => o.metadata.name),
      ["cm-3", "cm-4", "cm-5"],
    );
    assert.is(second.body.metadata.resourceVersion, rv);
    assert.is(second.body.metadata.remainingItemCount, 1);
    const last = await call("GET", `${base}?limit=3&continue=${second.body.metadata.continue}`);
    assert.equal(
      last.body.items.map((o: any) => o.metadata.name),
      ["cm-6"],
    );
    assert.is(last.body.metadata.continue, undefined);
    assert.is(last.body.metadata.remainingItemCount, undefined);
    // A selector: pages of what it selects, no remainingItemCount.
    const even = await call("GET", `${base}?limit=2&labelSelector=even%3Dtrue`);
    assert.equal(
      even.body.items.map((o: any) => o.metadata.name),
      ["cm-0", "cm-2"],
    );
    assert.ok(even.body.metadata.continue);
    assert.is(even.body.metadata.remainingItemCount, undefined);
    // A table (kubectl get) carries the token too.
    const table = await call("GET", `${base}?limit=2`, undefined, TABLE);
    assert.is(table.body.rows.length, 2);
    assert.ok(table.body.metadata.continue);
    // A token for a snapshot that is no longer kept: 410 Expired, with a token to go on inconsistently from the same place.
    const forged = Buffer.from(JSON.stringify({ v: "meta.k8s.io/v1", rv: 1, start: "default/cm-1\u0000" })).toString("base64url");
    const gone = await call("GET", `${base}?limit=2&continue=${forged}`);
    assert.is(gone.status, 410);
    assert.is(gone.body.reason, "Expired");
    assert.match(gone.body.message, /^The provided continue parameter is too old to display a consistent list result\./);
    const onward = await call("GET", `${base}?limit=2&continue=${gone.body.metadata.continue}`);
    assert.equal(
      onward.body.items.map((o: any) => o.metadata.name),
      ["cm-2", "cm-3"],
    );
    assert.is(onward.body.metadata.resourceVersion, String(c.store.rv));
    // Tokens and parameters that do not parse are 400s naming the cause.
    for (const [q, want] of [
      ["limit=abc", 'strconv.ParseInt: parsing "abc": invalid syntax'],
      ["limit=99999999999999999999", 'strconv.ParseInt: parsing "99999999999999999999": value out of range'],
      ["resourceVersion=abc", 'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax'],
      ["resourceVersion=-1", 'resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing "-1": invalid syntax'],
      ["watch=true&timeoutSeconds=1s", 'strconv.ParseInt: parsing "1s": invalid syntax'],
      ["continue=xyz", "invalid continue token: continue key is not valid: not a base64 encoded JSON object"],
      [`continue=${first.body.metadata.continue}&resourceVersion=5`, "specifying resource version is not allowed when using continue"],
    ] as const) {
      const r = await call("GET", `${base}?${q}`);
      assert.is(r.status, 400, q);
      assert.is(r.body.reason, "BadRequest", q);
      assert.is(r.body.message, want, q);
    }
    assert.is((await call("GET", `${base}/cm-0?resourceVersion=x`)).status, 400);
  } finally {
    await c.stop();
  }
});

DK("kubectl get --chunk-size pages through a list", async () => {
  const c = await startDevCluster();
  const kubectl = kubectlFor(c, scratch);
  try {
    for (let i = 0; i < 12; i++)
      await caller(c)("POST", "/api/v1/namespaces/default/configmaps", { metadata: { name: `p-${String(i).padStart(2, "0")}` } });
    const r = await kubectl("get", "configmaps", "--chunk-size=5", "-o", "name", "-v=6");
    assert.is(r.code, 0, r.out);
    assert.equal(
      r.out.split("\n").filter((l) => l.startsWith("configmap/")),
      Array.from({ length: 12 }, (_, i) => `configmap/p-${String(i).padStart(2, "0")}`),
    );
    // Three requests: 5, 5 and 2.
    assert.is(r.out.split("\n").filter((l) => /GET .*configmaps\?.*limit=5/.test(l)).length, 3, r.out);
  } finally {
    await c.stop();
  }
});

/** managed is a cluster-scoped CRD in Crossplane's categories for managed resources. */
const managed = () => {
  const c = crd("aws.example.org", "Bucket", "buckets");
  (c.spec.names as any).categories = ["crossplane", "managed"];
  return c;
};

D("a CRD's categories are in discovery and its accepted names; reviews say the one user may do everything", async () => {
  const c = await startDevCluster();
  const call = caller(c);
  try {
    assert.is((await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", managed())).status, 201);
    const list = await call("GET", "/apis/aws.example.org/v1");
    assert.equal(list.body.resources.find((r: any) => r.name === "buckets").categories, ["crossplane", "managed"]);
    const stored = await call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/buckets.aws.example.org");
    assert.equal(stored.body.status.acceptedNames.categories, ["crossplane", "managed"]);
    assert.equal(stored.body.status.storedVersions, ["v1"]);
    // A kind without categories has none in discovery (omitted, as kube omits an empty list).
    assert.is((await call("GET", "/api/v1")).body.resources.find((r: any) => r.name === "configmaps").categories, undefined);

    const groups = (await call("GET", "/apis")).body.groups.map((g: any) => g.name);
    assert.ok(groups.includes("authorization.k8s.io") && groups.includes("authentication.k8s.io"), groups.join(" "));
    const ssar = await call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SelfSubjectAccessReview",
      spec: { resourceAttributes: { verb: "delete", resource: "buckets", group: "aws.example.org" } },
    });
    assert.is(ssar.status, 201);
    assert.is(ssar.body.status.allowed, true);
    assert.equal(ssar.body.spec.resourceAttributes.verb, "delete");
    const neither = await call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", { spec: {} });
    assert.is(neither.status, 422);
    assert.match(neither.body.message, /exactly one of nonResourceAttributes or resourceAttributes must be specified/);
    const rules = await call("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", { spec: { namespace: "default" } });
    assert.equal(rules.body.status.resourceRules, [{ verbs: ["*"], apiGroups: ["*"], resources: ["*"] }]);
    const who = await call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", { spec: {} });
    assert.is(who.body.status.userInfo.username, "xfn-dev");
    assert.is((await call("GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")).status, 405);
  } finally {
    await c.stop();
  }
});

DK("kubectl get by category, get all, auth can-i and auth whoami", async () => {
  const c = await startDevCluster();
  const call = caller(c);
  const kubectl = kubectlFor(c, scratch);
  try {
    await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", managed());
    await call("POST", "/apis/aws.example.org/v1/buckets", {
      apiVersion: "aws.example.org/v1",
      kind: "Bucket",
      metadata: { name: "logs" },
    });
    const byCategory = await kubectl("get", "managed");
    assert.is(byCategory.code, 0, byCategory.out);
    assert.match(byCategory.out, /^NAME\s+AGE\nlogs\s+\d+s$/m);
    assert.match((await kubectl("get", "crossplane", "-o", "name")).out, /^bucket\.aws\.example\.org\/logs$/m);
    // `all` is a category like any other: kube puts its workload kinds in it, which this server does not serve;
    // with no kind in it kubectl says so, as it would of any server; a CRD in it is listed.
    assert.match((await kubectl("get", "all")).out, /the server doesn't have a resource type "all"/);
    const inAll = crd("example.org", "Gadget", "gadgets", "Namespaced");
    (inAll.spec.names as any).categories = ["all"];
    await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", inAll);
    // (A fresh discovery cache: kubectl would otherwise answer from what it read before the CRD.)
    const all = await kubectl("get", "all", "--cache-dir", join(scratch, "cache-after-gadgets"));
    assert.is(all.code, 0, all.out);
    assert.match(all.out, /No resources found in default namespace/);
    const can = await kubectl("auth", "can-i", "delete", "buckets.aws.example.org");
    assert.is(can.code, 0, can.out);
    // (kubectl adds its own warning: buckets are cluster-scoped and the context names a namespace.)
    assert.is(can.out.split("\n")[0], "yes");
    const list = await kubectl("auth", "can-i", "--list");
    assert.is(list.code, 0, list.out);
    assert.match(list.out, /\*\.\*\s+\[\]\s+\[\]\s+\[\*\]/);
    const who = await kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}");
    assert.is(who.code, 0, who.out);
    assert.is(who.out.trim(), "xfn-dev");
  } finally {
    await c.stop();
  }
});

const described = () =>
  crd("example.org", "Widget", "widgets", "Namespaced", [
    {
      name: "v1",
      served: true,
      storage: true,
      schema: {
        openAPIV3Schema: {
          type: "object",
          description: "A widget.",
          properties: {
            spec: {
              type: "object",
              description: "What the widget should be.",
              properties: { size: { type: "integer", description: "How big the widget is." } },
            },
          },
        },
      },
    },
  ]);

D("OpenAPI v3: a document per group version, hashed; each kind's schema and paths as kubectl reads them", async () => {
  const c = await startDevCluster();
  const call = caller(c);
  try {
    await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", described());
    const root = (await call("GET", "/openapi/v3")).body;
    const url: string = root.paths["apis/example.org/v1"].serverRelativeURL;
    assert.match(url, /^\/openapi\/v3\/apis\/example\.org\/v1\?hash=[0-9A-F]+$/);
    assert.ok(root.paths["api/v1"] && root.paths["apis/coordination.k8s.io/v1"]);
    const doc = (await call("GET", url)).body;
    const widget = doc.components.schemas["org.example.v1.Widget"];
    assert.equal(widget["x-kubernetes-group-version-kind"], [{ group: "example.org", kind: "Widget", version: "v1" }]);
    assert.is(widget.properties.spec.properties.size.description, "How big the widget is.");
    assert.equal(widget.properties.metadata.allOf, [{ $ref: "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" }]);
    assert.ok(doc.components.schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]);
    const patch = doc.paths["/apis/example.org/v1/namespaces/{namespace}/widgets/{name}"].patch;
    assert.equal(patch["x-kubernetes-group-version-kind"], { group: "example.org", kind: "Widget", version: "v1" });
    assert.ok(patch.parameters.some((p: any) => p.name === "fieldValidation" && p.in === "query"));
    const core = (await call("GET", "/openapi/v3/api/v1")).body.components.schemas["io.k8s.api.core.v1.ConfigMap"];
    assert.equal(Object.keys(core.properties).sort(), ["apiVersion", "binaryData", "data", "immutable", "kind", "metadata"]);
    // A changed CRD is a new document, under a new hash.
    const crd = (await call("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.org")).body;
    crd.spec.versions[0].schema.openAPIV3Schema.description = "A better widget.";
    assert.is((await call("PUT", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.org", crd)).status, 200);
    assert.is.not((await call("GET", "/openapi/v3")).body.paths["apis/example.org/v1"].serverRelativeURL, url);
    assert.is((await call("GET", "/openapi/v3/apis/nothing.example.org/v1")).status, 404);
  } finally {
    await c.stop();
  }
});

DK("kubectl explain shows a CRD's fields and a built-in kind's", async () => {
  const c = await startDevCluster();
  const kubectl = kubectlFor(c, scratch);
  try {
    await caller(c)("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", described());
    const kind = await kubectl("explain", "widgets");
    assert.is(kind.code, 0, kind.out);
    assert.match(kind.out, /KIND:\s+Widget/);
    assert.match(kind.out, /A widget\./);
    assert.match(kind.out, /spec\s+<Object>\s+What the widget should be\./);
    const field = await kubectl("explain", "widgets.spec.size");
    assert.match(field.out, /FIELD: size <integer>/);
    assert.match(field.out, /How big the widget is\./);
    const cm = await kubectl("explain", "configmaps");
    assert.is(cm.code, 0, cm.out);
    assert.match(cm.out, /data\s+<map\[string\]string>/);
    // kubectl still leaves validation to the server (it finds fieldValidation on PATCH): Strict refuses an unknown field.
    const file = join(scratch, "unknown-field.json");
    writeFileSync(
      file,
      JSON.stringify({ apiVersion: "example.org/v1", kind: "Widget", metadata: { name: "w" }, spec: { size: 1, colour: "red" } }),
    );
    const created = await kubectl("create", "-f", file);
    assert.is.not(created.code, 0);
    assert.match(created.out, /strict decoding error: unknown field "spec\.colour"/);
  } finally {
    await c.stop();
  }
});

D.run();
