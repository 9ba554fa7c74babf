// Rendering a composition offline, as `crossplane render` does: run a
// Pipeline-mode Composition's steps in order (src/engine) against an XR and the
// observed resources, and produce the XR's new status, the composed resources
// as Crossplane would create them, the Events it would record and the final
// context.
//
// Current crossplane render runs one real reconcile of Crossplane's XR
// controller against an in-memory client. What that reconcile does, and so
// what this file reproduces, was read at crossplane/crossplane
// 2d040d2daf4e001799c4154a4a09b9e1f40d7fde (internal/render/composite,
// internal/render/client.go, internal/controller/apiextensions/composite) and
// crossplane/cli 3d72f9316e0703e8e9dbde50e5bc9114544c9199
// (cmd/crossplane/render/xr): test/render/*.test.ts port their cases.
import { SYSTEM_CONDITION_TYPES } from "../sdk/response.js";
import { create, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import {
  Ready,
  ResourceSchema,
  type Resource,
  type ResourceSelector,
  type Resources,
  type RunFunctionResponse,
} from "../gen/fn/v1/run_function_pb.js";
import { sizeWarnings } from "../server/budget.js";
import {
  composeResources,
  COMPOSITE_LABEL,
  COMPOSITION_RESOURCE_NAME,
  resourceRefsOf,
  type ComposeEvent,
  ComposeError,
  firstNAndSomeMore,
} from "../engine/composed.js";
import { InputError, type Doc } from "../engine/docs.js";
import { renderUID } from "../engine/names.js";
import { checkComposition, resultEvent, runPipeline, type StepResult } from "../engine/composition.js";
import type { Runner } from "../engine/runner.js";
import { getOwn, setOwn } from "../own.js";
import { scopeOf } from "../engine/xcrd.js";
import { deletingMessage, deletionReport } from "../engine/deleting.js";
import { applyDefaults, parseApiVersion, prune, schemaSource, xrSchema } from "./schema.js";
import { isObject, metaOf } from "../json.js";

export const RENDER_API_VERSION = "render.crossplane.io/v1beta1";
/**
 * FIXED_TIME is the instant offline runs use where a real clock would make
 * output vary: crossplane render's lastTransitionTime, and the clock that
 * in-process functions see under xfn render and xfn test unless told otherwise.
 */
export const FIXED_TIME = "2024-01-01T00:00:00Z";
const CONDITION_TIME = FIXED_TIME;
/** The resourceVersion crossplane render gives the XR it reconciles. */
const RENDER_RESOURCE_VERSION = "999";
/** Condition types Crossplane owns; a function's condition of one of these types is ignored. */
const SYSTEM_CONDITIONS = new Set(SYSTEM_CONDITION_TYPES);

const str = (v: JsonValue | undefined): string => (typeof v === "string" ? v : "");
const stringMap = (v: unknown): Record<string, string> =>
  isObject(v) ? Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === "string")) : {};

/** RenderOptions tune render. */
export interface RenderOptions {
  timeoutMs: number;
  /** Print what crossplane render printed before Crossplane v2 (no resourceRefs, only Ready, results with step). */
  legacy?: boolean;
  /** The time of the reconcile, as functions would see it (the observed XR's Responsive condition). Default FIXED_TIME. */
  now?: Date;
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
  /** CRDs, XRDs and OpenAPI v3 documents that answer schema requirements (and tell composed kinds' scope). */
  schemas?: Doc[];
}

/** RenderOutputs are the documents render prints, in order. */
export interface RenderOutputs {
  xr: JsonObject;
  composed: JsonObject[];
  /** The Events the reconcile records, as kind: Result documents (or, in the legacy shape, the functions' results). */
  results: JsonObject[];
  context: JsonObject;
  /** What the XRD's schema pruned from the rendered XR, and other things a user should hear. */
  warnings: string[];
  /** Of those, the steps' requests and responses near (or over) the 4 MiB a cluster accepts (xfn test says these too). */
  sizeWarnings: string[];
  /** The XR the pipeline saw: the input, defaulted from the XRD's schema when one was given. */
  input: JsonObject;
  /** Each desired composed resource: its name in the pipeline, kind, readiness, and whether it was observed (for --graph). */
  states: Array<{ name: string; kind: string; ready: boolean; observed: boolean }>;
}

/** Store is what crossplane render's in-memory client holds: the objects required resources are looked up in. */
type Store = JsonObject[];

const storeKey = (o: JsonObject) => `${str(o["apiVersion"])}|${str(o["kind"])}|${str(metaOf(o)["namespace"])}|${str(metaOf(o)["name"])}`;

/** storeOf keeps the last object given for each apiVersion, kind, namespace and name, as a Go map keyed by them does. */
function storeOf(objects: JsonObject[]): Store {
  const m = new Map<string, JsonObject>();
  for (const o of objects) m.set(storeKey(o), o);
  return [...m.values()];
}

/**
 * select answers a resource requirement from docs as Crossplane's fetcher
 * answers it from render's in-memory client (ExistingRequiredResourcesFetcher):
 * by name, the one object of exactly that apiVersion, kind, namespace and name;
 * otherwise every object of the group and kind (the version may differ only
 * where one is empty) in the namespace (any, when none is given) carrying the
 * labels (all, without labels), sorted by namespace and name.
 */
export function select(objects: JsonObject[], s: Omit<ResourceSelector, "$typeName">): Resources {
  const namespace = s.namespace ?? "";
  let items: JsonObject[];
  if (s.match.case === "matchName") {
    const name = s.match.value;
    items = objects.filter(
      (o) =>
        str(o["apiVersion"]) === s.apiVersion &&
        str(o["kind"]) === s.kind &&
        str(metaOf(o)["namespace"]) === namespace &&
        str(metaOf(o)["name"]) === name,
    );
    items = items.slice(-1);
  } else {
    const want = parseApiVersion(s.apiVersion);
    const labels = s.match.case === "matchLabels" ? s.match.value.labels : {};
    items = objects
      .filter((o) => {
        const got = parseApiVersion(str(o["apiVersion"]));
        if (got.group !== want.group || str(o["kind"]) !== s.kind) return false;
        if (want.version !== "" && got.version !== "" && want.version !== got.version) return false;
        if (namespace !== "" && str(metaOf(o)["namespace"]) !== namespace) return false;
        const have = stringMap(metaOf(o)["labels"]);
        return Object.entries(labels).every(([k, v]) => Object.hasOwn(have, k) && have[k] === v);
      })
      .sort((a, b) => {
        const ka = `${str(metaOf(a)["namespace"])}/${str(metaOf(a)["name"])}`;
        const kb = `${str(metaOf(b)["namespace"])}/${str(metaOf(b)["name"])}`;
        return Buffer.compare(Buffer.from(ka), Buffer.from(kb));
      });
  }
  return {
    $typeName: "apiextensions.fn.proto.v1.Resources",
    items: items.map((o) => create(ResourceSchema, { resource: structuredClone(o) })),
  };
}

/**
 * checkSelector refuses a Composition that does not carry the labels the XR's
 * compositionSelector asks for, as crossplane render does: at
 * spec.crossplane.compositionSelector, and, for a legacy XR (or when no XRD
 * says which the XR is), at spec.compositionSelector.
 */
function checkSelector(xr: JsonObject, composition: JsonObject, legacy: boolean | undefined): void {
  const spec = isObject(xr["spec"]) ? xr["spec"] : {};
  const cp = isObject(spec["crossplane"]) ? spec["crossplane"] : {};
  const selectors = [legacy === true ? undefined : cp["compositionSelector"], legacy === false ? undefined : spec["compositionSelector"]];
  const have = stringMap(metaOf(composition)["labels"]);
  const name = str(metaOf(composition)["name"]);
  for (const sel of selectors) {
    if (!isObject(sel) || !isObject(sel["matchLabels"])) continue;
    for (const [k, v] of Object.entries(stringMap(sel["matchLabels"])).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (!Object.hasOwn(have, k))
        throw new InputError(`composition ${JSON.stringify(name)} is missing required label ${JSON.stringify(k)}`);
      if (have[k] !== v)
        throw new InputError(
          `composition ${JSON.stringify(name)} has incorrect value for label ${JSON.stringify(k)}: ` +
            `want ${JSON.stringify(v)}, got ${JSON.stringify(have[k])}`,
        );
    }
  }
}

/**
 * checkObserved refuses observed resources the XR's controller would not read
 * as its own, as crossplane render's CheckObservedResources does: one
 * controlled by another XR, or (for a namespaced XR) in another namespace.
 */
export function checkObserved(xrUID: string, xrNamespace: string, observed: JsonObject[]): void {
  const errs: string[] = [];
  for (const o of observed) {
    const refs = metaOf(o)["ownerReferences"];
    const controller = Array.isArray(refs) ? refs.filter(isObject).find((r) => r["controller"] === true) : undefined;
    const name = str(metaOf(o)["name"]);
    if (controller && str(controller["uid"]) !== xrUID)
      errs.push(`observed resource ${name} has a controller ref but is not controlled by the XR`);
    if (xrNamespace !== "" && str(metaOf(o)["namespace"]) !== xrNamespace)
      errs.push(`observed resource ${name} is not in the same namespace as the XR`);
  }
  if (errs.length > 0) throw new InputError(`invalid observed resources: ${errs.join("\n")}`);
}

/** Condition is a Kubernetes condition as Crossplane's xpv2.Condition carries it. */
interface Condition {
  type: string;
  status: string;
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message?: string;
}

/** asCondition reads a condition as Go decodes one into xpv2.Condition (unknown fields dropped). */
function asCondition(v: JsonValue): Condition | undefined {
  if (!isObject(v)) return undefined;
  const gen = typeof v["observedGeneration"] === "number" ? v["observedGeneration"] : 0;
  return {
    type: str(v["type"]),
    status: str(v["status"]),
    ...(gen !== 0 ? { observedGeneration: gen } : {}),
    lastTransitionTime: str(v["lastTransitionTime"]),
    reason: str(v["reason"]),
    ...(str(v["message"]) !== "" ? { message: str(v["message"]) } : {}),
  };
}

const sameCondition = (a: Condition, b: Condition) =>
  a.type === b.type &&
  a.status === b.status &&
  a.reason === b.reason &&
  (a.message ?? "") === (b.message ?? "") &&
  (!a.observedGeneration || !b.observedGeneration || a.observedGeneration === b.observedGeneration);

/**
 * setConditions merges conditions as Crossplane's ConditionedStatus.SetConditions:
 * an equal one stays, another of its type is replaced, a new type is added last.
 */
function setConditions(list: Condition[], ...add: Condition[]): void {
  for (const c of add) {
    let exists = false;
    for (let i = 0; i < list.length; i++) {
      if (list[i]!.type !== c.type) continue;
      exists = true;
      if (!sameCondition(list[i]!, c)) list[i] = c;
    }
    if (!exists) list.push(c);
  }
}

const conditionsIn = (o: JsonObject | undefined): Condition[] => {
  const s = o && isObject(o["status"]) ? o["status"] : {};
  return Array.isArray(s["conditions"]) ? s["conditions"].flatMap((c) => asCondition(c) ?? []) : [];
};

/** XRDInfo is what an XRD tells render: the XR's schema, and whether the XR is a legacy (LegacyCluster) one. */
interface XRDInfo {
  schema: JsonObject;
  legacy: boolean;
}

/** xrdFor reads the XRD given for the XR, refusing one for another kind as crossplane render does. */
function xrdFor(xrd: Doc, xr: JsonObject): XRDInfo {
  const o = xrd.obj;
  const name = str(metaOf(o)["name"]);
  if (o["kind"] !== "CompositeResourceDefinition")
    throw new InputError(`${xrd.source}: expected a CompositeResourceDefinition, got ${String(o["kind"] ?? "no kind")}`);
  const known = ["apiextensions.crossplane.io/v1", "apiextensions.crossplane.io/v2"];
  if (!known.includes(str(o["apiVersion"])))
    throw new InputError(
      `${xrd.source}: CompositeResourceDefinition ${JSON.stringify(name)} has unrecognized apiVersion ` +
        `${JSON.stringify(str(o["apiVersion"]))} (expected one of [${known.join(" ")}])`,
    );
  const spec = isObject(o["spec"]) ? o["spec"] : {};
  const names = isObject(spec["names"]) ? spec["names"] : {};
  const { group, version } = parseApiVersion(str(xr["apiVersion"]));
  // By group and kind only: an XR may be written in any version the XRD serves.
  if (str(spec["group"]) !== group || str(names["kind"]) !== str(xr["kind"]))
    throw new InputError(
      `${xrd.source}: CompositeResourceDefinition ${JSON.stringify(name)} ` +
        `(composite Group=${str(spec["group"])} Kind=${str(names["kind"])}) ` +
        `does not match the input XR's Group=${group} Kind=${str(xr["kind"])}`,
    );
  return { schema: xrSchema(o, version), legacy: scopeOf(o) === "LegacyCluster" };
}

/**
 * observedXR is the XR as Crossplane's reconcile hands it to the functions:
 * its uid (render's own when it has none), resourceVersion "999", the
 * crossplane.io/composite label, the selected Composition, references to the
 * observed resources, the Responsive condition, and (legacy XRs) the
 * connection secret reference the Composition asks for.
 */
function observedXR(xr: JsonObject, uid: string, legacy: boolean, composition: JsonObject, observed: JsonObject[], now: Date): JsonObject {
  const o = structuredClone(xr);
  const m: JsonObject = isObject(o["metadata"]) ? o["metadata"] : (o["metadata"] = {});
  m["uid"] = uid;
  m["resourceVersion"] = RENDER_RESOURCE_VERSION;
  const labels: JsonObject = isObject(m["labels"]) ? m["labels"] : (m["labels"] = {});
  if (str(labels[COMPOSITE_LABEL]) === "") labels[COMPOSITE_LABEL] = str(m["name"]);
  const spec: JsonObject = isObject(o["spec"]) ? o["spec"] : (o["spec"] = {});
  const at: JsonObject = legacy ? spec : isObject(spec["crossplane"]) ? spec["crossplane"] : (spec["crossplane"] = {});
  at["compositionRef"] = { name: str(metaOf(composition)["name"]) };
  if (observed.length > 0) {
    at["resourceRefs"] = observed.map((r) => ({
      apiVersion: str(r["apiVersion"]),
      kind: str(r["kind"]),
      name: str(metaOf(r)["name"]),
      ...(str(m["namespace"]) === "" && str(metaOf(r)["namespace"]) !== "" ? { namespace: str(metaOf(r)["namespace"]) } : {}),
    }));
  }
  const cspec = isObject(composition["spec"]) ? composition["spec"] : {};
  const secretNamespace = str(cspec["writeConnectionSecretsToNamespace"]);
  if (legacy && secretNamespace !== "" && !isObject(spec["writeConnectionSecretToRef"]))
    spec["writeConnectionSecretToRef"] = { name: uid, namespace: secretNamespace };
  const conds = conditionsIn(o);
  setConditions(conds, systemCondition(xr, "Responsive", "True", "WatchCircuitClosed", now.toISOString().replace(/\.\d{3}Z$/, "Z")));
  const status: JsonObject = isObject(o["status"]) ? o["status"] : (o["status"] = {});
  status["conditions"] = conds as unknown as JsonValue;
  return o;
}

/** systemCondition is a condition the XR controller marks: with the XR's generation as observedGeneration. */
function systemCondition(xr: JsonObject, type: string, status: string, reason: string, time = CONDITION_TIME, message?: string): Condition {
  const gen = typeof metaOf(xr)["generation"] === "number" ? (metaOf(xr)["generation"] as number) : 0;
  return {
    type,
    status,
    ...(gen !== 0 ? { observedGeneration: gen } : {}),
    lastTransitionTime: time,
    reason,
    ...(message ? { message } : {}),
  };
}

const resultDoc = (e: ComposeEvent): JsonObject => ({
  apiVersion: RENDER_API_VERSION,
  kind: "Result",
  severity: e.type,
  reason: e.reason,
  message: e.message,
});

/** legacyResultDoc is a function's result as crossplane render printed it before v2. */
const legacyResultDoc = (r: StepResult): JsonObject => ({
  apiVersion: RENDER_API_VERSION,
  kind: "Result",
  step: r.step,
  severity: `SEVERITY_${r.severity.toUpperCase()}`,
  message: r.message,
});

/** render runs the pipeline and shapes the outputs as `crossplane render` prints them. */
export async function render(inputs: RenderInputs, runner: Runner, opts: RenderOptions): Promise<RenderOutputs> {
  const steps = checkComposition(inputs.xr, inputs.composition);
  const legacyOutput = opts.legacy ?? false;
  let xr = inputs.xr.obj;
  // The XRD first: what is wrong with it is said in its own terms.
  const xrd = inputs.xrd ? xrdFor(inputs.xrd, xr) : undefined;
  checkSelector(xr, inputs.composition.obj, xrd?.legacy);
  const legacy = xrd?.legacy ?? false;
  const sources = [...(inputs.xrd ? [inputs.xrd] : []), ...(inputs.schemas ?? [])];
  const schemas = sources.length > 0 ? schemaSource(sources) : undefined;
  if (xrd) {
    // As the API server defaults an XR when it is written (crossplane render --xrd does this too).
    xr = structuredClone(xr);
    applyDefaults(xr, xrd.schema);
  }
  const xm = metaOf(xr);
  const xrNamespace = str(xm["namespace"]);
  const uid =
    str(xm["uid"]) !== ""
      ? str(xm["uid"])
      : legacyOutput
        ? ""
        : renderUID(str(xr["apiVersion"]), str(xr["kind"]), xrNamespace, str(xm["name"]));
  const observedObjects = inputs.observed.map((d) => d.obj);
  if (!legacyOutput) checkObserved(uid, xrNamespace, observedObjects);
  const { observed, observedByName } = byPipelineName(inputs.observed);
  // The pre-v2 shape is what recorded cases were written against: the XR is handed over as given.
  const seen = legacyOutput ? xr : observedXR(xr, uid, legacy, inputs.composition.obj, observedObjects, opts.now ?? new Date(FIXED_TIME));
  const store = storeOf([
    seen,
    ...observedObjects,
    ...inputs.required.map((d) => d.obj),
    ...inputs.credentials.map((d) => (str(d.obj["kind"]) === "" ? { ...d.obj, apiVersion: "v1", kind: "Secret" } : d.obj)),
  ]);
  // Each step's largest request and response, warned of near the limits a cluster puts on them (budget.ts).
  const sizes = new Map<string, { request: number; response: number; rsp: RunFunctionResponse }>();
  const r = await runPipeline(
    {
      sized: (step, request, response, rsp) => {
        const was = sizes.get(step);
        sizes.set(step, {
          request: Math.max(was?.request ?? 0, request),
          ...(was && was.response >= response ? { response: was.response, rsp: was.rsp } : { response, rsp }),
        });
      },
      steps,
      xr: seen,
      observed,
      context: structuredClone(inputs.context),
      credentials: inputs.credentials,
      fetch: (s) => select(legacyOutput ? inputs.required.map((d) => d.obj) : store, s),
      ...(schemas ? { schemaOf: (apiVersion: string, kind: string) => schemas.find(apiVersion, kind) } : {}),
    },
    runner,
    Date.now() + opts.timeoutMs,
  );
  const { composed, events: composeEvents } = composeResources({
    xr: legacyOutput ? { ...xr, metadata: { ...xm, uid } } : seen,
    desired: r.desired.resources,
    observed: observedByName,
    ...(schemas ? { namespaced: (apiVersion: string, kind: string) => schemas.namespaced(apiVersion, kind) } : {}),
    keepGenerateName: legacyOutput,
  });
  const objects = composed.map((c) => c.object);
  // crossplane render sorts composed resources by their name in the pipeline.
  const unready = composed.filter((c) => !c.ready).map((c) => c.name);
  const readiness: Readiness = {
    unready,
    xrReady: r.desired.composite?.ready ?? Ready.UNSPECIFIED,
    // Being deleted: what xfn host writes (the deletion step's own report, else what is left), not Creating.
    ...(str(xm["deletionTimestamp"]) !== ""
      ? {
          deleting: str(deletionReport(r.conditions)?.["message"] ?? deletingMessage(new Map(Object.entries(observedByName)))),
        }
      : {}),
  };
  const rendered = legacyOutput
    ? renderLegacyXR(xr, r.desired.composite?.resource, r.conditions, readiness)
    : renderXR(xr, seen, legacy, r.desired.composite?.resource, r.conditions, objects, readiness);
  let results: JsonObject[];
  if (legacyOutput) results = r.results.map(legacyResultDoc);
  else {
    // The Events the reconcile records, in the order it records them.
    const events: ComposeEvent[] = [];
    const ref = legacy ? (isObject(xr["spec"]) ? xr["spec"]["compositionRef"] : undefined) : crossplaneField(xr, "compositionRef");
    const compName = str(metaOf(inputs.composition.obj)["name"]);
    if (!(isObject(ref) && Object.keys(ref).length === 1 && ref["name"] === compName))
      events.push({ type: "Normal", reason: "SelectComposition", message: `Successfully selected composition: ${compName}` });
    events.push(...r.results.map(resultEvent), ...composeEvents);
    for (const n of unready)
      events.push({ type: "Normal", reason: "ComposeResources", message: `Composed resource ${JSON.stringify(n)} is not yet ready` });
    results = events.map(resultDoc);
  }
  const sizeNotes = [...sizes].flatMap(([step, z]) => sizeWarnings(step, z.request, z.response, z.rsp));
  const warnings = [
    ...renderWarnings(xr, rendered, opts.now ?? new Date(FIXED_TIME), xrd && inputs.xrd ? { ...xrd, doc: inputs.xrd } : undefined),
    ...sizeNotes,
  ];
  return {
    warnings,
    sizeWarnings: sizeNotes,
    input: xr,
    xr: rendered,
    states: composed.map((c) => ({
      name: c.name,
      kind: str(c.object["kind"]),
      ready: c.ready,
      observed: Object.hasOwn(observedByName, c.name),
    })),
    composed: objects,
    results,
    context: { apiVersion: RENDER_API_VERSION, kind: "Context", fields: r.context ?? {} },
  };
}

/** byPipelineName keys observed resources by their name in the pipeline (their composition-resource-name annotation). */
function byPipelineName(docs: Doc[]): { observed: Record<string, Resource>; observedByName: Record<string, JsonObject> } {
  const observed: Record<string, Resource> = {};
  const observedByName: Record<string, JsonObject> = {};
  for (const d of docs) {
    const name = stringMap(metaOf(d.obj)["annotations"])[COMPOSITION_RESOURCE_NAME];
    if (!name)
      throw new InputError(
        `${d.source}: an observed resource needs the ${COMPOSITION_RESOURCE_NAME} annotation to be matched to a pipeline resource`,
      );
    setOwn(observed, name, create(ResourceSchema, { resource: structuredClone(d.obj) }));
    setOwn(observedByName, name, d.obj);
  }
  return { observed, observedByName };
}

/**
 * renderWarnings are what render says beside its output: an XR deleted after
 * the clock functions see, and what the XRD does not declare of what the
 * pipeline wrote (the API server would drop it).
 */
function renderWarnings(
  xr: JsonObject,
  rendered: JsonObject,
  clock: Date,
  xrd: { schema: Parameters<typeof prune>[1]; doc: Doc } | undefined,
): string[] {
  const warnings: string[] = [];
  const deletion = str(metaOf(xr)["deletionTimestamp"]);
  if (Date.parse(deletion) > clock.getTime())
    warnings.push(
      `the XR was deleted at ${deletion}, after the time functions see (${clock.toISOString()}): ` +
        "pass --now to see how long its deletion has taken (the deletion step warns of resources blocking it past stuckAfter)",
    );
  if (xrd) {
    const xrdName = str(metaOf(xrd.doc.obj)["name"]);
    const version = parseApiVersion(str(xr["apiVersion"])).version;
    for (const path of prune(rendered, xrd.schema))
      warnings.push(
        `the XRD ${xrdName} does not declare ${path}, so the API server drops what the pipeline wrote there; ` +
          `declare it under spec.versions[${version}].schema.openAPIV3Schema`,
      );
  }
  return warnings;
}

const crossplaneField = (xr: JsonObject, k: string): JsonValue | undefined => {
  const spec = isObject(xr["spec"]) ? xr["spec"] : {};
  return isObject(spec["crossplane"]) ? spec["crossplane"][k] : undefined;
};

/**
 * Readiness is what the XR's Ready condition is made of: composed resources
 * not ready, the readiness a function set, and, while the XR is being
 * deleted, what its Ready=False (Deleting) condition says.
 */
interface Readiness {
  unready: string[];
  xrReady: Ready;
  deleting?: string;
}

/**
 * renderXR makes the XR as current crossplane render prints it: the object the
 * reconcile wrote last, which holds only its identity, its references to what
 * it composed (spec.crossplane.resourceRefs, or spec.resourceRefs for a legacy
 * XR; [] when none) and its status: the desired status, with conditions merged
 * in the order the reconcile sets them (the observed XR's, Responsive, the
 * functions', Synced, Ready), every lastTransitionTime the fixed one.
 */
function renderXR(
  xr: JsonObject,
  seen: JsonObject,
  legacy: boolean,
  desired: JsonObject | undefined,
  fnConditions: JsonObject[],
  composed: JsonObject[],
  readiness: Readiness,
): JsonObject {
  const { unready, xrReady } = readiness;
  const m = metaOf(xr);
  const out: JsonObject = {
    apiVersion: xr["apiVersion"]!,
    kind: xr["kind"]!,
    metadata: { name: m["name"]!, ...(str(m["namespace"]) !== "" ? { namespace: m["namespace"]! } : {}) },
  };
  const refs = resourceRefsOf(xr, composed) as unknown as JsonValue[];
  out["spec"] = legacy ? { resourceRefs: refs } : { crossplane: { resourceRefs: refs } };
  const status: JsonObject = structuredClone(isObject(desired?.["status"]) ? desired["status"] : {});
  const conds = conditionsIn({ status });
  setConditions(conds, ...conditionsIn(seen));
  const claimTypes: string[] = [];
  for (const fc of fnConditions) {
    const type = str(fc["type"]);
    if (SYSTEM_CONDITIONS.has(type)) continue;
    setConditions(conds, {
      type,
      status: str(fc["status"]),
      lastTransitionTime: CONDITION_TIME,
      reason: str(fc["reason"]),
      ...(str(fc["message"]) !== "" ? { message: str(fc["message"]) } : {}),
    });
    if (fc["claim"] === true && legacy && !claimTypes.includes(type)) claimTypes.push(type);
  }
  let ready = systemCondition(xr, "Ready", "True", "Available");
  if (unready.length > 0)
    ready = systemCondition(xr, "Ready", "False", "Creating", CONDITION_TIME, `Unready resources: ${firstNAndSomeMore(unready)}`);
  // The XR's readiness, when a function set it, wins over its resources'.
  if (xrReady === Ready.TRUE) ready = systemCondition(xr, "Ready", "True", "Available");
  if (xrReady === Ready.FALSE) ready = systemCondition(xr, "Ready", "False", "Creating");
  if (readiness.deleting !== undefined) ready = systemCondition(xr, "Ready", "False", "Deleting", CONDITION_TIME, readiness.deleting);
  setConditions(conds, systemCondition(xr, "Synced", "True", "ReconcileSuccess"), ready);
  status["conditions"] = conds.map((c) => ({ ...c, lastTransitionTime: CONDITION_TIME })) as unknown as JsonValue;
  if (claimTypes.length > 0) {
    const had = Array.isArray(status["claimConditionTypes"]) ? status["claimConditionTypes"].filter((t) => typeof t === "string") : [];
    status["claimConditionTypes"] = [...had, ...claimTypes.filter((t) => !had.includes(t))];
  }
  out["status"] = status;
  return out;
}

/** renderLegacyXR makes the XR as crossplane render printed it before v2: the desired status and a Ready condition. */
function renderLegacyXR(xr: JsonObject, desired: JsonObject | undefined, fnConditions: JsonObject[], readiness: Readiness): JsonObject {
  const { unready, xrReady } = readiness;
  const out: JsonObject = structuredClone(desired ?? {});
  const m = metaOf(xr);
  out["apiVersion"] = xr["apiVersion"]!;
  out["kind"] = xr["kind"]!;
  out["metadata"] = { name: m["name"]!, ...(m["namespace"] ? { namespace: m["namespace"] } : {}) };
  let ready: JsonObject = { type: "Ready", status: "True", reason: "Available", lastTransitionTime: CONDITION_TIME };
  if (xrReady === Ready.FALSE) ready = { type: "Ready", status: "False", reason: "Creating", lastTransitionTime: CONDITION_TIME };
  else if (xrReady === Ready.UNSPECIFIED && unready.length > 0) {
    const sorted = [...unready].sort();
    const shown = sorted.length > 3 ? `${sorted.slice(0, 3).join(", ")}, and ${sorted.length - 3} more` : sorted.join(", ");
    ready = {
      type: "Ready",
      status: "False",
      reason: "Creating",
      message: `Unready resources: ${shown}`,
      lastTransitionTime: CONDITION_TIME,
    };
  }
  if (readiness.deleting !== undefined)
    ready = { type: "Ready", status: "False", reason: "Deleting", message: readiness.deleting, lastTransitionTime: CONDITION_TIME };
  const status = isObject(out["status"]) ? out["status"] : {};
  const conds: JsonObject[] = [ready];
  for (const fc of fnConditions) {
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

/**
 * mergeFullXR is what `-x` prints: the input XR with the rendered one merged
 * over it, as crossplane render merges them (mergo with override): objects
 * merge key by key, a list replaces a list unless it is empty and the input's
 * is not, anything else replaces what the input held.
 */
export function mergeFullXR(input: JsonObject, rendered: JsonObject): JsonObject {
  const merge = (dst: JsonObject, src: JsonObject): JsonObject => {
    for (const [k, v] of Object.entries(src)) {
      const d = getOwn(dst, k);
      if (isObject(v) && isObject(d)) merge(d, v);
      else if (Array.isArray(v) && v.length === 0 && Array.isArray(d) && d.length > 0) continue;
      else setOwn(dst, k, structuredClone(v));
    }
    return dst;
  };
  return merge(structuredClone(input), rendered);
}

export { ComposeError };
