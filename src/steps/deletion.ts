// deletion: while the XR is being deleted, say so at once, say what blocks it,
// and delete in dependency order.
//
// Sets Ready=False with reason Deleting and a message naming the composed
// resources still present and their finalizers, records progress in
// status.deletion {remaining, deleted, total, since, order}, warns about any resource
// blocked longer than stuckAfter (quoting its own Ready and Synced messages),
// and, given the dependency configuration, deletes dependents first: a resource
// leaves desired state (and so is deleted) only once nothing that depends on
// it remains. Results and the condition target the XR and its claim. With a
// dependency configuration it records the deletion order (status.deletion.order,
// waves of resource names, dependents first) on every run, so that a
// controller can follow it when the function cannot run during deletion.
import type { JsonObject } from "@bufbuild/protobuf";
import { lastDesired, step, type Step } from "../pipeline.js";
import { getArray, getNumber, getString } from "../sdk/fieldpath.js";
import { getObjectCondition, isDeleting } from "../sdk/object.js";
import * as request from "../sdk/request.js";
import * as response from "../sdk/response.js";
import { observedXR, sortedKeys } from "./common.js";
import { graphOf, parseDependencies, type DependenciesOptions } from "./dependencies.js";
import { formatDuration, parseDuration } from "./duration.js";
import { checkAcyclic, deletionWaves, dependents } from "./graph.js";
import { isOwnUsage } from "./usages.js";

/** DeletionOptions configure the deletion step. */
export interface DeletionOptions {
  /** How long a resource may block deletion before a Warning, e.g. "5m". Default 5m. */
  stuckAfter?: string;
  /** The dependency configuration, for deleting dependents first. */
  dependencies?: DependenciesOptions;
}

export const DELETION_FIELD = "status.deletion";
const DELETING_TTL_S = 10;

function describeCondition(obj: JsonObject, type: string): string | undefined {
  const c = getObjectCondition(obj, type);
  if (!c) return undefined;
  return `${type}=${c.status}${c.reason ? ` ${c.reason}` : ""}${c.message ? `: ${c.message}` : ""}`;
}

/** deletion returns the step. */
export function deletion(opts: DeletionOptions = {}): Step {
  const stuckAfterMs = parseDuration(opts.stuckAfter ?? "5m");
  const graph = graphOf(parseDependencies(opts.dependencies ?? {}));

  return step("deletion", (ctx) => {
    const xr = observedXR(ctx);
    checkAcyclic(graph);
    if (!isDeleting(xr)) {
      // Record the order, so that whoever deletes the XR can follow it even when
      // this function cannot run then (xfn host does, when the function is down).
      // The dependencies step's Usages are Crossplane's means to the same order, not part of it.
      const names = sortedKeys(ctx.rsp.desired!.resources).filter((n) => !isOwnUsage(ctx.rsp.desired!.resources[n]!.resource));
      if (graph.size > 0) response.setDesiredCompositeField(ctx.rsp, `${DELETION_FIELD}.order`, deletionWaves(graph, names));
      return;
    }
    const since = getString(xr, "metadata.deletionTimestamp")!;
    const sinceMs = Date.parse(since);
    const observed = request.getObservedComposedResources(ctx.req);
    const remaining = sortedKeys(observed);
    const present = new Set(remaining);

    // Dependents first: a resource may go once none of its dependents remain.
    const users = dependents(graph);
    const desired = ctx.rsp.desired!.resources;
    for (const name of Object.keys(desired)) if (!present.has(name)) delete desired[name];
    const waitingOn: string[] = [];
    for (const name of remaining) {
      const obj = observed[name]!.resource ?? {};
      const blockers = (users.get(name) ?? []).filter((u) => present.has(u));
      if (blockers.length === 0 || isDeleting(obj)) {
        delete desired[name];
        continue;
      }
      waitingOn.push(`${name} (after ${blockers.join(", ")})`);
      response.setDesiredComposedResource(ctx.rsp, name, lastDesired(ctx.req, name), { ready: false });
    }

    const parts = remaining.map((name) => {
      const obj = observed[name]!.resource ?? {};
      const finalizers = (getArray(obj, "metadata.finalizers") ?? []).filter((f): f is string => typeof f === "string");
      return finalizers.length > 0 ? `${name} (finalizers: ${finalizers.join(", ")})` : name;
    });
    const message =
      remaining.length === 0
        ? "deleting: all composed resources are gone"
        : `deleting: waiting for ${parts.join(", ")}${waitingOn.length ? `; deleting later: ${waitingOn.join(", ")}` : ""}`;
    response.conditionFalse(ctx.rsp, "Ready", "Deleting").withMessage(message).targetCompositeAndClaim();
    response.setCompositeReady(ctx.rsp, false);

    const recordedTotal = getNumber(xr, `${DELETION_FIELD}.total`) ?? 0;
    const total = Math.max(recordedTotal, remaining.length);
    response.setDesiredCompositeField(ctx.rsp, DELETION_FIELD, {
      remaining: remaining.length,
      deleted: total - remaining.length,
      total,
      since,
      ...(graph.size > 0 ? { order: deletionWaves(graph, remaining) } : {}),
    });

    for (const name of remaining) {
      const obj = observed[name]!.resource ?? {};
      const own = getString(obj, "metadata.deletionTimestamp");
      const startedMs = own ? Date.parse(own) : sinceMs;
      const blockedMs = ctx.now.getTime() - startedMs;
      if (Number.isNaN(blockedMs) || blockedMs <= stuckAfterMs) continue;
      const finalizers = (getArray(obj, "metadata.finalizers") ?? []).filter((f): f is string => typeof f === "string");
      const details = [
        finalizers.length ? `finalizers: ${finalizers.join(", ")}` : "no finalizers",
        describeCondition(obj, "Ready"),
        describeCondition(obj, "Synced"),
      ].filter(Boolean);
      response
        .warning(
          ctx.rsp,
          `${name} has blocked deletion for ${formatDuration(blockedMs)}, ` +
            `longer than ${formatDuration(stuckAfterMs)}: ${details.join("; ")}`,
        )
        .withReason("DeletionBlocked")
        .targetCompositeAndClaim();
    }
    ctx.requeueAfter(DELETING_TTL_S);
  });
}
