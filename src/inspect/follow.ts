// What `xfn inspect --follow` prints for each step Crossplane ran: which
// reconcile and step, what the step changed in desired state (composed
// resources added, changed with the fields that changed, removed; the
// composite), its results and conditions, or its error. Every string that came
// from the cluster is printed with its control characters escaped.
import { isDeepStrictEqual } from "node:util";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { StepMeta } from "../gen/crossplane/pipeline/v1alpha1/pipeline_inspector_pb.js";
import { Severity, Status, type RunFunctionRequest, type RunFunctionResponse } from "../gen/fn/v1/run_function_pb.js";
import { printable } from "../terminal.js";

const SEVERITY: Record<number, string> = { [Severity.NORMAL]: "Normal", [Severity.WARNING]: "Warning", [Severity.FATAL]: "Fatal" };
const STATUS: Record<number, string> = { [Status.CONDITION_TRUE]: "True", [Status.CONDITION_FALSE]: "False" };

/** changedFields names the fields that differ between two objects, two levels deep (spec.forProvider, metadata.labels). */
export function changedFields(a: JsonValue | undefined, b: JsonValue | undefined, prefix = "", depth = 2): string[] {
  if (isDeepStrictEqual(a, b)) return [];
  const obj = (v: JsonValue | undefined): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
  if (depth === 0 || !obj(a) || !obj(b)) return [prefix || "(whole)"];
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  return keys.flatMap((k) => changedFields(a[k], b[k], prefix ? `${prefix}.${k}` : k, depth - 1));
}

const kindOf = (r: JsonObject | undefined) => `${String(r?.["apiVersion"] ?? "")} ${String(r?.["kind"] ?? "")}`.trim();

/** followLines is what --follow prints for one step. */
export function followLines(meta: StepMeta, req: RunFunctionRequest, rsp: RunFunctionResponse | undefined, error: string): string[] {
  const p = (s: string) => printable(s);
  const c = meta.context;
  const x = c.case === "compositionMeta" ? c.value : undefined;
  const who = x
    ? `${x.compositeResourceKind}/${x.compositeResourceNamespace ? `${x.compositeResourceNamespace}/` : ""}${x.compositeResourceName}`
    : c.case === "operationMeta"
      ? `Operation/${c.value.operationName}`
      : "(unknown)";
  const when = meta.timestamp ? timestampDate(meta.timestamp).toISOString() : "";
  const iteration = meta.iteration ? ` iteration ${meta.iteration}` : "";
  const step = `step ${meta.stepIndex} ${p(meta.stepName)} (${p(meta.functionName)})${iteration}`;
  const lines = [`${when} ${p(who)} ${step} trace ${p(meta.traceId.slice(0, 8))}`];
  if (error) return [...lines, `  error: ${p(error)}`];
  if (!rsp) return [...lines, "  no response"];
  const before = req.desired?.resources ?? {};
  const after = rsp.desired?.resources ?? {};
  for (const name of Object.keys(after).sort()) {
    const r = after[name]!.resource;
    if (!Object.hasOwn(before, name)) lines.push(`  + ${p(name)} (${p(kindOf(r))})`);
    else {
      const fields = changedFields(before[name]!.resource, r);
      if (fields.length) lines.push(`  ~ ${p(name)}: ${fields.map(p).join(", ")}`);
    }
  }
  for (const name of Object.keys(before).sort()) if (!Object.hasOwn(after, name)) lines.push(`  - ${p(name)}`);
  const composite = changedFields(req.desired?.composite?.resource, rsp.desired?.composite?.resource);
  if (composite.length) lines.push(`  ~ composite: ${composite.map(p).join(", ")}`);
  for (const r of rsp.results) lines.push(`  result ${SEVERITY[r.severity] ?? "Unspecified"}: ${p(r.message)}`);
  for (const cond of rsp.conditions)
    lines.push(
      `  condition ${p(cond.type)}=${STATUS[cond.status] ?? "Unknown"} (${p(cond.reason)})${cond.message ? `: ${p(cond.message)}` : ""}`,
    );
  if (lines.length === 1) lines.push("  no change");
  return lines;
}
