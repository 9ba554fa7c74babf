// Writers of a RunFunctionResponse. Every function takes the response first
// and changes only what it names.
//
// A response starts with `to(req)`: a deep copy of the request's desired state
// and context, the request's tag, and a TTL. Desired state is cumulative across
// a pipeline, so anything a function leaves out of its response is deleted:
// start from `to` and add, rather than building desired state from scratch.
import { create, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { DurationSchema, type Duration } from "@bufbuild/protobuf/wkt";
import { isObject, setValue } from "./fieldpath.js";
import {
  ConditionSchema,
  Ready,
  RequirementsSchema,
  ResourceSchema,
  ResourceSelectorSchema,
  ResponseMetaSchema,
  ResultSchema,
  RunFunctionResponseSchema,
  SchemaSelectorSchema,
  Severity,
  StateSchema,
  Status,
  Target,
  type Condition,
  type Resource,
  type Result,
  type RunFunctionRequest,
  type RunFunctionResponse,
} from "../gen/fn/v1/run_function_pb.js";
import { getOwn, setOwn } from "../own.js";
import { EncodeError, shortPath } from "../wire/struct/base.js";
import { checkEncodable, cloneJson } from "../wire/struct/values.js";
import { cloneState } from "./clone.js";
import { EncodingError, UsageError } from "./errors.js";

/**
 * encodable throws an EncodingError, naming what and where, if v holds
 * something the wire cannot carry (a Date, a function, undefined, NaN, a
 * cycle): the call that hands it over fails, not the encoding of the response
 * after the function returned.
 */
function encodable(v: unknown, what: string): void {
  try {
    checkEncodable(v);
  } catch (err) {
    if (!(err instanceof EncodeError)) throw err;
    const { steps, detail } = err.explain();
    const where = steps.join("");
    throw new EncodingError(`cannot set ${what}: ${where ? `the value at ${shortPath(steps)}` : "the value"} ${detail}`, where, {
      cause: err,
    });
  }
}

/** DEFAULT_TTL_SECONDS is how long a response stays valid unless told otherwise (as in the Go SDK). */
export const DEFAULT_TTL_SECONDS = 60;

/** ResponseOptions tune `to`. */
export interface ResponseOptions {
  /** TTL in seconds; defaults to DEFAULT_TTL_SECONDS. */
  ttlSeconds?: number;
}

/** to starts the response to req: desired state and context copied, tag echoed, TTL set. */
export function to(req: RunFunctionRequest, opts: ResponseOptions = {}): RunFunctionResponse {
  const rsp = create(RunFunctionResponseSchema, {
    meta: { tag: req.meta?.tag ?? "", ttl: seconds(opts.ttlSeconds ?? DEFAULT_TTL_SECONDS) },
    desired: req.desired ? cloneState(req.desired) : create(StateSchema),
  });
  if (req.context) rsp.context = cloneJson(req.context);
  return rsp;
}

function seconds(s: number): Duration {
  if (!Number.isFinite(s) || s < 0) throw new RangeError(`TTL must be a finite, non-negative number of seconds, got ${s}`);
  const whole = Math.floor(s);
  return create(DurationSchema, { seconds: BigInt(whole), nanos: Math.round((s - whole) * 1e9) });
}

/** What was asked with setTTL, by response, until a pipeline reads it (takeTTLAsks). */
const asks = new WeakMap<RunFunctionResponse, { seconds: number; override: boolean }[]>();

/**
 * setTTL sets how long the response stays valid, in seconds (0: no limit, as
 * Crossplane reads it). In a pipeline (pipeline.ts) a step's TTL is one ask
 * among the steps': the response keeps the shortest, so no step lengthens
 * another's; override: true makes this one the pipeline's TTL, whatever
 * earlier steps asked (later steps' asks still shorten it).
 */
export function setTTL(rsp: RunFunctionResponse, ttlSeconds: number, opts: { override?: boolean } = {}): void {
  rsp.meta ??= create(ResponseMetaSchema);
  rsp.meta.ttl = seconds(ttlSeconds);
  const list = asks.get(rsp);
  const ask = { seconds: ttlSeconds, override: opts.override === true };
  if (list) list.push(ask);
  else asks.set(rsp, [ask]);
}

/** takeTTLAsks returns (and forgets) what setTTL was asked on rsp since the last take, in order. */
export function takeTTLAsks(rsp: RunFunctionResponse): readonly { seconds: number; override: boolean }[] {
  const list = asks.get(rsp) ?? [];
  asks.delete(rsp);
  return list;
}

/** getTTLSeconds returns the response's TTL in seconds, or undefined when unset. */
export function getTTLSeconds(rsp: RunFunctionResponse): number | undefined {
  const ttl = rsp.meta?.ttl;
  return ttl ? Number(ttl.seconds) + ttl.nanos / 1e9 : undefined;
}

function desired(rsp: RunFunctionResponse) {
  return (rsp.desired ??= create(StateSchema));
}

/**
 * TypedResource is a Kubernetes object typed by an interface, such as those
 * `xfn generate types` writes from CRDs and XRDs. TypeScript cannot prove that
 * an interface holds only JSON values (an interface has no index signature),
 * so the writers below accept one as it is and check it: a value that is not
 * JSON (a Date, a function, undefined in a list) makes the call throw an
 * EncodingError naming its path. (Changed after the call, it is still caught
 * when the response is encoded: a Fatal result naming the path.)
 */
export interface TypedResource {
  readonly apiVersion: string;
  readonly kind: string;
}

/** asJson is the one place a typed object is taken as JSON; see TypedResource. */
function asJson(v: object): JsonObject {
  return v as JsonObject;
}

/**
 * setDesiredCompositeStatus merges status into the desired XR's status.
 * Crossplane honours only `status` on a desired XR, so that is all this writes.
 * status is a JsonObject or a typed status, e.g. `NonNullable<XBuckets["status"]>`.
 */
export function setDesiredCompositeStatus(rsp: RunFunctionResponse, status: JsonObject | object): void {
  encodable(status, "the desired XR's status");
  const d = desired(rsp);
  d.composite ??= create(ResourceSchema, { resource: {} });
  const xr = (d.composite.resource ??= {});
  const current = xr["status"];
  xr["status"] = { ...(isObject(current) ? current : {}), ...cloneJson(asJson(status)) };
}

/**
 * setDesiredCompositeField sets one field of the desired XR's status, by field
 * path (it must start with "status"), leaving the rest of the status alone.
 */
export function setDesiredCompositeField(rsp: RunFunctionResponse, path: string, value: JsonValue): void {
  if (!/^status(\.|\[)/.test(path))
    throw new UsageError(`cannot set ${JSON.stringify(path)} on the desired XR: only status fields can be set`);
  encodable(value, `${path} of the desired XR`);
  const d = desired(rsp);
  d.composite ??= create(ResourceSchema, { resource: {} });
  setValue((d.composite.resource ??= {}), path, cloneJson(value));
}

/** setCompositeReady asserts the XR's readiness, overriding Crossplane's own (v1.19+). */
export function setCompositeReady(rsp: RunFunctionResponse, ready: boolean): void {
  const d = desired(rsp);
  d.composite ??= create(ResourceSchema, { resource: {} });
  d.composite.ready = ready ? Ready.TRUE : Ready.FALSE;
}

/** DesiredOptions tune setDesiredComposedResource. */
export interface DesiredOptions {
  /** Readiness to assert; leave unset to let Crossplane (or a later step) decide. */
  ready?: boolean;
}

/**
 * setDesiredComposedResource sets (replaces) one desired composed resource.
 * Its readiness is kept from the earlier desired entry unless opts.ready says
 * otherwise, so an earlier step's explicit choice survives.
 */
export function setDesiredComposedResource(
  rsp: RunFunctionResponse,
  name: string,
  resource: JsonObject | TypedResource,
  opts: DesiredOptions = {},
): Resource {
  if (name === "") throw new UsageError("cannot set desired composed resource: the name is empty");
  encodable(resource, `desired composed resource ${JSON.stringify(name)}`);
  const d = desired(rsp);
  const previous = getOwn(d.resources, name);
  const r = create(ResourceSchema, {
    resource: asJson(resource),
    ready: opts.ready === undefined ? (previous?.ready ?? Ready.UNSPECIFIED) : opts.ready ? Ready.TRUE : Ready.FALSE,
  });
  setOwn(d.resources, name, r);
  return r;
}

/** getDesiredComposedResource returns a desired composed resource of the response, or undefined. */
export function getDesiredComposedResource(rsp: RunFunctionResponse, name: string): Resource | undefined {
  const resources = rsp.desired?.resources;
  return resources ? getOwn(resources, name) : undefined;
}

/**
 * setReady asserts a desired composed resource's readiness. It throws if no
 * such desired resource exists, since readiness of nothing is a bug.
 */
export function setReady(rsp: RunFunctionResponse, name: string, ready: boolean): void {
  const r = getDesiredComposedResource(rsp, name);
  if (!r) throw new UsageError(`cannot set readiness of ${JSON.stringify(name)}: no such desired composed resource`);
  r.ready = ready ? Ready.TRUE : Ready.FALSE;
}

/**
 * setReadyWhereUndecided sets the readiness of every desired composed
 * resource whose readiness no step has decided yet (as function-auto-ready
 * does at the end of a pipeline), and leaves decided ones alone. ready is a
 * value or a function of the resource's name and desired body. It returns the
 * names it decided.
 */
export function setReadyWhereUndecided(
  rsp: RunFunctionResponse,
  ready: boolean | ((name: string, resource: JsonObject) => boolean),
): string[] {
  const decided: string[] = [];
  for (const [name, r] of Object.entries(rsp.desired?.resources ?? {})) {
    if (r.ready !== Ready.UNSPECIFIED) continue;
    const v = typeof ready === "function" ? ready(name, r.resource ?? {}) : ready;
    r.ready = v ? Ready.TRUE : Ready.FALSE;
    decided.push(name);
  }
  return decided;
}

/**
 * setConnectionDetails merges keys into the desired XR's connection details,
 * which Crossplane writes to the XR's connection Secret (legacy XRs with
 * writeConnectionSecretToRef; Crossplane v2's modern XRs have none: compose a
 * Secret instead). Strings are stored as UTF-8 bytes.
 */
export function setConnectionDetails(rsp: RunFunctionResponse, details: Record<string, string | Uint8Array>): void {
  const d = desired(rsp);
  d.composite ??= create(ResourceSchema, { resource: {} });
  for (const [k, v] of Object.entries(details)) {
    if (typeof v !== "string" && !(v instanceof Uint8Array))
      throw new EncodingError(`cannot set connection detail ${JSON.stringify(k)}: it is ${typeof v}, not a string or bytes`, "");
    setOwn(d.composite.connectionDetails, k, typeof v === "string" ? new TextEncoder().encode(v) : v);
  }
}

/** setContextKey sets a key of the context handed to the next step. */
export function setContextKey(rsp: RunFunctionResponse, key: string, value: JsonValue): void {
  encodable(value, `context key ${JSON.stringify(key)}`);
  const ctx = (rsp.context ??= {});
  Object.defineProperty(ctx, key, { value: cloneJson(value), writable: true, enumerable: true, configurable: true });
}

/** setOutput sets the free-form output an Operation reports. XRs ignore it. */
export function setOutput(rsp: RunFunctionResponse, output: JsonObject | object): void {
  encodable(output, "the output");
  rsp.output = cloneJson(asJson(output));
}

// --- results -----------------------------------------------------------------

/** ResultBuilder refines a result just added to a response. */
export interface ResultBuilder {
  readonly result: Result;
  /** withReason sets a PascalCase machine-readable reason (Crossplane defaults to ComposeResources). */
  withReason(reason: string): ResultBuilder;
  /** targetComposite sends the event to the XR only (the default). */
  targetComposite(): ResultBuilder;
  /** targetCompositeAndClaim sends the event to the XR and its claim. */
  targetCompositeAndClaim(): ResultBuilder;
}

/** targeting gives a builder its two target setters, writing to msg and returning the builder. */
function targeting<B>(msg: { target?: Target | undefined }, self: () => B) {
  return {
    targetComposite(): B {
      msg.target = Target.COMPOSITE;
      return self();
    },
    targetCompositeAndClaim(): B {
      msg.target = Target.COMPOSITE_AND_CLAIM;
      return self();
    },
  };
}

function addResult(rsp: RunFunctionResponse, severity: Severity, message: string): ResultBuilder {
  const result = create(ResultSchema, { severity, message, target: Target.COMPOSITE });
  rsp.results.push(result);
  const b: ResultBuilder = {
    result,
    withReason(reason) {
      result.reason = reason;
      return b;
    },
    ...targeting(result, () => b),
  };
  return b;
}

const messageOf = (m: string | Error): string => (m instanceof Error ? m.message : m);

/** fatal adds a Fatal result: Crossplane fails the pipeline with this message. */
export function fatal(rsp: RunFunctionResponse, message: string | Error): ResultBuilder {
  return addResult(rsp, Severity.FATAL, messageOf(message));
}

/** warning adds a Warning result: an event and a log line; the pipeline goes on. */
export function warning(rsp: RunFunctionResponse, message: string | Error): ResultBuilder {
  return addResult(rsp, Severity.WARNING, messageOf(message));
}

/** normal adds a Normal result: an informational event and log line. */
export function normal(rsp: RunFunctionResponse, message: string): ResultBuilder {
  return addResult(rsp, Severity.NORMAL, message);
}

/** hasFatal reports whether the response carries a Fatal result. */
export function hasFatal(rsp: RunFunctionResponse): boolean {
  return rsp.results.some((r) => r.severity === Severity.FATAL);
}

// --- conditions --------------------------------------------------------------

/** ConditionBuilder refines a condition just added to a response. */
export interface ConditionBuilder {
  readonly condition: Condition;
  withMessage(message: string): ConditionBuilder;
  targetComposite(): ConditionBuilder;
  targetCompositeAndClaim(): ConditionBuilder;
}

/**
 * SYSTEM_CONDITION_TYPES are the condition types Crossplane keeps for itself
 * (crossplane apis v2.3.4: core/v2 IsSystemConditionType, and apiextensions/v1
 * adds Responsive): a function's condition of one of these types is ignored by
 * Crossplane (use setCompositeReady for readiness). xfn host honours Ready
 * from the pipeline while an XR is deleted in order.
 */
export const SYSTEM_CONDITION_TYPES: readonly string[] = ["Ready", "Synced", "Healthy", "UpToDate", "Responsive"];

function addCondition(rsp: RunFunctionResponse, type: string, status: Status, reason: string): ConditionBuilder {
  // Crossplane takes any type (database-ready, DatabaseReady) and any reason, an empty one included.
  // It ignores conditions of the types it owns (SYSTEM_CONDITION_TYPES) from functions; xfn host
  // takes Ready from the pipeline (the deletion step's Ready=False, Deleting).
  if (typeof type !== "string" || type === "") throw new UsageError("cannot set condition: the type is empty");
  if (typeof reason !== "string") throw new UsageError(`cannot set condition ${type}: the reason is ${typeof reason}, not a string`);
  // A later call for the same type replaces the earlier one: one condition per type.
  const existing = rsp.conditions.findIndex((c) => c.type === type);
  const condition = create(ConditionSchema, { type, status, reason, target: Target.COMPOSITE });
  if (existing >= 0) rsp.conditions[existing] = condition;
  else rsp.conditions.push(condition);
  const b: ConditionBuilder = {
    condition,
    withMessage(message) {
      condition.message = message;
      return b;
    },
    ...targeting(condition, () => b),
  };
  return b;
}

/** conditionTrue sets condition `type` to True with a reason (by convention PascalCase; Crossplane takes any). */
export function conditionTrue(rsp: RunFunctionResponse, type: string, reason: string): ConditionBuilder {
  return addCondition(rsp, type, Status.CONDITION_TRUE, reason);
}

/** conditionFalse sets condition `type` to False with a reason (by convention PascalCase; Crossplane takes any). */
export function conditionFalse(rsp: RunFunctionResponse, type: string, reason: string): ConditionBuilder {
  return addCondition(rsp, type, Status.CONDITION_FALSE, reason);
}

/** conditionUnknown sets condition `type` to Unknown with a reason (by convention PascalCase; Crossplane takes any). */
export function conditionUnknown(rsp: RunFunctionResponse, type: string, reason: string): ConditionBuilder {
  return addCondition(rsp, type, Status.CONDITION_UNKNOWN, reason);
}

// --- requirements ------------------------------------------------------------

/** Selector picks objects of one kind by name or by labels (exactly one of the two). */
export type Selector = {
  apiVersion: string;
  kind: string;
  /** Namespace to look in; leave unset for cluster-scoped kinds or every namespace. */
  namespace?: string;
} & (
  | { matchName: string; matchLabels?: never; all?: never }
  | { matchLabels: Record<string, string>; matchName?: never; all?: never }
  /** Every object of the kind (in namespace, if given): an empty label selector. */
  | { all: true; matchName?: never; matchLabels?: never }
);

function hasLabelsTwice(name: string): never {
  throw new UsageError(`cannot require resources ${JSON.stringify(name)}: give exactly one of matchName, matchLabels and all`);
}

function toSelector(name: string, s: Selector) {
  if (!s.apiVersion || !s.kind) throw new UsageError(`cannot require resources ${JSON.stringify(name)}: apiVersion and kind are required`);
  const hasName = typeof s.matchName === "string" && s.matchName !== "";
  const hasLabels = s.matchLabels !== undefined || s.all === true;
  if (s.all === true && s.matchLabels !== undefined) hasLabelsTwice(name);
  if (hasName === hasLabels) {
    throw new UsageError(`cannot require resources ${JSON.stringify(name)}: give exactly one of matchName, matchLabels and all`);
  }
  return {
    apiVersion: s.apiVersion,
    kind: s.kind,
    match: hasName
      ? { case: "matchName" as const, value: s.matchName! }
      : { case: "matchLabels" as const, value: { labels: { ...(s.all ? {} : s.matchLabels) } } },
    ...(s.namespace !== undefined ? { namespace: s.namespace } : {}),
  };
}

function requirements(rsp: RunFunctionResponse) {
  return (rsp.requirements ??= create(RequirementsSchema));
}

/**
 * requireResources asks Crossplane to fetch resources and call the function
 * again with them in required_resources (read with getRequiredResources).
 */
export function requireResources(rsp: RunFunctionResponse, name: string, selector: Selector): void {
  setOwn(requirements(rsp).resources, name, create(ResourceSelectorSchema, toSelector(name, selector)));
}

/**
 * requireExtraResources asks through the deprecated extra_resources field, for
 * Crossplane older than v2.0. Newer Crossplane answers both fields.
 */
export function requireExtraResources(rsp: RunFunctionResponse, name: string, selector: Selector): void {
  setOwn(requirements(rsp).extraResources, name, create(ResourceSelectorSchema, toSelector(name, selector)));
}

/** requireSchema asks Crossplane (v2.2+) for the OpenAPI schema of a kind. */
export function requireSchema(rsp: RunFunctionResponse, name: string, kind: { apiVersion: string; kind: string }): void {
  if (!kind.apiVersion || !kind.kind)
    throw new UsageError(`cannot require schema ${JSON.stringify(name)}: apiVersion and kind are required`);
  setOwn(requirements(rsp).schemas, name, create(SchemaSelectorSchema, { apiVersion: kind.apiVersion, kind: kind.kind }));
}
