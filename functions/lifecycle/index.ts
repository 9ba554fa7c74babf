// lifecycle: every built-in lifecycle step, configured from a Composition's
// input, for platform teams who write no TypeScript. Put it after any other
// function in a pipeline; see README.md beside this file.
import type { JsonObject } from "@bufbuild/protobuf";
import { defineFunction, request, response, runSteps, steps, type RunFunctionRequest, type Step } from "xfn-runtime";
import { parseInput, type Options } from "./input.js";

/** stepsFor builds the step list, in the order the steps must run (req: the request it is for, if known). */
export function stepsFor(o: Options, req?: RunFunctionRequest): Step[] {
  const out: Step[] = [];
  // First: a resource left out is neither named, waited for, nor deleted in order.
  if (o.includeWhen) out.push(steps.includeWhen(o.includeWhen));
  if (o.externalNames) out.push(steps.externalName(o.externalNames));
  if (o.lateInit) out.push(steps.lateInit(o.lateInit));
  if (o.readiness) out.push(steps.readiness(o.readiness));
  if (o.dependencies) out.push(steps.dependencies(o.dependencies, { usages: o.usages }));
  // Without dependencies, the Usages composed while there were some are released, not left waiting for their users.
  else if (req && steps.hasOwnUsages(req)) out.push(steps.releaseUsages());
  if (o.deletion) out.push(steps.deletion({ ...o.deletion, ...(o.dependencies ? { dependencies: o.dependencies } : {}) }));
  // Last: it checks what the steps above wrote into the XR's status.
  if (o.schemaCheck) out.push(steps.statusSchema({ suggest: suggestions(o) }));
  // After every other: it says what each of them did, a failed one included.
  if (o.summary) out.push(steps.summary(o.summary));
  return out;
}

/** suggestions gives, for each status field the configured steps write, the schema to declare it with. */
export function suggestions(o: Options): Record<string, JsonObject> {
  const out: Record<string, JsonObject> = {};
  if (o.externalNames)
    out[o.externalNames.statusField ?? steps.DEFAULT_EXTERNAL_NAMES_FIELD] = { type: "object", additionalProperties: { type: "string" } };
  if (o.dependencies)
    out[steps.WAITING_FIELD] = {
      type: "object",
      additionalProperties: {
        type: "object",
        properties: { for: { type: "array", items: { type: "string" } }, since: { type: "string", format: "date-time" } },
      },
    };
  if (o.deletion)
    out[steps.DELETION_FIELD] = {
      type: "object",
      properties: {
        remaining: { type: "integer" },
        deleted: { type: "integer" },
        total: { type: "integer" },
        since: { type: "string", format: "date-time" },
        order: { type: "array", items: { type: "array", items: { type: "string" } } },
      },
    };
  return out;
}

export default defineFunction((req, ctx) => {
  let list: Step[];
  try {
    list = stepsFor(parseInput(request.getInput(req)), req);
  } catch (err) {
    const rsp = response.to(req);
    response.fatal(rsp, `invalid Lifecycle input: ${(err as Error).message}`).withReason("InvalidInput");
    return rsp;
  }
  return runSteps(list, req, ctx.now());
});
