// The engine that runs a Composition's pipeline: each step's function called
// in order with the observed state, the desired state and context threaded
// from step to step, credentials and resource requirements answered (the
// requirements loop, up to 5 passes, as Crossplane runs it). xfn render and
// the host loop both run compositions through it; it does no I/O of its own
// beyond the Runner (functions) and Fetch (required resources) it is given.
import { createHash } from "node:crypto";
import { create, equals, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import {
  Capability,
  RequirementsSchema,
  ResourceSchema,
  RunFunctionRequestSchema,
  Severity,
  StateSchema,
  Status,
  Target,
  type Requirements,
  type Resource,
  type ResourceSelector,
  type Resources,
  type Result,
  type RunFunctionRequest,
  type RunFunctionResponse,
  type State,
} from "../gen/fn/v1/run_function_pb.js";
import { setOwn } from "../own.js";
import { cloneState, stateOf } from "../sdk/clone.js";
import { encodeRequest } from "../wire/codec.js";
import { identity, InputError, type Doc } from "./docs.js";
import type { Runner } from "./runner.js";

export const COMPOSITION_RESOURCE_NAME = "crossplane.io/composition-resource-name";
export const COMPOSITE_LABEL = "crossplane.io/composite";
export const CLAIM_NAME_LABEL = "crossplane.io/claim-name";
export const CLAIM_NAMESPACE_LABEL = "crossplane.io/claim-namespace";
/** Crossplane re-runs a function at most this many times while its requirements change. */
export const MAX_REQUIREMENTS_ITERATIONS = 5;
const ALL_CAPABILITIES = [
  Capability.CAPABILITIES,
  Capability.REQUIRED_RESOURCES,
  Capability.CREDENTIALS,
  Capability.CONDITIONS,
  Capability.REQUIRED_SCHEMAS,
];

/** FatalResultError: a pipeline step returned a Fatal result (exit code 3). */
export class FatalResultError extends Error {
  override readonly name = "FatalResultError";
  constructor(
    readonly step: string,
    readonly detail: string,
    /** Every result up to and including the fatal step's, the fatal one among them. */
    readonly results: StepResult[] = [],
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
  return parsePipeline(comp.source, "spec.pipeline", spec["pipeline"]);
}

/** parsePipeline reads a pipeline's steps (a Composition's or an Operation's), naming where each problem is. */
export function parsePipeline(source: string, at: string, pipeline: JsonValue[]): PipelineStep[] {
  return pipeline.map((raw, i): PipelineStep => {
    const where = `${source}: ${at}[${i}]`;
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

/** Fetch answers one resource requirement. */
export type Fetch = (s: Omit<ResourceSelector, "$typeName">) => Resources | Promise<Resources>;

/** SchemaOf answers one schema requirement: the kind's OpenAPI v3 schema, or undefined when not found. */
export type SchemaOf = (apiVersion: string, kind: string) => JsonObject | undefined;

async function answer(selectors: Record<string, ResourceSelector>, fetch: Fetch): Promise<Record<string, Resources>> {
  const out: Record<string, Resources> = {};
  for (const [k, s] of Object.entries(selectors)) setOwn(out, k, await fetch(s));
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
  schemaOf: SchemaOf = () => undefined,
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
    // An empty Schema answers "not found", as Crossplane does.
    req.requiredSchemas = Object.fromEntries(
      Object.entries(wanted.schemas).map(([k, sel]) => {
        const found = schemaOf(sel.apiVersion, sel.kind);
        return [k, { $typeName: "apiextensions.fn.proto.v1.Schema" as const, ...(found ? { openapiV3: structuredClone(found) } : {}) }];
      }),
    );
  }
  throw new Error(`pipeline step ${JSON.stringify(step)}: requirements did not stabilize after ${MAX_REQUIREMENTS_ITERATIONS} iterations`);
}

function decodeSecret(secret: JsonObject): Record<string, Uint8Array> {
  const out: Record<string, Uint8Array> = {};
  for (const [k, v] of Object.entries(stringMap(secret["data"]))) setOwn(out, k, Buffer.from(v, "base64"));
  for (const [k, v] of Object.entries(stringMap(secret["stringData"]))) setOwn(out, k, Buffer.from(v, "utf8"));
  return out;
}

/** tagOf computes a request's tag as Crossplane does: the hex SHA-256 of its encoding. */
export function tagOf(req: RunFunctionRequest): string {
  return createHash("sha256").update(encodeRequest(req)).digest("hex");
}

/** StepResult is one result a function returned, and the step that returned it. */
export interface StepResult {
  step: string;
  severity: "Normal" | "Warning" | "Fatal" | "Unspecified";
  message: string;
  /** PascalCase reason; Crossplane's default, ComposeResources, when the function gave none. */
  reason: string;
  /** Whether the result is meant for the claim too (TARGET_COMPOSITE_AND_CLAIM). */
  claim: boolean;
}

/** PipelineResult is what running a Composition's pipeline produced. */
export interface PipelineResult {
  desired: State;
  context: JsonObject | undefined;
  /** Every non-fatal result, in order. */
  results: StepResult[];
  /** Conditions the functions set, as Kubernetes conditions without a lastTransitionTime. */
  conditions: JsonObject[];
  /** Each step's output (Operations report them), in step order. */
  outputs: Array<{ step: string; output: JsonObject }>;
  /** The shortest TTL any step asked for, in seconds. */
  ttlSeconds: number | undefined;
}

/** DEFAULT_RESULT_REASON is the reason Crossplane gives a result that has none. */
export const DEFAULT_RESULT_REASON = "ComposeResources";

const SEVERITIES: Record<number, StepResult["severity"]> = {
  [Severity.NORMAL]: "Normal",
  [Severity.WARNING]: "Warning",
  [Severity.FATAL]: "Fatal",
};

/** stepResult turns a function's result into a StepResult. */
export function stepResult(step: string, r: Result): StepResult {
  return {
    step,
    severity: SEVERITIES[r.severity] ?? "Unspecified",
    message: r.message,
    reason: r.reason || DEFAULT_RESULT_REASON,
    claim: r.target === Target.COMPOSITE_AND_CLAIM,
  };
}

/** PipelineInputs are what each step of a pipeline is called with. */
export interface PipelineInputs {
  steps: PipelineStep[];
  /** The observed XR; none for an Operation. */
  xr?: JsonObject;
  observed: Record<string, Resource>;
  context: JsonObject | undefined;
  credentials: Doc[];
  /** Answers resource requirements (bootstrap and asked for). */
  fetch: Fetch;
  /** Answers schema requirements; none found without it. */
  schemaOf?: SchemaOf;
}

/**
 * runPipeline calls each step in order, threading desired state and context,
 * answering requirements until they settle. A Fatal result throws FatalResultError.
 */
export async function runPipeline(p: PipelineInputs, runner: Runner, deadline: number): Promise<PipelineResult> {
  const observed = stateOf(p.observed, p.xr ? create(ResourceSchema, { resource: structuredClone(p.xr) }) : undefined);
  const outputs: Array<{ step: string; output: JsonObject }> = [];
  let desired: State = create(StateSchema);
  let context = p.context;
  const results: StepResult[] = [];
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
    for (const b of s.bootstrap) setOwn(bootstrap, b.name, await p.fetch(b.selector));
    const req = create(RunFunctionRequestSchema, {
      meta: { capabilities: ALL_CAPABILITIES },
      ...(context ? { context } : {}),
      ...(s.input ? { input: s.input } : {}),
    });
    // Maps keyed by names from files and functions are set, not passed to
    // create, which would drop a key named __proto__ (sdk/clone.ts).
    req.observed = cloneState(observed);
    req.desired = cloneState(desired);
    req.credentials = credentials;
    req.requiredResources = bootstrap;
    req.meta!.tag = tagOf(req);
    const rsp = await runWithRequirements((r) => runner.run(s.functionName, r, deadline), req, p.fetch, s.step, p.schemaOf);
    const fatal = rsp.results.find((r) => r.severity === Severity.FATAL);
    if (fatal) throw new FatalResultError(s.step, fatal.message, [...results, ...rsp.results.map((r) => stepResult(s.step, r))]);
    desired = rsp.desired ?? create(StateSchema);
    context = rsp.context;
    const ttl = rsp.meta?.ttl;
    if (ttl) ttlSeconds = Math.min(ttlSeconds ?? Infinity, Number(ttl.seconds) + ttl.nanos / 1e9);
    for (const r of rsp.results) results.push(stepResult(s.step, r));
    if (rsp.output) outputs.push({ step: s.step, output: rsp.output });
    for (const c of rsp.conditions) {
      const status = c.status === Status.CONDITION_TRUE ? "True" : c.status === Status.CONDITION_FALSE ? "False" : "Unknown";
      conditions.push({
        type: c.type,
        status,
        reason: c.reason,
        ...(c.message ? { message: c.message } : {}),
        ...(c.target === Target.COMPOSITE_AND_CLAIM ? { claim: true } : {}),
      });
    }
  }
  return { desired, context, results, conditions, ttlSeconds, outputs };
}
