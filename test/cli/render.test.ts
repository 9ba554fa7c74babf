// xfn render, as users run it: real files, real exit codes. Most cases go
// through runRender (the command's own code) in-process; a few spawn the CLI.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parseAllDocuments } from "yaml";
import { DEFAULT_NOW, runRender } from "../../src/cli/render.js";
import { serve } from "../../src/server/server.js";
import { memoryLog } from "../support/log.js";
import { sink } from "../support/sink.js";
import { ROOT, run } from "../support/spawn.js";

const F = join(ROOT, "test/fixtures/render");
const EX = join(ROOT, "examples");

const flags = (over: Record<string, unknown> = {}) => ({
  requiredResources: [] as string[],
  extraResources: [] as string[],
  contextValues: [] as string[],
  contextFiles: [] as string[],
  timeout: 60_000,
  includeFunctionResults: false,
  includeFullXr: false,
  includeContext: false,
  now: new Date(DEFAULT_NOW),
  legacyOutput: false,
  ...over,
});

async function render(xr: string, comp: string, fns: string | undefined, over: Record<string, unknown> = {}) {
  const out = sink();
  const err = sink();
  const code = await runRender(xr, comp, fns, flags(over) as never, out.stream, err.stream);
  const docs = parseAllDocuments(out.text()).map((d) => d.toJS() as Record<string, any>);
  return { code, out: out.text(), err: err.text(), docs };
}

let scratch: string;
const R = suite("cli: xfn render");
R.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-render-"));
});
R.after(() => rmSync(scratch, { recursive: true, force: true }));

const write = (name: string, text: string) => {
  const p = join(scratch, name);
  writeFileSync(p, text);
  return p;
};

/** oneStep writes a function module, its Function and a Composition of one step calling it (stepExtra: more of the step, in YAML). */
function oneStep(name: string, source: string, stepExtra = ""): { fns: string; comp: string } {
  write(`${name}-fn.ts`, source);
  const fns = write(
    `${name}-functions.yaml`,
    `apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata: { name: ${name}, annotations: { render.xfn.dev/module: ${name}-fn.ts } }\n`,
  );
  const comp = write(
    `${name}-comp.yaml`,
    `apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: { name: c }\n` +
      `spec:\n  compositeTypeRef: { apiVersion: example.xfn.dev/v1alpha1, kind: XBuckets }\n  mode: Pipeline\n` +
      `  pipeline:\n    - step: s\n      functionRef: { name: ${name} }\n${stepExtra}`,
  );
  return { fns, comp };
}

R("renders the examples: XR status, composed resources with Crossplane's metadata, results", async () => {
  const r = await render(join(EX, "xr.yaml"), join(EX, "composition.yaml"), join(EX, "functions.yaml"), {
    observedResources: join(EX, "observed.yaml"),
    includeFunctionResults: true,
  });
  assert.is(r.code, 0, r.err);
  assert.ok(r.out.startsWith("---\n"));
  const [xr, assets, logs, ...results] = r.docs;
  assert.equal(xr!["metadata"], { name: "team-a" });
  assert.is(xr!["status"].bucketCount, 2);
  assert.equal(xr!["status"].externalNames, { "bucket-logs": "team-a-logs-7xq2m" });
  // As current crossplane render prints an XR: what it composed, and the conditions of a successful
  // reconcile in the order Crossplane sets them (Responsive, the functions', Synced, Ready).
  assert.equal(xr!["status"].conditions, [
    { type: "Responsive", status: "True", reason: "WatchCircuitClosed", lastTransitionTime: "2024-01-01T00:00:00Z" },
    {
      type: "BucketsReady",
      status: "False",
      reason: "Creating",
      message: "waiting for assets",
      lastTransitionTime: "2024-01-01T00:00:00Z",
    },
    { type: "Synced", status: "True", reason: "ReconcileSuccess", lastTransitionTime: "2024-01-01T00:00:00Z" },
    {
      type: "Ready",
      status: "False",
      reason: "Creating",
      message: "Unready resources: bucket-assets",
      lastTransitionTime: "2024-01-01T00:00:00Z",
    },
  ]);
  assert.is(assets!["metadata"].annotations["crossplane.io/composition-resource-name"], "bucket-assets");
  assert.is(assets!["metadata"].generateName, "team-a-");
  // Crossplane's ChildName: the prefix and 12 hex digits of SHA-256(uid + composition resource name)
  // (python3: hashlib.sha256(b"5f1d3e2a-...1e44bucket-assets").hexdigest()[:12]).
  assert.is(assets!["metadata"].name, "team-a-afa1c2914e99", "a new resource gets its name before it is created, as in Crossplane v2");
  assert.equal(xr!["spec"], {
    crossplane: {
      resourceRefs: [
        { apiVersion: "s3.aws.upbound.io/v1beta1", kind: "Bucket", name: assets!["metadata"].name },
        { apiVersion: "s3.aws.upbound.io/v1beta1", kind: "Bucket", name: "team-a-7xq2m" },
      ].sort((a, b) => a.name.localeCompare(b.name)),
    },
  });
  assert.is(assets!["metadata"].labels["crossplane.io/composite"], "team-a");
  assert.equal(assets!["metadata"].ownerReferences, [
    {
      apiVersion: "example.xfn.dev/v1alpha1",
      kind: "XBuckets",
      name: "team-a",
      uid: "5f1d3e2a-9c41-4b7e-8f0e-2d6a7c9b1e44",
      controller: true,
      blockOwnerDeletion: true,
    },
  ]);
  assert.is(logs!["metadata"].name, "team-a-7xq2m", "an observed resource keeps its name");
  assert.is(logs!["metadata"].generateName, undefined);
  assert.is(logs!["metadata"].annotations["crossplane.io/external-name"], "team-a-logs-7xq2m");
  // Every Event the reconcile records, as current crossplane render prints them with -r.
  assert.equal(results, [
    {
      apiVersion: "render.crossplane.io/v1beta1",
      kind: "Result",
      severity: "Normal",
      reason: "SelectComposition",
      message: "Successfully selected composition: xbuckets",
    },
    {
      apiVersion: "render.crossplane.io/v1beta1",
      kind: "Result",
      severity: "Normal",
      reason: "ComposeResources",
      message: 'Pipeline step "compose-buckets": composed 2 buckets',
    },
    {
      apiVersion: "render.crossplane.io/v1beta1",
      kind: "Result",
      severity: "Normal",
      reason: "ComposeResources",
      message: 'Composed resource "bucket-assets" is not yet ready',
    },
  ]);
  // Printed as Go's YAML prints: times and "True" in double quotes, other quoted strings in single quotes, lists flush.
  assert.match(r.out, /\n {2}- lastTransitionTime: "2024-01-01T00:00:00Z"\n {4}reason: WatchCircuitClosed\n {4}status: "True"\n/);
  assert.match(r.out, /\n {4}message: 'Unready resources: bucket-assets'\n/);
  assert.match(r.out, /\nmessage: 'Pipeline step "compose-buckets": composed 2 buckets'\n/);
});

R(
  "an XR being deleted: Ready=False Deleting as the deletion step reports it (or naming what is left), its warning with --now",
  async () => {
    const xr = readFileSync(join(EX, "xr.yaml"), "utf8").replace(/^metadata:\n/m, "metadata:\n  deletionTimestamp: 2026-11-28T10:00:00Z\n");
    const deleting = write("deleting-xr.yaml", xr);
    const ready = (docs: Record<string, any>[]) => docs[0]!["status"].conditions.find((c: any) => c.type === "Ready");
    // The examples' pipeline has the deletion step: its report is the XR's Ready, as xfn host writes it.
    const r = await render(deleting, join(EX, "composition.yaml"), join(EX, "functions.yaml"), {
      observedResources: join(EX, "observed.yaml"),
      includeFunctionResults: true,
    });
    assert.is(r.code, 0, r.err);
    assert.equal(ready(r.docs), {
      type: "Ready",
      status: "False",
      reason: "Deleting",
      message: "deleting: waiting for bucket-logs",
      lastTransitionTime: "2024-01-01T00:00:00Z",
    });
    assert.equal(r.docs[0]!["status"].deletion.remaining, 1);
    // The clock functions see (fixed, 2024) is before the deletion: said, since no deletion can have taken long yet.
    assert.match(
      r.err,
      /warning: the XR was deleted at 2026-11-28T10:00:00Z, after the time functions see \(2024-01-01T00:00:00\.000Z\): pass --now/,
    );
    assert.not.match(r.out, /DeletionBlocked/);
    // Ten minutes on, the step's warning names the resource blocking it.
    const later = await render(deleting, join(EX, "composition.yaml"), join(EX, "functions.yaml"), {
      observedResources: join(EX, "observed.yaml"),
      includeFunctionResults: true,
      now: new Date("2026-11-28T10:10:00Z"),
    });
    assert.is(later.code, 0, later.err);
    assert.is(later.err, "");
    const blocked = later.docs.find((d) => d["kind"] === "Result" && d["reason"] === "DeletionBlocked");
    assert.ok(blocked, later.out);
    assert.is(blocked!["severity"], "Warning");
    assert.match(blocked!["message"], /^Pipeline step "lifecycle": bucket-logs has blocked deletion for 10m0s, longer than 5m0s/);
    // Without a deletion step: Crossplane's Deleting, naming the composed resources still there.
    const { fns, comp } = oneStep(
      "nodelete",
      `import { response } from ${JSON.stringify(join(ROOT, "src/index.ts"))};\nexport default (req: never) => response.to(req);\n`,
    );
    const plain = await render(deleting, comp, fns, { observedResources: join(EX, "observed.yaml") });
    assert.is(plain.code, 0, plain.err);
    assert.equal(ready(plain.docs), {
      type: "Ready",
      status: "False",
      reason: "Deleting",
      message: "deleting 1 composed resource: bucket-logs",
      lastTransitionTime: "2024-01-01T00:00:00Z",
    });
    // The pre-v2 shape says the same.
    const legacy = await render(deleting, join(EX, "composition.yaml"), join(EX, "functions.yaml"), {
      observedResources: join(EX, "observed.yaml"),
      legacyOutput: true,
    });
    assert.equal(ready(legacy.docs).reason, "Deleting");
  },
);

R("--legacy-output prints the pre-v2 shape: only Ready, generateName only, results with step", async () => {
  const r = await render(join(EX, "xr.yaml"), join(EX, "composition.yaml"), join(EX, "functions.yaml"), {
    observedResources: join(EX, "observed.yaml"),
    includeFunctionResults: true,
    legacyOutput: true,
  });
  assert.is(r.code, 0, r.err);
  const [xr, assets, , result] = r.docs;
  assert.is(xr!["spec"], undefined);
  assert.equal(
    xr!["status"].conditions.map((c: any) => c.type),
    ["Ready", "BucketsReady"],
  );
  assert.is(assets!["metadata"].name, undefined);
  assert.is(assets!["metadata"].generateName, "team-a-");
  assert.equal(result, {
    apiVersion: "render.crossplane.io/v1beta1",
    kind: "Result",
    step: "compose-buckets",
    severity: "SEVERITY_NORMAL",
    message: "composed 2 buckets",
  });
});

R("an XR without a uid gets a stable one, and its new resources stable names", async () => {
  const xrFile = write("xr-nouid.yaml", readFileSync(join(EX, "xr.yaml"), "utf8").replace(/^\s*uid:.*$/m, ""));
  const a = await render(xrFile, join(EX, "composition.yaml"), join(EX, "functions.yaml"));
  const b = await render(xrFile, join(EX, "composition.yaml"), join(EX, "functions.yaml"));
  assert.is(a.code, 0, a.err);
  const uid = a.docs[1]!["metadata"].ownerReferences[0].uid;
  assert.match(uid, /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.is(a.out, b.out);
});

// An XRD like examples/host/xrd.yaml, without the status fields, and with a default for spec.region.
const bareXRD = () =>
  write(
    "bare-xrd.yaml",
    readFileSync(join(EX, "host/xrd.yaml"), "utf8")
      .split("            status:")[0]!
      .replace("region: {type: string}", "region: {type: string, default: ap-south-1}"),
  );

R("--xrd: the XR is defaulted from the schema; what the schema does not declare is pruned, with a warning for each", async () => {
  const xrFile = write("xr-noregion.yaml", readFileSync(join(EX, "xr.yaml"), "utf8").replace("  region: eu-west-1\n", ""));
  const r = await render(xrFile, join(EX, "composition.yaml"), join(EX, "functions.yaml"), {
    observedResources: join(EX, "observed.yaml"),
    xrd: bareXRD(),
    includeFunctionResults: true,
    includeFullXr: true,
  });
  assert.is(r.code, 0, r.err);
  const xr = r.docs[0]!;
  assert.is(xr["spec"].region, "ap-south-1", "defaulted, as the API server would");
  assert.is(xr["spec"].crossplane.resourceRefs.length, 2, "Crossplane's own fields are never pruned");
  assert.equal(Object.keys(xr["status"]), ["conditions"], "every undeclared status field is gone from the printed XR");
  // Nothing waits here, so status.waiting is not written (src/steps/dependencies.ts): only what is written is pruned.
  for (const f of ["bucketCount", "externalNames", "deletion"])
    assert.match(
      r.err,
      new RegExp(`warning: the XRD xbuckets\\.example\\.xfn\\.dev does not declare status\\.${f}, so the API server drops`),
    );
  // The lifecycle function checks its own fields against the schema it was handed, and says exactly what to add.
  const warnings = r.docs.filter((d) => d["kind"] === "Result" && d["reason"] === "StatusFieldNotInSchema").map((d) => d["message"]);
  assert.ok(
    warnings.some(
      (m: string) =>
        m.includes("status.externalNames is not in the schema of XBuckets (example.xfn.dev/v1alpha1)") &&
        m.includes("{ externalNames: { type: object, additionalProperties: { type: string } } }"),
    ),
    warnings.join("\n"),
  );
  assert.ok(warnings.some((m: string) => m.includes("status.deletion") && m.includes("order: { type: array")));
  // The step checks status.waiting too, though this run leaves it out: it is written whenever something waits.
  assert.ok(warnings.some((m: string) => m.includes("status.waiting is not in the schema") && m.includes("since: { type: string")));
});

R("--xrd with every field declared: nothing pruned, no warning; an XRD for another kind is refused", async () => {
  const r = await render(join(EX, "xr.yaml"), join(EX, "composition.yaml"), join(EX, "functions.yaml"), {
    observedResources: join(EX, "observed.yaml"),
    xrd: join(EX, "host/xrd.yaml"),
    includeFunctionResults: true,
  });
  assert.is(r.code, 0, r.err);
  assert.is(r.err, "");
  assert.equal(r.docs[0]!["status"].externalNames, { "bucket-logs": "team-a-logs-7xq2m" });
  assert.not.ok(r.out.includes("StatusFieldNotInSchema"));
  const other = write("other-xrd.yaml", readFileSync(join(EX, "host/xrd.yaml"), "utf8").replace("kind: XBuckets", "kind: XQueues"));
  const bad = await render(join(EX, "xr.yaml"), join(EX, "composition.yaml"), join(EX, "functions.yaml"), { xrd: other });
  assert.is(bad.code, 1);
  assert.match(
    bad.err,
    /CompositeResourceDefinition "xbuckets\.example\.xfn\.dev" \(composite Group=example\.xfn\.dev Kind=XQueues\) does not match the input XR's Group=example\.xfn\.dev Kind=XBuckets/,
  );
  const notXRD = await render(join(EX, "xr.yaml"), join(EX, "composition.yaml"), join(EX, "functions.yaml"), {
    xrd: write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"),
  });
  assert.is(notXRD.code, 1);
  assert.match(notXRD.err, /cm\.yaml: expected a CompositeResourceDefinition, got ConfigMap/);
  const noVersion = await render(join(EX, "xr.yaml"), join(EX, "composition.yaml"), join(EX, "functions.yaml"), {
    xrd: write("v2-xrd.yaml", readFileSync(join(EX, "host/xrd.yaml"), "utf8").replace("- name: v1alpha1", "- name: v2")),
  });
  assert.is(noVersion.code, 1);
  assert.match(noVersion.err, /the XRD xbuckets\.example\.xfn\.dev has no version "v1alpha1" \(it has v2\)/);
});

R(
  "a step's response near Crossplane's 4 MiB is warned of with its largest parts; over it, said to fail; small ones say nothing",
  async () => {
    const fnOf = (kib: number) =>
      `import { defineFunction, response } from ${JSON.stringify(join(ROOT, "src/index.ts"))};\n` +
      `export default defineFunction((req) => {\n` +
      `  const rsp = response.to(req);\n` +
      `  response.setDesiredComposedResource(rsp, "big", { apiVersion: "v1", kind: "ConfigMap", data: { d: "x".repeat(${kib} * 1024) } });\n` +
      `  response.setDesiredComposedResource(rsp, "small", { apiVersion: "v1", kind: "ConfigMap", data: { d: "y" } });\n` +
      `  return rsp;\n});\n`;
    const near = oneStep("near", fnOf(3500));
    const r = await render(join(EX, "xr.yaml"), near.comp, near.fns);
    assert.is(r.code, 0, r.err);
    assert.match(
      r.err,
      /warning: step "s": response is 3\.\d+ MiB \(\d+ bytes\), 8\d% of the 4194304-byte limit Crossplane accepts; largest: "big" 3\.\d+ MiB \(\d+ bytes\), "small" [^:]+: a little more and the call fails/,
    );
    const over = oneStep("over", fnOf(4200));
    const o = await render(join(EX, "xr.yaml"), over.comp, over.fns);
    // Over it, the call fails as it would under Crossplane, naming what made it large.
    assert.is(o.code, 1);
    assert.match(
      o.err,
      /RESOURCE_EXHAUSTED: response is \d+ bytes, larger than the 4194304-byte limit Crossplane accepts; largest: "big" 4\.\d+ MiB/,
    );
    const fine = oneStep("fine", fnOf(100));
    assert.not.match((await render(join(EX, "xr.yaml"), fine.comp, fine.fns)).err, /limit/);
  },
);

R("--required-schemas answers schema requirements from a CRD and from an OpenAPI v3 document; unknown kinds are not found", async () => {
  const { fns, comp } = oneStep(
    "schemas",
    `import { defineFunction, request, response } from ${JSON.stringify(join(ROOT, "src/index.ts"))};\n` +
      `export default defineFunction((req) => {\n` +
      `  const rsp = response.to(req);\n` +
      `  response.requireSchema(rsp, "crd", { apiVersion: "s3.aws.upbound.io/v1beta1", kind: "Bucket" });\n` +
      `  response.requireSchema(rsp, "api", { apiVersion: "apps/v1", kind: "Deployment" });\n` +
      `  response.requireSchema(rsp, "none", { apiVersion: "nope.io/v1", kind: "Nothing" });\n` +
      `  const seen = (n: string) => { const s = request.getRequiredSchema(req, n); return s === undefined ? "unanswered" : s === null ? "not found" : Object.keys((s as any).properties ?? s).sort().join(","); };\n` +
      `  response.setDesiredCompositeStatus(rsp, { crd: seen("crd"), api: seen("api"), none: seen("none"),\n` +
      `    replicas: (request.getRequiredSchema(req, "api") as any)?.properties?.spec?.properties?.replicas?.type ?? "" });\n` +
      `  return rsp;\n});\n`,
  );
  const dir = join(scratch, "schemas");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "crds.yaml"), readFileSync(join(EX, "host/crds.yaml"), "utf8"));
  writeFileSync(
    join(dir, "apps-v1.json"),
    JSON.stringify({
      openapi: "3.0.0",
      components: {
        schemas: {
          "io.k8s.api.apps.v1.Deployment": {
            type: "object",
            "x-kubernetes-group-version-kind": [{ group: "apps", version: "v1", kind: "Deployment" }],
            properties: {
              spec: { allOf: [{ $ref: "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec" }] },
              status: { type: "object" },
            },
          },
          "io.k8s.api.apps.v1.DeploymentSpec": { type: "object", properties: { replicas: { type: "integer" } } },
        },
      },
    }),
  );
  const r = await render(join(EX, "xr.yaml"), comp, fns, { requiredSchemas: dir });
  assert.is(r.code, 0, r.err);
  const status = r.docs[0]!["status"];
  assert.is(status.crd, "type,x-kubernetes-preserve-unknown-fields");
  assert.is(status.api, "spec,status");
  assert.is(status.replicas, "integer", "references are inlined");
  assert.is(status.none, "not found");
  const bad = write("not-a-schema.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: { name: x }\n");
  const refused = await render(join(EX, "xr.yaml"), comp, fns, { requiredSchemas: bad });
  assert.is(refused.code, 1);
  assert.match(
    refused.err,
    /not-a-schema\.yaml: expected a CustomResourceDefinition, a CompositeResourceDefinition or an OpenAPI v3 document/,
  );
});

R("a name __proto__ is an ordinary name: observed and composed resources, a Secret key, a context key", async () => {
  // Object keys from the files: assigning one named __proto__ would set the
  // map's prototype instead, and the entry would vanish without a word.
  const { fns, comp } = oneStep(
    "proto",
    `import { defineFunction, request, response } from ${JSON.stringify(join(ROOT, "src/index.ts"))};\n` +
      `export default defineFunction((req) => {\n` +
      `  const rsp = response.to(req);\n` +
      `  const observed = request.getObservedComposedResources(req);\n` +
      `  const creds = request.getCredentials(req, "db") ?? {};\n` +
      `  response.setDesiredCompositeStatus(rsp, {\n` +
      `    observed: Object.keys(observed).sort().join(","),\n` +
      `    seenSize: String((observed["__proto__"] as any)?.resource?.spec?.size ?? "none"),\n` +
      `    creds: Object.keys(creds).sort().join(","),\n` +
      `    secret: Object.hasOwn(creds, "__proto__") ? Buffer.from(creds["__proto__"]!).toString() : "none",\n` +
      `  });\n` +
      `  for (const name of ["__proto__", "plain"])\n` +
      `    response.setDesiredComposedResource(rsp, name, { apiVersion: "example.org/v1", kind: "Thing", spec: { name } });\n` +
      `  return rsp;\n});\n`,
    `      credentials: [{ name: db, source: Secret, secretRef: { namespace: ns, name: creds } }]\n`,
  );
  const observed = write(
    "proto-observed.yaml",
    `apiVersion: example.org/v1\nkind: Thing\n` +
      `metadata: { name: t1, annotations: { crossplane.io/composition-resource-name: __proto__ } }\nspec: { size: 3 }\n`,
  );
  const secret = write(
    "proto-secret.yaml",
    `apiVersion: v1\nkind: Secret\nmetadata: { name: creds, namespace: ns }\n` +
      `data: { __proto__: ${Buffer.from("s3cret").toString("base64")} }\nstringData: { user: admin }\n`,
  );
  const r = await render(join(EX, "xr.yaml"), comp, fns, {
    observedResources: observed,
    functionCredentials: secret,
    contextValues: ['__proto__={"tier": "gold"}'],
    includeContext: true,
  });
  assert.is(r.code, 0, r.err);
  const context = r.docs.pop()!;
  assert.is(context["kind"], "Context");
  assert.ok(Object.hasOwn(context["fields"], "__proto__"), "the context key set by --context-values");
  assert.equal(context["fields"]["__proto__"], { tier: "gold" });
  const [xr, ...composed] = r.docs;
  const { observed: seen, seenSize, creds, secret: value } = xr!["status"];
  assert.equal({ seen, seenSize, creds, value }, { seen: "__proto__", seenSize: "3", creds: "__proto__,user", value: "s3cret" });
  const names = composed.map((d) => d["metadata"]?.["annotations"]?.["crossplane.io/composition-resource-name"]).sort();
  assert.equal(names, ["__proto__", "plain"]);
  assert.equal(composed.find((d) => d["spec"]?.name === "__proto__")?.["spec"], { name: "__proto__" });
});

R("the examples render byte-identically twice (a spawned CLI run)", async () => {
  const args = ["render", "examples/xr.yaml", "examples/composition.yaml", "examples/functions.yaml", "-r", "-c", "-x"];
  const a = await run(args);
  const b = await run(args);
  assert.is(a.code, 0, a.stderr);
  assert.is(a.stdout, b.stdout);
  assert.match(a.stdout, /kind: Context/);
});

R("answers requirements (by name and namespace, by labels), loops until they settle; credentials; context", async () => {
  const ctxFile = write("env.json", JSON.stringify({ tier: "gold" }));
  const r = await render(join(F, "xr.yaml"), join(F, "composition.yaml"), join(F, "functions.yaml"), {
    requiredResources: [join(F, "required.yaml")],
    functionCredentials: join(F, "credentials.yaml"),
    contextFiles: [`apiextensions.crossplane.io/environment=${ctxFile}`, "other=" + ctxFile],
    contextValues: ['other={"from": "values"}'],
    includeContext: true,
    includeFunctionResults: true,
  });
  assert.is(r.code, 0, r.err);
  const [xr, queue, selected, result] = r.docs;
  const context = r.docs.find((d) => d["kind"] === "Context");
  assert.equal([selected!["reason"], selected!["message"]], ["SelectComposition", "Successfully selected composition: xqueues"]);
  assert.equal(xr!["status"].labelled, ["a-labelled", "b-labelled"]);
  assert.equal(xr!["status"].credentialKeys, ["password", "username"]);
  assert.is(xr!["status"].passwordLength, "hunter2".length);
  assert.equal(xr!["status"].env, { tier: "gold" });
  assert.is(queue!["spec"].forProvider.region, "ap-southeast-2");
  assert.is(queue!["metadata"].namespace, "team-a", "a namespaced XR composes into its namespace");
  assert.is(queue!["metadata"].labels["crossplane.io/claim-name"], "orders");
  assert.equal(
    [result!["kind"], result!["severity"], result!["reason"], result!["message"]],
    ["Result", "Warning", "ComposeResources", 'Pipeline step "needs-config": using region from settings'],
  );
  assert.equal(context!["fields"], {
    "apiextensions.crossplane.io/environment": { tier: "gold" },
    other: { from: "values" },
    "seen-by": "needs-config",
  });
  assert.not.ok(r.out.includes("hunter2"), "credential values are never printed");
});

R("every -e/--required-resources and --extra-resources counts, as in crossplane render", async () => {
  const [first, ...rest] = readFileSync(join(F, "required.yaml"), "utf8").split("\n---\n");
  const a = write("required-a.yaml", first!);
  const b = write("required-b.yaml", rest.slice(0, 1).join("\n---\n"));
  const c = write("required-c.yaml", rest.slice(1).join("\n---\n"));
  const r = await render(join(F, "xr.yaml"), join(F, "composition.yaml"), join(F, "functions.yaml"), {
    requiredResources: [a, b],
    extraResources: [c],
    functionCredentials: join(F, "credentials.yaml"),
  });
  assert.is(r.code, 0, r.err);
  assert.is(r.docs[1]!["spec"].forProvider.region, "ap-southeast-2", "from the first -e");
  assert.equal(r.docs[0]!["status"].labelled, ["a-labelled", "b-labelled"], "from --extra-resources");
});

R("a legacy XR (a v1 XRD) records its references at spec.resourceRefs, which --xrd keeps", async () => {
  const xrd = write(
    "legacy-xrd.yaml",
    readFileSync(join(EX, "host/xrd.yaml"), "utf8")
      .replace("apiextensions.crossplane.io/v2", "apiextensions.crossplane.io/v1")
      .replace(/^ {2}scope: .*\n/m, ""),
  );
  const r = await render(join(EX, "xr.yaml"), join(EX, "composition.yaml"), join(EX, "functions.yaml"), {
    observedResources: join(EX, "observed.yaml"),
    xrd,
  });
  assert.is(r.code, 0, r.err);
  assert.not.match(r.err, /resourceRefs/, "no warning: the references are the XR's own field");
  assert.equal(
    r.docs[0]!["spec"].resourceRefs.map((x: { name: string }) => x.name),
    ["team-a-7xq2m", "team-a-afa1c2914e99"],
  );
  assert.is(r.docs[0]!["spec"].crossplane, undefined);
});

const withStep = (fn: string) =>
  write(
    `comp-${fn}.yaml`,
    `apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: c}\nspec:\n  compositeTypeRef: {apiVersion: example.org/v1, kind: XQueue}\n  mode: Pipeline\n  pipeline:\n    - step: the-step\n      functionRef: {name: ${fn}}\n`,
  );

R("a Fatal result: exit code 3, the result on stderr, nothing on stdout", async () => {
  const r = await render(join(F, "xr.yaml"), withStep("fatal"), join(F, "functions.yaml"));
  assert.is(r.code, 3);
  assert.is(
    r.err,
    'xfn render: cannot compose resources: pipeline step "the-step" returned a fatal result: bucket name team-a is already taken\n',
  );
  assert.is(r.out, "");
});

R("a function that throws is a Fatal result naming the error (exit 3)", async () => {
  const r = await render(join(F, "xr.yaml"), withStep("throws"), join(F, "functions.yaml"));
  assert.is(r.code, 3);
  assert.match(r.err, /returned a fatal result: function failed: template variable \.spec\.size is undefined/);
});

R("requirements that never settle stop, with Crossplane's error", async () => {
  const r = await render(join(F, "xr.yaml"), withStep("restless"), join(F, "functions.yaml"));
  assert.is(r.code, 1);
  assert.is(
    r.err,
    'xfn render: cannot compose resources: cannot run Composition pipeline step "the-step": ' +
      "requirements didn't stabilize after the maximum number of iterations (5)\n",
  );
});

const bad: Record<string, { args: () => [string, string, string | undefined]; over?: Record<string, unknown>; want: RegExp }> = {
  MissingXRFile: {
    args: () => ["/nonexistent/xr.yaml", join(F, "composition.yaml"), join(F, "functions.yaml")],
    want: /cannot read \/nonexistent\/xr\.yaml: no such file or directory/,
  },
  XRIsNotAnObject: {
    args: () => [write("list.yaml", "- a\n- b\n"), join(F, "composition.yaml"), join(F, "functions.yaml")],
    want: /list\.yaml: expected a Kubernetes object, got a list/,
  },
  XRWithoutKind: {
    args: () => [write("nokind.yaml", "metadata: {name: x}\n"), join(F, "composition.yaml"), join(F, "functions.yaml")],
    want: /nokind\.yaml: not a Kubernetes object \(a composite resource needs apiVersion and kind\)/,
  },
  BrokenYaml: {
    args: () => [write("broken.yaml", "kind: [unclosed\n"), join(F, "composition.yaml"), join(F, "functions.yaml")],
    want: /cannot parse .*broken\.yaml/,
  },
  TwoXRs: {
    args: () => [write("two.yaml", "kind: A\n---\nkind: B\n"), join(F, "composition.yaml"), join(F, "functions.yaml")],
    want: /two\.yaml: expected exactly one composite resource, found 2 documents/,
  },
  NotAComposition: {
    args: () => [join(F, "xr.yaml"), join(F, "xr.yaml"), join(F, "functions.yaml")],
    want: /expected an apiextensions\.crossplane\.io Composition, got example\.org\/v1 XQueue/,
  },
  ResourcesMode: {
    args: () => [
      join(F, "xr.yaml"),
      write(
        "res.yaml",
        "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: old}\nspec:\n  compositeTypeRef: {apiVersion: example.org/v1, kind: XQueue}\n  mode: Resources\n  resources: []\n",
      ),
      join(F, "functions.yaml"),
    ],
    want: /render only supports Composition Function pipelines: Composition "old" must use spec\.mode: Pipeline/,
  },
  TypeRefMismatch: {
    args: () => [join(EX, "xr.yaml"), join(F, "composition.yaml"), join(F, "functions.yaml")],
    want: /compositeTypeRef\.kind \(XQueue\) does not match XR's kind \(XBuckets\)/,
  },
  UnknownFunction: {
    args: () => [join(F, "xr.yaml"), withStep("nope"), join(F, "functions.yaml")],
    want: /unknown Function "nope": it is not in .*functions\.yaml/,
  },
  FunctionWithoutRuntime: {
    args: () => [
      join(F, "xr.yaml"),
      withStep("plain"),
      write(
        "fns.yaml",
        "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata: {name: plain}\nspec: {package: xpkg.example.org/fn:v1}\n",
      ),
    ],
    want: /Function "plain" .* has no runtime xfn can use: annotate it with render\.xfn\.dev\/module/,
  },
  ModuleMissing: {
    args: () => [
      join(F, "xr.yaml"),
      withStep("gone"),
      write(
        "fns-gone.yaml",
        "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata: {name: gone, annotations: {render.xfn.dev/module: ./nowhere}}\n",
      ),
    ],
    want: /Function "gone" .*cannot load function module .*nowhere: no such file or directory/,
  },
  NoFunctionsFile: {
    args: () => [join(F, "xr.yaml"), withStep("x"), undefined],
    want: /no functions file: give one after the Composition, or put functions\.yaml beside/,
  },
  ObservedWithoutAnnotation: {
    args: () => [join(F, "xr.yaml"), join(F, "composition.yaml"), join(F, "functions.yaml")],
    over: { observedResources: join(F, "xr.yaml") },
    want: /needs the crossplane\.io\/composition-resource-name annotation/,
  },
  MissingCredentials: {
    args: () => [join(F, "xr.yaml"), join(F, "composition.yaml"), join(F, "functions.yaml")],
    want: /cannot get credentials from secret "db-creds": not in --function-credentials/,
  },
  BadContextValue: {
    args: () => [join(F, "xr.yaml"), join(F, "composition.yaml"), join(F, "functions.yaml")],
    over: { contextValues: ["novalue"] },
    want: /--context-values "novalue": expected key=value/,
  },
  MultipleRequiredResourcesFirstMissing: {
    args: () => [join(F, "xr.yaml"), join(F, "composition.yaml"), join(F, "functions.yaml")],
    over: { requiredResources: ["/nonexistent/a.yaml", join(F, "required.yaml")] },
    want: /cannot read \/nonexistent\/a\.yaml: no such file or directory/,
  },
  MultipleExtraResourcesFirstMissing: {
    args: () => [join(F, "xr.yaml"), join(F, "composition.yaml"), join(F, "functions.yaml")],
    over: { extraResources: ["/nonexistent/b.yaml", join(F, "required.yaml")] },
    want: /cannot read \/nonexistent\/b\.yaml: no such file or directory/,
  },
  RequiredResourcesFolderWithoutYaml: {
    args: () => [join(F, "xr.yaml"), join(F, "composition.yaml"), join(F, "functions.yaml")],
    over: { requiredResources: [join(F, "fns")] },
    want: /no YAML files found in .*fns \(\.yaml, \.yml or \.json\)/,
  },
  MatchLabelMismatch: {
    args: () => [
      write(
        "xr-selector.yaml",
        readFileSync(join(F, "xr.yaml"), "utf8").replace(
          "spec: {}",
          "spec: {crossplane: {compositionSelector: {matchLabels: {env: prod}}}}",
        ),
      ),
      join(F, "composition.yaml"),
      join(F, "functions.yaml"),
    ],
    want: /composition "xqueues" is missing required label "env"/,
  },
  MissingContextFile: {
    args: () => [join(F, "xr.yaml"), join(F, "composition.yaml"), join(F, "functions.yaml")],
    over: { contextFiles: ["k=/nonexistent.json"] },
    want: /--context-files: cannot read \/nonexistent\.json for key "k"/,
  },
};
// Each bad input runs through the real CLI, as a user would. The processes are
// started together (at most four at a time) and each test awaits its own.
const toArgs = (over: Record<string, unknown>): string[] =>
  Object.entries(over).flatMap(([k, v]) => {
    const flag = `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
    return Array.isArray(v) ? v.flatMap((x) => [flag, String(x)]) : [flag, String(v)];
  });
const spawned = new Map<string, Promise<Awaited<ReturnType<typeof run>>>>();
const running = Promise.resolve();
const limit: Array<Promise<unknown>> = [];
R.before(() => {
  for (const [name, tc] of Object.entries(bad)) {
    const [a, b, c] = tc.args();
    const args = ["render", a, b, ...(c ? [c] : []), ...toArgs(tc.over ?? {})];
    const slot = limit.length >= 4 ? limit[limit.length - 4]! : running;
    const p = slot.then(() => run(args));
    limit.push(p);
    spawned.set(name, p);
  }
});
for (const [name, tc] of Object.entries(bad)) {
  R(`bad input, exit code 1, spawned: ${name}`, async () => {
    const r = await spawned.get(name)!;
    assert.is(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, tc.want);
    assert.is(r.stdout, "");
  });
}

R("a Development-runtime Function is called over gRPC at its target", async () => {
  const hello = (await import("../../functions/hello/index.js")).default;
  const srv = await serve(hello, { address: "127.0.0.1:0", insecure: true }, memoryLog().log);
  try {
    const fns = write(
      "dev.yaml",
      `apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-hello\n  annotations:\n    render.crossplane.io/runtime: Development\n    render.crossplane.io/runtime-development-target: 127.0.0.1:${srv.port}\n`,
    );
    const comp = write(
      "dev-comp.yaml",
      "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: c}\nspec:\n  compositeTypeRef: {apiVersion: example.xfn.dev/v1alpha1, kind: XBuckets}\n  mode: Pipeline\n  pipeline:\n    - step: hello\n      functionRef: {name: function-hello}\n",
    );
    const r = await render(join(EX, "xr.yaml"), comp, fns);
    assert.is(r.code, 0, r.err);
    assert.equal(
      r.docs.slice(1).map((d) => d["metadata"].annotations["crossplane.io/composition-resource-name"]),
      ["bucket-assets", "bucket-logs"],
    );
    const down = write(
      "down.yaml",
      "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-hello\n  annotations:\n    render.crossplane.io/runtime: Development\n    render.crossplane.io/runtime-development-target: 127.0.0.1:1\n",
    );
    const d = await render(join(EX, "xr.yaml"), comp, down, { timeout: 2000 });
    assert.is(d.code, 1);
    assert.match(d.err, /cannot run Function "function-hello": .*(UNAVAILABLE|DEADLINE_EXCEEDED)/);
  } finally {
    await srv.stop(1000);
  }
});

R("--converge: each round's line and diff on standard error, the settled state on standard output", async () => {
  const r = await render(join(EX, "xr.yaml"), join(EX, "composition.yaml"), join(EX, "functions.yaml"), { converge: true });
  assert.is(r.code, 0, r.err);
  const lines = r.err.split("\n");
  assert.equal(
    lines.filter((l) => l.startsWith("round ")),
    [
      "round 1: composed bucket-logs; XR Ready=False (Creating); then ready: bucket-logs",
      "round 2: composed bucket-assets; XR Ready=False (Creating); then ready: bucket-assets",
      // Both exist: the Usage that makes Crossplane delete bucket-assets first (issue 61 point 1).
      "round 3: composed usage-of-bucket-logs-by-bucket-assets; XR Ready=True (Available); then ready: usage-of-bucket-logs-by-bucket-assets",
      "round 4: XR Ready=True (Available)",
      "round 5: rendered the same as the round before; XR Ready=True (Available)",
    ],
  );
  assert.ok(lines.includes("--- round 1") && lines.includes("+++ round 2"), r.err);
  assert.match(r.err, /^xfn render: converged after 5 rounds: round 5 changed nothing the next would see$/m);
  assert.is(r.docs.length, 4);
  assert.is(r.docs[0]!["status"].conditions.find((c: { type: string }) => c.type === "Ready").status, "True");
});

R("--converge: still changing after --max-rounds exits 2 naming what; its flags alone, or wrong, are refused", async () => {
  const { fns, comp } = oneStep(
    "counter",
    `import { request, response } from ${JSON.stringify(join(ROOT, "src/index.ts"))};\n` +
      "export default (req: never) => { const rsp = response.to(req);\n" +
      "  const n = Number((request.getObservedCompositeResource(req)?.status as { n?: number } | undefined)?.n ?? 0);\n" +
      '  response.setDesiredCompositeField(rsp, "status.n", n + 1); return rsp; };\n',
  );
  const r = await render(join(EX, "xr.yaml"), comp, fns, { converge: true, maxRounds: "3" });
  assert.is(r.code, 2, r.err);
  assert.match(
    r.err,
    /^xfn render: did not converge in 3 rounds \(--max-rounds\): the next round's input would still differ: the XR's status\.n$/m,
  );
  assert.is(r.docs[0]!["status"].n, 4, "the last state is printed");
  const refused: [Record<string, unknown>, RegExp][] = [
    [{ readyAfter: ["2"] }, /--max-rounds, --ready-after, --ready and --ready-status go with --converge/],
    [{ converge: true, maxRounds: "many" }, /--max-rounds: "many" is not a whole number/],
    [{ converge: true, ready: ["bucket-logs"] }, /--ready "bucket-logs": expected key=value/],
    [{ converge: true, ready: ["bucket-logs=self.("] }, /--converge: ready bucket-logs: cannot parse "self\.\("/],
    [{ converge: true, readyStatus: ["bucket-logs=[1]"] }, /--ready-status bucket-logs: expected a map of status fields/],
  ];
  for (const [over, want] of refused) {
    const bad = await render(join(EX, "xr.yaml"), join(EX, "composition.yaml"), join(EX, "functions.yaml"), over);
    assert.is(bad.code, 1, JSON.stringify(over));
    assert.match(bad.err, want);
  }
});

R("spawned: --converge with per-resource rules from the command line", async () => {
  const r = await run([
    "render",
    "examples/xr.yaml",
    "examples/composition.yaml",
    "--converge",
    "--ready-after",
    "bucket-logs=2",
    "--ready",
    "*=self.spec.forProvider.region != ''",
    "--ready-status",
    "bucket-logs={atProvider: {arn: x}}",
  ]);
  assert.is(r.code, 0, r.stderr);
  assert.match(r.stderr, /^round 2: XR Ready=False \(Creating\); then ready: bucket-logs$/m);
  assert.match(r.stderr, /converged after 6 rounds/);
});

R("spawned: a missing file exits 1 and a Fatal result exits 3", async () => {
  const missing = await run(["render", "nope.yaml", "examples/composition.yaml"]);
  assert.is(missing.code, 1);
  assert.match(missing.stderr, /xfn render: cannot read nope\.yaml: no such file or directory/);
  const fatal = await run(["render", join(F, "xr.yaml"), withStep("fatal"), join(F, "functions.yaml")]);
  assert.is(fatal.code, 3);
  assert.match(fatal.stderr, /returned a fatal result: bucket name team-a is already taken/);
});

R("spawned: a function stuck on the CPU (a backtracking RegExp) is stopped at --timeout, naming it; render never hangs", async () => {
  // A JavaScript RegExp the function runs itself (CEL's matches() is on RE2): no timer of render's thread can fire meanwhile.
  const { fns, comp } = oneStep(
    "stuck",
    `import { response } from ${JSON.stringify(join(ROOT, "src/index.ts"))};\n` +
      "export default (req: never) => { /^(a+)+$/.test('a'.repeat(40) + '!'); return response.to(req); };\n",
  );
  const xr = write("stuck-xr.yaml", "apiVersion: example.xfn.dev/v1alpha1\nkind: XBuckets\nmetadata: { name: team-a }\nspec: {}\n");
  const started = Date.now();
  const r = await run(["render", xr, comp, fns, "--timeout", "2s"], { timeoutMs: 60_000 });
  const took = Date.now() - started;
  assert.ok(took < 20_000, `render ended after ${took} ms`);
  assert.is.not(r.code, 0);
  assert.match(r.stderr, /xfn render: Function "stuck" kept the process's thread busy past its deadline \(--timeout\)/);
  assert.is(r.stdout, "");
});

R.run();
