// health: whether an XR and the resources it composes are working, or hitting
// errors (crossplane #5643's `Healthy`, which Crossplane reserves and has not
// built yet). Ready says whether the infrastructure is there to use; Healthy
// says whether anything is failing on the way, so "not ready, give it time" and
// "not ready, it is broken" read differently.
//
// The rules, from the proposal (crossplane/crossplane#5643, read 2026-11-30;
// Crossplane v2.4.0 has no code for it, apis core/v2 condition.go only
// reserves the type):
// - An XR that is not synced is unhealthy ("The composite resource is not
//   synced"), whatever its composed resources say: it may not have applied
//   their latest desired state.
// - Otherwise it is unhealthy when a composed resource is: Synced False (its
//   controller hit an error), or, for a composed XR, Healthy False (or the
//   roll-up a function wrote, HEALTH_TYPE), named in
//   "Unhealthy composed resources: a, b, and 3 more".
// - One more from Ready, which the proposal leaves out: Ready False with reason
//   Unavailable (core/v2's "the resource is not available for use", set when it
//   should be and is not) is a failure; Creating is time.
// The reasons are Crossplane's reserved ReconcileSuccess and ReconcileError.
import type { JsonObject } from "@bufbuild/protobuf";
import { firstNAndSomeMore } from "../words.js";
import { getObjectCondition } from "../sdk/object.js";

/** HEALTH_TYPE is the roll-up's condition type as a function writes it: Crossplane drops a function's `Healthy`. */
export const HEALTH_TYPE = "ResourcesHealthy";

/** NOT_SYNCED is the message of an XR that is unhealthy because it is not synced (crossplane #5643's words). */
export const NOT_SYNCED = "The composite resource is not synced";

/** Health is a roll-up as a condition: status, reason, and the message when unhealthy. */
export interface Health {
  status: "True" | "False";
  reason: "ReconcileSuccess" | "ReconcileError";
  message?: string;
  /** The composed resources found unhealthy, by name. */
  unhealthy: string[];
}

/** whyUnhealthy says why a composed resource is unhealthy ("not synced", "unhealthy", "unavailable"), or undefined. */
export function whyUnhealthy(obj: JsonObject): string | undefined {
  if (failing(getObjectCondition(obj, "Synced"))) return "not synced";
  for (const type of ["Healthy", HEALTH_TYPE]) if (getObjectCondition(obj, type)?.status === "False") return "unhealthy";
  const ready = getObjectCondition(obj, "Ready");
  if (ready?.status === "False" && ready.reason === "Unavailable") return "unavailable";
  return undefined;
}

/** failing tells whether a Synced condition says its controller hit an error (paused is not one). */
const failing = (c: { status?: string; reason?: string } | undefined) => c?.status === "False" && c.reason !== "ReconcilePaused";

/**
 * rollUp is the XR's health: synced is the XR's own Synced condition (this
 * reconcile's, or the last one's as observed), composed its composed
 * resources by name.
 */
export function rollUp(synced: { status?: string; reason?: string } | undefined, composed: Iterable<[string, JsonObject]>): Health {
  if (failing(synced)) return { status: "False", reason: "ReconcileError", message: NOT_SYNCED, unhealthy: [] };
  const unhealthy: string[] = [];
  for (const [name, obj] of composed) if (whyUnhealthy(obj) !== undefined) unhealthy.push(name);
  if (unhealthy.length === 0) return { status: "True", reason: "ReconcileSuccess", unhealthy };
  return {
    status: "False",
    reason: "ReconcileError",
    message: `Unhealthy composed resources: ${firstNAndSomeMore(unhealthy)}`,
    unhealthy: unhealthy.sort(),
  };
}
