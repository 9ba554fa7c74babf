// lifecycle: every built-in lifecycle step, configured from a Composition's
// input, for platform teams who write no TypeScript. Put it after any other
// function in a pipeline; see README.md beside this file.
import { defineFunction, request, response, runSteps, steps, type Step } from "xfn-runtime";
import { parseInput, type Options } from "./input.js";

/** stepsFor builds the step list, in the order the steps must run. */
export function stepsFor(o: Options): Step[] {
  const out: Step[] = [];
  if (o.externalNames) out.push(steps.externalName(o.externalNames));
  if (o.lateInit) out.push(steps.lateInit(o.lateInit));
  if (o.readiness) out.push(steps.readiness(o.readiness));
  if (o.dependencies) out.push(steps.dependencies(o.dependencies));
  if (o.deletion) out.push(steps.deletion({ ...o.deletion, ...(o.dependencies ? { dependencies: o.dependencies } : {}) }));
  return out;
}

export default defineFunction((req, ctx) => {
  let list: Step[];
  try {
    list = stepsFor(parseInput(request.getInput(req)));
  } catch (err) {
    const rsp = response.to(req);
    response.fatal(rsp, `invalid Lifecycle input: ${(err as Error).message}`).withReason("InvalidInput");
    return rsp;
  }
  return runSteps(list, req, ctx.now());
});
