// xfn generate types: Kubernetes structural schemas to TypeScript, and the
// typed objects passing to the response writers without a cast.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import ts from "typescript";
import { generateTypes, toJsonSchema } from "../../src/codegen/types.js";
import { loadDocs } from "../../src/engine/docs.js";
import { run, ROOT } from "../support/spawn.js";

const T = suite("codegen: types from CRDs and XRDs");

const schemas: Record<string, { reason: string; args: object; want: object }> = {
  ClosedObject: {
    reason: "an object with properties is pruned to them by the API server, so it accepts no other keys",
    args: { type: "object", properties: { a: { type: "string" } } },
    want: { type: "object", properties: { a: { type: "string" } }, additionalProperties: false },
  },
  PreserveUnknown: {
    reason: "x-kubernetes-preserve-unknown-fields keeps any key",
    args: { type: "object", properties: { a: { type: "string" } }, "x-kubernetes-preserve-unknown-fields": true },
    want: { type: "object", properties: { a: { type: "string" } }, additionalProperties: true },
  },
  Map: {
    reason: "additionalProperties with a schema is a map",
    args: { type: "object", additionalProperties: { type: "string" } },
    want: { type: "object", additionalProperties: { type: "string" } },
  },
  IntOrString: {
    reason: "x-kubernetes-int-or-string is either",
    args: { "x-kubernetes-int-or-string": true },
    want: { anyOf: [{ type: "integer" }, { type: "string" }] },
  },
  Nullable: {
    reason: "nullable adds null",
    args: { type: "string", nullable: true },
    want: { type: ["string", "null"] },
  },
  ProtoProperty: {
    reason: "a property named __proto__ is a property like any other (JSON.parse makes it an own key)",
    args: { type: "object", properties: JSON.parse('{"__proto__": {"type": "string"}, "b": {"type": "integer"}}') },
    want: {
      type: "object",
      properties: JSON.parse('{"__proto__": {"type": "string"}, "b": {"type": "integer"}}'),
      additionalProperties: false,
    },
  },
  Nested: {
    reason: "items, allOf and nested properties are rewritten too; defaults are dropped",
    args: { type: "array", items: { type: "object", properties: { n: { type: "integer", default: 1 } } } },
    want: { type: "array", items: { type: "object", properties: { n: { type: "integer" } }, additionalProperties: false } },
  },
};
for (const [name, tc] of Object.entries(schemas)) {
  T(`toJsonSchema: ${name}`, () => {
    assert.equal(toJsonSchema(tc.args as never), tc.want, tc.reason);
  });
}

T("toJsonSchema, observed: a property with a default is required wherever the object holding it is", () => {
  const schema = {
    type: "object",
    required: ["a"],
    properties: {
      a: { type: "string" },
      b: { type: "string", default: "x" },
      c: { type: "object", default: {}, properties: { d: { type: "integer", default: 1 }, e: { type: "integer" } } },
      f: { type: "array", items: { type: "object", properties: { g: { type: "boolean", default: false } } } },
      h: { type: "string", nullable: true, default: "y" },
    },
  };
  const observed = toJsonSchema(schema as never, { observed: true }) as any;
  assert.equal(observed.required, ["a", "b", "c", "h"]);
  assert.equal(observed.properties.c.required, ["d"]);
  assert.equal(observed.properties.f.items.required, ["g"]);
  assert.equal(observed.properties.h.type, ["string", "null"], "a nullable field with a default may still be null");
  // As written, a default leaves a field optional: the API server fills it in.
  assert.equal((toJsonSchema(schema as never) as any).required, ["a"]);
});

const crd = (kind: string, versions: string[]) => ({
  obj: {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${kind.toLowerCase()}s.example.org` },
    spec: {
      group: "example.org",
      names: { kind, plural: `${kind.toLowerCase()}s` },
      versions: versions.map((v) => ({
        name: v,
        served: true,
        storage: v === versions[0],
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: { spec: { type: "object", required: ["size"], properties: { size: { type: "integer" } } } },
          },
        },
      })),
    },
  },
  source: "test",
});

T("one interface per served version, apiVersion and kind as literal types", async () => {
  const { code, kinds } = await generateTypes([crd("Disk", ["v1"]), crd("Volume", ["v1", "v2"])]);
  assert.equal(
    kinds.map((k) => [k.name, k.observed, k.apiVersion]),
    [
      ["Disk", "ObservedDisk", "example.org/v1"],
      ["VolumeV1", "ObservedVolumeV1", "example.org/v1"],
      ["VolumeV2", "ObservedVolumeV2", "example.org/v2"],
    ],
  );
  assert.match(code, /export interface ObservedDisk \{\n {2}apiVersion: "example\.org\/v1";\n {2}kind: "Disk";/);
  assert.match(code, /export interface Disk \{\n {2}apiVersion: "example\.org\/v1";\n {2}kind: "Disk";/);
  assert.match(code, /size: number;/);
});

T("documents of other kinds are skipped; none at all is an error; two kinds of one name are refused", async () => {
  const cm = { obj: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x" } }, source: "cm.yaml" };
  assert.is((await generateTypes([cm, crd("Disk", ["v1"])])).kinds.length, 1);
  try {
    await generateTypes([cm]);
    assert.unreachable();
  } catch (err) {
    assert.match((err as Error).message, /found no CustomResourceDefinition or CompositeResourceDefinition/);
  }
  try {
    await generateTypes([crd("Disk", ["v1"]), { ...crd("Disk", ["v1"]), source: "other.yaml" }]);
    assert.unreachable();
  } catch (err) {
    assert.match((err as Error).message, /other\.yaml: two kinds would both be named Disk \(the other from test\)/);
  }
});

T("generated types pass to the readers and writers without casts, and tsc catches a wrong kind", async () => {
  // A kind whose schema has defaults: written without them, read back with them set.
  const queue = crd("Queue", ["v1"]);
  (queue.obj.spec.versions[0]!.schema.openAPIV3Schema as any).properties.spec = {
    type: "object",
    default: {},
    properties: { deletionPolicy: { type: "string", enum: ["Orphan", "Delete"], default: "Delete" }, size: { type: "integer" } },
  };
  const { code } = await generateTypes([...loadDocs(join(ROOT, "templates/function/crds")), queue]);
  const dir = join(ROOT, ".tmp", `typed-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  try {
    writeFileSync(join(dir, "types.ts"), code);
    const use = (kind: string) => `import { fieldpath, getAnnotation, getObjectCondition, isDeleting, request, response, setAnnotation,
  type RunFunctionRequest } from "xfn-runtime";
import type { Bucket, ObservedBucket, ObservedQueue, ObservedXBuckets, Queue, XBuckets } from "./types.js";
export function f(req: RunFunctionRequest) {
  const rsp = response.to(req);
  const xr = request.getObservedCompositeResource<ObservedXBuckets>(req);
  // The readers take typed objects as they are.
  const seen = request.getObservedComposedResource<ObservedBucket>(req, "b");
  // Read back, a field with a default is there (and the object holding it): no check for undefined.
  const observedQueue = request.getObservedComposedResource<ObservedQueue>(req, "q");
  const policy: "Orphan" | "Delete" = observedQueue ? observedQueue.spec.deletionPolicy : "Delete";
  // Written, it may be left out.
  const q: Queue = { apiVersion: "example.org/v1", kind: "Queue", spec: { size: policy === "Orphan" ? 1 : 2 } };
  response.setDesiredComposedResource(rsp, "q", q);
  const arn: string | undefined = fieldpath.getString(seen, "status.atProvider.arn");
  const region = fieldpath.getValue(xr, "spec.region") ?? fieldpath.getValues(seen, "spec.forProvider.tags[*]").length;
  const ready = getObjectCondition(seen, "Ready")?.status === "True" && !isDeleting(seen) && getAnnotation(xr, "a") !== arn;
  const b: Bucket = { apiVersion: "s3.aws.m.upbound.io/v1beta1", kind: ${JSON.stringify(kind)}, spec: { forProvider: { region: xr?.spec?.region ?? "x" } } };
  setAnnotation(b, "crossplane.io/external-name", String(region));
  response.setDesiredComposedResource(rsp, "b", b, { ready });
  const status: NonNullable<XBuckets["status"]> = { bucketCount: 1, externalNames: { b: "name" } };
  response.setDesiredCompositeStatus(rsp, status);
  return rsp;
}
`;
    const diagnostics = (kind: string) => {
      writeFileSync(join(dir, "use.ts"), use(kind));
      const program = ts.createProgram([join(dir, "use.ts")], {
        strict: true,
        exactOptionalPropertyTypes: true,
        noEmit: true,
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        target: ts.ScriptTarget.ES2022,
        customConditions: ["xfn-source"],
        skipLibCheck: true,
        types: ["node"],
      });
      return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    };
    assert.equal(diagnostics("Bucket"), []);
    const wrong = diagnostics("Bukket");
    assert.is(wrong.length, 1, wrong.join("\n"));
    assert.match(wrong[0]!, /Type '"Bukket"' is not assignable to type '"Bucket"'/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

T("xfn generate types: to a file, and clear errors for bad input", async () => {
  const dir = join(ROOT, ".tmp", `gen-${process.pid}`);
  try {
    const ok = await run(["generate", "types", "templates/function/crds", "-o", join(dir, "t.ts")]);
    assert.is(ok.code, 0, ok.stderr);
    assert.match(
      ok.stderr,
      /wrote .*t\.ts: Bucket and ObservedBucket \(s3\.aws\.m\.upbound\.io\/v1beta1 Bucket\), XBuckets and ObservedXBuckets \(example\.org\/v1alpha1 XBuckets\)/,
    );
    const none = await run(["generate", "types", "examples/xr.yaml"]);
    assert.is(none.code, 1);
    assert.match(none.stderr, /xfn generate types: found no CustomResourceDefinition/);
    const missing = await run(["generate", "types", "nope.yaml"]);
    assert.is(missing.code, 1);
    assert.match(missing.stderr, /cannot read nope\.yaml: no such file or directory/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

T.run();
