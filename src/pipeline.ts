// Pipelines compose steps into one function.
//
// A step is a plain function over a StepContext: it reads the request, adds to
// the response that the pipeline started with response.to(req), and never does
// I/O; the clock is passed in as ctx.now. Steps run in order over one response,
// so a later step sees what an earlier one chose and must not undo it.
//
// Two outcomes are not "success":
// - A step that throws fails the pipeline: a Fatal result names the step and the
//   error, and no later step runs.
// - A step that says a resource must wait (ctx.hold) is not an error. After the
//   last step, a held resource that does not exist yet is left out of desired
//   state, so it is not created. One that exists keeps its last desired state
//   (the request's desired entry, or else its observed spec), so a flickering
//   dependency never deletes it. A Normal result says what it waits for, and
//   the TTL shortens so Crossplane asks again soon.
import type { JsonObject } from "@bufbuild/protobuf";
import type { RunContext, RunFunction } from "./function.js";
import type { StepTiming } from "./server/call.js";
import { Ready, Severity, type RunFunctionRequest, type RunFunctionResponse } from "./gen/fn/v1/run_function_pb.js";
import { getOwn } from "./own.js";
import { describeError } from "./sdk/errors.js";
import * as request from "./sdk/request.js";
import * as response from "./sdk/response.js";
import { cloneJson } from "./wire/struct/values.js";

/** StepContext is what a step works with. */
export interface StepContext {
  /** The request, read-only. */
  readonly req: RunFunctionRequest;
  /** The response being built, shared by every step. */
  readonly rsp: RunFunctionResponse;
  /** The time this run started. Steps read the clock only from here. */
  readonly now: Date;
  /** hold keeps a desired composed resource back until what it waits for is there. */
  hold(resource: string, waitingFor: string): void;
  /** heldFor returns what a held resource waits for, or undefined if it is not held. */
  heldFor(resource: string): readonly string[] | undefined;
  /** requeueAfter asks Crossplane to call again within this many seconds. */
  requeueAfter(seconds: number): void;
  /**
   * trail is what each earlier step did, kept only when a step of the pipeline
   * asks for it (readsTrail: steps.summary); otherwise empty.
   */
  readonly trail: readonly StepRecord[];
}

/** StepRecord is what one step did to the response, as a step that reports on the others reads it. */
export interface StepRecord {
  readonly name: string;
  /** ran: it returned; failed: it threw (error says what); skipped: an earlier step failed, so it did not run. */
  readonly outcome: "ran" | "failed" | "skipped";
  readonly error?: string;
  /** Desired composed resources it added, changed (their object or readiness) and removed, by name. */
  readonly added: readonly string[];
  readonly changed: readonly string[];
  readonly removed: readonly string[];
  /** What it changed of the XR's desired state: its top-level fields and those under status ("status.waiting"), and "ready". */
  readonly composite: readonly string[];
  /** The resources it held back, each with what it waits for. */
  readonly held: ReadonlyArray<{ readonly resource: string; readonly waitsFor: readonly string[] }>;
  /** The Warning results it added. */
  readonly warnings: number;
}

/**
 * Step is one stage of a pipeline. Give it a name with `step` so errors can
 * name it. What it returns is ignored, except a Promise: see Synchronous.
 */
export type Step = ((ctx: StepContext) => void) & {
  readonly stepName?: string;
  /** A step that reads ctx.trail: the pipeline keeps it, and runs this step even after an earlier one fails. */
  readonly readsTrail?: boolean;
};

/**
 * Synchronous refuses, at compile time, a step function that returns a
 * Promise. TypeScript lets an async function stand where one returning void
 * is expected, and the pipeline does not wait for it: what the step did after
 * its first await would be lost. (At run time such a step is a Fatal result.)
 */
export type Synchronous<F> = F extends (ctx: StepContext) => infer R
  ? 0 extends 1 & R // any: not known to be a Promise
    ? unknown
    : [R] extends [never] // a step that only throws
      ? unknown
      : [R] extends [PromiseLike<unknown>]
        ? { "a pipeline step must be synchronous: this one returns a Promise": never }
        : unknown
  : unknown;

/** step names a step function. */
export function step<F extends (ctx: StepContext) => unknown>(name: string, run: F & Synchronous<F>): Step {
  return Object.assign((ctx: StepContext) => run(ctx), { stepName: name });
}

// An unnamed step by its position in the pipeline: "step 2: ...".
const nameOf = (s: Step, i: number): string => s.stepName ?? (s.name || String(i + 1));

/**
 * runSteps runs steps over req and returns the response. It is pure: same
 * request and clock, same response.
 */
export function runSteps(steps: readonly Step[], req: RunFunctionRequest, now: Date): RunFunctionResponse {
  const rsp = response.to(req);
  const held = new Map<string, string[]>();
  let requeue: number | undefined;
  const trail: StepRecord[] = [];
  const tracing = steps.some((s) => s.readsTrail === true);
  let heldNow = new Map<string, string[]>();
  const ctx: StepContext = {
    req,
    rsp,
    now,
    trail,
    hold(resource, waitingFor) {
      const list = held.get(resource) ?? [];
      if (!list.includes(waitingFor)) list.push(waitingFor);
      held.set(resource, list);
      if (tracing) heldNow.set(resource, list);
    },
    heldFor: (resource) => held.get(resource),
    requeueAfter(seconds) {
      requeue = requeue === undefined ? seconds : Math.min(requeue, seconds);
      stepRequeue = stepRequeue === undefined ? seconds : Math.min(stepRequeue, seconds);
    },
  };
  // Every TTL a step asks for (response.setTTL) is one ask among the steps': the shortest wins, so a later step's
  // longer TTL never undoes an earlier one's (function-auto-ready #170, function-kcl #392); an override replaces
  // what the steps before it asked, its own step's requeues kept. A TTL of 0 is no limit, as Crossplane reads it.
  const defaultTTL = response.getTTLSeconds(rsp) ?? response.DEFAULT_TTL_SECONDS;
  let asked: number | undefined;
  let stepRequeue: number | undefined;
  const noteTTL = () => {
    for (const a of response.takeTTLAsks(rsp)) {
      const t = a.seconds === 0 ? Infinity : a.seconds;
      if (a.override) {
        asked = t;
        requeue = stepRequeue;
      } else asked = Math.min(asked ?? Infinity, t);
    }
  };
  const times = stepTimes();
  const timing: StepTiming[] | undefined = times ? [] : undefined;
  if (times) times.set(rsp, timing!);
  for (const [i, s] of steps.entries()) {
    let out: unknown;
    stepRequeue = undefined;
    const before = tracing ? snapshot(rsp) : undefined;
    const t0 = timing ? epochMs() : 0;
    const r0 = rsp.results.length;
    heldNow = new Map();
    let failed: string | undefined;
    try {
      out = s(ctx);
      noteTTL();
    } catch (err) {
      failed = describeError(err);
    }
    if (failed === undefined && isThenable(out)) {
      // Its rejection must not go unhandled: on a worker thread that ends the
      // worker, and every other call it holds with it. Promise.resolve calls a
      // thenable's then later, so a then that throws rejects here too.
      Promise.resolve(out).catch(() => {});
      failed = ASYNC_STEP;
    }
    if (before) trail.push(record(nameOf(s, i), before, snapshot(rsp), heldNow, failed));
    if (timing) timing.push(timed(nameOf(s, i), t0, rsp, r0, failed));
    if (failed !== undefined) {
      response.fatal(rsp, `step ${nameOf(s, i)}: ${failed}`).withReason("StepFailed");
      if (!tracing) return rsp;
      // The steps that report on the others still run, to say what failed and what did not run.
      const none = snapshot(rsp);
      for (const [j, r] of steps.entries()) {
        if (j <= i) continue;
        if (r.readsTrail) runReporter(r, j, ctx);
        else trail.push({ ...record(nameOf(r, j), none, none, new Map(), undefined), outcome: "skipped" });
      }
      return rsp;
    }
  }
  finishHolds(req, rsp, held);
  // What the steps asked (the default when none did), shortened by their requeues; Infinity is 0, no limit.
  const ttl = Math.min(asked ?? defaultTTL, requeue ?? Infinity);
  response.setTTL(rsp, ttl === Infinity ? 0 : ttl);
  response.takeTTLAsks(rsp);
  return rsp;
}

/**
 * STEP_TIMES is where a traced call's handler finds its pipeline's step
 * timings: a WeakMap from response to timings, on globalThis under a
 * registered symbol, so that a function importing another copy of
 * xfn-runtime than the server's still reports them. Absent unless a traced
 * call came (telemetry/calls.ts): then each pipeline records its steps.
 */
export const STEP_TIMES = Symbol.for("xfn.stepTimes");

const stepTimes = () => (globalThis as Record<symbol, unknown>)[STEP_TIMES] as WeakMap<RunFunctionResponse, StepTiming[]> | undefined;

const epochMs = () => performance.timeOrigin + performance.now();

const SEVERITY_NAMES: Record<number, StepTiming["severity"]> = {
  [Severity.FATAL]: "Fatal",
  [Severity.WARNING]: "Warning",
  [Severity.NORMAL]: "Normal",
};
const SEVERITY_RANK = { "": 0, Normal: 1, Warning: 2, Fatal: 3 } as const;

/** worstSeverity is the most severe of the results' severities by name, "" for none. */
export function worstSeverity(results: readonly { severity: Severity }[]): StepTiming["severity"] {
  let worst: StepTiming["severity"] = "";
  for (const r of results) {
    const s = SEVERITY_NAMES[r.severity] ?? "";
    if (SEVERITY_RANK[s] > SEVERITY_RANK[worst]) worst = s;
  }
  return worst;
}

function timed(name: string, start: number, rsp: RunFunctionResponse, resultsBefore: number, failed: string | undefined): StepTiming {
  const added = rsp.results.slice(resultsBefore);
  return {
    name,
    start,
    end: epochMs(),
    ...(failed !== undefined ? { failed } : {}),
    resources: Object.keys(rsp.desired?.resources ?? {}).length,
    results: added.length,
    severity: failed !== undefined ? "Fatal" : worstSeverity(added),
  };
}

/** runReporter runs a step that reports on a failed pipeline; its own failure is one more Fatal result. */
function runReporter(s: Step, i: number, ctx: StepContext): void {
  try {
    s(ctx);
  } catch (err) {
    response.fatal(ctx.rsp, `step ${nameOf(s, i)}: ${describeError(err)}`).withReason("StepFailed");
  }
}

/** Snapshot is the response's desired state, each part as JSON text, to tell what a step changed. */
interface Snapshot {
  resources: Map<string, string>;
  composite: Map<string, string>;
  warnings: number;
}

function snapshot(rsp: RunFunctionResponse): Snapshot {
  const resources = new Map<string, string>();
  for (const [name, r] of Object.entries(rsp.desired?.resources ?? {})) resources.set(name, JSON.stringify([r.resource, r.ready]));
  const composite = new Map<string, string>();
  const c = rsp.desired?.composite;
  if (c) {
    composite.set("ready", String(c.ready));
    for (const [k, v] of Object.entries(c.resource ?? {})) {
      if (k !== "status" || typeof v !== "object" || v === null || Array.isArray(v)) composite.set(k, JSON.stringify(v));
      else for (const [f, fv] of Object.entries(v)) composite.set(`status.${f}`, JSON.stringify(fv));
    }
  }
  return { resources, composite, warnings: rsp.results.filter((r) => r.severity === Severity.WARNING).length };
}

/** changedKeys are the keys whose text differs between two maps, present in either. */
function changedKeys(a: Map<string, string>, b: Map<string, string>): string[] {
  const out = [...b].filter(([k, v]) => a.get(k) !== v).map(([k]) => k);
  for (const k of a.keys()) if (!b.has(k)) out.push(k);
  return out;
}

function record(name: string, a: Snapshot, b: Snapshot, held: Map<string, string[]>, error: string | undefined): StepRecord {
  const touched = changedKeys(a.resources, b.resources);
  return {
    name,
    outcome: error === undefined ? "ran" : "failed",
    ...(error !== undefined ? { error } : {}),
    added: touched.filter((n) => !a.resources.has(n)),
    changed: touched.filter((n) => a.resources.has(n) && b.resources.has(n)),
    removed: touched.filter((n) => !b.resources.has(n)),
    // A composite that only gained its readiness's default (UNSPECIFIED) changed nothing.
    composite: changedKeys(a.composite, b.composite).filter((k) => k !== "ready" || b.composite.get(k) !== String(Ready.UNSPECIFIED)),
    held: [...held].map(([resource, waits]) => ({ resource, waitsFor: [...waits] })),
    warnings: b.warnings - a.warnings,
  };
}

const ASYNC_STEP =
  "returned a Promise: a pipeline step must be synchronous (it does no I/O), and the pipeline does not wait for it, " +
  "so what it does after an await would be lost; let Crossplane fetch what it needs (response.requireResources), " +
  "or write the function as an async RunFunction instead of a step";

const isThenable = (v: unknown): v is PromiseLike<unknown> =>
  (typeof v === "object" || typeof v === "function") && v !== null && typeof (v as { then?: unknown }).then === "function";

function finishHolds(req: RunFunctionRequest, rsp: RunFunctionResponse, held: Map<string, string[]>): void {
  const observed = request.getObservedComposedResources(req);
  const before = request.getDesiredComposedResources(req);
  for (const [name, waits] of held) {
    const resources = rsp.desired?.resources ?? {};
    // A later step may have dropped it already (deletion does): nothing to hold.
    if (!Object.hasOwn(resources, name)) continue;
    if (Object.hasOwn(observed, name)) {
      const last = getOwn(before, name);
      const kept = response.setDesiredComposedResource(rsp, name, lastDesired(req, name));
      // Not ready while it waits, unless an earlier function said otherwise.
      kept.ready = last && last.ready !== Ready.UNSPECIFIED ? last.ready : Ready.FALSE;
      response
        .normal(rsp, `${name}: waiting for ${waits.join(", ")}; keeping it as it is`)
        .withReason("Waiting")
        .targetCompositeAndClaim();
    } else {
      delete resources[name];
      response
        .normal(rsp, `${name}: waiting for ${waits.join(", ")}; not creating it yet`)
        .withReason("Waiting")
        .targetCompositeAndClaim();
    }
  }
}

/**
 * lastDesired is the desired state an existing resource keeps while it must
 * not change: the request's desired entry (what earlier functions asked for),
 * or else its observed identity and spec. A copy.
 */
export function lastDesired(req: RunFunctionRequest, name: string): JsonObject {
  const before = request.getDesiredComposedResources(req);
  const observed = request.getObservedComposedResources(req);
  const last = getOwn(before, name)?.resource;
  return last ? cloneJson(last) : freeze(getOwn(observed, name)?.resource ?? {});
}

/**
 * Crossplane's Usage bookkeeping on a used object, written by its Usage
 * controller and webhook (crossplane v2.4.0 internal/controller/protection/
 * usage, internal/protection/usage.go): never part of what a composition
 * applies, or the controller could not take the label off.
 */
const IN_USE_LABEL = "crossplane.io/in-use";
const DELETION_ATTEMPT_ANNOTATION = "usage.crossplane.io/deletion-attempt-with-policy";

/**
 * freeze reduces an observed object to what a composition sets, so that
 * re-applying it changes nothing: identity, labels, annotations and spec
 * (without Crossplane's Usage bookkeeping).
 */
export function freeze(obj: JsonObject): JsonObject {
  const meta = (obj["metadata"] ?? {}) as JsonObject;
  const out: JsonObject = {};
  for (const k of ["apiVersion", "kind"]) if (obj[k] !== undefined) out[k] = obj[k]!;
  const m: JsonObject = {};
  for (const k of ["name", "namespace", "labels", "annotations"]) if (meta[k] !== undefined) m[k] = meta[k]!;
  out["metadata"] = m;
  if (obj["spec"] !== undefined) out["spec"] = obj["spec"]!;
  const copy = cloneJson(out);
  const cm = copy["metadata"] as JsonObject;
  for (const [field, key] of [
    ["labels", IN_USE_LABEL],
    ["annotations", DELETION_ATTEMPT_ANNOTATION],
  ] as const) {
    const map = cm[field];
    if (map && typeof map === "object" && !Array.isArray(map) && Object.hasOwn(map, key)) {
      delete map[key];
      if (Object.keys(map).length === 0) delete cm[field];
    }
  }
  return copy;
}

/** pipeline turns steps into a function that `xfn serve` can serve. */
export function pipeline(...steps: Step[]): RunFunction {
  for (const [i, s] of steps.entries()) {
    if (typeof s !== "function") throw new Error(`pipeline: step ${i + 1} is ${typeof s}, not a function`);
  }
  return (req: RunFunctionRequest, ctx: RunContext) => runSteps(steps, req, ctx.now());
}
