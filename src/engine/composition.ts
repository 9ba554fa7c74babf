// The engine that runs a Composition's pipeline: each step's function called
// in order with the observed state, the desired state and context threaded
// from step to step, credentials and resource requirements answered (the
// requirements loop, as Crossplane runs it). xfn render and
// the host loop both run compositions through it; it does no I/O of its own
// beyond the Runner (functions) and Fetch (required resources) it is given.
import { createHash, randomUUID } from "node:crypto";
import { create, equals, type JsonObject, type JsonValue, type Message } from "@bufbuild/protobuf";
import type { GenMessage } from "@bufbuild/protobuf/codegenv2";
import {
  Capability,
  RequirementsSchema,
  ResourceSchema,
  ResourcesSchema,
  RunFunctionRequestSchema,
  SchemaSchema,
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
  type Schema,
  type State,
} from "../gen/fn/v1/run_function_pb.js";
import { setOwn } from "../own.js";
import { cloneState, stateOf } from "../sdk/clone.js";
import { encodeRequest, encodeResponse } from "../wire/codec.js";
import type { ComposeEvent } from "./composed.js";
import { identity, InputError, type Doc } from "./docs.js";
import type { Runner } from "./runner.js";
import type { StepObserver } from "./observer.js";
import { isObject, metaOf } from "../json.js";
import { messageOf } from "../sdk/errors.js";

/** Crossplane re-runs a function at most this many times while its requirements change. */
export const MAX_REQUIREMENTS_ITERATIONS = 5;
const ALL_CAPABILITIES = [
  Capability.CAPABILITIES,
  Capability.REQUIRED_RESOURCES,
  Capability.CREDENTIALS,
  Capability.CONDITIONS,
  Capability.REQUIRED_SCHEMAS,
];

/**
 * StepError: a pipeline step could not be run (the function is unreachable or
 * failed, or its requirements did not settle), worded as Crossplane words it.
 */
export class StepError extends Error {
  override readonly name = "StepError";
  constructor(
    readonly step: string,
    cause: Error,
  ) {
    super(`cannot run Composition pipeline step ${JSON.stringify(step)}: ${cause.message}`, { cause });
  }
}

/** FatalResultError: a pipeline step returned a Fatal result (exit code 3). */
export class FatalResultError extends Error {
  override readonly name = "FatalResultError";
  constructor(
    readonly step: string,
    readonly detail: string,
    /** Every result before the Fatal one (those after it are not reported, as in Crossplane). */
    readonly results: StepResult[] = [],
    /** Every condition the functions set, the Fatal step's among them. */
    readonly conditions: JsonObject[] = [],
  ) {
    super(`pipeline step ${JSON.stringify(step)} returned a fatal result: ${detail}`);
  }
}

export interface PipelineStep {
  step: string;
  functionName: string;
  input?: JsonObject;
  credentials: Array<{ name: string; secretName: string; secretNamespace: string }>;
  bootstrap: Requirement[];
  /** Schema requirements declared on the step, answered before its first call. */
  bootstrapSchemas: Array<{ name: string; apiVersion: string; kind: string }>;
}

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
      // As Crossplane's ToProtobufResourceSelector: a name, else labels when given, else no match (every object of the kind).
      const selector: Selector = {
        apiVersion: String(s["apiVersion"] ?? ""),
        kind: String(s["kind"] ?? ""),
        match:
          typeof s["name"] === "string"
            ? { case: "matchName", value: s["name"] }
            : isObject(s["matchLabels"])
              ? { case: "matchLabels", value: { $typeName: "apiextensions.fn.proto.v1.MatchLabels", labels: stringMap(s["matchLabels"]) } }
              : { case: undefined },
        ...(typeof s["namespace"] === "string" ? { namespace: s["namespace"] } : {}),
      };
      return [{ name: s["requirementName"], selector }];
    });
    const bootstrapSchemas = (Array.isArray(req["requiredSchemas"]) ? req["requiredSchemas"] : []).flatMap((s) =>
      isObject(s) && typeof s["requirementName"] === "string"
        ? [{ name: s["requirementName"], apiVersion: String(s["apiVersion"] ?? ""), kind: String(s["kind"] ?? "") }]
        : [],
    );
    return {
      step,
      functionName: fn,
      ...(raw["input"] ? { input: raw["input"] as JsonObject } : {}),
      credentials,
      bootstrap,
      bootstrapSchemas,
    };
  });
}

/** Fetch answers one resource requirement. */
/** Selector is a resource selector as the engine passes it around (a plain object, not a message). */
export type Selector = Omit<ResourceSelector, "$typeName">;

/** A requirement, under the name a function or the Composition gave it. */
export interface Requirement {
  name: string;
  selector: Selector;
}

export type Fetch = (s: Selector) => Resources | Promise<Resources>;

/** SchemaOf answers one schema requirement: the kind's OpenAPI v3 schema, or undefined when not found. */
export type SchemaOf = (apiVersion: string, kind: string) => JsonObject | undefined;

/** schemaAnswer is a schema requirement's answer: the kind's schema, or an empty Schema for "not found", as Crossplane answers. */
function schemaAnswer(schemaOf: SchemaOf, apiVersion: string, kind: string): Schema {
  const found = schemaOf(apiVersion, kind);
  return create(SchemaSchema, found ? { openapiV3: structuredClone(found) } : {});
}

function mapsEqual<T extends Message>(schema: GenMessage<T>, a: Record<string, T>, b: Record<string, T>): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && equals(schema, a[k]!, b[k]!));
}

/** requirementsEqual compares as Go's proto.Equal: absent equals only absent; present ones by content. */
const requirementsEqual = (a: Requirements | undefined, b: Requirements | undefined): boolean =>
  a === undefined || b === undefined ? a === b : equals(RequirementsSchema, a, b);

/** RequirementsError: a function's requirements did not settle, or could not be answered. */
export class RequirementsError extends Error {
  override readonly name = "RequirementsError";
}

/**
 * runWithRequirements calls a function, answers what it asks for, and calls it
 * again until its requirements stop changing, as Crossplane's
 * FetchingFunctionRunner does (internal/xfn/required_resources.go at
 * 2d040d2daf4e001799c4154a4a09b9e1f40d7fde):
 * - a Fatal result, or requirements equal to the last call's, end the loop;
 * - each call gets what was given up front (bootstrap) and the answers to the
 *   last call's requirements, nothing older, and the context the last call returned;
 * - when the first call's requirements resolve to exactly what it was given,
 *   it saw everything it needs: one call, no second;
 * - at most 1 + 5 calls; then "requirements didn't stabilize".
 */
export async function runWithRequirements(
  run: (req: RunFunctionRequest) => Promise<RunFunctionResponse>,
  req: RunFunctionRequest,
  fetch: Fetch,
  schemaOf: SchemaOf = () => undefined,
): Promise<RunFunctionResponse> {
  let previous: Requirements | undefined;
  const bootstrapResources = { ...req.requiredResources };
  const bootstrapSchemas = { ...req.requiredSchemas };
  for (let i = 0; i <= MAX_REQUIREMENTS_ITERATIONS; i++) {
    const rsp = await run(req);
    if (rsp.results.some((r) => r.severity === Severity.FATAL)) return rsp;
    const wanted = rsp.requirements;
    if (requirementsEqual(wanted, previous)) return rsp;
    const resources: Record<string, Resources> = { ...bootstrapResources };
    const extra: Record<string, Resources> = {};
    const schemas: Record<string, Schema> = { ...bootstrapSchemas };
    for (const [n, sel] of Object.entries(wanted?.extraResources ?? {})) setOwn(extra, n, await fetchFor(fetch, n, sel));
    for (const [n, sel] of Object.entries(wanted?.resources ?? {})) setOwn(resources, n, await fetchFor(fetch, n, sel));
    for (const [n, sel] of Object.entries(wanted?.schemas ?? {})) setOwn(schemas, n, schemaAnswer(schemaOf, sel.apiVersion, sel.kind));
    if (
      i === 0 &&
      mapsEqual(ResourcesSchema, req.requiredResources, resources) &&
      mapsEqual(ResourcesSchema, req.extraResources, extra) &&
      mapsEqual(SchemaSchema, req.requiredSchemas, schemas)
    )
      return rsp;
    previous = wanted;
    req.requiredResources = resources;
    req.extraResources = extra;
    req.requiredSchemas = schemas;
    if (rsp.context) req.context = rsp.context;
    else delete req.context;
  }
  throw new RequirementsError(`requirements didn't stabilize after the maximum number of iterations (${MAX_REQUIREMENTS_ITERATIONS})`);
}

async function fetchFor(fetch: Fetch, name: string, sel: ResourceSelector): Promise<Resources> {
  try {
    return await fetch(sel);
  } catch (err) {
    throw new RequirementsError(`fetching resources for ${name}: ${messageOf(err)}`);
  }
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
  /** What each step required last (by requirement name), to seed its next run with (PipelineInputs.seed). */
  required: Record<string, Requirement[]>;
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

/**
 * resultEvent is the Event Crossplane records for a function's result: its
 * severity as the type, its reason (ComposeResources when it gave none), and
 * the message prefixed with the step. A result of unknown severity is a
 * Warning that says so, without the prefix.
 */
export function resultEvent(r: StepResult): ComposeEvent {
  if (r.severity === "Unspecified")
    return {
      type: "Warning",
      reason: r.reason,
      message: `Pipeline step ${JSON.stringify(r.step)} returned a result of unknown severity (assuming warning): ${r.message}`,
    };
  return {
    type: r.severity === "Normal" ? "Normal" : "Warning",
    reason: r.reason,
    message: `Pipeline step ${JSON.stringify(r.step)}: ${r.message}`,
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
  /**
   * seed gives the resources a step required on its last run, fetched before
   * its first call (best effort, after bootstrap), as Crossplane's composer
   * seeds them from its dependency tracker: a function whose requirements have
   * not changed then needs one call, not two.
   */
  seed?: (step: string) => Requirement[];
  /** Told of each step's request and response (a Pipeline Inspector: xfn host --inspector-socket). */
  observer?: StepObserver;
  /** The Composition's name, for the observer. */
  compositionName?: string;
  /** Told of each call's request and response size in encoded bytes (xfn render and xfn test warn near Crossplane's limit). */
  sized?: (step: string, requestBytes: number, responseBytes: number, rsp: RunFunctionResponse) => void;
}

/** stepCredentials are the credentials a step names, read from the Secrets given (--function-credentials). */
function stepCredentials(s: PipelineStep, secrets: Doc[]): RunFunctionRequest["credentials"] {
  return Object.fromEntries(
    s.credentials.map((c) => {
      const secret = secrets.find(
        (d) =>
          d.obj["kind"] === "Secret" && metaOf(d.obj)["name"] === c.secretName && (metaOf(d.obj)["namespace"] ?? "") === c.secretNamespace,
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
}

/**
 * firstRequired are the resources and schemas a step is sent on its first
 * call: the Composition's bootstrap requirements, then (best effort) what the
 * step required on its last run.
 */
async function firstRequired(
  s: PipelineStep,
  p: PipelineInputs,
): Promise<{ resources: Record<string, Resources>; schemas: Record<string, Schema> }> {
  const resources: Record<string, Resources> = {};
  for (const b of s.bootstrap) {
    try {
      setOwn(resources, b.name, await p.fetch(b.selector));
    } catch (err) {
      throw new Error(`cannot fetch bootstrap required resources for requirement ${JSON.stringify(b.name)}: ${messageOf(err)}`);
    }
  }
  for (const r of p.seed?.(s.step) ?? []) {
    if (Object.hasOwn(resources, r.name)) continue; // bootstrap requirements are authoritative
    try {
      setOwn(resources, r.name, await p.fetch(r.selector));
    } catch {
      // Best effort: the function asks again, and the loop answers it.
    }
  }
  const schemas: Record<string, Schema> = {};
  for (const b of s.bootstrapSchemas) setOwn(schemas, b.name, schemaAnswer(p.schemaOf ?? (() => undefined), b.apiVersion, b.kind));
  return { resources, schemas };
}

/** stepMeta is what an observer (a Pipeline Inspector) is told of a step: which run, step, function and XR. */
function stepMeta(p: PipelineInputs, s: PipelineStep, stepIndex: number, traceId: string): Parameters<StepObserver["begin"]>[0] {
  const xrMeta = metaOf(p.xr ?? {});
  return {
    traceId,
    stepIndex,
    stepName: s.step,
    functionName: s.functionName,
    ...(p.xr
      ? {
          composition: {
            name: p.compositionName ?? "",
            xr: {
              apiVersion: String(p.xr["apiVersion"] ?? ""),
              kind: String(p.xr["kind"] ?? ""),
              name: String(xrMeta["name"] ?? ""),
              namespace: String(xrMeta["namespace"] ?? ""),
              uid: String(xrMeta["uid"] ?? ""),
            },
          },
        }
      : {}),
  };
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
  const required: PipelineResult["required"] = {};
  const traceId = randomUUID(); // one per pipeline run, shared by its steps, as Crossplane's trace ID
  for (const [stepIndex, s] of p.steps.entries()) {
    if (Date.now() > deadline) throw new Error(`timed out before pipeline step ${JSON.stringify(s.step)}`);
    const req = create(RunFunctionRequestSchema, {
      meta: { capabilities: ALL_CAPABILITIES },
      ...(context ? { context } : {}),
      ...(s.input ? { input: s.input } : {}),
    });
    // Maps keyed by names from files and functions are set, not passed to
    // create, which would drop a key named __proto__ (sdk/clone.ts).
    req.observed = cloneState(observed);
    req.desired = cloneState(desired);
    req.credentials = stepCredentials(s, p.credentials);
    const first = await firstRequired(s, p);
    req.requiredResources = first.resources;
    req.requiredSchemas = first.schemas;
    req.meta!.tag = tagOf(req);
    let rsp: RunFunctionResponse;
    // As Crossplane's inspector wraps its whole function runner: the step's first request, its final response.
    const inspected = await p.observer?.begin(stepMeta(p, s, stepIndex, traceId), req);
    try {
      const sized = p.sized;
      const call = sized
        ? async (r: RunFunctionRequest) => {
            const answer = await runner.run(s.functionName, r, deadline);
            sized(s.step, encodeRequest(r).length, encodeResponse(answer).length, answer);
            return answer;
          }
        : (r: RunFunctionRequest) => runner.run(s.functionName, r, deadline);
      rsp = await runWithRequirements(call, req, p.fetch, p.schemaOf);
    } catch (err) {
      await inspected?.(undefined, err as Error);
      if (err instanceof InputError) throw err;
      throw new StepError(s.step, err as Error);
    }
    await inspected?.(rsp, undefined);
    // Conditions first: Crossplane keeps those of a step that returned a Fatal result.
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
    // Results up to a Fatal one; what a function returned after it is not reported.
    for (const r of rsp.results) {
      if (r.severity === Severity.FATAL) throw new FatalResultError(s.step, r.message, [...results], [...conditions]);
      results.push(stepResult(s.step, r));
    }
    desired = rsp.desired ?? create(StateSchema);
    context = rsp.context;
    // A TTL of zero means no limit, as in Crossplane: only a positive one shortens the pipeline's.
    const ttl = rsp.meta?.ttl;
    const seconds = ttl ? Number(ttl.seconds) + ttl.nanos / 1e9 : 0;
    if (seconds > 0) ttlSeconds = Math.min(ttlSeconds ?? Infinity, seconds);
    if (rsp.output) outputs.push({ step: s.step, output: rsp.output });
    // The Composition's bootstrap requirements (so they are watched even when the function does not ask
    // again), then both the current and the deprecated field, as Crossplane's tracker records them.
    const wanted: Array<[string, Selector]> = [
      ...s.bootstrap.map((b): [string, Selector] => [b.name, b.selector]),
      ...Object.entries(rsp.requirements?.resources ?? {}),
      ...Object.entries(rsp.requirements?.extraResources ?? {}),
    ];
    if (wanted.length > 0)
      setOwn(
        required,
        s.step,
        wanted.map(([name, selector]) => ({ name, selector })),
      );
  }
  return { desired, context, results, conditions, ttlSeconds, outputs, required };
}
