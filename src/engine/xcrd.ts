// The CRD Crossplane makes to serve an XRD's composite resources, field for
// field: crossplane-runtime's pkg/xcrd ForCompositeResource (crd.go) with the
// properties Crossplane adds (schemas.go), read at crossplane/crossplane-runtime
// 4e7ed235 (Crossplane v2). One module for `xfn render --xrd` (which defaults and
// prunes an XR by the schema) and `xfn host` (which installs the CRD), so both
// hold an XR to the same schema a Crossplane cluster holds it to.
//
// Go writes the CRD as JSON: a field at its zero value is left out where its
// tag says omitempty (required, properties, description, deprecated ...), and
// kept where it does not (served, storage).
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isObject, metaOf } from "../json.js";

export type XRScope = "Namespaced" | "Cluster" | "LegacyCluster";

/** scopeOf is an XRD's spec.scope, else its default in the version the XRD is written in (LegacyCluster in v1, Namespaced in v2). */
export function scopeOf(xrd: JsonObject): XRScope {
  const scope = specOf(xrd)["scope"];
  if (scope === "Namespaced" || scope === "Cluster" || scope === "LegacyCluster") return scope;
  return String(xrd["apiVersion"]) === "apiextensions.crossplane.io/v1" ? "LegacyCluster" : "Namespaced";
}

const specOf = (o: JsonObject): JsonObject => (isObject(o["spec"]) ? o["spec"] : {});
const objectOf = (v: JsonValue | undefined): JsonObject => (isObject(v) ? v : {});
const str = { type: "string" };
const named = { type: "object", required: ["name"], properties: { name: str } };
const selector = {
  type: "object",
  required: ["matchLabels"],
  properties: { matchLabels: { type: "object", additionalProperties: str } },
};

/** specProps are the properties Crossplane adds under an XR's spec (CompositeResourceSpecProps). */
export function specProps(scope: XRScope, defaultPolicy?: string): JsonObject {
  const refProps: JsonObject = { apiVersion: str, name: str, ...(scope === "Namespaced" ? {} : { namespace: str }), kind: str };
  const props: JsonObject = {
    compositionRef: named,
    compositionSelector: selector,
    compositionRevisionRef: named,
    compositionRevisionSelector: selector,
    compositionUpdatePolicy: { type: "string", enum: ["Automatic", "Manual"], ...(defaultPolicy ? { default: defaultPolicy } : {}) },
    resourceRefs: {
      type: "array",
      items: { type: "object", properties: refProps, required: ["apiVersion", "kind"] },
      "x-kubernetes-list-type": "atomic",
    },
  };
  if (scope === "LegacyCluster") {
    props["claimRef"] = {
      type: "object",
      required: ["apiVersion", "kind", "namespace", "name"],
      properties: { apiVersion: str, kind: str, namespace: str, name: str },
    };
    props["writeConnectionSecretToRef"] = { type: "object", required: ["name", "namespace"], properties: { name: str, namespace: str } };
    return structuredClone(props);
  }
  return structuredClone({
    crossplane: { type: "object", description: "Configures how Crossplane will reconcile this composite resource", properties: props },
  });
}

/** statusProps are the properties Crossplane adds under an XR's status (CompositeResourceStatusProps). */
export function statusProps(scope: XRScope): JsonObject {
  const props: JsonObject = {
    conditions: {
      description: "Conditions of the resource.",
      type: "array",
      "x-kubernetes-list-map-keys": ["type"],
      "x-kubernetes-list-type": "map",
      items: {
        type: "object",
        required: ["lastTransitionTime", "reason", "status", "type"],
        properties: {
          lastTransitionTime: { type: "string", format: "date-time" },
          message: str,
          reason: str,
          status: str,
          type: str,
          observedGeneration: { type: "integer", format: "int64" },
        },
      },
    },
  };
  if (scope === "LegacyCluster") {
    props["connectionDetails"] = { type: "object", properties: { lastPublishedTime: { type: "string", format: "date-time" } } };
    props["claimConditionTypes"] = { type: "array", "x-kubernetes-list-type": "set", items: str };
  }
  return structuredClone(props);
}

/** printerColumns are the columns Crossplane adds to an XR's (CompositeResourcePrinterColumns). */
export function printerColumns(scope: XRScope): JsonObject[] {
  const at = scope === "LegacyCluster" ? ".spec" : ".spec.crossplane";
  return [
    { name: "SYNCED", type: "string", jsonPath: ".status.conditions[?(@.type=='Synced')].status" },
    { name: "READY", type: "string", jsonPath: ".status.conditions[?(@.type=='Ready')].status" },
    { name: "COMPOSITION", type: "string", jsonPath: `${at}.compositionRef.name` },
    { name: "COMPOSITIONREVISION", type: "string", jsonPath: `${at}.compositionRevisionRef.name`, priority: 1 },
    { name: "AGE", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ];
}

/** XRDError is an XRD Crossplane cannot make a CRD of, with Crossplane's words. */
export class XRDError extends Error {}

/**
 * versionSchema is the openAPIV3Schema one version of the XRD serves
 * (genCrdVersion, then the spec and status properties ForCompositeResource adds).
 */
function versionSchema(
  xrd: JsonObject,
  v: JsonObject,
  scope: XRScope,
  added = { spec: specProps(scope, optionalString(specOf(xrd)["defaultCompositionUpdatePolicy"])), status: statusProps(scope) },
): JsonObject {
  const given = isObject(v["schema"]) ? v["schema"]["openAPIV3Schema"] : undefined;
  if (!isObject(given))
    throw new XRDError(
      `cannot generate CRD for "Composite Resource" "${String(metaOf(xrd)["name"])}": custom resource validation cannot be nil`,
    );
  const s = structuredClone(given);
  const props = objectOf(s["properties"]);
  const xSpec = objectOf(props["spec"]);
  const xStatus = objectOf(props["status"]);
  const givenMax = objectOf(objectOf(objectOf(props["metadata"])["properties"])["name"])["maxLength"];
  const maxLength = typeof givenMax === "number" && givenMax < 63 ? givenMax : 63;
  const list = (v: JsonValue | undefined): JsonValue[] => (Array.isArray(v) ? v : []);
  const some = (k: string, value: JsonValue[] | JsonValue | undefined): JsonObject =>
    value === undefined || (Array.isArray(value) && value.length === 0) || value === "" ? {} : { [k]: value };
  const spec: JsonObject = {
    type: "object",
    ...some("required", list(xSpec["required"])),
    ...some("x-kubernetes-preserve-unknown-fields", xSpec["x-kubernetes-preserve-unknown-fields"] === true ? true : undefined),
    ...some("x-kubernetes-validations", list(xSpec["x-kubernetes-validations"])),
    ...some("oneOf", list(xSpec["oneOf"])),
    ...some("description", xSpec["description"]),
    properties: { ...objectOf(xSpec["properties"]), ...added.spec },
  };
  const status: JsonObject = {
    type: "object",
    ...some("required", list(xStatus["required"])),
    ...some("x-kubernetes-validations", list(xStatus["x-kubernetes-validations"])),
    ...some("description", xStatus["description"]),
    ...some("oneOf", list(xStatus["oneOf"])),
    properties: { ...objectOf(xStatus["properties"]), ...added.status },
  };
  return {
    type: "object",
    required: ["spec"],
    ...some("description", s["description"]),
    ...some("x-kubernetes-validations", list(s["x-kubernetes-validations"])),
    properties: {
      apiVersion: { type: "string" },
      kind: { type: "string" },
      metadata: { type: "object", properties: { name: { type: "string", maxLength } } },
      spec,
      status,
    },
  };
}

const optionalString = (v: JsonValue | undefined): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

/** xrSchemaOf is the openAPIV3Schema of one version of the XR kind an XRD defines, as its CRD serves it. */
export function xrSchemaOf(xrd: JsonObject, version: string): JsonObject | undefined {
  const v = (Array.isArray(specOf(xrd)["versions"]) ? (specOf(xrd)["versions"] as JsonValue[]) : []).find(
    (x) => isObject(x) && x["name"] === version,
  );
  return isObject(v) ? versionSchema(xrd, v, scopeOf(xrd)) : undefined;
}

/** crdMetadata is a CRD's metadata as setCrdMetadata makes it (the XRD's labels, spec.metadata's), controlled by the XRD. */
function crdMetadata(xrd: JsonObject, name: JsonValue): JsonObject {
  const m = metaOf(xrd);
  const xm = objectOf(specOf(xrd)["metadata"]);
  const labels = { ...objectOf(m["labels"]), ...objectOf(xm["labels"]) };
  return {
    name,
    ...(Object.keys(labels).length ? { labels } : {}),
    ...(isObject(xm["annotations"]) ? { annotations: objectOf(xm["annotations"]) } : {}),
    ownerReferences: [
      {
        apiVersion: "apiextensions.crossplane.io/v1",
        kind: "CompositeResourceDefinition",
        name: m["name"] ?? "",
        uid: m["uid"] ?? "",
        controller: true,
        blockOwnerDeletion: true,
      },
    ],
  };
}

/** forCompositeResource is the CRD Crossplane makes for an XRD's composite resources (ForCompositeResource). */
export function forCompositeResource(xrd: JsonObject): JsonObject {
  const spec = specOf(xrd);
  const m = metaOf(xrd);
  const scope = scopeOf(xrd);
  const names = objectOf(spec["names"]);
  const versions = (Array.isArray(spec["versions"]) ? spec["versions"] : []).filter(isObject).map((v) => ({
    name: v["name"] ?? "",
    served: v["served"] === true,
    storage: v["referenceable"] === true,
    ...(v["deprecated"] === true ? { deprecated: true } : {}),
    ...(typeof v["deprecationWarning"] === "string" ? { deprecationWarning: v["deprecationWarning"] } : {}),
    schema: { openAPIV3Schema: versionSchema(xrd, v, scope) },
    subresources: {
      status: {},
      ...(isObject(v["subresources"]) && isObject(v["subresources"]["scale"])
        ? { scale: structuredClone(v["subresources"]["scale"]) }
        : {}),
    },
    additionalPrinterColumns: [
      ...(Array.isArray(v["additionalPrinterColumns"]) ? structuredClone(v["additionalPrinterColumns"]) : []),
      ...printerColumns(scope),
    ],
  }));
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: crdMetadata(xrd, m["name"] ?? ""),
    spec: {
      group: spec["group"] ?? "",
      names: { ...structuredClone(names), categories: [...(Array.isArray(names["categories"]) ? names["categories"] : []), "composite"] },
      scope: scope === "Namespaced" ? "Namespaced" : "Cluster",
      versions,
      ...(isObject(spec["conversion"]) ? { conversion: structuredClone(spec["conversion"]) } : {}),
    },
  };
}

/** claimSpecProps are the properties Crossplane adds under a claim's spec (CompositeResourceClaimSpecProps). */
function claimSpecProps(defaultDeletePolicy?: string): JsonObject {
  return structuredClone({
    compositionRef: named,
    compositionSelector: selector,
    compositionRevisionRef: named,
    compositionRevisionSelector: selector,
    compositionUpdatePolicy: { type: "string", enum: ["Automatic", "Manual"] },
    compositeDeletePolicy: {
      type: "string",
      enum: ["Background", "Foreground"],
      ...(defaultDeletePolicy ? { default: defaultDeletePolicy } : {}),
    },
    resourceRef: { type: "object", required: ["apiVersion", "kind", "name"], properties: { apiVersion: str, kind: str, name: str } },
    writeConnectionSecretToRef: { type: "object", required: ["name"], properties: { name: str } },
  });
}

/**
 * forCompositeResourceClaim is the CRD Crossplane (v1 XRDs with claimNames)
 * makes for an XRD's claims (ForCompositeResourceClaim), or undefined for an
 * XRD without claimNames. Claim names that collide with the XR's are an
 * XRDError in Crossplane's words.
 */
export function forCompositeResourceClaim(xrd: JsonObject): JsonObject | undefined {
  const spec = specOf(xrd);
  if (!isObject(spec["claimNames"])) return undefined;
  const claim = spec["claimNames"];
  const names = objectOf(spec["names"]);
  for (const k of ["kind", "plural", "singular", "listKind"]) {
    const n = claim[k];
    if (typeof n === "string" && n !== "" && n === names[k])
      throw new XRDError(`invalid resource claim names: ${JSON.stringify(n)} conflicts with composite resource name`);
  }
  const versions = (Array.isArray(spec["versions"]) ? spec["versions"] : []).filter(isObject).map((v) => ({
    name: v["name"] ?? "",
    served: v["served"] === true,
    storage: v["referenceable"] === true,
    ...(v["deprecated"] === true ? { deprecated: true } : {}),
    ...(typeof v["deprecationWarning"] === "string" ? { deprecationWarning: v["deprecationWarning"] } : {}),
    schema: {
      openAPIV3Schema: versionSchema(xrd, v, "LegacyCluster", {
        spec: claimSpecProps(optionalString(spec["defaultCompositeDeletePolicy"])),
        status: statusProps("LegacyCluster"),
      }),
    },
    subresources: { status: {} },
    additionalPrinterColumns: [
      ...(Array.isArray(v["additionalPrinterColumns"]) ? structuredClone(v["additionalPrinterColumns"]) : []),
      { name: "SYNCED", type: "string", jsonPath: ".status.conditions[?(@.type=='Synced')].status" },
      { name: "READY", type: "string", jsonPath: ".status.conditions[?(@.type=='Ready')].status" },
      { name: "CONNECTION-SECRET", type: "string", jsonPath: ".spec.writeConnectionSecretToRef.name" },
      { name: "AGE", type: "date", jsonPath: ".metadata.creationTimestamp" },
    ],
  }));
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: crdMetadata(xrd, `${String(claim["plural"] ?? "")}.${String(spec["group"] ?? "")}`),
    spec: {
      scope: "Namespaced",
      group: spec["group"] ?? "",
      names: { ...structuredClone(claim), categories: [...(Array.isArray(claim["categories"]) ? claim["categories"] : []), "claim"] },
      versions,
      ...(isObject(spec["conversion"]) ? { conversion: structuredClone(spec["conversion"]) } : {}),
    },
  };
}
