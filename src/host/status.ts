// The XR's status as the host writes it: the pipeline's desired status, and
// conditions set by type, keeping a condition's lastTransitionTime while its
// status and reason stay the same (as Kubernetes and Crossplane do); which
// conditions a reconcile sets (Synced, Ready, the functions' own), and what a
// deleting XR says.
import type { JsonObject } from "@bufbuild/protobuf";
import { firstNAndSomeMore } from "../engine/composed.js";
import { deletingMessage } from "../engine/deleting.js";
import { resultEvent, type FatalResultError, type PipelineResult, type StepResult } from "../engine/composition.js";
import { Ready } from "../gen/fn/v1/run_function_pb.js";
import { SYSTEM_CONDITION_TYPES } from "../sdk/response.js";
import { rollUp } from "../steps/health.js";
import type { HostEvent } from "./events.js";
import { conditionsOf, isObject, metaOf, now } from "./kube.js";

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

/**
 * withHealth adds Healthy to conditions that set Synced: crossplane #5643's
 * roll-up of the XR's Synced and its composed resources' (steps/health.ts),
 * which Crossplane reserves and v2.4.0 does not write yet. The host is the
 * controller here, so it writes the reserved type (a function cannot).
 */
export function withHealth(conds: Condition[], composed: Map<string, JsonObject>): Condition[] {
  const synced = conds.find((c) => c.type === "Synced");
  if (!synced) return conds;
  const h = rollUp(synced, composed);
  return [...conds, { type: "Healthy", status: h.status, reason: h.reason, ...(h.message ? { message: h.message } : {}) }];
}

/** MAX_MESSAGE bounds a condition message (Kubernetes allows 32 KiB; kubectl shows a line). */
export const MAX_MESSAGE = 2048;

/** clip shortens a message to MAX_MESSAGE characters. */
export const clip = (s: string) => (s.length > MAX_MESSAGE ? `${s.slice(0, MAX_MESSAGE - 3)}...` : s);

/**
 * readyAndSynced are the conditions a reconcile that ran the pipeline writes:
 * Synced (what went wrong, if anything), Ready (from the pipeline's readiness,
 * or Deleting), and the functions' own.
 */
export function readyAndSynced(
  r: { problems: string[]; deleting: boolean; observedObjects: Map<string, JsonObject> },
  result: PipelineResult,
  ordered: boolean,
  applied: { unready: string[]; waiting: string[] },
): Condition[] {
  const { unready, waiting } = applied;
  const warnings = result.results.filter((x) => x.severity === "Warning").map((x) => `${x.step}: ${x.message}`);
  const conds: Condition[] = [
    r.problems.length > 0
      ? { type: "Synced", status: "False", reason: "ReconcileError", message: clip(r.problems.join("; ")) }
      : { type: "Synced", status: "True", reason: "ReconcileSuccess" },
  ];
  const xrReady = result.desired.composite?.ready ?? Ready.UNSPECIFIED;
  if (!r.deleting) {
    if (xrReady === Ready.TRUE || (xrReady === Ready.UNSPECIFIED && unready.length === 0 && waiting.length === 0))
      conds.push({ type: "Ready", status: "True", reason: "Available" });
    else {
      // What keeps it from being ready (the unready list as Crossplane words it),
      // and what the functions warned of, where `kubectl get` and describe show it.
      const why = [...(unready.length ? [`Unready resources: ${firstNAndSomeMore(unready)}`] : []), ...waiting, ...warnings];
      conds.push({ type: "Ready", status: "False", reason: "Creating", ...(why.length ? { message: clip(why.join("; ")) } : {}) });
    }
  }
  if (r.deleting && !ordered)
    conds.push({ type: "Ready", status: "False", reason: "Deleting", message: clip(deletingMessage(r.observedObjects)) });
  for (const fc of result.conditions) {
    // Functions may not override system conditions, except Ready while the XR is deleted (the deletion step's report).
    if (SYSTEM_CONDITIONS.has(String(fc["type"])) && !(fc["type"] === "Ready" && ordered)) continue;
    conds.push(functionCondition(fc));
  }
  return conds;
}

/**
 * afterFatal are the custom conditions after a Fatal result, as Crossplane
 * sets them: those the Fatal step set, and the XR's others turned Unknown,
 * since nothing could say what they are now.
 */
export function afterFatal(err: FatalResultError, xr: JsonObject): Condition[] {
  const seen = new Set<string>();
  const custom: Condition[] = [];
  for (const fc of err.conditions) {
    const type = String(fc["type"]);
    if (SYSTEM_CONDITIONS.has(type)) continue;
    seen.add(type);
    custom.push(functionCondition(fc));
  }
  for (const c of conditionsOf(xr)) {
    const type = String(c["type"]);
    if (SYSTEM_CONDITIONS.has(type) || seen.has(type)) continue;
    custom.push({
      type,
      status: "Unknown",
      reason: "FatalError",
      message: "A fatal error occurred before the status of this condition could be determined.",
    });
  }
  return custom;
}

/** resultEvents turns the functions' results into Events, as Crossplane reports them. */
export const resultEvents = (results: StepResult[]): HostEvent[] => results.map(resultEvent);

/** SYSTEM_CONDITIONS are the condition types Crossplane keeps for itself: a function's are ignored. */
const SYSTEM_CONDITIONS = new Set(SYSTEM_CONDITION_TYPES);

/** functionCondition is a condition a function set, as the host writes it. */
function functionCondition(fc: JsonObject): Condition {
  return {
    type: String(fc["type"]),
    status: fc["status"] === "True" ? "True" : fc["status"] === "False" ? "False" : "Unknown",
    reason: String(fc["reason"] ?? ""),
    ...(typeof fc["message"] === "string" ? { message: fc["message"] } : {}),
  };
}

/**
 * keptStatus is the XR's status as it is, but its conditions: what a reconcile
 * that could not run the pipeline writes back, so that status the pipeline
 * wrote before (recorded external names, the deletion order) is not removed
 * by a server-side apply that leaves it out.
 */
export function keptStatus(xr: JsonObject): JsonObject {
  const { conditions: _conditions, ...rest } = isObject(xr["status"]) ? (xr["status"] as JsonObject) : {};
  return rest;
}

/** recordedOrder reads status.deletion.order (waves of resource names), or [] when absent or malformed. */
export function recordedOrder(xr: JsonObject): string[][] {
  const s = isObject(xr["status"]) ? xr["status"] : {};
  const d = isObject(s["deletion"]) ? s["deletion"] : {};
  const o = d["order"];
  if (!Array.isArray(o) || !o.every((w) => Array.isArray(w) && w.every((n) => typeof n === "string"))) return [];
  return o as string[][];
}

/**
 * FOREGROUND_NOTE is what the XR says while Kubernetes deletes it in the
 * foreground (kubectl delete --cascade=foreground): the API server's garbage
 * collector deletes every composed resource at once, whatever order the
 * pipeline asks for.
 */
export const FOREGROUND_NOTE =
  "deleted with --cascade=foreground: Kubernetes deletes every composed resource at once, not in the pipeline's deletion order " +
  "(delete with the default --cascade=background to keep the order)";

/** foreground tells whether the XR is being deleted in the foreground (its foregroundDeletion finalizer). */
export function foreground(xr: JsonObject): boolean {
  const finalizers = metaOf(xr)["finalizers"];
  return Array.isArray(finalizers) && finalizers.includes("foregroundDeletion");
}
