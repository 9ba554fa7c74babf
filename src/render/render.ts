// Rendering a composition offline, as `crossplane render` does: run a
// Pipeline-mode Composition's steps in order against an XR and the observed
// resources, and produce the XR's new status, the composed resources as
// Crossplane would create them, the functions' results and the final context.
import { createHash } from "node:crypto";
import { clone, create, equals, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import {
  Capability,
  Ready,
  RequirementsSchema,
  ResourceSchema,
  RunFunctionRequestSchema,
  Severity,
  StateSchema,
  Status,
  type Requirements,
  type Resource,
  type ResourceSelector,
  type Resources,
  type RunFunctionRequest,
  type RunFunctionResponse,
  type State,
} from "../gen/fn/v1/run_function_pb.js";
import { encodeRequest } from "../wire/codec.js";
import { identity, InputError, type Doc } from "./load.js";
import type { Runner } from "./runner.js";

export const COMPOSITION_RESOURCE_NAME = "crossplane.io/composition-resource-name";
export const COMPOSITE_LABEL = "crossplane.io/composite";
export const CLAIM_NAME_LABEL = "crossplane.io/claim-name";
export const CLAIM_NAMESPACE_LABEL = "crossplane.io/claim-namespace";
export const RENDER_API_VERSION = "render.crossplane.io/v1beta1";
/** Crossplane re-runs a function at most this many times while its requirements change. */
export const MAX_REQUIREMENTS_ITERATIONS = 5;
/**
 * FIXED_TIME is the instant offline runs use where a real clock would make
 * output vary: crossplane render's lastTransitionTime, and the clock that
 * in-process functions see under xfn render and xfn test unless told otherwise.
 */
export const FIXED_TIME = "2024-01-01T00:00:00Z";
const CONDITION_TIME = FIXED_TIME;
const SYSTEM_CONDITIONS = new Set(["Ready", "Synced", "Healthy"]);
const ALL_CAPABILITIES = [
  Capability.CAPABILITIES,
  Capability.REQUIRED_RESOURCES,
  Capability.CREDENTIALS,
  Capability.CONDITIONS,
  Capability.REQUIRED_SCHEMAS,
];

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

/** FatalResultError: a pipeline step returned a Fatal result (exit code 3). */
export class FatalResultError extends Error {
  override readonly name = "FatalResultError";
  constructor(
    readonly step: string,
    readonly detail: string,
  ) {
    super(`pipeline step ${JSON.stringify(step)} returned a fatal result: ${detail}`);
  }
}

export interface PipelineStep {
  step: string;
  functionName: string;
  input?: JsonObject;
  credentials: Array<{ name: string; secretName: string; secretNamespace: string }>;
  bootstrap: Array<{ name: string; selector: Omit<ResourceSelector, "$typeName"> }>;
}

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
const meta = (o: JsonObject): JsonObject => (isObject(o["metadata"]) ? o["metadata"] : {});
const stringMap = (v: unknown): Record<string, string> =>
  isObject(v) ? Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === "string")) : {};

/** checkComposition validates the XR and Composition and returns the pipeline. */
export function checkComposition(xr: Doc, comp: Doc): PipelineStep[] {
  const x = identity(xr, "a composite resource");
  const c = identity(comp, "a Composition");
  if (c.kind !== "Composition" || !c.apiVersion.startsWith("apiextensions.crossplane.io/")) {
    throw new InputError(`${comp.source}: expected an apiextensions.crossplane.io Composition, got ${c.apiVersion} ${c.kind}`);
  }
  const spec = isObject(comp.obj["spec"]) ? comp.obj["spec"] : {};
  const ref = isObject(spec["compositeTypeRef"]) ? spec["compositeTypeRef"] : {};
  if (ref["kind"] !== x.kind)
    throw new InputError(`composition's compositeTypeRef.kind (${String(ref["kind"])}) does not match XR's kind (${x.kind})`);
  if (ref["apiVersion"] !== x.apiVersion) {
    throw new InputError(
      `composition's compositeTypeRef.apiVersion (${String(ref["apiVersion"])}) does not match XR's apiVersion (${x.apiVersion})`,
    );
  }
  const mode = spec["mode"] ?? "Pipeline";
  if (mode !== "Pipeline" || !Array.isArray(spec["pipeline"])) {
    throw new InputError(
      `render only supports Composition Function pipelines: Composition ${JSON.stringify(c.name)} ` +
        "must use spec.mode: Pipeline with a spec.pipeline",
    );
  }
  return spec["pipeline"].map((raw, i): PipelineStep => {
    const where = `${comp.source}: spec.pipeline[${i}]`;
    if (!isObject(raw)) throw new InputError(`${where} is not an object`);
    const step = raw["step"];
    const fn = isObject(raw["functionRef"]) ? raw["functionRef"]["name"] : undefined;
    if (typeof step !== "string" || step === "") throw new InputError(`${where}: step needs a name`);
    if (typeof fn !== "string" || fn === "") throw new InputError(`${where} (${step}): functionRef.name is required`);
    if (raw["input"] !== undefined && !isObject(raw["input"])) throw new InputError(`${where} (${step}): input must be an object`);
    const credentials = (Array.isArray(raw["credentials"]) ? raw["credentials"] : []).flatMap((cr) => {
      if (!isObject(cr) || cr["source"] !== "Secret" || !isObject(cr["secretRef"])) return [];
      return [
        {
          name: String(cr["name"]),
          secretName: String(cr["secretRef"]["name"]),
          secretNamespace: String(cr["secretRef"]["namespace"] ?? ""),
        },
      ];
    });
    const req = isObject(raw["requirements"]) ? raw["requirements"] : {};
    const bootstrap = (Array.isArray(req["requiredResources"]) ? req["requiredResources"] : []).flatMap((s) => {
      if (!isObject(s) || typeof s["requirementName"] !== "string") return [];
      const selector: Omit<ResourceSelector, "$typeName"> = {
        apiVersion: String(s["apiVersion"] ?? ""),
        kind: String(s["kind"] ?? ""),
        match:
          typeof s["name"] === "string"
            ? { case: "matchName", value: s["name"] }
            : { case: "matchLabels", value: { $typeName: "apiextensions.fn.proto.v1.MatchLabels", labels: stringMap(s["matchLabels"]) } },
        ...(typeof s["namespace"] === "string" ? { namespace: s["namespace"] } : {}),
      };
      return [{ name: s["requirementName"], selector }];
    });
    return { step, functionName: fn, ...(raw["input"] ? { input: raw["input"] as JsonObject } : {}), credentials, bootstrap };
  });
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

/** Fetch answers one resource requirement. */
export type Fetch = (s: Omit<ResourceSelector, "$typeName">) => Resources | Promise<Resources>;

async function answer(selectors: Record<string, ResourceSelector>, fetch: Fetch): Promise<Record<string, Resources>> {
  const out: Record<string, Resources> = {};
  for (const [k, s] of Object.entries(selectors)) out[k] = await fetch(s);
  return out;
}

const hasRequirements = (r: Requirements | undefined): r is Requirements =>
  !!r && (Object.keys(r.resources).length > 0 || Object.keys(r.extraResources).length > 0 || Object.keys(r.schemas).length > 0);

/**
 * runWithRequirements calls a function, answers what it asks for, and calls it
 * again until its requirements stop changing, at most 5 times, as Crossplane does.
 */
async function runWithRequirements(
  run: (req: RunFunctionRequest) => Promise<RunFunctionResponse>,
  req: RunFunctionRequest,
  fetch: Fetch,
  step: string,
) {
  let previous: Requirements | undefined;
  for (let i = 0; i < MAX_REQUIREMENTS_ITERATIONS; i++) {
    const rsp = await run(req);
    const wanted = rsp.requirements;
    if (!hasRequirements(wanted) || rsp.results.some((r) => r.severity === Severity.FATAL)) return rsp;
    if (previous && equals(RequirementsSchema, previous, wanted)) return rsp;
    previous = wanted;
    req.requiredResources = { ...req.requiredResources, ...(await answer(wanted.resources, fetch)) };
    req.extraResources = await answer(wanted.extraResources, fetch);
    // xfn render has no schemas to offer: an empty Schema answers "not found".
    req.requiredSchemas = Object.fromEntries(
      Object.keys(wanted.schemas).map((k) => [k, { $typeName: "apiextensions.fn.proto.v1.Schema" as const }]),
    );
  }
  throw new Error(`pipeline step ${JSON.stringify(step)}: requirements did not stabilize after ${MAX_REQUIREMENTS_ITERATIONS} iterations`);
}

function decodeSecret(secret: JsonObject): Record<string, Uint8Array> {
  const out: Record<string, Uint8Array> = {};
  for (const [k, v] of Object.entries(stringMap(secret["data"]))) out[k] = Buffer.from(v, "base64");
  for (const [k, v] of Object.entries(stringMap(secret["stringData"]))) out[k] = Buffer.from(v, "utf8");
  return out;
}

/** tagOf computes a request's tag as Crossplane does: the hex SHA-256 of its encoding. */
export function tagOf(req: RunFunctionRequest): string {
  return createHash("sha256").update(encodeRequest(req)).digest("hex");
}

/** PipelineResult is what running a Composition's pipeline produced. */
export interface PipelineResult {
  desired: State;
  context: JsonObject | undefined;
  /** Non-fatal results, as render's Result documents. */
  results: JsonObject[];
  /** Conditions the functions set, as Kubernetes conditions. */
  conditions: JsonObject[];
  /** The shortest TTL any step asked for, in seconds. */
  ttlSeconds: number | undefined;
}

/** PipelineInputs are what each step of a pipeline is called with. */
export interface PipelineInputs {
  steps: PipelineStep[];
  xr: JsonObject;
  observed: Record<string, Resource>;
  context: JsonObject | undefined;
  credentials: Doc[];
  /** Answers resource requirements (bootstrap and asked for). */
  fetch: Fetch;
}

/**
 * runPipeline calls each step in order, threading desired state and context,
 * answering requirements until they settle. A Fatal result throws FatalResultError.
 */
export async function runPipeline(p: PipelineInputs, runner: Runner, deadline: number): Promise<PipelineResult> {
  const observed: State = create(StateSchema, { composite: { resource: structuredClone(p.xr) }, resources: p.observed });
  let desired: State = create(StateSchema);
  let context = p.context;
  const results: JsonObject[] = [];
  const conditions: JsonObject[] = [];
  let ttlSeconds: number | undefined;
  for (const s of p.steps) {
    if (Date.now() > deadline) throw new Error(`timed out before pipeline step ${JSON.stringify(s.step)}`);
    const credentials = Object.fromEntries(
      s.credentials.map((c) => {
        const secret = p.credentials.find(
          (d) =>
            d.obj["kind"] === "Secret" && meta(d.obj)["name"] === c.secretName && (meta(d.obj)["namespace"] ?? "") === c.secretNamespace,
        );
        if (!secret)
          throw new InputError(
            `pipeline step ${JSON.stringify(s.step)}: cannot get credentials from secret ${JSON.stringify(c.secretName)}: ` +
              "not in --function-credentials",
          );
        return [
          c.name,
          {
            $typeName: "apiextensions.fn.proto.v1.Credentials" as const,
            source: {
              case: "credentialData" as const,
              value: { $typeName: "apiextensions.fn.proto.v1.CredentialData" as const, data: decodeSecret(secret.obj) },
            },
          },
        ];
      }),
    );
    const bootstrap: Record<string, Resources> = {};
    for (const b of s.bootstrap) bootstrap[b.name] = await p.fetch(b.selector);
    const req = create(RunFunctionRequestSchema, {
      meta: { capabilities: ALL_CAPABILITIES },
      observed: clone(StateSchema, observed),
      desired: clone(StateSchema, desired),
      ...(context ? { context } : {}),
      ...(s.input ? { input: s.input } : {}),
      credentials,
      requiredResources: bootstrap,
    });
    req.meta!.tag = tagOf(req);
    const rsp = await runWithRequirements((r) => runner.run(s.functionName, r, deadline), req, p.fetch, s.step);
    const fatal = rsp.results.find((r) => r.severity === Severity.FATAL);
    if (fatal) throw new FatalResultError(s.step, fatal.message);
    desired = rsp.desired ?? create(StateSchema);
    context = rsp.context;
    const ttl = rsp.meta?.ttl;
    if (ttl) ttlSeconds = Math.min(ttlSeconds ?? Infinity, Number(ttl.seconds) + ttl.nanos / 1e9);
    for (const r of rsp.results) {
      results.push({
        apiVersion: RENDER_API_VERSION,
        kind: "Result",
        step: s.step,
        severity: `SEVERITY_${Severity[r.severity]}`,
        message: r.message,
        ...(r.reason ? { reason: r.reason } : {}),
      });
    }
    for (const c of rsp.conditions) {
      const status = c.status === Status.CONDITION_TRUE ? "True" : c.status === Status.CONDITION_FALSE ? "False" : "Unknown";
      conditions.push({
        type: c.type,
        status,
        reason: c.reason,
        ...(c.message ? { message: c.message } : {}),
        lastTransitionTime: CONDITION_TIME,
      });
    }
  }
  return { desired, context, results, conditions, ttlSeconds };
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
  // crossplane render's Result documents carry no reason.
  const results = r.results.map(({ reason: _r, ...rest }) => rest);
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
  for (const c of conditions) {
    if (SYSTEM_CONDITIONS.has(String(c["type"]))) continue;
    const i = conds.findIndex((x) => x["type"] === c["type"]);
    if (i >= 0) conds[i] = c;
    else conds.push(c);
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
