// readiness: decide whether each desired composed resource is ready, by the
// checks configured for it, but only where no earlier step has decided.
import type { JsonValue } from "@bufbuild/protobuf";
import { Ready } from "../gen/fn/v1/run_function_pb.js";
import { getOwn } from "../own.js";
import { step, type Step } from "../pipeline.js";
import { getValue, parsePath } from "../sdk/fieldpath.js";
import { getObjectCondition } from "../sdk/object.js";
import * as request from "../sdk/request.js";
import * as response from "../sdk/response.js";
import { celVariables, compile, evaluate, type Expression } from "./cel.js";
import { isNonEmpty, sortedKeys } from "./common.js";

/** ReadinessCheck is one check, named as in Crossplane's readinessChecks. */
export type ReadinessCheck =
  | { type: "MatchCondition"; matchCondition?: { type?: string; status?: string } }
  | { type: "NonEmpty"; fieldPath: string }
  | { type: "MatchString"; fieldPath: string; matchString: string }
  | { type: "MatchInteger"; fieldPath: string; matchInteger: number }
  | { type: "MatchTrue"; fieldPath: string }
  | { type: "MatchFalse"; fieldPath: string }
  | { type: "None" }
  /** A CEL expression that must be true (kro's readyWhen): self is the resource, xr and the others by name; see cel.ts. */
  | { type: "Expression"; expression: string };

export const CHECK_TYPES = [
  "MatchCondition",
  "NonEmpty",
  "MatchString",
  "MatchInteger",
  "MatchTrue",
  "MatchFalse",
  "None",
  "Expression",
] as const;

/** ReadinessOptions configure the readiness step. */
export interface ReadinessOptions {
  /** Checks per composed resource name; all must pass. Unlisted resources use the default. */
  checks?: Readonly<Record<string, readonly ReadinessCheck[]>>;
  /** Checks for resources not listed. Default: condition Ready=True. */
  default?: readonly ReadinessCheck[];
}

const DEFAULT_CHECKS: readonly ReadinessCheck[] = [{ type: "MatchCondition", matchCondition: { type: "Ready", status: "True" } }];

const show = (v: JsonValue | undefined) => (v === undefined ? "missing" : JSON.stringify(v));

/** failure returns why a check does not pass on obj, or undefined when it passes. */
export function failure(check: ReadinessCheck, obj: Record<string, JsonValue>, vars: Record<string, unknown> = {}): string | undefined {
  switch (check.type) {
    case "Expression": {
      const out = evaluate(compiled(check.expression), { ...vars, self: obj });
      return out.ok ? undefined : `${out.why} is not true`;
    }
    case "None":
      return undefined;
    case "MatchCondition": {
      const type = check.matchCondition?.type ?? "Ready";
      const status = check.matchCondition?.status ?? "True";
      const c = getObjectCondition(obj, type);
      if (c?.status === status) return undefined;
      if (!c) return `no ${type} condition yet`;
      return `${type} is ${c.status}${c.reason ? ` (${c.reason}${c.message ? `: ${c.message}` : ""})` : ""}, want ${status}`;
    }
    case "NonEmpty":
      return isNonEmpty(getValue(obj, check.fieldPath)) ? undefined : `${check.fieldPath} is empty`;
    case "MatchString": {
      const v = getValue(obj, check.fieldPath);
      return v === check.matchString ? undefined : `${check.fieldPath} is ${show(v)}, want ${JSON.stringify(check.matchString)}`;
    }
    case "MatchInteger": {
      const v = getValue(obj, check.fieldPath);
      return v === check.matchInteger ? undefined : `${check.fieldPath} is ${show(v)}, want ${check.matchInteger}`;
    }
    case "MatchTrue":
    case "MatchFalse": {
      const want = check.type === "MatchTrue";
      const v = getValue(obj, check.fieldPath);
      return v === want ? undefined : `${check.fieldPath} is ${show(v)}, want ${want}`;
    }
  }
}

function validate(where: string, checks: readonly ReadinessCheck[]): void {
  for (const [i, c] of checks.entries()) {
    if (!CHECK_TYPES.includes(c.type)) {
      throw new Error(`${where}[${i}]: unknown check type ${JSON.stringify(c.type)}; expected one of ${CHECK_TYPES.join(", ")}`);
    }
    if ("fieldPath" in c) parsePath(c.fieldPath);
    if (c.type === "Expression") compiled(c.expression, `${where}[${i}].expression`);
  }
}

const expressions = new Map<string, Expression>();
/** compiled parses an expression once per text. */
function compiled(text: string, where = "expression"): Expression {
  let e = expressions.get(text);
  if (!e) {
    e = compile(text, where);
    if (expressions.size > 1000) expressions.clear();
    expressions.set(text, e);
  }
  return e;
}

/** readiness returns the step. */
export function readiness(opts: ReadinessOptions = {}): Step {
  const checks = opts.checks ?? {};
  const fallback = opts.default ?? DEFAULT_CHECKS;
  validate("default", fallback);
  for (const [name, list] of Object.entries(checks)) validate(`checks.${name}`, list);

  return step("readiness", (ctx) => {
    const observed = request.getObservedComposedResources(ctx.req);
    const desired = ctx.rsp.desired?.resources ?? {};
    const notReady: string[] = [];
    for (const name of sortedKeys(desired)) {
      const r = desired[name]!;
      if (r.ready !== Ready.UNSPECIFIED) {
        if (r.ready === Ready.FALSE) notReady.push(`${name} (marked not ready by an earlier step)`);
        continue;
      }
      const obj = getOwn(observed, name)?.resource;
      if (!obj) {
        r.ready = Ready.FALSE;
        notReady.push(`${name} (not created yet)`);
        continue;
      }
      const list = getOwn(checks, name) ?? fallback;
      const vars = list.some((c) => c.type === "Expression") ? celVariables(ctx) : {};
      const why = list.map((c) => failure(c, obj, vars)).filter((w): w is string => w !== undefined);
      r.ready = why.length === 0 ? Ready.TRUE : Ready.FALSE;
      if (why.length > 0) notReady.push(`${name} (${why.join("; ")})`);
    }
    if (notReady.length > 0) response.normal(ctx.rsp, `not ready: ${notReady.join(", ")}`).withReason("NotReady");
  });
}
