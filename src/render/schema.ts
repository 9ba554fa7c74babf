// Schemas offline: the XR schema an XRD makes (as Crossplane makes the XR's
// CRD from it), defaulting and pruning an object with the API server's own
// defaulter and pruner (src/schema/), and answering functions' schema requirements from CRDs, XRDs and
// OpenAPI v3 documents (what /openapi/v3/<group-version> returns).
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { applyDefaults } from "../schema/defaults.js";
import { pruneToSchema as prune } from "../schema/schema.js";
import { PRESERVE } from "../sdk/schema.js";
import { scopeOf, xrSchemaOf } from "../engine/xcrd.js";
import { InputError, type Doc } from "../engine/input.js";
import { isObject } from "../sdk/fieldpath.js";

export { applyDefaults, prune };

/** Kind names a kind by group, version and kind. */
export interface GVK {
  group: string;
  version: string;
  kind: string;
}

export function parseApiVersion(apiVersion: string): { group: string; version: string } {
  const i = apiVersion.lastIndexOf("/");
  return i < 0 ? { group: "", version: apiVersion } : { group: apiVersion.slice(0, i), version: apiVersion.slice(i + 1) };
}

/**
 * xrSchema is the openAPIV3Schema of the XR kind an XRD defines, for one
 * version, as the CRD Crossplane makes for it serves it (engine/xcrd.ts: the
 * XRD's schema with what Crossplane adds under spec and status). A version
 * without a schema (which a Crossplane cluster refuses, and crossplane render
 * takes) defaults and prunes nothing.
 */
export function xrSchema(xrd: JsonObject, version: string): JsonObject {
  const spec = isObject(xrd["spec"]) ? xrd["spec"] : {};
  const versions = Array.isArray(spec["versions"]) ? spec["versions"].filter(isObject) : [];
  const v = versions.find((x) => x["name"] === version);
  if (v && !(isObject(v["schema"]) && isObject(v["schema"]["openAPIV3Schema"]))) return { type: "object", [PRESERVE]: true };
  const found = xrSchemaOf(xrd, version);
  if (!found)
    throw new InputError(
      `the XRD ${String((xrd["metadata"] as JsonObject | undefined)?.["name"] ?? "")} has no version ${JSON.stringify(version)} ` +
        `(it has ${versions.map((x) => String(x["name"])).join(", ") || "none"})`,
    );
  return found;
}

/** crdSchema is the openAPIV3Schema of one version of a CRD, or undefined. */
function crdSchema(crd: JsonObject, version: string): JsonObject | undefined {
  const spec = isObject(crd["spec"]) ? crd["spec"] : {};
  const versions = Array.isArray(spec["versions"]) ? spec["versions"].filter(isObject) : [];
  const v = versions.find((x) => x["name"] === version);
  if (v && isObject(v["schema"]) && isObject(v["schema"]["openAPIV3Schema"])) return v["schema"]["openAPIV3Schema"];
  // apiextensions.k8s.io/v1beta1 CRDs kept one schema for every version.
  if (v && isObject(spec["validation"]) && isObject(spec["validation"]["openAPIV3Schema"])) return spec["validation"]["openAPIV3Schema"];
  return undefined;
}

/**
 * SchemaSource answers schema requirements offline from CRDs, XRDs and
 * OpenAPI v3 documents. find returns the schema of a kind, or undefined.
 */
export interface SchemaSource {
  find(apiVersion: string, kind: string): JsonObject | undefined;
  /** namespaced tells whether a kind is namespaced, from a CRD's or an XRD's scope; undefined when no CRD or XRD names it. */
  namespaced(apiVersion: string, kind: string): boolean | undefined;
}

/** schemaSource indexes docs (CRDs, XRDs, OpenAPI v3 documents); anything else is an error naming its file. */
export function schemaSource(docs: Doc[]): SchemaSource {
  const entries: Array<{ gvk: GVK; schema: () => JsonObject | undefined }> = [];
  const scopes: Array<{ group: string; kind: string; namespaced: boolean }> = [];
  for (const d of docs) {
    const o = d.obj;
    const spec = isObject(o["spec"]) ? o["spec"] : {};
    const names = isObject(spec["names"]) ? spec["names"] : {};
    if (o["kind"] === "CustomResourceDefinition" || o["kind"] === "CompositeResourceDefinition") {
      const versions = Array.isArray(spec["versions"]) ? spec["versions"].filter(isObject) : [];
      const group = String(spec["group"] ?? "");
      const kind = String(names["kind"] ?? "");
      if (o["kind"] === "CompositeResourceDefinition") scopes.push({ group, kind, namespaced: scopeOf(o) === "Namespaced" });
      else if (spec["scope"] === "Namespaced" || spec["scope"] === "Cluster")
        scopes.push({ group, kind, namespaced: spec["scope"] === "Namespaced" });
      for (const v of versions) {
        const version = String(v["name"]);
        entries.push({
          gvk: { group: String(spec["group"] ?? ""), version, kind: String(names["kind"] ?? "") },
          schema: () => (o["kind"] === "CustomResourceDefinition" ? crdSchema(o, version) : xrSchema(o, version)),
        });
      }
    } else if (isObject(o["components"]) && isObject(o["components"]["schemas"])) {
      const all = o["components"]["schemas"];
      for (const [name, s] of Object.entries(all)) {
        const gvks = isObject(s) ? s["x-kubernetes-group-version-kind"] : undefined;
        if (!Array.isArray(gvks) || gvks.length !== 1 || !isObject(gvks[0])) continue;
        const g = gvks[0];
        entries.push({
          gvk: { group: String(g["group"] ?? ""), version: String(g["version"] ?? ""), kind: String(g["kind"] ?? "") },
          schema: () => flatten(all, name),
        });
      }
    } else {
      throw new InputError(`${d.source}: expected a CustomResourceDefinition, a CompositeResourceDefinition or an OpenAPI v3 document`);
    }
  }
  return {
    find(apiVersion, kind) {
      const { group, version } = parseApiVersion(apiVersion);
      const e = entries.find((x) => x.gvk.group.toLowerCase() === group.toLowerCase() && x.gvk.version === version && x.gvk.kind === kind);
      return e?.schema();
    },
    namespaced(apiVersion, kind) {
      const { group } = parseApiVersion(apiVersion);
      return scopes.find((x) => x.group.toLowerCase() === group.toLowerCase() && x.kind === kind)?.namespaced;
    },
  };
}

const REF = "#/components/schemas/";

/**
 * MAX_FLATTENED_NODES bounds what flattening one schema may make: a few
 * kilobytes of schemas that each refer to the next twice expand exponentially
 * (a 3 KB document grew to 4.3 GB before the process aborted). Kubernetes'
 * largest flattened schemas hold some tens of thousands.
 */
export const MAX_FLATTENED_NODES = 1_000_000;

/** flatten inlines every $ref of an OpenAPI document's schema, as Crossplane does before handing it over (a cycle stops). */
export function flatten(all: JsonObject, name: string): JsonObject {
  let made = 0;
  const resolve = (v: JsonValue, seen: string[]): JsonValue => {
    if (++made > MAX_FLATTENED_NODES)
      throw new Error(
        `cannot inline the $refs of schema ${name}: they expand past ${MAX_FLATTENED_NODES} nodes ` +
          "(schemas that refer to others more than once, level after level)",
      );
    if (Array.isArray(v)) return v.map((x) => resolve(x, seen));
    if (!isObject(v)) return v;
    const ref = v["$ref"];
    if (typeof ref === "string" && ref.startsWith(REF)) {
      const n = ref.slice(REF.length);
      const target = all[n];
      if (!isObject(target) || seen.includes(n)) return { type: "object", [PRESERVE]: true };
      const { $ref: _r, ...rest } = v;
      return { ...(resolve(target, [...seen, n]) as JsonObject), ...(resolve(rest, seen) as JsonObject) };
    }
    // allOf: [{$ref}] is how kube-openapi wraps a referenced schema with a description.
    if (Array.isArray(v["allOf"]) && v["allOf"].length === 1) {
      const { allOf, ...rest } = v;
      return { ...(resolve(allOf[0]!, seen) as JsonObject), ...(resolve(rest, seen) as JsonObject) };
    }
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, resolve(x, seen)]));
  };
  return resolve(all[name]!, [name]) as JsonObject;
}
