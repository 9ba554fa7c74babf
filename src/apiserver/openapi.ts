// OpenAPI v3 as kube-apiserver publishes it for kubectl: /openapi/v3 lists a
// document per group version (with a hash in its URL, which kubectl caches
// by), and each document has a schema per kind, marked with
// x-kubernetes-group-version-kind, and the kind's paths, whose PATCH takes
// fieldValidation (kubectl asks for it before it leaves validation to the
// server). `kubectl explain` reads the schemas: a CRD's kinds get their
// served version's openAPIV3Schema with apiVersion, kind and metadata added,
// as apiextensions-apiserver's builder adds them; built-in kinds get the
// fields their API has (described here in a line each, not kube's text).
import { createHash } from "node:crypto";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isObject } from "../json.js";
import type { ResourceType } from "./types.js";

const META_REF = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

const str = (description: string, extra: JsonObject = {}): JsonObject => ({ type: "string", description, ...extra });
const int = (description: string): JsonObject => ({ type: "integer", format: "int32", description });
const bool = (description: string): JsonObject => ({ type: "boolean", description });
const time = (description: string): JsonObject => ({ type: "string", format: "date-time", description });
/** ref is a field of a shared schema, as kube's documents refer to one: allOf of its $ref. */
const ref = (name: string, description: string, extra: JsonObject = {}): JsonObject => ({
  description,
  allOf: [{ $ref: `#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.${name}` }],
  ...extra,
});
const LIST_META_REF = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const strings = (description: string): JsonObject => ({ type: "array", items: { type: "string", default: "" }, description });
const stringMap = (description: string, format?: string): JsonObject => ({
  type: "object",
  additionalProperties: { type: "string", default: "", ...(format ? { format } : {}) },
  description,
});
const obj = (description: string, properties: Record<string, JsonObject>, required: string[] = []): JsonObject => ({
  type: "object",
  description,
  properties,
  ...(required.length ? { required } : {}),
});

/** Schemas every document shares: object metadata. */
const SHARED: Record<string, JsonObject> = {
  [META_REF]: obj("Metadata every persisted object has.", {
    name: str("The object's name, unique in its namespace."),
    generateName: str("A prefix the server completes into a unique name when no name is given."),
    namespace: str("The namespace the object is in."),
    uid: str("Unique in time and space; set by the server."),
    resourceVersion: str("The version of the object, for optimistic concurrency and watches; set by the server."),
    generation: { type: "integer", format: "int64", description: "A sequence number of the desired state's changes." },
    creationTimestamp: ref("Time", "When the object was created; set by the server."),
    deletionGracePeriodSeconds: { type: "integer", format: "int64", description: "Seconds the object has to go once asked to be deleted." },
    deletionTimestamp: ref("Time", "When the object was asked to be deleted; set by the server."),
    labels: stringMap("Keys and values to organise and select objects by."),
    annotations: stringMap("Keys and values tools keep on the object."),
    finalizers: {
      ...strings("What must happen before the object is removed."),
      "x-kubernetes-list-type": "set",
      "x-kubernetes-patch-strategy": "merge",
    },
    ownerReferences: {
      type: "array",
      description: "The objects this one depends on; it is collected when they are all gone.",
      items: { default: {}, allOf: [{ $ref: "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference" }] },
      "x-kubernetes-list-map-keys": ["uid"],
      "x-kubernetes-list-type": "map",
      "x-kubernetes-patch-merge-key": "uid",
      "x-kubernetes-patch-strategy": "merge",
    },
    managedFields: {
      type: "array",
      description: "Which manager owns which fields; kept by the server.",
      items: { default: {}, allOf: [{ $ref: "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry" }] },
      "x-kubernetes-list-type": "atomic",
    },
    selfLink: str("Not set (deprecated)."),
  }),
  "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference": {
    ...obj(
      "A reference to an owner.",
      {
        apiVersion: str("The owner's API version.", { default: "" }),
        blockOwnerDeletion: bool("Whether the owner's foreground deletion waits for this object."),
        controller: bool("Whether the owner is the managing controller."),
        kind: str("The owner's kind.", { default: "" }),
        name: str("The owner's name.", { default: "" }),
        uid: str("The owner's uid.", { default: "" }),
      },
      ["apiVersion", "kind", "name", "uid"],
    ),
    "x-kubernetes-map-type": "atomic",
  },
  "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry": obj("Which fields a manager owns, and how it last wrote them.", {
    apiVersion: str("The API version the manager wrote in."),
    fieldsType: str("How fieldsV1 is written: FieldsV1."),
    fieldsV1: ref("FieldsV1", "The fields owned."),
    manager: str("The manager's name."),
    operation: str("Apply or Update."),
    subresource: str("The subresource written, if any."),
    time: ref("Time", "When the manager last changed them."),
  }),
  "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1": { description: "A set of fields, as structured-merge-diff writes it.", type: "object" },
  "io.k8s.apimachinery.pkg.apis.meta.v1.Time": { description: "A time, in RFC 3339.", type: "string", format: "date-time" },
  [LIST_META_REF]: obj("Metadata of a list.", {
    continue: str("Where the next page starts, when a limit was asked for."),
    remainingItemCount: { type: "integer", format: "int64", description: "How many items the next pages hold, when known." },
    resourceVersion: str("The version of the list, to watch from."),
    selfLink: str("Not set (deprecated)."),
    shardInfo: ref("ShardInfo", "Not set: the list is not sharded."),
  }),
  "io.k8s.apimachinery.pkg.apis.meta.v1.ShardInfo": obj(
    "Which shard of a list this is.",
    { selector: str("The shard's selector.", { default: "" }) },
    ["selector"],
  ),
};

const condition = obj("A condition.", {
  type: str("The condition's type."),
  status: str("True, False or Unknown."),
  reason: str("Why, in one CamelCase word."),
  message: str("Why, for people."),
  lastTransitionTime: time("When the status last changed."),
});

/** BUILTIN_SCHEMAS are the built-in kinds' fields, by group/kind. */
const BUILTIN_SCHEMAS: Record<string, Record<string, JsonObject>> = {
  "/Namespace": {
    spec: obj("What the namespace's deletion waits for.", {
      finalizers: strings("Finalizers that must be removed before the namespace is."),
    }),
    status: obj("The namespace's state.", {
      phase: str("Active or Terminating."),
      conditions: { type: "array", items: condition, description: "Why a deletion waits." },
    }),
  },
  "/ConfigMap": {
    data: stringMap("Configuration values, as strings."),
    binaryData: stringMap("Configuration values, as bytes (base64).", "byte"),
    immutable: bool("Whether the data can no longer change."),
  },
  "/Secret": {
    data: stringMap("Secret values, as bytes (base64).", "byte"),
    stringData: stringMap("Secret values as strings, merged into data when written; never read back."),
    type: str("What the secret holds (Opaque by default)."),
    immutable: bool("Whether the data can no longer change."),
  },
  "/Event": {
    involvedObject: obj("The object the event is about.", {
      apiVersion: str("Its API version."),
      kind: str("Its kind."),
      name: str("Its name."),
      namespace: str("Its namespace."),
      uid: str("Its uid."),
      fieldPath: str("The part of it the event is about."),
    }),
    reason: str("Why, in one CamelCase word."),
    message: str("What happened, for people."),
    type: str("Normal or Warning."),
    source: obj("What reported the event.", { component: str("The component."), host: str("The host.") }),
    count: int("How often it happened."),
    firstTimestamp: time("When it first happened."),
    lastTimestamp: time("When it last happened."),
    eventTime: { type: "string", format: "date-time", description: "When it happened, to the microsecond." },
    reportingComponent: str("The controller that reported it."),
    reportingInstance: str("Which instance of that controller."),
    action: str("What was done, or failed."),
  },
  "coordination.k8s.io/Lease": {
    spec: obj("Who holds the lease, and for how long.", {
      holderIdentity: str("Who holds it."),
      leaseDurationSeconds: int("How long a holder may go without renewing it."),
      acquireTime: { type: "string", format: "date-time", description: "When it was acquired." },
      renewTime: { type: "string", format: "date-time", description: "When it was last renewed." },
      leaseTransitions: int("How often it changed hands."),
    }),
  },
  "apiextensions.k8s.io/CustomResourceDefinition": {
    spec: obj("The kind it defines.", {
      group: str("The API group of the kind."),
      names: obj("The kind's names.", {
        kind: str("The kind."),
        listKind: str("The kind of its lists."),
        plural: str("The resource name in URLs."),
        singular: str("The singular name."),
        shortNames: strings("Short names kubectl takes."),
        categories: strings("Groups of resources it belongs to (kubectl get CATEGORY)."),
      }),
      scope: str("Cluster or Namespaced."),
      versions: {
        type: "array",
        description: "The versions it is served in.",
        items: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
      },
      conversion: { type: "object", "x-kubernetes-preserve-unknown-fields": true, description: "How versions convert." },
      preserveUnknownFields: bool("Deprecated: must be false."),
    }),
    status: { type: "object", "x-kubernetes-preserve-unknown-fields": true, description: "Accepted names, conditions, stored versions." },
  },
};

/** builtinSchema is the schema of a built-in kind the server serves (metadata taken as it comes), or undefined. */
export function builtinSchema(group: string, version: string, kind: string): JsonObject | undefined {
  const fields = BUILTIN_SCHEMAS[`${group}/${kind}`];
  if (!fields || version !== "v1") return undefined;
  return {
    type: "object",
    properties: {
      apiVersion: { type: "string" },
      kind: { type: "string" },
      metadata: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
      ...structuredClone(fields),
    },
  };
}

/** What each built-in kind is, in a line. */
const DESCRIPTIONS: Record<string, string> = {
  Namespace: "A scope for names: objects in it are deleted with it.",
  ConfigMap: "Configuration, as keys and values.",
  Secret: "Secret data, as keys and values.",
  Event: "A report of something that happened to an object.",
  Lease: "A lock with a holder and a term, for leader election.",
  CustomResourceDefinition: "A kind the server serves, with its names, versions and schemas.",
};

/** schemaName is kube's name for a kind's schema: the group reversed (io.k8s.api.core for the core group). */
export function schemaName(t: ResourceType, version: string): string {
  if (t.group === "") return `io.k8s.api.core.${version}.${t.kind}`;
  if (t.group === "coordination.k8s.io") return `io.k8s.api.coordination.${version}.${t.kind}`;
  if (t.group === "apiextensions.k8s.io") return `io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.${version}.${t.kind}`;
  return `${t.group.split(".").reverse().join(".")}.${version}.${t.kind}`;
}

/** kindSchema is a kind's schema as a document holds it. */
function kindSchema(t: ResourceType, version: string): JsonObject {
  const gvk = [{ group: t.group, kind: t.kind, version }];
  const head = {
    apiVersion: str("The version of the schema this object is in."),
    kind: str("The kind of the object."),
    metadata: { allOf: [{ $ref: `#/components/schemas/${META_REF}` }], default: {}, description: "Standard object metadata." },
  };
  const builtin = BUILTIN_SCHEMAS[`${t.group}/${t.kind}`];
  if (builtin)
    return {
      type: "object",
      description: DESCRIPTIONS[t.kind] ?? "",
      properties: { ...head, ...builtin },
      "x-kubernetes-group-version-kind": gvk,
    };
  const raw = t.openAPI?.[version];
  const schema: JsonObject = isObject(raw) ? structuredClone(raw) : { type: "object", "x-kubernetes-preserve-unknown-fields": true };
  const props = isObject(schema["properties"]) ? schema["properties"] : {};
  // A custom kind's metadata has no default in kube's document (a built-in's has {}).
  const { default: _, ...metadata } = head.metadata;
  schema["properties"] = { ...head, ...props, metadata };
  schema["x-kubernetes-group-version-kind"] = gvk;
  return schema;
}

/** listSchema is a kind's list: its items of the kind, list metadata. */
function listSchema(t: ResourceType, version: string): JsonObject {
  return {
    description: `${t.listKind} is a list of ${t.kind}`,
    type: "object",
    required: ["items"],
    properties: {
      apiVersion: str("The version of the schema this object is in."),
      items: { description: `The ${t.plural}.`, type: "array", items: { $ref: `#/components/schemas/${schemaName(t, version)}` } },
      kind: str("The kind of the object."),
      metadata: { description: "Standard list metadata.", allOf: [{ $ref: `#/components/schemas/${LIST_META_REF}` }] },
    },
    "x-kubernetes-group-version-kind": [{ group: t.group, kind: t.listKind, version }],
  };
}

/** paths are a kind's paths, with the operations kubectl looks for: PATCH (and POST, PUT) taking fieldValidation. */
function paths(t: ResourceType, version: string): JsonObject {
  const base = `${t.group ? `/apis/${t.group}` : "/api"}/${version}${t.namespaced ? "/namespaces/{namespace}" : ""}/${t.plural}`;
  const gvk = { group: t.group, kind: t.kind, version };
  const ref = { $ref: `#/components/schemas/${schemaName(t, version)}` };
  const query = (name: string): JsonObject => ({ name, in: "query", schema: { type: "string", uniqueItems: true } });
  const writes = [query("dryRun"), query("fieldManager"), query("fieldValidation")];
  const op = (action: string, parameters: JsonObject[] = []): JsonObject => ({
    operationId: `${action}${t.kind}`,
    parameters,
    responses: { "200": { description: "OK", content: { "application/json": { schema: ref } } } },
    "x-kubernetes-action": action,
    "x-kubernetes-group-version-kind": gvk,
  });
  return {
    [base]: { get: op("list"), post: op("post", writes), delete: op("deletecollection") },
    [`${base}/{name}`]: {
      get: op("get"),
      put: op("put", writes),
      patch: op("patch", [...writes, query("force")]),
      delete: op("delete", [query("dryRun")]),
    },
  };
}

/** groupVersions lists the group versions served, as /openapi/v3 names them. */
function groupVersions(types: Iterable<ResourceType>): Map<string, Array<{ t: ResourceType; version: string }>> {
  const out = new Map<string, Array<{ t: ResourceType; version: string }>>();
  for (const t of types)
    for (const version of t.versions) {
      const key = t.group ? `apis/${t.group}/${version}` : `api/${version}`;
      (out.get(key) ?? out.set(key, []).get(key)!).push({ t, version });
    }
  return out;
}

/** document is one group version's OpenAPI v3 document. */
export function document(types: Iterable<ResourceType>, gv: string): JsonObject | undefined {
  const kinds = groupVersions(types).get(gv);
  if (!kinds) return undefined;
  const schemas: Record<string, JsonValue> = { ...SHARED };
  let allPaths: JsonObject = {};
  for (const { t, version } of kinds) {
    schemas[schemaName(t, version)] = kindSchema(t, version);
    // A custom kind's list, as kube-apiserver's CRD documents hold it.
    if (t.openAPI) schemas[`${schemaName(t, version)}List`] = listSchema(t, version);
    allPaths = { ...allPaths, ...paths(t, version) };
  }
  // A CRD's group version is published by apiextensions' own builder, under its own title.
  const info = kinds.some(({ t }) => t.openAPI)
    ? { title: "Kubernetes CRD Swagger", version: "v0.1.0" }
    : { title: "Kubernetes", version: "v1.31.0" };
  return { openapi: "3.0.0", info, paths: allPaths, components: { schemas } };
}

/** root is /openapi/v3: each group version's document, by a URL whose hash changes with it. */
export function root(types: Iterable<ResourceType>): JsonObject {
  const list = [...types];
  const out: JsonObject = {};
  for (const gv of groupVersions(list).keys()) {
    const hash = createHash("sha512")
      .update(JSON.stringify(document(list, gv)))
      .digest("hex")
      .toUpperCase()
      .slice(0, 128);
    out[gv] = { serverRelativeURL: `/openapi/v3/${gv}?hash=${hash}` };
  }
  return { paths: out };
}
