// Helpers over a Kubernetes object held as plain JSON: metadata and status
// conditions, the parts nearly every function reads. Like the field-path
// readers, they take a JsonObject or an object typed from a CRD, no cast.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { getOwn } from "../own.js";
import { peek } from "../wire/struct/peek.js";
import { getArray, getObject, getString, isObject, setValue } from "./fieldpath.js";

/** ObjectCondition is one entry of an object's status.conditions. */
export interface ObjectCondition {
  type: string;
  status: "True" | "False" | "Unknown" | string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

/** own reads o's own key (never the prototype's), or undefined. */
const own = (o: JsonObject | undefined, key: string): JsonValue | undefined => (o !== undefined ? getOwn(o, key) : undefined);

/**
 * metadataEntry reads metadata[map][key] directly when every part is the type
 * it should be; for anything else it answers through the field-path readers,
 * which name what is wrong. (Functions call these per resource per step: a
 * field path here was most of a step's time.)
 */
function metadataEntry(obj: JsonObject | undefined, map: "annotations" | "labels", key: string): string | undefined {
  // An observed object's metadata not read yet: find the one entry in its bytes.
  const seen = peek(obj, ["metadata", map, key]);
  if (seen === undefined || typeof seen === "string") return seen;
  const meta = own(obj, "metadata");
  if (meta === undefined) return undefined;
  if (isObject(meta)) {
    const m = own(meta, map);
    if (m === undefined) return undefined;
    if (isObject(m)) {
      const v = own(m, key);
      if (v === undefined || typeof v === "string") return v;
    }
  }
  return getString(getObject(obj, `metadata.${map}`), `[${key}]`);
}

/** getAnnotation returns metadata.annotations[key], or undefined. */
export function getAnnotation(obj: object | undefined, key: string): string | undefined {
  return metadataEntry(obj as JsonObject | undefined, "annotations", key);
}

/**
 * annotationReader returns a reader of obj's annotations that finds them once,
 * however many keys it is asked for: on an observed object not read yet, each
 * getAnnotation walks the bytes of its metadata, and a step reading three
 * annotations of every resource walked them three times. It answers as
 * getAnnotation does, including the error for an annotation that is not a string.
 */
export function annotationReader(target: object | undefined): (key: string) => string | undefined {
  const obj = target as JsonObject | undefined;
  const seen = peek(obj, ["metadata", "annotations"]);
  if (seen === undefined) return () => undefined;
  if (typeof seen !== "symbol" && isObject(seen)) {
    const annotations = seen;
    return (key) => {
      const v = own(annotations, key);
      return v === undefined || typeof v === "string" ? v : getAnnotation(obj, key);
    };
  }
  return (key) => getAnnotation(obj, key);
}

/** setAnnotation sets metadata.annotations[key]. */
export function setAnnotation(target: object, key: string, value: string): void {
  const obj = target as JsonObject;
  // Directly when metadata and annotations are objects or absent; otherwise the
  // field path write, which refuses what it must and names why.
  if (key !== "__proto__") {
    const meta = own(obj, "metadata");
    if (meta === undefined || isObject(meta)) {
      const m: JsonObject = meta ?? (obj["metadata"] = {});
      const a = own(m, "annotations");
      if (a === undefined || a === null || isObject(a)) {
        (isObject(a) ? a : (m["annotations"] = {}))[key] = value;
        return;
      }
    }
  }
  setValue(obj, `metadata.annotations[${key}]`, value);
}

/** getLabel returns metadata.labels[key], or undefined. */
export function getLabel(obj: object | undefined, key: string): string | undefined {
  return metadataEntry(obj as JsonObject | undefined, "labels", key);
}

/** conditions reads status.conditions, directly when the types are as they should be. */
function conditions(obj: JsonObject | undefined): JsonValue[] | undefined {
  const seen = peek(obj, ["status", "conditions"]);
  if (seen === undefined || Array.isArray(seen)) return seen;
  const status = own(obj, "status");
  if (status === undefined) return undefined;
  if (isObject(status)) {
    const c = own(status, "conditions");
    if (c === undefined || Array.isArray(c)) return c;
  }
  return getArray(obj, "status.conditions");
}

/** getObjectCondition returns the status condition of the given type, or undefined. */
export function getObjectCondition(obj: object | undefined, type: string): ObjectCondition | undefined {
  for (const c of conditions(obj as JsonObject | undefined) ?? []) {
    if (typeof c === "object" && c !== null && !Array.isArray(c) && c["type"] === type && typeof c["status"] === "string") {
      const out: ObjectCondition = { type, status: c["status"] };
      const { reason, message, lastTransitionTime } = c;
      if (typeof reason === "string") out.reason = reason;
      if (typeof message === "string") out.message = message;
      if (typeof lastTransitionTime === "string") out.lastTransitionTime = lastTransitionTime;
      return out;
    }
  }
  return undefined;
}

/** kubeTimestamp renders a time as Kubernetes writes timestamps: RFC 3339, whole seconds, UTC. */
export function kubeTimestamp(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** isDeleting reports whether the object has a deletionTimestamp. */
export function isDeleting(target: object | undefined): boolean {
  const obj = target as JsonObject | undefined;
  const seen = peek(obj, ["metadata", "deletionTimestamp"]);
  if (seen === undefined || seen === null) return false;
  if (typeof seen === "string") return true;
  const meta = own(obj, "metadata");
  if (meta === undefined) return false;
  if (isObject(meta)) {
    const t = own(meta, "deletionTimestamp");
    if (t === undefined || t === null) return false;
    if (typeof t === "string") return true;
  }
  return getString(obj, "metadata.deletionTimestamp") !== undefined;
}
