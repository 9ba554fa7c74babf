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
import { Ready, type RunFunctionRequest, type RunFunctionResponse } from "./gen/fn/v1/run_function_pb.js";
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
}

/**
 * Step is one stage of a pipeline. Give it a name with `step` so errors can
 * name it. What it returns is ignored, except a Promise: see Synchronous.
 */
export type Step = ((ctx: StepContext) => void) & { readonly stepName?: string };

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
  const ctx: StepContext = {
    req,
    rsp,
    now,
    hold(resource, waitingFor) {
      const list = held.get(resource) ?? [];
      if (!list.includes(waitingFor)) list.push(waitingFor);
      held.set(resource, list);
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
  for (const [i, s] of steps.entries()) {
    let out: unknown;
    stepRequeue = undefined;
    try {
      out = s(ctx);
      noteTTL();
    } catch (err) {
      response.fatal(rsp, `step ${nameOf(s, i)}: ${describeError(err)}`).withReason("StepFailed");
      return rsp;
    }
    if (isThenable(out)) {
      // Its rejection must not go unhandled: on a worker thread that ends the
      // worker, and every other call it holds with it. Promise.resolve calls a
      // thenable's then later, so a then that throws rejects here too.
      Promise.resolve(out).catch(() => {});
      response.fatal(rsp, `step ${nameOf(s, i)}: ${ASYNC_STEP}`).withReason("StepFailed");
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
 * freeze reduces an observed object to what a composition sets, so that
 * re-applying it changes nothing: identity, labels, annotations and spec.
 */
export function freeze(obj: JsonObject): JsonObject {
  const meta = (obj["metadata"] ?? {}) as JsonObject;
  const out: JsonObject = {};
  for (const k of ["apiVersion", "kind"]) if (obj[k] !== undefined) out[k] = obj[k]!;
  const m: JsonObject = {};
  for (const k of ["name", "namespace", "labels", "annotations"]) if (meta[k] !== undefined) m[k] = meta[k]!;
  out["metadata"] = m;
  if (obj["spec"] !== undefined) out["spec"] = obj["spec"]!;
  return cloneJson(out);
}

/** pipeline turns steps into a function that `xfn serve` can serve. */
export function pipeline(...steps: Step[]): RunFunction {
  for (const [i, s] of steps.entries()) {
    if (typeof s !== "function") throw new Error(`pipeline: step ${i + 1} is ${typeof s}, not a function`);
  }
  return (req: RunFunctionRequest, ctx: RunContext) => runSteps(steps, req, ctx.now());
}
