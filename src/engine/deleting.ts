// What a reconcile of an XR being deleted says in its Ready condition, for
// xfn host and xfn render alike. A pipeline with the deletion step reports
// itself (Ready=False, reason Deleting, naming what is left and what holds
// it); without one, Crossplane's Deleting condition is written, naming the
// composed resources still there.
import type { JsonObject } from "@bufbuild/protobuf";
import { isObject } from "../json.js";

/** deletionReport is the Ready=False Deleting condition a function (the deletion step) set for the XR, if one did. */
export function deletionReport(conditions: readonly JsonObject[]): JsonObject | undefined {
  return conditions.find((c) => c["type"] === "Ready" && c["reason"] === "Deleting");
}

/** deletingMessage names what is left and what holds it, as the deletion step does. */
export function deletingMessage(left: Map<string, JsonObject>): string {
  const parts = [...left.keys()].sort().map((rn) => {
    const m = left.get(rn)!["metadata"];
    const f = isObject(m) ? m["finalizers"] : undefined;
    return Array.isArray(f) && f.length > 0 ? `${rn} (finalizers: ${f.join(", ")})` : rn;
  });
  return `deleting ${parts.length} composed resource${parts.length === 1 ? "" : "s"}: ${parts.join(", ")}`;
}
