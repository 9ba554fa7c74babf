// xfn validate, as `crossplane resource validate` (crossplane/cli
// 3d72f93ae: pkg/validate/validate_test.go TestSchemaValidate and
// TestResultError, unknown_fields_test.go, apply_defaults_test.go,
// pkg/validate/output/render_test.go, cmd/crossplane/validate/
// validate_integration_test.go TestRun, common/load's loader), ported; and
// what xfn adds: OpenAPI v3 documents as schemas, `xfn render --validate`,
// `validate:` in a test case.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse as parseYaml } from "yaml";
import { runValidate } from "../../src/cli/validate.js";
import { runRender } from "../../src/cli/render.js";
import { runCase } from "../../src/testing/cases.js";
import { loadSources } from "../../src/validate/load.js";
import { render } from "../../src/validate/output.js";
import { resultError, Schemas, schemaValidate, type ValidationResult } from "../../src/validate/validate.js";
import { ROOT } from "../support/spawn.js";

const F = join(ROOT, "test/fixtures/validate");

const crd = (name: string, kind: string, versions: Array<[string, JsonObject]>): JsonObject => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name },
  spec: {
    group: "test.org",
    names: { kind, listKind: `${kind}List`, plural: `${kind.toLowerCase()}s`, singular: kind.toLowerCase() },
    scope: "Cluster",
    versions: versions.map(([v, schema]) => ({ name: v, served: true, storage: true, schema: { openAPIV3Schema: schema } })),
  },
});
const replicasSpec = {
  type: "object",
  properties: { spec: { type: "object", properties: { replicas: { type: "integer" } }, required: ["replicas"] } },
};
const TEST = crd("test", "Test", [["v1alpha1", replicasSpec]]);
const TEST_CEL = crd("test-cel", "TestCEL", [
  [
    "v1alpha1",
    {
      type: "object",
      properties: {
        spec: {
          type: "object",
          "x-kubernetes-validations": [
            {
              rule: "self.minReplicas <= self.replicas && self.replicas <= self.maxReplicas",
              message: "replicas should be in between minReplicas and maxReplicas",
            },
          ],
          properties: { replicas: { type: "integer" }, minReplicas: { type: "integer" }, maxReplicas: { type: "integer" } },
          required: ["replicas", "minReplicas", "maxReplicas"],
        },
      },
    },
  ],
]);
// Shares group and kind with TEST, with only v1beta1: found first, it fails defaulting for v1alpha1.
const TEST_OTHER_VERSION = crd("test-other-version", "Test", [["v1beta1", replicasSpec]]);

const obj = (apiVersion: string, kind: string, name: string, spec?: JsonObject): JsonObject => ({
  apiVersion,
  kind,
  metadata: { name },
  ...(spec ? { spec } : {}),
});
const valid = obj("test.org/v1alpha1", "Test", "test", { replicas: 1 });
const badType = obj("test.org/v1alpha1", "Test", "bad-type", { replicas: "not-an-int" });
const badCEL = obj("test.org/v1alpha1", "TestCEL", "bad-cel", { replicas: 50, minReplicas: 3, maxReplicas: 10 });
const missing = obj("other.org/v1", "Unknown", "no-crd");
const unknownField = obj("test.org/v1alpha1", "Test", "extra", { replicas: 1, unknownField: "surprise" });

const schemasOf = (...crds: JsonObject[]) => new Schemas().add(crds.map((c, i) => ({ obj: c, source: `crd ${i}` })));

type Expect = { status: string; errors?: Array<[string, string?]> };
/** temp makes a folder for one test; every one is removed when the file's tests end (they left 4 per run in /tmp). */
const made: string[] = [];
const temp = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  made.push(d);
  return d;
};
process.on("exit", () => made.forEach((d) => rmSync(d, { recursive: true, force: true })));

const S = suite("xfn validate: SchemaValidate (crossplane TestSchemaValidate)");
const CASES: Array<[string, JsonObject[], JsonObject[], [number, number, number, number], Expect[]]> = [
  ["Valid", [valid], [TEST], [1, 1, 0, 0], [{ status: "valid" }]],
  ["InvalidSchema", [badType], [TEST], [1, 0, 1, 0], [{ status: "invalid", errors: [["schema", "spec.replicas"]] }]],
  ["InvalidCEL", [badCEL], [TEST_CEL], [1, 0, 1, 0], [{ status: "invalid", errors: [["cel", "spec"]] }]],
  ["MissingSchema", [missing], [TEST], [1, 0, 0, 1], [{ status: "missingSchema" }]],
  ["UnknownField", [unknownField], [TEST], [1, 0, 1, 0], [{ status: "invalid", errors: [["unknownField", "spec.unknownField"]] }]],
  ["DefaultingFailureOnly", [valid], [TEST_OTHER_VERSION, TEST], [1, 1, 0, 0], [{ status: "defaultingFailed", errors: [["defaulting"]] }]],
  [
    "DefaultingFailureWithSchemaError",
    [badType],
    [TEST_OTHER_VERSION, TEST],
    [1, 0, 1, 0],
    [{ status: "invalid", errors: [["defaulting"], ["schema", "spec.replicas"]] }],
  ],
  ["Empty", [], [], [0, 0, 0, 0], []],
  [
    "MixedOrder",
    [valid, badType, missing],
    [TEST],
    [3, 1, 1, 1],
    [{ status: "valid" }, { status: "invalid", errors: [["schema", "spec.replicas"]] }, { status: "missingSchema" }],
  ],
  // Built-in kinds the embedded API server knows: checked as strict decoding would (no user schema needed).
  [
    "KubernetesBuiltIn (the kinds xfn knows)",
    [
      obj("v1", "Secret", "connection-details"),
      obj("v1", "ConfigMap", "cm"),
      obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.org"),
    ],
    [],
    [3, 3, 0, 0],
    [{ status: "valid" }, { status: "valid" }, { status: "valid" }],
  ],
  [
    "KubernetesBuiltInInvalid (the kinds xfn knows)",
    [
      obj("v1", "Secret", "bad-field", { unexpected: true }),
      { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x" }, immutable: "yes" },
    ],
    [],
    [2, 0, 2, 0],
    [
      { status: "invalid", errors: [["schema", "spec"]] },
      { status: "invalid", errors: [["schema", "immutable"]] },
    ],
  ],
];
for (const [name, resources, crds, [total, v, inv, miss], want] of CASES)
  S(name, () => {
    const before = structuredClone(resources);
    const r = schemaValidate(resources, schemasOf(...crds));
    assert.equal(r.summary, { total, valid: v, invalid: inv, missingSchemas: miss });
    assert.equal(
      r.resources.map((x) => ({
        status: x.status,
        ...(x.errors ? { errors: x.errors.map((e) => (e.field ? [e.type, e.field] : [e.type])) } : {}),
      })),
      want,
    );
    assert.equal(resources, before, "the resources given are not changed (defaults and pruning work on a copy)");
  });
S("messages are kube's: a type error names the type, an unknown field its name, a CEL rule its message", () => {
  const r = schemaValidate([badType, unknownField, badCEL], schemasOf(TEST, TEST_CEL));
  assert.equal(
    r.resources.flatMap((x) => x.errors ?? []),
    [
      {
        type: "schema",
        field: "spec.replicas",
        message: 'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"',
        value: "string",
      },
      {
        type: "unknownField",
        field: "spec.unknownField",
        message: 'spec.unknownField: Invalid value: "unknownField": unknown field: "unknownField"',
        value: "unknownField",
      },
      { type: "cel", field: "spec", message: "spec: Invalid value: replicas should be in between minReplicas and maxReplicas", value: {} },
    ],
  );
});
S("defaults are applied before checking (apply_defaults_test): a defaulted required field passes, nested defaults too", () => {
  const s = new Schemas().add(loadSources(join(F, "schemas"), () => ""));
  const r = schemaValidate([{ apiVersion: "validate.example.org/v1", kind: "Widget", metadata: { name: "d" }, spec: { options: {} } }], s);
  assert.is(r.resources[0]!.status, "valid", JSON.stringify(r));
  // Without the default, size would be a Required error.
  const noDefault = crd("n", "Test", [["v1alpha1", replicasSpec]]);
  assert.is(schemaValidate([obj("test.org/v1alpha1", "Test", "n", {})], schemasOf(noDefault)).resources[0]!.status, "invalid");
});
S("an XRD is checked through the CRD Crossplane makes from it: what Crossplane adds under spec is known, the rest is not", () => {
  const s = new Schemas().add(loadSources(join(F, "schemas"), () => ""));
  const r = schemaValidate(
    loadSources(join(F, "valid.yaml"), () => "").map((d) => d.obj),
    s,
  );
  assert.equal(r.summary, { total: 2, valid: 2, invalid: 0, missingSchemas: 0 });
  const bad = schemaValidate(
    [
      {
        apiVersion: "validate.example.org/v1",
        kind: "XShop",
        metadata: { name: "x", namespace: "d" },
        spec: { region: "eu", crossplane: { nope: 1 } },
      },
    ],
    s,
  );
  assert.equal(
    bad.resources[0]!.errors?.map((e) => e.field),
    ["spec.crossplane.nope"],
  );
});
S("an OpenAPI v3 document (kubectl get --raw /openapi/v3/apis/apps/v1) answers for built-in kinds, its $refs followed", () => {
  const doc: JsonObject = {
    openapi: "3.0.0",
    components: {
      schemas: {
        "io.k8s.api.apps.v1.Deployment": {
          type: "object",
          properties: {
            apiVersion: { type: "string" },
            kind: { type: "string" },
            metadata: { type: "object" },
            spec: { allOf: [{ $ref: "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec" }] },
          },
          "x-kubernetes-group-version-kind": [{ group: "apps", version: "v1", kind: "Deployment" }],
        },
        "io.k8s.api.apps.v1.DeploymentSpec": { type: "object", properties: { replicas: { type: "integer", format: "int32" } } },
      },
    },
  };
  const s = new Schemas().add([{ obj: doc, source: "apps.json" }]);
  const r = schemaValidate(
    [obj("apps/v1", "Deployment", "workload", { replicas: 2 }), obj("apps/v1", "Deployment", "bad-type", { replicas: "many" })],
    s,
  );
  assert.equal(
    r.resources.map((x) => x.status),
    ["valid", "invalid"],
  );
  // Without it, a kind xfn does not know has no schema (crossplane decodes it into client-go's types).
  assert.is(schemaValidate([obj("apps/v1", "Deployment", "w")], new Schemas()).resources[0]!.status, "missingSchema");
});
// ConvertToCRDs (cmd/crossplane/validate/validate_test.go): an XRD with claimNames makes the claim's CRD too.
const legacyXRD = (claimNames?: JsonObject): JsonObject => ({
  apiVersion: "apiextensions.crossplane.io/v1",
  kind: "CompositeResourceDefinition",
  metadata: { name: "test" },
  spec: {
    group: "test.org",
    names: { kind: "Test", listKind: "TestList", plural: "tests", singular: "test" },
    ...(claimNames ? { claimNames } : {}),
    versions: [
      {
        name: "v1alpha1",
        served: true,
        referenceable: true,
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: { type: "object", properties: { replicas: { type: "integer" } } },
              status: { type: "object", properties: { replicas: { type: "integer" } } },
            },
          },
        },
      },
    ],
  },
});
S("UnstructuredXRDWithClaim: the claim's CRD as Crossplane makes it; a claim is checked against it", async () => {
  const { forCompositeResourceClaim } = await import("../../src/engine/xcrd.js");
  const claim = forCompositeResourceClaim(legacyXRD({ kind: "TestClaim", plural: "testclaims" }))!;
  const spec = claim["spec"] as any;
  assert.is((claim["metadata"] as any).name, "testclaims.test.org");
  assert.equal(spec.names, { kind: "TestClaim", plural: "testclaims", categories: ["claim"] });
  assert.is(spec.scope, "Namespaced");
  const v = spec.versions[0];
  assert.equal(
    v.additionalPrinterColumns.map((c: any) => c.name),
    ["SYNCED", "READY", "CONNECTION-SECRET", "AGE"],
  );
  const props = v.schema.openAPIV3Schema.properties;
  assert.equal(Object.keys(props.spec.properties).sort(), [
    "compositeDeletePolicy",
    "compositionRef",
    "compositionRevisionRef",
    "compositionRevisionSelector",
    "compositionSelector",
    "compositionUpdatePolicy",
    "replicas",
    "resourceRef",
    "writeConnectionSecretToRef",
  ]);
  assert.equal(props.spec.properties.writeConnectionSecretToRef.required, ["name"]);
  assert.equal(Object.keys(props.status.properties).sort(), ["claimConditionTypes", "conditions", "connectionDetails", "replicas"]);
  assert.is(props.metadata.properties.name.maxLength, 63);
  assert.is(forCompositeResourceClaim(legacyXRD()), undefined, "UnstructuredXRD: no claimNames, no claim CRD");
  const s = new Schemas().add([{ obj: legacyXRD({ kind: "TestClaim", plural: "testclaims" }), source: "xrd.yaml" }]);
  const r = schemaValidate(
    [
      {
        apiVersion: "test.org/v1alpha1",
        kind: "TestClaim",
        metadata: { name: "c", namespace: "d" },
        spec: { replicas: 1, compositeDeletePolicy: "Foreground" },
      },
      {
        apiVersion: "test.org/v1alpha1",
        kind: "TestClaim",
        metadata: { name: "bad", namespace: "d" },
        spec: { compositeDeletePolicy: "Later" },
      },
      {
        apiVersion: "test.org/v1alpha1",
        kind: "Test",
        metadata: { name: "x" },
        spec: { replicas: 1, claimRef: { apiVersion: "a", kind: "b", namespace: "c", name: "d" } },
      },
    ],
    s,
  );
  assert.equal(
    r.resources.map((x) => x.status),
    ["valid", "invalid", "valid"],
  );
  assert.throws(
    () => new Schemas().add([{ obj: legacyXRD({ kind: "Test", plural: "testclaims" }), source: "xrd.yaml" }]),
    (e: Error) =>
      e.message ===
      'xrd.yaml: cannot derive the CRDs of the XRD: invalid resource claim names: "Test" conflicts with composite resource name',
  );
});
S("WrongKind: an object among the extensions that is not a schema is skipped", () => {
  const s = new Schemas().add([
    { obj: { apiVersion: "apiextensions.k8s.io/v1", kind: "WrongKind", metadata: { name: "test" } }, source: "x" },
  ]);
  assert.equal(s.crds, []);
});
S("a schema that does not compile is an error naming where", () => {
  const broken = crd("broken", "Broken", [["v1", { type: "object", "x-kubernetes-validations": [{ rule: "self.(" }] }]]);
  assert.throws(
    () => schemasOf(broken),
    (e: Error) => /cannot use the schema at crd 0: spec\.versions\[0\]/.test(e.message),
  );
});
S.run();

const E = suite("xfn validate: the exit status (crossplane TestResultError)");
const sum = (valid: number, invalid: number, missingSchemas: number): ValidationResult => ({
  summary: { total: valid + invalid + missingSchemas, valid, invalid, missingSchemas },
  resources: [],
});
const ERRS: Array<[string, ValidationResult, boolean, string | undefined]> = [
  ["Clean", sum(1, 0, 0), false, undefined],
  ["InvalidPresent", sum(0, 1, 0), false, "could not validate all resources"],
  ["MissingIgnored", sum(0, 0, 1), false, undefined],
  ["MissingWithFlag", sum(0, 0, 1), true, "could not validate all resources, schema(s) missing"],
  ["InvalidAndMissing", sum(0, 1, 1), true, "could not validate all resources"],
];
for (const [name, r, flag, want] of ERRS) E(name, () => assert.is(resultError(r, flag), want));
E.run();

const O = suite("xfn validate: output (crossplane render_test)");
const fixture = (): ValidationResult => ({
  summary: { total: 3, valid: 1, invalid: 1, missingSchemas: 1 },
  resources: [
    { apiVersion: "test.org/v1alpha1", kind: "Test", name: "ok", status: "valid" },
    {
      apiVersion: "test.org/v1alpha1",
      kind: "Test",
      name: "bad",
      status: "invalid",
      errors: [
        {
          type: "schema",
          field: "spec.replicas",
          message: 'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"',
          value: "string",
        },
      ],
    },
    { apiVersion: "other.org/v1", kind: "Unknown", name: "missing", status: "missingSchema" },
  ],
});
const defaulting = (): ValidationResult => ({
  summary: { total: 2, valid: 1, invalid: 1, missingSchemas: 0 },
  resources: [
    {
      apiVersion: "test.org/v1alpha1",
      kind: "Test",
      name: "warn-only",
      status: "defaultingFailed",
      errors: [{ type: "defaulting", message: "no schema found for version v1alpha1 in CRD test-other-version" }],
    },
    {
      apiVersion: "test.org/v1alpha1",
      kind: "Test",
      name: "mixed",
      status: "invalid",
      errors: [
        { type: "defaulting", message: "no schema found for version v1alpha1 in CRD test-other-version" },
        { type: "schema", field: "spec.replicas", message: "spec.replicas: bad", value: "string" },
      ],
    },
  ],
});
const lines = (s: string) => s.trimEnd().split("\n");
O("WithSuccess", () =>
  assert.equal(lines(render(fixture(), "text")), [
    "[✓] test.org/v1alpha1, Kind=Test, ok validated successfully",
    '[x] schema validation error test.org/v1alpha1, Kind=Test, bad : spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"',
    "[!] could not find CRD/XRD for: other.org/v1, Kind=Unknown",
    "Total 3 resources: 1 missing schemas, 1 success cases, 1 failure cases",
  ]),
);
O("SkipSuccess", () => assert.equal(lines(render(fixture(), "text", { skipSuccessResults: true })).length, 3));
O("DefaultingMixed", () =>
  assert.equal(
    lines(render(defaulting(), "text")).map((l) => l.slice(0, 60)),
    [
      "[!] failed to apply defaults for test.org/v1alpha1, Kind=Test, warn-only: no schema found for version v1alpha1 in CRD test-other-version",
      "[!] failed to apply defaults for test.org/v1alpha1, Kind=Test, mixed: no schema found for version v1alpha1 in CRD test-other-version",
      "[x] schema validation error test.org/v1alpha1, Kind=Test, mixed : spec.replicas: bad",
      "Total 2 resources: 0 missing schemas, 1 success cases, 1 failure cases",
    ].map((l) => l.slice(0, 60)),
  ),
);
O("JSON round-trips, in Go's field order, with <, > and & escaped as Go's encoder does", () => {
  const out = render(fixture(), "json");
  assert.equal(JSON.parse(out), fixture());
  assert.ok(
    out.startsWith(
      '{\n  "summary": {\n    "total": 3,\n    "valid": 1,\n    "invalid": 1,\n    "missingSchemas": 1\n  },\n  "resources": [',
    ),
  );
  const r = fixture();
  r.resources[1]!.errors![0]!.message = "<nil> & more";
  assert.match(render(r, "json"), '"\\u003cnil\\u003e \\u0026 more"');
});
O("YAML round-trips, keys sorted as sigs.k8s.io/yaml writes them", () => {
  const out = render(fixture(), "yaml");
  assert.equal(parseYaml(out), fixture());
  assert.ok(out.startsWith("resources:\n- apiVersion: test.org/v1alpha1\n  kind: Test\n  name: ok\n  status: valid\n"), out);
});
O("text is safe for a terminal: escape codes in names and messages are shown, not sent", () => {
  const r = fixture();
  r.resources[0]!.name = "ok\u001b[2J";
  assert.not.match(render(r, "text"), "\u001b");
});
O.run();

/** run calls the command as the CLI does and returns its exit code, stdout and stderr. */
function run(extensions: string, resources: string, flags: Partial<Parameters<typeof runValidate>[2]> = {}, stdin = "") {
  let out = "";
  let err = "";
  const code = runValidate(
    extensions,
    resources,
    { cacheDir: join(F, "no-cache"), errorOnMissingSchemas: false, output: "text", skipSuccessResults: false, ...flags },
    { write: (s: string) => ((out += s), true) } as never,
    { write: (s: string) => ((err += s), true) } as never,
    () => stdin,
  );
  return { code, out, err };
}

const R = suite("xfn validate: the command (crossplane TestRun)");
const at = (f: string) => join(F, f);
R("DefaultTextValid", () => {
  const r = run(at("schemas"), at("valid.yaml"));
  assert.is(r.code, 0, r.err);
  assert.match(r.out, "[✓] validate.example.org/v1, Kind=Widget, ok validated successfully");
  assert.match(r.out, "Total 2 resources: 0 missing schemas, 2 success cases, 0 failure cases");
});
R("TextInvalidExitsNonZero: every problem of every resource, schema, unknown field, CEL and Required", () => {
  const r = run(at("schemas"), at("invalid.yaml"));
  assert.is(r.code, 1);
  assert.is(r.err, "xfn validate: could not validate all resources\n");
  for (const want of [
    "[x] schema validation error validate.example.org/v1, Kind=Widget, bad : spec.size: Invalid value",
    'spec.tier: Unsupported value: "bronze"',
    'spec.colour: Invalid value: "colour": unknown field: "colour"',
    "[x] CEL validation error validate.example.org/v1, Kind=Widget, rule : spec: Invalid value: min must not exceed size",
    "[x] schema validation error validate.example.org/v1, Kind=XShop, noregion : spec.region: Required value",
  ])
    assert.match(r.out, want);
});
R("JSONValid and JSONInvalidExitsNonZero", () => {
  const ok = run(at("schemas"), at("valid.yaml"), { output: "json" });
  assert.equal(JSON.parse(ok.out).summary, { total: 2, valid: 2, invalid: 0, missingSchemas: 0 });
  const bad = run(at("schemas"), at("invalid.yaml"), { output: "json" });
  assert.is(bad.code, 1);
  assert.is(JSON.parse(bad.out).resources[0].errors[0].type, "schema");
});
R("YAMLValid", () => assert.equal(parseYaml(run(at("schemas"), at("valid.yaml"), { output: "yaml" }).out).summary.valid, 2));
R("JSONMissingSchemaNoFlag / WithFlag", () => {
  const no = run(at("schemas"), at("missing.yaml"), { output: "json" });
  assert.is(no.code, 0);
  assert.is(JSON.parse(no.out).resources[0].status, "missingSchema");
  const yes = run(at("schemas"), at("missing.yaml"), { output: "json", errorOnMissingSchemas: true });
  assert.is(yes.code, 1);
  assert.match(yes.err, "could not validate all resources, schema(s) missing");
});
R("SkipSuccessResults: text drops [✓] lines but still counts them; JSON keeps every resource", () => {
  const t = run(at("schemas"), at("valid.yaml"), { skipSuccessResults: true });
  assert.not.match(t.out, "[✓]");
  assert.match(t.out, "2 success cases");
  assert.is(JSON.parse(run(at("schemas"), at("valid.yaml"), { output: "json", skipSuccessResults: true }).out).resources.length, 2);
});
R("stdin: render's output piped in with -; stdin for both is refused", () => {
  const piped = readFileSync(at("valid.yaml"), "utf8");
  assert.is(run(at("schemas"), "-", {}, piped).code, 0);
  const both = run("-", "-");
  assert.is(both.code, 1);
  assert.is(both.err, "xfn validate: cannot use stdin for both extensions and resources\n");
});
R("bad input names its cause: a missing file, YAML that does not parse, a package not in the cache", () => {
  assert.match(
    run(at("nope.yaml"), at("valid.yaml")).err,
    `cannot load extensions from ${JSON.stringify(at("nope.yaml"))}: cannot stat input source: stat ${at("nope.yaml")}: no such file or directory`,
  );
  const dir = temp("xfn-validate-");
  writeFileSync(join(dir, "bad.yaml"), "a: [b\n");
  assert.match(run(at("schemas"), join(dir, "bad.yaml")).err, `cannot parse ${join(dir, "bad.yaml")}`);
  writeFileSync(
    join(dir, "provider.yaml"),
    "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p}\nspec: {package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.2.0}\n",
  );
  const p = run(join(dir, "provider.yaml"), at("valid.yaml"));
  assert.is(p.code, 1);
  assert.match(p.err, "cannot find the schemas of xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.2.0 in the cache");
});
R("a package whose name leads out of the cache is refused, naming it; nothing outside is read", () => {
  const dir = temp("xfn-validate-");
  mkdirSync(join(dir, "cache"));
  // What ../../secret would reach: YAML outside the cache, which must not become a schema.
  mkdirSync(join(dir, "secret"));
  writeFileSync(join(dir, "secret", "package.yaml"), readFileSync(join(F, "schemas/widgets.yaml")));
  for (const name of ["../secret", "../../x/../secret", "."]) {
    writeFileSync(
      join(dir, "provider.yaml"),
      `apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p}\nspec: {package: "${name}"}\n`,
    );
    const r = run(join(dir, "provider.yaml"), at("valid.yaml"), { cacheDir: join(dir, "cache") });
    assert.is(r.code, 1, name);
    assert.match(r.err, `cannot look up package ${JSON.stringify(name)} in the cache`);
    assert.match(r.err, "its name leads out of the cache");
  }
});
R("an OpenAPI document whose $refs expand exponentially is refused, naming the schema, not expanded to gigabytes", () => {
  // 40 schemas, each referring to the next twice: 2^40 nodes if inlined, in about 3 KB.
  const schemas: Record<string, unknown> = {};
  for (let i = 0; i < 40; i++)
    schemas[`io.x.S${i}`] =
      i === 39
        ? { type: "string" }
        : {
            type: "object",
            properties: { a: { $ref: `#/components/schemas/io.x.S${i + 1}` }, b: { $ref: `#/components/schemas/io.x.S${i + 1}` } },
          };
  schemas["io.x.v1.Bomb"] = {
    type: "object",
    "x-kubernetes-group-version-kind": [{ group: "x.io", version: "v1", kind: "Bomb" }],
    properties: { spec: { $ref: "#/components/schemas/io.x.S0" } },
  };
  const dir = temp("xfn-validate-");
  writeFileSync(join(dir, "openapi.json"), JSON.stringify({ openapi: "3.0.0", components: { schemas } }));
  writeFileSync(join(dir, "bomb.yaml"), "apiVersion: x.io/v1\nkind: Bomb\nmetadata: {name: b}\nspec: {}\n");
  const started = Date.now();
  const r = run(join(dir, "openapi.json"), join(dir, "bomb.yaml"));
  assert.ok(Date.now() - started < 20_000, `took ${Date.now() - started} ms`);
  assert.is(r.code, 1);
  assert.match(r.err + r.out, /cannot inline the \$refs of schema io\.x\.v1\.Bomb: they expand past 1000000 nodes/);
});
R("a Provider's CRDs come from crossplane's cache layout (registry/repository@tag)", () => {
  const dir = temp("xfn-validate-");
  const pkg = join(dir, "cache", "xpkg.crossplane.io/crossplane-contrib/provider-nop@v0.2.0");
  mkdirSync(pkg, { recursive: true });
  writeFileSync(join(pkg, "package.yaml"), readFileSync(join(F, "schemas/widgets.yaml")));
  writeFileSync(
    join(dir, "provider.yaml"),
    "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p}\nspec: {package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.2.0}\n",
  );
  const r = run(join(dir, "provider.yaml"), at("valid.yaml"), { cacheDir: join(dir, "cache") });
  assert.match(r.out, "Kind=Widget, ok validated successfully");
});
R.run();

const L = suite("xfn validate: what it reads (crossplane's loader)");
L("comma lists; folders walked for .yaml and .yml only; a link to a folder not followed; a Composition's step inputs first", () => {
  const dir = temp("xfn-validate-load-");
  mkdirSync(join(dir, "a/b"), { recursive: true });
  writeFileSync(join(dir, "a/one.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\n---\n---\n{}\n");
  writeFileSync(join(dir, "a/b/two.yml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: two}\n");
  writeFileSync(join(dir, "a/skip.json"), '{"apiVersion": "v1", "kind": "ConfigMap"}');
  symlinkSync(join(dir, "a"), join(dir, "a/b/loop.yaml"));
  symlinkSync(join(dir, "a/b"), join(dir, "a/linked"));
  writeFileSync(
    join(dir, "comp.yaml"),
    "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: c}\nspec:\n  pipeline:\n  - step: s\n    functionRef: {name: f}\n    input: {apiVersion: f.example.org/v1, kind: Input, x: 1}\n",
  );
  const docs = loadSources(`${join(dir, "a")},${join(dir, "comp.yaml")}`, () => "");
  assert.equal(
    docs.map((d) => d.obj["kind"]),
    ["ConfigMap", "ConfigMap", "Input", "Composition"],
  );
});
L.run();

const X = suite("xfn render --validate and validate: in a test case");
const hello = join(ROOT, "examples");
X(
  "render --validate: a composed field the provider's CRD does not declare fails the render, naming it; output is still written",
  async () => {
    const dir = temp("xfn-render-validate-");
    const strict = (props: JsonObject) =>
      `apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: buckets.s3.aws.upbound.io}\nspec:\n  group: s3.aws.upbound.io\n  names: {kind: Bucket, plural: buckets}\n  scope: Cluster\n  versions:\n  - name: v1beta1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: ${JSON.stringify({ type: "object", properties: { spec: { type: "object", properties: { forProvider: { type: "object", properties: props } } } } })}\n`;
    writeFileSync(join(dir, "ok.yaml"), strict({ region: { type: "string" } }));
    writeFileSync(join(dir, "strict.yaml"), strict({ location: { type: "string" } }));
    const go = async (schemas: string) => {
      let out = "";
      let err = "";
      const code = await runRender(
        join(hello, "xr.yaml"),
        join(hello, "composition.yaml"),
        undefined,
        {
          requiredResources: [],
          extraResources: [],
          contextValues: [],
          contextFiles: [],
          timeout: 60_000,
          includeFunctionResults: false,
          includeFullXr: false,
          includeContext: false,
          now: new Date("2024-01-01T00:00:00Z"),
          legacyOutput: false,
          validate: schemas,
        },
        { write: (s: string) => ((out += s), true) } as never,
        { write: (s: string) => ((err += s), true) } as never,
      );
      return { code, out, err };
    };
    const xrd = join(ROOT, "examples/host/xrd.yaml");
    const ok = await go(`${xrd},${join(dir, "ok.yaml")}`);
    assert.is(ok.code, 0, ok.err);
    const bad = await go(`${xrd},${join(dir, "strict.yaml")}`);
    assert.is(bad.code, 1);
    assert.match(bad.err, 'spec.forProvider.region: Invalid value: "region": unknown field: "region"');
    assert.match(bad.err, "xfn render: --validate: could not validate all resources");
    assert.match(
      bad.err,
      "a cluster's server-side apply would refuse: failed to create typed patch object (/team-a-8cccad1cd8e5; s3.aws.upbound.io/v1beta1, Kind=Bucket): .spec.forProvider.region: field not declared in schema",
    );
    assert.match(bad.out, "kind: Bucket", "the render's output is still written");
  },
);
X("a case's validate: fails it when a desired composed resource is refused, or has no schema; passes when all pass", async () => {
  const dir = temp("xfn-case-validate-");
  const kase = join(dir, "cases/one");
  mkdirSync(kase, { recursive: true });
  const request = {
    observed: {
      composite: {
        resource: {
          apiVersion: "example.xfn.dev/v1alpha1",
          kind: "XBuckets",
          metadata: { name: "a" },
          spec: { region: "eu-west-1", buckets: [{ name: "logs" }] },
        },
      },
    },
    input: { apiVersion: "hello.xfn.dev/v1alpha1", kind: "Input", defaultRegion: "us-east-1" },
  };
  writeFileSync(join(kase, "request.yaml"), JSON.stringify(request));
  writeFileSync(join(kase, "expected.yaml"), "{}\n");
  const cfg = (validate: string) =>
    writeFileSync(join(kase, "case.yaml"), `function: ${join(ROOT, "functions/hello")}\nvalidate: ${validate}\n`);
  writeFileSync(
    join(dir, "bucket.yaml"),
    `apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: buckets.s3.aws.upbound.io}\nspec:\n  group: s3.aws.upbound.io\n  names: {kind: Bucket, plural: buckets}\n  scope: Cluster\n  versions:\n  - name: v1beta1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {forProvider: {type: object, properties: {location: {type: string}}}}}}}}\n`,
  );
  cfg("../../bucket.yaml");
  const runOne = async () => [await runCase(kase, join(dir, "cases"))];
  let r = await runOne();
  assert.is(r[0]!.status, "failed");
  assert.match(
    r[0]!.detail!,
    'validate: [x] schema validation error s3.aws.upbound.io/v1beta1, Kind=Bucket, bucket-logs : spec.forProvider.region: Invalid value: "region": unknown field',
  );
  assert.match(
    r[0]!.detail!,
    "validate: a cluster's server-side apply would refuse: failed to create typed patch object (/bucket-logs; s3.aws.upbound.io/v1beta1, Kind=Bucket): .spec.forProvider.region: field not declared in schema",
  );
  cfg("[]");
  writeFileSync(
    join(kase, "case.yaml"),
    `function: ${join(ROOT, "functions/hello")}\nvalidate: ${join(ROOT, "examples/host/crds.yaml")}\n`,
  );
  r = await runOne();
  assert.is(r[0]!.status, "passed", r[0]!.detail);
  writeFileSync(join(kase, "case.yaml"), `function: ${join(ROOT, "functions/hello")}\nvalidate: ${join(ROOT, "examples/host/xrd.yaml")}\n`);
  r = await runOne();
  assert.match(r[0]!.detail!, "validate: [!] could not find CRD/XRD for: s3.aws.upbound.io/v1beta1, Kind=Bucket");
  writeFileSync(join(kase, "case.yaml"), "validate: 3\n");
  r = await runOne();
  assert.match(r[0]!.detail!, "validate must be a path, or a list of paths");
});
X.run();
