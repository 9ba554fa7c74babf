// Rendering a composition offline, as `crossplane render` does: run a
// Pipeline-mode Composition's steps in order (src/engine) against an XR and the
// observed resources, and produce the XR's new status, the composed resources
// as Crossplane would create them, the functions' results and the final context.
import { create, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { Ready, ResourceSchema, type Resource, type ResourceSelector, type Resources, type State } from "../gen/fn/v1/run_function_pb.js";
import { InputError, type Doc } from "../engine/docs.js";
import {
  CLAIM_NAME_LABEL,
  CLAIM_NAMESPACE_LABEL,
  checkComposition,
  COMPOSITE_LABEL,
  COMPOSITION_RESOURCE_NAME,
  runPipeline,
  type StepResult,
} from "../engine/pipeline.js";
import type { Runner } from "../engine/runner.js";

export const RENDER_API_VERSION = "render.crossplane.io/v1beta1";
/**
 * FIXED_TIME is the instant offline runs use where a real clock would make
 * output vary: crossplane render's lastTransitionTime, and the clock that
 * in-process functions see under xfn render and xfn test unless told otherwise.
 */
export const FIXED_TIME = "2024-01-01T00:00:00Z";
const CONDITION_TIME = FIXED_TIME;
const SYSTEM_CONDITIONS = new Set(["Ready", "Synced", "Healthy"]);

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
const meta = (o: JsonObject): JsonObject => (isObject(o["metadata"]) ? o["metadata"] : {});
const stringMap = (v: unknown): Record<string, string> =>
  isObject(v) ? Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === "string")) : {};

/** resultDoc is a function's result as render prints it (crossplane render's Result documents carry no reason). */
function resultDoc(r: StepResult): JsonObject {
  return {
    apiVersion: RENDER_API_VERSION,
    kind: "Result",
    step: r.step,
    severity: `SEVERITY_${r.severity.toUpperCase()}`,
    message: r.message,
  };
}

/** RenderInputs are the parsed inputs of one render. */
export interface RenderInputs {
  xr: Doc;
  composition: Doc;
  observed: Doc[];
  required: Doc[];
  credentials: Doc[];
  context: Record<string, JsonValue>;
}

/** RenderOutputs are the documents render prints, in order. */
export interface RenderOutputs {
  xr: JsonObject;
  composed: JsonObject[];
  results: JsonObject[];
  context: JsonObject;
}

/** select returns the supplied resources that match a selector, sorted by name. */
export function select(docs: Doc[], s: Omit<ResourceSelector, "$typeName">): Resources {
  const items = docs
    .map((d) => d.obj)
    .filter((o) => o["apiVersion"] === s.apiVersion && o["kind"] === s.kind)
    .filter((o) => s.namespace === undefined || meta(o)["namespace"] === s.namespace)
    .filter((o) => {
      if (s.match.case === "matchName") return meta(o)["name"] === s.match.value;
      if (s.match.case === "matchLabels") {
        const labels = stringMap(meta(o)["labels"]);
        return Object.entries(s.match.value.labels).every(([k, v]) => labels[k] === v);
      }
      return false;
    })
    .sort((a, b) => String(meta(a)["name"]).localeCompare(String(meta(b)["name"])));
  return {
    $typeName: "apiextensions.fn.proto.v1.Resources",
    items: items.map((o) => create(ResourceSchema, { resource: structuredClone(o) })),
  };
}

/** render runs the pipeline and shapes the outputs as `crossplane render` prints them. */
export async function render(inputs: RenderInputs, runner: Runner, opts: { timeoutMs: number }): Promise<RenderOutputs> {
  const steps = checkComposition(inputs.xr, inputs.composition);
  const xr = inputs.xr.obj;
  const observed: Record<string, Resource> = {};
  for (const d of inputs.observed) {
    const name = stringMap(meta(d.obj)["annotations"])[COMPOSITION_RESOURCE_NAME];
    if (!name)
      throw new InputError(
        `${d.source}: an observed resource needs the ${COMPOSITION_RESOURCE_NAME} annotation to be matched to a pipeline resource`,
      );
    observed[name] = create(ResourceSchema, { resource: structuredClone(d.obj) });
  }
  const r = await runPipeline(
    {
      steps,
      xr,
      observed,
      context: structuredClone(inputs.context),
      credentials: inputs.credentials,
      fetch: (s) => select(inputs.required, s),
    },
    runner,
    Date.now() + opts.timeoutMs,
  );
  const results = r.results.map(resultDoc);
  return {
    xr: renderXR(xr, r.desired, r.conditions),
    composed: renderComposed(xr, r.desired, observed),
    results,
    context: { apiVersion: RENDER_API_VERSION, kind: "Context", fields: r.context ?? {} },
  };
}

function renderXR(xr: JsonObject, desired: State, conditions: JsonObject[]): JsonObject {
  const out: JsonObject = structuredClone(desired.composite?.resource ?? {});
  const m = meta(xr);
  out["apiVersion"] = xr["apiVersion"]!;
  out["kind"] = xr["kind"]!;
  out["metadata"] = { name: m["name"]!, ...(m["namespace"] ? { namespace: m["namespace"] } : {}) };
  const unready = Object.keys(desired.resources)
    .filter((k) => desired.resources[k]!.ready !== Ready.TRUE)
    .sort();
  const xrReady = desired.composite?.ready ?? Ready.UNSPECIFIED;
  let ready: JsonObject = { type: "Ready", status: "True", reason: "Available", lastTransitionTime: CONDITION_TIME };
  if (xrReady === Ready.FALSE) ready = { type: "Ready", status: "False", reason: "Creating", lastTransitionTime: CONDITION_TIME };
  else if (xrReady === Ready.UNSPECIFIED && unready.length > 0) {
    const shown = unready.length > 3 ? `${unready.slice(0, 3).join(", ")}, and ${unready.length - 3} more` : unready.join(", ");
    ready = {
      type: "Ready",
      status: "False",
      reason: "Creating",
      message: `Unready resources: ${shown}`,
      lastTransitionTime: CONDITION_TIME,
    };
  }
  const status = isObject(out["status"]) ? out["status"] : {};
  const conds: JsonObject[] = [ready];
  for (const fc of conditions) {
    if (SYSTEM_CONDITIONS.has(String(fc["type"]))) continue;
    const { claim: _claim, ...c } = fc;
    const i = conds.findIndex((x) => x["type"] === c["type"]);
    if (i >= 0) conds[i] = { ...c, lastTransitionTime: CONDITION_TIME };
    else conds.push({ ...c, lastTransitionTime: CONDITION_TIME });
  }
  status["conditions"] = conds;
  out["status"] = status;
  return out;
}

function renderComposed(xr: JsonObject, desired: State, observed: Record<string, Resource>): JsonObject[] {
  const xm = meta(xr);
  const xrLabels = stringMap(xm["labels"]);
  const prefix = xrLabels[COMPOSITE_LABEL] || String(xm["name"]);
  const claim = isObject((xr["spec"] as JsonObject | undefined)?.["claimRef"])
    ? ((xr["spec"] as JsonObject)["claimRef"] as JsonObject)
    : undefined;
  return Object.keys(desired.resources)
    .sort()
    .map((name) => {
      const cd: JsonObject = structuredClone(desired.resources[name]!.resource ?? {});
      const m: JsonObject = isObject(cd["metadata"]) ? cd["metadata"] : {};
      cd["metadata"] = m;
      const was = Object.hasOwn(observed, name) ? observed[name]!.resource : undefined;
      if (was) {
        const om = meta(was);
        for (const k of ["namespace", "name", "generateName"]) {
          if (om[k] !== undefined) m[k] = om[k]!;
          else delete m[k];
        }
      }
      if (!m["name"] && !m["generateName"]) m["generateName"] = `${prefix}-`;
      if (xm["namespace"]) m["namespace"] = xm["namespace"]!;
      m["annotations"] = { ...stringMap(m["annotations"]), [COMPOSITION_RESOURCE_NAME]: name };
      const labels: Record<string, string> = { ...stringMap(m["labels"]), [COMPOSITE_LABEL]: prefix };
      if (xrLabels[CLAIM_NAME_LABEL] && xrLabels[CLAIM_NAMESPACE_LABEL]) {
        labels[CLAIM_NAMESPACE_LABEL] = xrLabels[CLAIM_NAMESPACE_LABEL];
        labels[CLAIM_NAME_LABEL] = xrLabels[CLAIM_NAME_LABEL];
      } else if (claim && typeof claim["name"] === "string" && typeof claim["namespace"] === "string") {
        labels[CLAIM_NAMESPACE_LABEL] = claim["namespace"];
        labels[CLAIM_NAME_LABEL] = claim["name"];
      }
      m["labels"] = labels;
      const owner: JsonObject = {
        apiVersion: xr["apiVersion"]!,
        kind: xr["kind"]!,
        name: xm["name"]!,
        uid: typeof xm["uid"] === "string" ? xm["uid"] : "",
        controller: true,
        blockOwnerDeletion: true,
      };
      const refs = (Array.isArray(m["ownerReferences"]) ? m["ownerReferences"] : []).filter(
        (r) => !(isObject(r) && r["controller"] === true),
      );
      m["ownerReferences"] = [...refs, owner];
      return cd;
    });
}
