// The CRD Crossplane makes for an XRD, ported from crossplane-runtime's
// TestForCompositeResource (pkg/xcrd/crd_test.go, crossplane/crossplane-runtime
// 4e7ed235b0e1): case names kept, the Go expectations written out as JSON.
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { forCompositeResource, XRDError } from "../../src/engine/xcrd.js";

const X = suite("xcrd: the CRD Crossplane makes for an XRD (crossplane-runtime TestForCompositeResource)");

const name = "coolcomposites.example.org";
const labels = { cool: "very" };
const annotations = { "example.org/cool": "very" };
const schema = (): JsonObject => ({
  required: ["spec"],
  properties: {
    spec: {
      description: "Specification of the resource.",
      required: ["storageGB", "engineVersion"],
      properties: {
        engineVersion: { enum: ["5.6", "5.7"], type: "string" },
        storageGB: { type: "integer", description: "Pretend this is useful." },
        someField: { type: "string", description: "Pretend this is useful." },
        someOtherField: { type: "string", description: "Pretend this is useful." },
      },
      "x-kubernetes-validations": [{ message: "Cannot change engine version", rule: "self.engineVersion == oldSelf.engineVersion" }],
      type: "object",
      oneOf: [{ required: ["someField"] }, { required: ["someOtherField"] }],
    },
    status: {
      properties: { phase: { type: "string" }, something: { type: "string" } },
      "x-kubernetes-validations": [{ message: "Phase is required once set", rule: "!has(oldSelf.phase) || has(self.phase)" }],
      oneOf: [{ required: ["phase"] }, { required: ["something"] }],
      type: "object",
      description: "Status of the resource.",
    },
  },
  type: "object",
  description: "What the resource is for.",
});

const xrd = (scope: string | undefined, openAPIV3Schema: JsonObject | undefined, version: JsonObject = {}): JsonObject => ({
  apiVersion: "apiextensions.crossplane.io/v1",
  kind: "CompositeResourceDefinition",
  metadata: { name, labels, annotations, uid: "you-you-eye-dee" },
  spec: {
    ...(scope ? { scope } : {}),
    group: "example.org",
    names: { plural: "coolcomposites", singular: "coolcomposite", kind: "CoolComposite", listKind: "CoolCompositeList" },
    versions: [{ name: "v1", referenceable: true, served: true, ...(openAPIV3Schema ? { schema: { openAPIV3Schema } } : {}), ...version }],
  },
});

const S = { type: "string" };
const named = { type: "object", required: ["name"], properties: { name: S } };
const selector = { type: "object", required: ["matchLabels"], properties: { matchLabels: { type: "object", additionalProperties: S } } };
const conditions = {
  description: "Conditions of the resource.",
  type: "array",
  "x-kubernetes-list-type": "map",
  "x-kubernetes-list-map-keys": ["type"],
  items: {
    type: "object",
    required: ["lastTransitionTime", "reason", "status", "type"],
    properties: {
      lastTransitionTime: { type: "string", format: "date-time" },
      message: S,
      reason: S,
      status: S,
      type: S,
      observedGeneration: { type: "integer", format: "int64" },
    },
  },
};
const crossplaneProps = (legacy: boolean) => ({
  compositionRef: named,
  compositionSelector: selector,
  compositionRevisionRef: named,
  compositionRevisionSelector: selector,
  compositionUpdatePolicy: { type: "string", enum: ["Automatic", "Manual"] },
  resourceRefs: {
    type: "array",
    items: {
      type: "object",
      properties: { apiVersion: S, name: S, ...(legacy ? { namespace: S } : {}), kind: S },
      required: ["apiVersion", "kind"],
    },
    "x-kubernetes-list-type": "atomic",
  },
});
const columns = (at: string) => [
  { name: "SYNCED", type: "string", jsonPath: ".status.conditions[?(@.type=='Synced')].status" },
  { name: "READY", type: "string", jsonPath: ".status.conditions[?(@.type=='Ready')].status" },
  { name: "COMPOSITION", type: "string", jsonPath: `${at}.compositionRef.name` },
  { name: "COMPOSITIONREVISION", type: "string", jsonPath: `${at}.compositionRevisionRef.name`, priority: 1 },
  { name: "AGE", type: "date", jsonPath: ".metadata.creationTimestamp" },
];

/** want is the CRD the Go test expects, for a scope; more adds to the version. */
function want(scope: "Namespaced" | "LegacyCluster", spec: JsonObject, root: JsonObject = {}, version: JsonObject = {}): JsonObject {
  const legacy = scope === "LegacyCluster";
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: {
      name,
      labels,
      ownerReferences: [
        {
          apiVersion: "apiextensions.crossplane.io/v1",
          kind: "CompositeResourceDefinition",
          name,
          uid: "you-you-eye-dee",
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      group: "example.org",
      names: {
        plural: "coolcomposites",
        singular: "coolcomposite",
        kind: "CoolComposite",
        listKind: "CoolCompositeList",
        categories: ["composite"],
      },
      scope: legacy ? "Cluster" : "Namespaced",
      versions: [
        {
          name: "v1",
          served: true,
          storage: true,
          subresources: { status: {}, ...((version["subresources"] as JsonObject) ?? {}) },
          additionalPrinterColumns: columns(legacy ? ".spec" : ".spec.crossplane"),
          schema: {
            openAPIV3Schema: {
              type: "object",
              description: "What the resource is for.",
              required: ["spec"],
              ...root,
              properties: {
                apiVersion: S,
                kind: S,
                metadata: { type: "object", properties: { name: { type: "string", maxLength: 63 } } },
                spec: {
                  type: "object",
                  required: ["storageGB", "engineVersion"],
                  description: "Specification of the resource.",
                  "x-kubernetes-validations": [
                    { message: "Cannot change engine version", rule: "self.engineVersion == oldSelf.engineVersion" },
                  ],
                  oneOf: [{ required: ["someField"] }, { required: ["someOtherField"] }],
                  ...spec,
                  properties: {
                    storageGB: { type: "integer", description: "Pretend this is useful." },
                    engineVersion: { type: "string", enum: ["5.6", "5.7"] },
                    someField: { type: "string", description: "Pretend this is useful." },
                    someOtherField: { type: "string", description: "Pretend this is useful." },
                    ...(legacy
                      ? {
                          ...crossplaneProps(true),
                          claimRef: {
                            type: "object",
                            required: ["apiVersion", "kind", "namespace", "name"],
                            properties: { apiVersion: S, kind: S, namespace: S, name: S },
                          },
                          writeConnectionSecretToRef: {
                            type: "object",
                            required: ["name", "namespace"],
                            properties: { name: S, namespace: S },
                          },
                        }
                      : {
                          crossplane: {
                            type: "object",
                            description: "Configures how Crossplane will reconcile this composite resource",
                            properties: crossplaneProps(false),
                          },
                        }),
                  },
                },
                status: {
                  type: "object",
                  description: "Status of the resource.",
                  "x-kubernetes-validations": [{ message: "Phase is required once set", rule: "!has(oldSelf.phase) || has(self.phase)" }],
                  oneOf: [{ required: ["phase"] }, { required: ["something"] }],
                  properties: {
                    phase: S,
                    something: S,
                    conditions,
                    ...(legacy
                      ? {
                          connectionDetails: { type: "object", properties: { lastPublishedTime: { type: "string", format: "date-time" } } },
                          claimConditionTypes: { type: "array", "x-kubernetes-list-type": "set", items: S },
                        }
                      : {}),
                  },
                },
              },
            },
          },
        },
      ],
    },
  };
}

X("Namespaced: a CRD from a modern XRD version of a namespaced XR", () => {
  assert.equal(forCompositeResource(xrd("Namespaced", schema())), want("Namespaced", {}));
});

X("Legacy: a CRD from a legacy XRD version (no scope in a v1 XRD)", () => {
  assert.equal(forCompositeResource(xrd(undefined, schema())), want("LegacyCluster", {}));
  assert.equal(forCompositeResource(xrd("LegacyCluster", schema())), want("LegacyCluster", {}));
});

X("NilSchema: an error if the composite resource validation is nil", () => {
  assert.throws(
    () => forCompositeResource(xrd("Namespaced", undefined)),
    (err: Error) =>
      err instanceof XRDError &&
      err.message === `cannot generate CRD for "Composite Resource" "${name}": custom resource validation cannot be nil`,
  );
});

X("PreserveUnknownFields: spec keeps the XRD's x-kubernetes-preserve-unknown-fields", () => {
  const s = schema();
  ((s["properties"] as JsonObject)["spec"] as JsonObject)["x-kubernetes-preserve-unknown-fields"] = true;
  assert.equal(forCompositeResource(xrd(undefined, s)), want("LegacyCluster", { "x-kubernetes-preserve-unknown-fields": true }));
});

X("PreserveUnknownFieldsInSpec: top-level x-kubernetes-validations are kept outside spec", () => {
  const rule = {
    rule: "self.metadata.name == ('database-' + self.spec.engineVersion)",
    message: "metadata.name must be database-spec.engineVersion",
  };
  const s = { ...schema(), "x-kubernetes-validations": [rule] };
  assert.equal(forCompositeResource(xrd("Namespaced", s)), want("Namespaced", {}, { "x-kubernetes-validations": [rule] }));
});

X("Scale: the scale subresource comes from the XRD version", () => {
  const scale = { specReplicasPath: ".spec.replicas", statusReplicasPath: ".status.replicas", labelSelectorPath: ".status.selector" };
  assert.equal(
    forCompositeResource(xrd("Namespaced", schema(), { subresources: { scale } })),
    want("Namespaced", {}, {}, { subresources: { scale } }),
  );
});

X(
  "the XRD's defaultCompositionUpdatePolicy is the default of spec.crossplane.compositionUpdatePolicy; a metadata.name maxLength under 63 is kept",
  () => {
    const s = schema();
    (s["properties"] as JsonObject)["metadata"] = { type: "object", properties: { name: { type: "string", maxLength: 20 } } };
    const x = xrd("Namespaced", s);
    (x["spec"] as JsonObject)["defaultCompositionUpdatePolicy"] = "Manual";
    const v = ((forCompositeResource(x)["spec"] as any).versions[0].schema.openAPIV3Schema as any).properties;
    assert.equal(v.spec.properties.crossplane.properties.compositionUpdatePolicy, {
      type: "string",
      enum: ["Automatic", "Manual"],
      default: "Manual",
    });
    assert.is(v.metadata.properties.name.maxLength, 20);
  },
);

X.run();
