// includeWhen: a composed resource exists only while CEL expressions hold
// (kro's includeWhen), e.g. `monitoring: ["xr.spec.monitoring == true"]`.
//
// Per desired resource, every expression must be true (see cel.ts for what
// they see); otherwise the resource is taken out of the desired state, which
// Crossplane reads as "delete it" if it exists, and a Normal result says why.
// An expression that reads a field not there yet counts as false.
import { step, type Step } from "../pipeline.js";
import * as response from "../sdk/response.js";
import { celVariables, compile, evaluate, type Expression } from "./cel.js";
import { sortedKeys } from "./common.js";

/** IncludeWhenOptions map desired resource names to the expressions that must hold for them to exist. */
export type IncludeWhenOptions = Readonly<Record<string, readonly string[]>>;

/** includeWhen returns the step. */
export function includeWhen(opts: IncludeWhenOptions): Step {
  const rules = new Map<string, Expression[]>();
  for (const name of sortedKeys(opts)) {
    const list = opts[name];
    if (!Array.isArray(list)) throw new Error(`includeWhen.${name}: must be a list of expressions`);
    rules.set(
      name,
      list.map((e, i) => compile(e, `includeWhen.${name}[${i}]`)),
    );
  }
  return step("includeWhen", (ctx) => {
    const desired = ctx.rsp.desired?.resources;
    if (!desired) return;
    let vars: Record<string, unknown> | undefined;
    for (const [name, exprs] of rules) {
      if (!Object.hasOwn(desired, name)) continue;
      vars ??= celVariables(ctx);
      const failed = exprs.map((e) => evaluate(e, vars!)).find((o) => !o.ok);
      if (!failed || failed.ok) continue;
      delete desired[name];
      response.normal(ctx.rsp, `not composing ${name}: ${failed.why} is not true`).withReason("NotIncluded");
    }
  });
}
