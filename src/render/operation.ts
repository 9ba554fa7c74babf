// Rendering an Operation offline, as `crossplane render` does for
// ops.crossplane.io: run its pipeline (no XR; each step's required resources
// bootstrapped, the desired state threaded), and print the Operation as
// Crossplane leaves it after a successful run (its conditions, each step's
// output, the resources it applied), the resources it would apply (server-side,
// as the functions return them) and the functions' results as Events.
//
// A CronOperation or WatchOperation renders the Operation it would create from
// its operationTemplate; a WatchOperation's needs the resource that changed
// (--watched-resource), handed to every step as the required resource
// ops.crossplane.io/watched-resource, as Crossplane does.
import type { JsonObject } from "@bufbuild/protobuf";
import { InputError, identity, type Doc } from "../engine/docs.js";
import { parsePipeline, runPipeline, type StepResult } from "../engine/composition.js";
import type { Runner } from "../engine/runner.js";
import { WATCHED_RESOURCE } from "../sdk/request.js";
import { FIXED_TIME, RENDER_API_VERSION, select } from "./render.js";
import { schemaSource } from "./schema.js";
import { isObject } from "../sdk/fieldpath.js";

export const OPS_API_VERSION = "ops.crossplane.io/v1alpha1";

export interface OperationInputs {
  operation: Doc;
  required: Doc[];
  credentials: Doc[];
  /** The resource that changed, for a WatchOperation. */
  watched?: Doc;
  schemas?: Doc[];
}

export interface OperationOutputs {
  operation: JsonObject;
  applied: JsonObject[];
  results: JsonObject[];
}

/** operationSpec finds the spec of the Operation to run: the Operation's own, or a Cron/WatchOperation's template. */
function operationSpec(doc: Doc): { spec: JsonObject; name: string; at: string; watch: boolean } {
  const id = identity(doc, "an Operation");
  if (!id.apiVersion.startsWith("ops.crossplane.io/"))
    throw new InputError(
      `${doc.source}: expected an ops.crossplane.io Operation, CronOperation or WatchOperation, got ${id.apiVersion} ${id.kind}`,
    );
  const spec = isObject(doc.obj["spec"]) ? doc.obj["spec"] : {};
  if (id.kind === "Operation") return { spec, name: id.name, at: "spec.pipeline", watch: false };
  if (id.kind === "CronOperation" || id.kind === "WatchOperation") {
    const tmpl =
      isObject(spec["operationTemplate"]) && isObject(spec["operationTemplate"]["spec"]) ? spec["operationTemplate"]["spec"] : undefined;
    if (!tmpl) throw new InputError(`${doc.source}: a ${id.kind} needs spec.operationTemplate.spec`);
    return { spec: tmpl, name: id.name, at: "spec.operationTemplate.spec.pipeline", watch: id.kind === "WatchOperation" };
  }
  throw new InputError(`${doc.source}: expected an Operation, CronOperation or WatchOperation, got ${id.kind}`);
}

const event = (r: StepResult): JsonObject => ({
  apiVersion: RENDER_API_VERSION,
  kind: "Result",
  severity: r.severity === "Normal" ? "Normal" : "Warning",
  reason: "RunPipelineStep",
  message: `Pipeline step ${JSON.stringify(r.step)}: ${r.message}`,
});

/** renderOperation runs the Operation's pipeline and shapes what crossplane render prints for it. */
export async function renderOperation(inputs: OperationInputs, runner: Runner, opts: { timeoutMs: number }): Promise<OperationOutputs> {
  const { spec, name, at, watch } = operationSpec(inputs.operation);
  if (!Array.isArray(spec["pipeline"]) || spec["pipeline"].length === 0)
    throw new InputError(`${inputs.operation.source}: ${at} must list at least one step`);
  const steps = parsePipeline(inputs.operation.source, at, spec["pipeline"]);
  const required = [...inputs.required];
  if (watch && !inputs.watched)
    throw new InputError(`${inputs.operation.source}: a WatchOperation runs for a resource that changed: give it with --watched-resource`);
  if (inputs.watched) {
    const w = identity(inputs.watched, "the watched resource");
    required.push(inputs.watched);
    for (const s of steps) {
      if (s.bootstrap.some((b) => b.name === WATCHED_RESOURCE)) continue;
      s.bootstrap.push({
        name: WATCHED_RESOURCE,
        selector: {
          apiVersion: w.apiVersion,
          kind: w.kind,
          match: { case: "matchName", value: w.name },
          ...(w.namespace ? { namespace: w.namespace } : {}),
        },
      });
    }
  }
  const schemas = inputs.schemas?.length ? schemaSource(inputs.schemas) : undefined;
  const r = await runPipeline(
    {
      steps,
      observed: {},
      context: undefined,
      credentials: inputs.credentials,
      fetch: (sel) =>
        select(
          required.map((d) => d.obj),
          sel,
        ),
      ...(schemas ? { schemaOf: (apiVersion: string, kind: string) => schemas.find(apiVersion, kind) } : {}),
    },
    runner,
    Date.now() + opts.timeoutMs,
  );
  const applied = Object.keys(r.desired.resources)
    .sort()
    .map((k) => structuredClone(r.desired.resources[k]!.resource ?? {}));
  for (const [i, a] of applied.entries())
    if (typeof a["apiVersion"] !== "string" || typeof a["kind"] !== "string" || !isObject(a["metadata"]) || !a["metadata"]["name"])
      throw new InputError(
        `desired resource ${JSON.stringify(Object.keys(r.desired.resources).sort()[i])}: ` +
          "an Operation applies what it returns, which needs apiVersion, kind and metadata.name",
      );
  const key = (x: JsonObject) => `${String(x["apiVersion"])}${String(x["kind"])}${String(x["namespace"] ?? "")}${String(x["name"])}`;
  const refs = applied
    .map((a) => {
      const m = a["metadata"] as JsonObject;
      return {
        apiVersion: a["apiVersion"]!,
        kind: a["kind"]!,
        name: m["name"]!,
        ...(m["namespace"] ? { namespace: m["namespace"] } : {}),
      } as JsonObject;
    })
    .sort((a, b) => key(a).localeCompare(key(b)));
  const t = FIXED_TIME;
  const status: JsonObject = {
    conditions: [
      { type: "Succeeded", status: "True", reason: "PipelineSuccess", lastTransitionTime: t },
      { type: "ValidPipeline", status: "True", reason: "ValidPipeline", lastTransitionTime: t },
      { type: "Synced", status: "True", reason: "ReconcileSuccess", lastTransitionTime: t },
    ],
  };
  if (r.outputs.length > 0) status["pipeline"] = r.outputs.map((o) => ({ step: o.step, output: o.output }));
  if (refs.length > 0) status["appliedResourceRefs"] = refs;
  return {
    operation: { apiVersion: OPS_API_VERSION, kind: "Operation", metadata: { name }, status },
    applied,
    results: r.results.map(event),
  };
}
