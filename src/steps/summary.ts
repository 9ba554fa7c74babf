// summary: what each step of the pipeline did, on the XR, where `kubectl
// describe` shows it: a condition (and an Event when it changes) naming each
// step and what it composed, changed, removed or held back, and a roll-up of
// the composed resources' health (health.ts). Opt-in: put it last.
import type { JsonObject } from "@bufbuild/protobuf";
import { firstNAndSomeMore } from "../words.js";
import { Severity } from "../gen/fn/v1/run_function_pb.js";
import { getOwn } from "../own.js";
import { step, type Step, type StepRecord } from "../pipeline.js";
import { getObjectCondition } from "../sdk/object.js";
import * as request from "../sdk/request.js";
import * as response from "../sdk/response.js";
import { observedXR } from "./common.js";
import { HEALTH_TYPE, rollUp } from "./health.js";

/** SUMMARY_TYPE is the summary's condition type. */
export const SUMMARY_TYPE = "PipelineSummary";

/** MAX_SUMMARY bounds the summary's message: a condition is read in a terminal. */
export const MAX_SUMMARY = 1024;

/** SummaryOptions configure the summary step. */
export interface SummaryOptions {
  /** The summary's condition type. Default PipelineSummary. */
  type?: string;
  /** The roll-up's condition type, or false for none. Default ResourcesHealthy (Crossplane drops a function's `Healthy`). */
  health?: string | false;
  /** Whether a changed summary is also an Event (a Normal result). Default true. */
  event?: boolean;
}

/** describeStep is one step's part of the summary: "name: what it did". */
export function describeStep(r: StepRecord): string {
  if (r.outcome === "failed") return `${r.name}: failed: ${oneLine(r.error ?? "")}`;
  if (r.outcome === "skipped") return `${r.name}: not run`;
  const did: string[] = [];
  if (r.added.length) did.push(`composed ${firstNAndSomeMore([...r.added])}`);
  if (r.changed.length) did.push(`changed ${firstNAndSomeMore([...r.changed])}`);
  if (r.removed.length) did.push(`removed ${firstNAndSomeMore([...r.removed])}`);
  if (r.held.length) {
    const waits = r.held.map((h) => `${h.resource} (for ${h.waitsFor.join(", ")})`);
    did.push(`held ${firstNAndSomeMore(waits)}`);
  }
  if (r.composite.length) did.push(`set the XR's ${firstNAndSomeMore(r.composite.map((k) => (k === "ready" ? "readiness" : k)))}`);
  if (r.warnings) did.push(r.warnings === 1 ? "1 warning" : `${r.warnings} warnings`);
  return `${r.name}: ${did.length ? did.join(", ") : "no change"}`;
}

/** describeTrail is the summary of a pipeline's steps, clipped to MAX_SUMMARY characters. */
export function describeTrail(trail: readonly StepRecord[]): string {
  const ran = trail.filter((r) => r.outcome !== "skipped").length;
  const failed = trail.some((r) => r.outcome === "failed");
  const head = failed ? `${ran} of ${trail.length} steps ran` : `${ran} ${ran === 1 ? "step" : "steps"}`;
  const text = `${head}: ${trail.length ? trail.map(describeStep).join("; ") : "none before this one"}`;
  return text.length > MAX_SUMMARY ? `${text.slice(0, MAX_SUMMARY - 3)}...` : text;
}

const oneLine = (s: string) => s.replace(/\s+/g, " ").trim();

/** summary returns the step. */
export function summary(opts: SummaryOptions = {}): Step {
  const type = opts.type ?? SUMMARY_TYPE;
  const healthType = opts.health === undefined ? HEALTH_TYPE : opts.health;
  for (const [what, t] of [
    ["type", type],
    ["health", healthType],
  ] as const) {
    if (t !== false && (typeof t !== "string" || t === ""))
      throw new Error(`summary: ${what} must be a condition type, not ${JSON.stringify(t)}`);
    if (typeof t === "string" && response.SYSTEM_CONDITION_TYPES.includes(t))
      throw new Error(`summary: ${what} ${JSON.stringify(t)} is a condition type Crossplane keeps for itself and drops from a function`);
  }
  const s = step("summary", (ctx) => {
    const trail = ctx.trail;
    const failed = trail.some((r) => r.outcome === "failed");
    const text = describeTrail(trail);
    const waiting = trail.some((r) => r.held.length > 0);
    const reason = failed ? "StepFailed" : waiting ? "Waiting" : "Completed";
    const b = failed ? response.conditionFalse(ctx.rsp, type, reason) : response.conditionTrue(ctx.rsp, type, reason);
    b.withMessage(text);
    const xr = observedXR(ctx);
    const last = getObjectCondition(xr, type);
    if (opts.event !== false && (last?.message !== text || last.reason !== reason)) {
      (failed ? response.warning(ctx.rsp, text) : response.normal(ctx.rsp, text)).withReason(type);
      // Crossplane emits a response's results up to its first Fatal one: the summary goes before it.
      const fatal = ctx.rsp.results.findIndex((r) => r.severity === Severity.FATAL);
      if (fatal >= 0) ctx.rsp.results.splice(fatal, 0, ctx.rsp.results.pop()!);
    }
    if (healthType !== false) {
      const composed = request.getObservedComposedResources(ctx.req);
      const h = rollUp(
        getObjectCondition(xr, "Synced"),
        Object.keys(composed).map((n): [string, JsonObject] => [n, getOwn(composed, n)?.resource ?? {}]),
      );
      const c =
        h.status === "True"
          ? response.conditionTrue(ctx.rsp, healthType, h.reason)
          : response.conditionFalse(ctx.rsp, healthType, h.reason);
      if (h.message) c.withMessage(h.message);
    }
  });
  return Object.assign(s, { readsTrail: true });
}
