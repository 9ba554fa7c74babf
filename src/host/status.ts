// The XR's status as the host writes it: the pipeline's desired status, and
// conditions set by type, keeping a condition's lastTransitionTime while its
// status and reason stay the same (as Kubernetes and Crossplane do).
import type { JsonObject } from "@bufbuild/protobuf";
import { conditionsOf, now } from "./kube.js";

/** Condition is a status condition as the host sets it (lastTransitionTime is filled in). */
export interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason: string;
  message?: string;
}

/** mergeConditions sets each new condition on the XR's existing ones, by type. */
export function mergeConditions(xr: JsonObject, set: readonly Condition[]): JsonObject[] {
  const merged = [...conditionsOf(xr)];
  for (const c of set) {
    const n: JsonObject = { type: c.type, status: c.status, reason: c.reason, ...(c.message ? { message: c.message } : {}) };
    const i = merged.findIndex((x) => x["type"] === c.type);
    const old = i >= 0 ? merged[i]! : undefined;
    n["lastTransitionTime"] =
      old && old["status"] === c.status && old["reason"] === c.reason ? (old["lastTransitionTime"] ?? now()) : now();
    if (i >= 0) merged[i] = n;
    else merged.push(n);
  }
  return merged;
}

/** MAX_MESSAGE bounds a condition message (Kubernetes allows 32 KiB; kubectl shows a line). */
export const MAX_MESSAGE = 2048;

/** clip shortens a message to MAX_MESSAGE characters. */
export const clip = (s: string) => (s.length > MAX_MESSAGE ? `${s.slice(0, MAX_MESSAGE - 3)}...` : s);
