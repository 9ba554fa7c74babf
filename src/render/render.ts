// Rendering a composition offline, as `crossplane render` does: run a
// Pipeline-mode Composition's steps in order (src/engine) against an XR and the
// observed resources, and produce the XR's new status, the composed resources
// as Crossplane would create them, the functions' results and the final context.
import { createHash } from "node:crypto";
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
import { getOwn, setOwn } from "../own.js";
import { applyDefaults, parseApiVersion, prune, schemaSource, xrSchema } from "./schema.js";

export const RENDER_API_VERSION = "render.crossplane.io/v1beta1";
/**
 * FIXED_TIME is the instant offline runs use where a real clock would make
 * output vary: crossplane render's lastTransitionTime, and the clock that
 * in-process functions see under xfn render and xfn test unless told otherwise.
 */
export const FIXED_TIME = "2024-01-01T00:00:00Z";
const CONDITION_TIME = FIXED_TIME;
const SYSTEM_CONDITIONS = new Set(["Ready", "Synced", "Healthy", "UpToDate", "Responsive"]);

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
const meta = (o: JsonObject): JsonObject => (isObject(o["metadata"]) ? o["metadata"] : {});
const stringMap = (v: unknown): Record<string, string> =>
  isObject(v) ? Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === "string")) : {};

/**
 * resultDoc is a function's result as render prints it. Current crossplane
 * render prints the Event Crossplane records for it (type, reason, and the
 * message prefixed with the step); the legacy form, the result itself.
 */
function resultDoc(r: StepResult, legacy: boolean): JsonObject {
  if (legacy)
    return {
      apiVersion: RENDER_API_VERSION,
      kind: "Result",
      step: r.step,
      severity: `SEVERITY_${r.severity.toUpperCase()}`,
      message: r.message,
    };
  return {
    apiVersion: RENDER_API_VERSION,
    kind: "Result",
    severity: r.severity === "Normal" ? "Normal" : "Warning",
    reason: r.reason,
    message: `Pipeline step ${JSON.stringify(r.step)}: ${r.message}`,
  };
}

/** RenderOptions tune render. */
export interface RenderOptions {
  timeoutMs: number;
  /** Print what crossplane render printed before Crossplane v2 (no resourceRefs, only Ready, results with step). */
  legacy?: boolean;
}

/** RenderInputs are the parsed inputs of one render. */
export interface RenderInputs {
  xr: Doc;
  composition: Doc;
  observed: Doc[];
  required: Doc[];
  credentials: Doc[];
  context: Record<string, JsonValue>;
  /** The XR's CompositeResourceDefinition: its schema defaults the XR, prunes the rendered one, and answers schema requirements. */
  xrd?: Doc;
  /** CRDs, XRDs and OpenAPI v3 documents that answer schema requirements. */
  schemas?: Doc[];
}

/** RenderOutputs are the documents render prints, in order. */
export interface RenderOutputs {
  xr: JsonObject;
  composed: JsonObject[];
  results: JsonObject[];
  context: JsonObject;
  /** What the XRD's schema pruned from the rendered XR, and other things a user should hear. */
  warnings: string[];
  /** The XR the pipeline saw: the input, defaulted from the XRD's schema when one was given. */
  input: JsonObject;
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
export async function render(inputs: RenderInputs, runner: Runner, opts: RenderOptions): Promise<RenderOutputs> {
  const steps = checkComposition(inputs.xr, inputs.composition);
  let xr = inputs.xr.obj;
  let schema: JsonObject | undefined;
  // The XRD first: what is wrong with it is said in its own terms.
  if (inputs.xrd) schema = schemaForXR(inputs.xrd, xr);
  const sources = [...(inputs.xrd ? [inputs.xrd] : []), ...(inputs.schemas ?? [])];
  const schemas = sources.length > 0 ? schemaSource(sources) : undefined;
  if (schema) {
    // As the API server defaults an XR when it is written (crossplane render --xrd does this too).
    xr = structuredClone(xr);
    applyDefaults(xr, schema);
  }
  const observed: Record<string, Resource> = {};
  for (const d of inputs.observed) {
    const name = stringMap(meta(d.obj)["annotations"])[COMPOSITION_RESOURCE_NAME];
    if (!name)
      throw new InputError(
        `${d.source}: an observed resource needs the ${COMPOSITION_RESOURCE_NAME} annotation to be matched to a pipeline resource`,
      );
    setOwn(observed, name, create(ResourceSchema, { resource: structuredClone(d.obj) }));
  }
  const r = await runPipeline(
    {
      steps,
      xr,
      observed,
      context: structuredClone(inputs.context),
      credentials: inputs.credentials,
      fetch: (s) => select(inputs.required, s),
      ...(schemas ? { schemaOf: (apiVersion: string, kind: string) => schemas.find(apiVersion, kind) } : {}),
    },
    runner,
    Date.now() + opts.timeoutMs,
  );
  const legacy = opts.legacy ?? false;
  const results = r.results.map((x) => resultDoc(x, legacy));
  const composed = renderComposed(xr, r.desired, observed, legacy);
  const rendered = renderXR(xr, r.desired, r.conditions, legacy ? undefined : composed);
  const warnings: string[] = [];
  if (schema && inputs.xrd) {
    const xrdName = String(meta(inputs.xrd.obj)["name"] ?? "");
    const version = parseApiVersion(String(xr["apiVersion"])).version;
    for (const path of prune(rendered, schema))
      warnings.push(
        `the XRD ${xrdName} does not declare ${path}, so the API server drops what the pipeline wrote there; ` +
          `declare it under spec.versions[${version}].schema.openAPIV3Schema`,
      );
  }
  return {
    warnings,
    input: xr,
    xr: rendered,
    composed,
    results,
    context: { apiVersion: RENDER_API_VERSION, kind: "Context", fields: r.context ?? {} },
  };
}

/**
 * renderXR makes the XR as render prints it: the desired status, and the
 * conditions Crossplane sets. Given the composed resources (the current form),
 * also spec.crossplane.resourceRefs and the Responsive and Synced conditions
 * Crossplane v2 sets on every reconcile that succeeds.
 */
/** schemaForXR is the schema an XRD gives the XR's kind and version; an XRD for another kind is refused. */
function schemaForXR(xrd: Doc, xr: JsonObject): JsonObject {
  const o = xrd.obj;
  if (o["kind"] !== "CompositeResourceDefinition")
    throw new InputError(`${xrd.source}: expected a CompositeResourceDefinition, got ${String(o["kind"] ?? "no kind")}`);
  const spec = isObject(o["spec"]) ? o["spec"] : {};
  const names = isObject(spec["names"]) ? spec["names"] : {};
  const { group, version } = parseApiVersion(String(xr["apiVersion"]));
  if (spec["group"] !== group || names["kind"] !== xr["kind"])
    throw new InputError(
      `${xrd.source}: the XRD defines ${String(names["kind"])}.${String(spec["group"])}, ` +
        `but the XR is a ${String(xr["kind"])} of ${String(xr["apiVersion"])}`,
    );
  return xrSchema(o, version);
}

function renderXR(xr: JsonObject, desired: State, conditions: JsonObject[], composed?: JsonObject[]): JsonObject {
  const out: JsonObject = structuredClone(desired.composite?.resource ?? {});
  const m = meta(xr);
  out["apiVersion"] = xr["apiVersion"]!;
  out["kind"] = xr["kind"]!;
  out["metadata"] = { name: m["name"]!, ...(m["namespace"] ? { namespace: m["namespace"] } : {}) };
  if (composed) {
    const refs = composed
      .map((c) => {
        const cm = meta(c);
        const ref: JsonObject = { apiVersion: c["apiVersion"]!, kind: c["kind"]!, name: cm["name"]! };
        // A cluster-scoped XR may compose namespaced resources; a namespaced XR's are in its namespace.
        if (!m["namespace"] && cm["namespace"]) ref["namespace"] = cm["namespace"];
        return ref;
      })
      .sort((a, b) => refKey(a).localeCompare(refKey(b)));
    if (refs.length > 0) out["spec"] = { crossplane: { resourceRefs: refs } };
  }
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
  const conds: JsonObject[] = composed
    ? [
        { type: "Responsive", status: "True", reason: "WatchCircuitClosed", lastTransitionTime: CONDITION_TIME },
        { type: "Synced", status: "True", reason: "ReconcileSuccess", lastTransitionTime: CONDITION_TIME },
        ready,
      ]
    : [ready];
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

const refKey = (r: JsonObject) => `${String(r["apiVersion"])}/${String(r["kind"])}/${String(r["namespace"] ?? "")}/${String(r["name"])}`;

/** renderUID is the XR's uid, or, for an XR that has none (one not created yet), a stable one made from its identity. */
export function renderUID(xr: JsonObject): string {
  const m = meta(xr);
  if (typeof m["uid"] === "string" && m["uid"] !== "") return m["uid"];
  // A name-based (version 5 style) UUID: the same XR always gets the same uid, so output is reproducible.
  const h = createHash("sha1")
    .update(`xfn.render/${String(xr["apiVersion"])}/${String(xr["kind"])}/${String(m["namespace"] ?? "")}/${String(m["name"])}`)
    .digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString("hex");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/**
 * composedName names a composed resource that has only a generateName, as
 * Crossplane v2 does before creating it: the prefix and a suffix fixed by the
 * XR's uid and the resource's name in the pipeline, so that every render (and
 * every reconcile) gives the same name. (Crossplane's suffix is computed
 * differently; it is as stable.)
 */
function composedName(generateName: string, uid: string, resourceName: string): string {
  const suffix = createHash("sha256").update(`${uid}/${resourceName}`).digest("hex").slice(0, 12);
  return `${generateName.slice(0, 63 - suffix.length)}${suffix}`;
}

function renderComposed(xr: JsonObject, desired: State, observed: Record<string, Resource>, legacy: boolean): JsonObject[] {
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
      const was = getOwn(observed, name)?.resource;
      if (was) {
        const om = meta(was);
        for (const k of ["namespace", "name", "generateName"]) {
          if (om[k] !== undefined) m[k] = om[k]!;
          else delete m[k];
        }
      }
      if (!m["name"] && !m["generateName"]) m["generateName"] = `${prefix}-`;
      if (!legacy && !m["name"]) m["name"] = composedName(String(m["generateName"]), renderUID(xr), name);
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
        uid: legacy ? (typeof xm["uid"] === "string" ? xm["uid"] : "") : renderUID(xr),
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
