// Kubernetes structural schemas, as functions meet them: a kind's OpenAPI v3
// schema (what getRequiredSchema returns, or an XRD's openAPIV3Schema), and
// what the API server keeps of an object written against it.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isObject } from "./fieldpath.js";

/** PRESERVE is the extension by which a schema keeps fields it does not list. */
export const PRESERVE = "x-kubernetes-preserve-unknown-fields";

/**
 * prune removes, in place, what schema does not declare, as the API server
 * prunes a custom resource on write: a field not among an object's properties
 * goes unless the object preserves unknown fields or has additionalProperties.
 * apiVersion, kind and metadata of the root are kept. It returns the paths it
 * removed (e.g. "status.externalNames").
 */
export function prune(obj: JsonObject, schema: JsonObject): string[] {
  const removed: string[] = [];
  const walk = (v: JsonValue | undefined, s: JsonValue | undefined, path: string, root: boolean): void => {
    if (!isObject(s) || typeof v !== "object" || v === null) return;
    if (Array.isArray(v)) {
      v.forEach((x, i) => walk(x, s["items"], `${path}[${i}]`, false));
      return;
    }
    const props = isObject(s["properties"]) ? s["properties"] : undefined;
    const extra = s["additionalProperties"];
    for (const k of Object.keys(v)) {
      const p = path ? `${path}.${k}` : k;
      if (root && (k === "apiVersion" || k === "kind" || k === "metadata")) continue;
      if (props && Object.hasOwn(props, k)) walk(v[k], props[k], p, false);
      else if (isObject(extra)) walk(v[k], extra, p, false);
      else if (extra === true || s[PRESERVE] === true || (!props && extra === undefined && s["type"] !== "object")) continue;
      else {
        delete v[k];
        removed.push(p);
      }
    }
  };
  walk(obj, schema, "", true);
  return removed;
}

/** declares tells whether schema keeps the field at a dotted path (e.g. "status.externalNames") of an object written against it. */
export function declares(schema: JsonObject, path: string): boolean {
  const probe: JsonObject = {};
  let at = probe;
  const parts = path.split(".");
  parts.forEach((p, i) => {
    const next: JsonObject = {};
    at[p] = i === parts.length - 1 ? "probe" : next;
    at = next;
  });
  return !prune(probe, schema).some((r) => path === r || path.startsWith(`${r}.`));
}
