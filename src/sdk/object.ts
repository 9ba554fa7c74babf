// Helpers over a Kubernetes object held as plain JSON: metadata and status
// conditions, the parts nearly every function reads.
import type { JsonObject } from "@bufbuild/protobuf";
import { getArray, getObject, getString, setValue } from "./fieldpath.js";

/** ObjectCondition is one entry of an object's status.conditions. */
export interface ObjectCondition {
  type: string;
  status: "True" | "False" | "Unknown" | string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

/** getAnnotation returns metadata.annotations[key], or undefined. */
export function getAnnotation(obj: JsonObject | undefined, key: string): string | undefined {
  return getString(getObject(obj, "metadata.annotations"), `[${key}]`);
}

/** setAnnotation sets metadata.annotations[key]. */
export function setAnnotation(obj: JsonObject, key: string, value: string): void {
  setValue(obj, `metadata.annotations[${key}]`, value);
}

/** getLabel returns metadata.labels[key], or undefined. */
export function getLabel(obj: JsonObject | undefined, key: string): string | undefined {
  return getString(getObject(obj, "metadata.labels"), `[${key}]`);
}

/** getObjectCondition returns the status condition of the given type, or undefined. */
export function getObjectCondition(obj: JsonObject | undefined, type: string): ObjectCondition | undefined {
  for (const c of getArray(obj, "status.conditions") ?? []) {
    if (typeof c === "object" && c !== null && !Array.isArray(c) && c["type"] === type && typeof c["status"] === "string") {
      const out: ObjectCondition = { type, status: c["status"] };
      for (const k of ["reason", "message", "lastTransitionTime"] as const) {
        const v = c[k];
        if (typeof v === "string") out[k] = v;
      }
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
export function isDeleting(obj: JsonObject | undefined): boolean {
  return getString(obj, "metadata.deletionTimestamp") !== undefined;
}
