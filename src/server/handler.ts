// The transport-independent core of the server: bytes in, bytes or a gRPC
// status out.
//
// Domain failures (a function that throws, or returns something that cannot be
// encoded) become a Fatal result in a normal response, as the Go SDK does, so
// Crossplane shows the message on the XR. Transport failures (bytes that do not
// decode, a full queue, a response too large to deliver, a passed deadline)
// become a gRPC status. Either way the handler keeps serving.
import { Code } from "./codes.js";
import type { Logger } from "pino";
import PQueue from "p-queue";
import { RunFunctionResponseSchema, type RunFunctionRequest, type RunFunctionResponse } from "../gen/fn/v1/run_function_pb.js";
import { decodeRequest, encodeResponse } from "../wire/codec.js";
import type { RunContext, RunFunction } from "../function.js";
import { describeError, messageOf } from "../sdk/errors.js";
import * as response from "../sdk/response.js";
import { getString } from "../sdk/fieldpath.js";
import { refusals, REFUSED_REPORT_MS } from "./log.js";
import { deadlineDetails, running, runResponseHook, type CallInfo, type CallReport, type HandlerResult, type StepTiming } from "./call.js";
import { STEP_TIMES, worstSeverity } from "../pipeline.js";
import { nearLimitText, partsText, WARN_SHARE } from "./budget.js";

// What the server's thread needs of a call without loading the handler (call.ts), for those who import it from here.
export { Cancel, DEFAULT_MAX_RESPONSE_BYTES, deadlineDetails, runningCalls, runResponseHook, soleCall } from "./call.js";
export type { CallInfo, HandlerResult } from "./call.js";

/** HandlerOptions bound the work the handler accepts. */
export interface HandlerOptions {
  /** Functions running at once. */
  maxConcurrency: number;
  /** Requests waiting for a slot; one more is refused with RESOURCE_EXHAUSTED. */
  maxQueue: number;
  /** Largest encoded response, in bytes (Crossplane's client accepts 4 MiB). */
  maxResponseBytes: number;
  /** The clock. Each request reads it once; the function sees that instant throughout. */
  now?: () => Date;
  /**
   * onResponse is told of every response sent, with the request and the
   * instant the function saw (for recording). It must not throw.
   */
  onResponse?: (req: RunFunctionRequest, rsp: RunFunctionResponse, at: Date) => void;
  /** How often refusals for a full queue after the first are summed up in one line (ms). Default REFUSED_REPORT_MS. */
  refusedReportMs?: number;
}

/** Handler runs requests through one function. */
export interface Handler {
  handle(bytes: Uint8Array, call: CallInfo): Promise<HandlerResult>;
  /** Requests running or queued right now. */
  inFlight(): number;
}

const DEADLINE_SLACK_MS = 50;

class DeadlineExceeded extends Error {}
class Cancelled extends Error {}

/** createHandler wraps fn with decoding, bounded concurrency, deadlines and encoding. */
export function createHandler(fn: RunFunction, opts: HandlerOptions, log: Logger): Handler {
  const queue = new PQueue({ concurrency: opts.maxConcurrency });
  // What Object.prototype holds once the function module has loaded: anything a call adds is pollution.
  const prototypeKeys = new Set(Object.keys(Object.prototype));
  const now = opts.now ?? (() => new Date());
  // A full queue under a flood would otherwise write a line per refused call.
  const busy = refusals(log, opts.refusedReportMs ?? REFUSED_REPORT_MS);

  async function handle(bytes: Uint8Array, call: CallInfo): Promise<HandlerResult> {
    const started = performance.now();
    const startedAt = Date.now();
    let req: RunFunctionRequest;
    try {
      req = decodeRequest(bytes);
    } catch (err) {
      // Not logged here: the server logs refused requests with their peer, summed up under a flood.
      return { code: Code.INVALID_ARGUMENT, details: `cannot decode RunFunctionRequest (${bytes.length} bytes): ${messageOf(err)}` };
    }
    // The tag as Crossplane sent it: a function that changes req.meta.tag must not change what is echoed.
    const tag = req.meta?.tag ?? "";
    const rlog = new LazyLog(log, () => ({ tag, version: call.version, xr: xrName(req) }));

    if (queue.size >= opts.maxQueue) {
      const details = `server busy: ${queue.pending} requests running and ${queue.size} queued (limit ${opts.maxQueue}); retry later`;
      busy.refused({ code: "RESOURCE_EXHAUSTED", tag, version: call.version, xr: xrName(req) }, details);
      return { code: Code.RESOURCE_EXHAUSTED, details };
    }

    // Everything that ends the call early: the client's deadline, its
    // cancellation, or the server shutting down.
    // grpc-js cancels a call whose deadline passed a moment before our own
    // timer fires, so a cancellation at the deadline is reported as the deadline.
    const end = new Ending();
    call.cancel?.onCancel(() =>
      end.end(
        Date.now() >= call.deadline - DEADLINE_SLACK_MS
          ? new DeadlineExceeded("the client's deadline passed")
          : new Cancelled("the call was cancelled"),
      ),
    );
    if (call.cancel?.cancelled) end.end(new Cancelled("the call was cancelled"));
    let timer: NodeJS.Timeout | undefined;
    if (Number.isFinite(call.deadline)) {
      timer = setTimeout(() => end.end(new DeadlineExceeded("the client's deadline passed")), Math.max(0, call.deadline - Date.now()));
    }

    // A traced call's pipeline records its steps (pipeline.ts STEP_TIMES): from the first traced call on.
    if (call.trace) (globalThis as Record<symbol, unknown>)[STEP_TIMES] ??= new WeakMap();
    try {
      const at = call.at === undefined ? now() : new Date(call.at);
      const ctx = new Context(end, rlog, () => at);
      // The task returns as soon as the call ends, even if fn never settles, so
      // a hung function cannot hold a concurrency slot past its deadline; one
      // still queued when the call ends returns without running.
      const rsp = await end.race(
        queue.add(() => {
          running.add(rlog);
          return end.race(run(fn, req, tag, ctx, end));
        }),
      );
      const polluted = unpollute(prototypeKeys);
      const encoded = polluted ? encodeFatal(req, tag, pollutedMessage(polluted), rlog) : encode(req, tag, rsp, rlog);
      const sent = encoded.sent;
      let out = encoded.bytes;
      const limit = opts.maxResponseBytes;
      if (out.length > limit) {
        const details = `response is ${out.length} bytes, larger than the ${limit}-byte limit Crossplane accepts${partsText(sent)}`;
        rlog.get().error({ code: "RESOURCE_EXHAUSTED", bytes: out.length }, details);
        return { code: Code.RESOURCE_EXHAUSTED, details };
      }
      if (out.length >= WARN_SHARE * limit) {
        // Said where users look (a Warning result: an event on the XR) when it still fits with it, and logged.
        const said = nearLimitText(out.length, limit, sent);
        rlog.get().warn({ bytes: out.length, limit }, said);
        response.warning(sent, said).withReason("ResponseNearLimit");
        const again = encodeResponse(sent);
        if (again.length <= limit) out = again;
        else sent.results.pop();
      }
      const hook = opts.onResponse;
      if (hook) runResponseHook(rlog.get(), () => hook(req, sent, at));
      if (call.trace) return { ok: out, report: reportOf(req, bytes.length, sent, out.length, tag, rsp) };
      slowCall(rlog, performance.now() - started, call.deadline - startedAt, call.timeoutMs !== undefined);
      if (log.isLevelEnabled("debug")) {
        rlog.get().debug(
          {
            durationMs: round(performance.now() - started),
            results: sent.results.length,
            resources: Object.keys(sent.desired?.resources ?? {}).length,
            bytes: out.length,
          },
          "ran function",
        );
      }
      return { ok: out };
    } catch (err) {
      const reason = end.reason ?? err;
      if (reason instanceof DeadlineExceeded) {
        const details = deadlineDetails(call.timeoutMs);
        const said = call.timeoutMs === undefined ? "function did not finish before the client's deadline" : details;
        rlog.get().warn({ code: "DEADLINE_EXCEEDED", durationMs: round(performance.now() - started) }, said);
        return { code: Code.DEADLINE_EXCEEDED, details };
      }
      if (reason instanceof Cancelled) {
        rlog.get().debug({ code: "CANCELLED" }, "call cancelled");
        return { code: Code.CANCELLED, details: "call cancelled" };
      }
      // Not reachable through run, which turns a throw into a Fatal result.
      rlog.get().error({ err }, "unexpected handler failure");
      return { code: Code.INTERNAL, details: `unexpected failure: ${messageOf(err)}` };
    } finally {
      running.delete(rlog);
      clearTimeout(timer);
      call.cancel?.onCancel(undefined);
    }
  }

  return { handle, inFlight: () => queue.size + queue.pending };
}

/** reportOf is what a traced call's span says of it (telemetry/calls.ts): sizes, counts, severity, the pipeline's steps. */
function reportOf(
  req: RunFunctionRequest,
  requestBytes: number,
  sent: RunFunctionResponse,
  responseBytes: number,
  tag: string,
  returned: RunFunctionResponse,
): CallReport {
  const times = (globalThis as Record<symbol, unknown>)[STEP_TIMES] as WeakMap<object, StepTiming[]> | undefined;
  const xr = xrName(req);
  return {
    tag,
    ...(xr ? { xr } : {}),
    requestBytes,
    responseBytes,
    observed: Object.keys(req.observed?.resources ?? {}).length,
    desiredIn: Object.keys(req.desired?.resources ?? {}).length,
    desiredOut: Object.keys(sent.desired?.resources ?? {}).length,
    results: sent.results.length,
    severity: worstSeverity(sent.results),
    steps: (returned && times?.get(returned)) || [],
  };
}

/**
 * Ending is one call's early end. A signal for the function is made only if it
 * reads ctx.signal.
 */
class Ending {
  reason: Error | undefined;
  private ac: AbortController | undefined;
  private reject: ((reason: Error) => void) | undefined;
  private ended: Promise<never> | undefined;
  end(reason: Error): void {
    if (this.reason) return;
    this.reason = reason;
    this.ac?.abort(reason);
    this.reject?.(reason);
  }
  get signal(): AbortSignal {
    if (!this.ac) {
      this.ac = new AbortController();
      if (this.reason) this.ac.abort(this.reason);
    }
    return this.ac.signal;
  }
  /** race settles as p does, or rejects with the reason as soon as the call ends. */
  race<T>(p: Promise<T>): Promise<T> {
    if (this.reason) {
      p.catch(() => {}); // settles unwatched: its rejection is this one
      return Promise.reject(this.reason);
    }
    this.ended ??= new Promise<never>((_, reject) => {
      this.reject = reject;
    });
    return Promise.race([p, this.ended]);
  }
}

/** LazyLog makes the request's child logger when something first logs (a child per request showed in profiles). */
class LazyLog {
  private child: Logger | undefined;
  private made: Record<string, unknown> | undefined;
  constructor(
    private readonly log: Logger,
    private readonly bindings: () => Record<string, unknown>,
  ) {}
  get(): Logger {
    return (this.child ??= this.log.child(this.fields()));
  }
  /** fields are what each of the request's log lines carries (its tag, API version and XR). */
  fields(): Record<string, unknown> {
    return (this.made ??= this.bindings());
  }
}

/**
 * Context is the RunContext a function sees. Its signal and logger are made
 * when first read, by getters on the prototype: an object literal with getters
 * made V8 give every context its own hidden class, which made young-generation
 * garbage collection far dearer (measured: bench/README.md, "Why the code is
 * as it is").
 */
class Context implements RunContext {
  readonly #end: Ending;
  readonly #log: LazyLog;
  constructor(
    end: Ending,
    log: LazyLog,
    readonly now: () => Date,
  ) {
    this.#end = end;
    this.#log = log;
  }
  get signal(): AbortSignal {
    return this.#end.signal;
  }
  get log(): Logger {
    return this.#log.get();
  }
}

/** run runs fn unless the call has ended, turning a throw into a Fatal result. */
async function run(fn: RunFunction, req: RunFunctionRequest, tag: string, ctx: RunContext, end: Ending): Promise<RunFunctionResponse> {
  if (end.reason) throw end.reason;
  try {
    return await fn(req, ctx);
  } catch (err) {
    return thrown(req, tag, err, ctx.log);
  }
}

function thrown(req: RunFunctionRequest, tag: string, err: unknown, log: Logger): RunFunctionResponse {
  // The message and its causes' (an SDK error says what it was doing; its cause, why).
  const text = describeError(err);
  log.error({ err: text }, "function threw");
  return fatalResponse(req, tag, `function failed: ${text}`);
}

/**
 * fatalResponse is the tag, TTL and one Fatal result. Crossplane ignores the
 * rest of a Fatal response, and the request's desired state or context may be
 * what failed (bytes from a malformed request, copied through).
 */
function fatalResponse(req: RunFunctionRequest, tag: string, message: string): RunFunctionResponse {
  const rsp = response.to(req);
  rsp.meta!.tag = tag;
  delete rsp.desired;
  delete rsp.context;
  response.fatal(rsp, message).withReason("FunctionError");
  return rsp;
}

/**
 * encode serialises the response, making sure it echoes the request's tag.
 * A response that cannot be encoded faithfully is replaced by a Fatal result
 * that says why. That includes Struct values that are not JSON (undefined, a
 * BigInt, a function, NaN): protobuf-es would silently write them as null;
 * encodeResponse refuses them, naming the path.
 */
function encode(
  req: RunFunctionRequest,
  tag: string,
  rsp: RunFunctionResponse,
  log: LazyLog,
): { bytes: Uint8Array; sent: RunFunctionResponse } {
  if (!rsp || typeof rsp !== "object" || rsp.$typeName !== RunFunctionResponseSchema.typeName) {
    return encodeFatal(req, tag, `function returned ${describe(rsp)}, not a RunFunctionResponse (start one with response.to(req))`, log);
  }
  if (!rsp.meta) {
    rsp.meta = response.to(req).meta;
    rsp.meta!.tag = tag;
  } else if (rsp.meta.tag !== tag) rsp.meta.tag = tag;
  try {
    return { bytes: encodeResponse(rsp), sent: rsp };
  } catch (err) {
    return encodeFatal(req, tag, `cannot encode the function's response: ${messageOf(err)}`, log);
  }
}

/** A call that took at least SLOW_MIN_MS and more than SLOW_SHARE of the time it had is logged as a warning. */
export const SLOW_SHARE = 0.5;
export const SLOW_MIN_MS = 1000;

/**
 * slowCall warns of a call answered in time that took more than half the
 * time it had (its caller's deadline, or the server's --timeout): the next
 * one, a little larger, may not be, and then all the caller learns is
 * DEADLINE_EXCEEDED. took and had are in ms; had is Infinity without a deadline.
 */
function slowCall(log: LazyLog, took: number, had: number, byTimeout: boolean): void {
  if (took < SLOW_MIN_MS || !(took > had * SLOW_SHARE)) return;
  const s = (ms: number) => `${Math.round(ms / 100) / 10} s`;
  const limit = byTimeout ? "the server's --timeout" : "the caller's deadline";
  log
    .get()
    .warn(
      { durationMs: round(took), allowedMs: round(had) },
      `slow call: it took ${s(took)} of the ${s(had)} it had (${limit}); past that it is ended`,
    );
}

/**
 * unpollute removes the enumerable properties added to Object.prototype since
 * the handler was made, and returns their names (undefined if none, the usual
 * case: one Object.keys of an empty object per call). Every object in the
 * thread inherits them: every later call's response carried them (or failed
 * to encode: "invalid int32: undefined"), until the server was restarted. A
 * deep merge of input holding a "__proto__" key is the usual cause.
 */
export function unpollute(before: ReadonlySet<string>): string[] | undefined {
  let added: string[] | undefined;
  for (const k of Object.keys(Object.prototype)) {
    if (before.has(k)) continue;
    (added ??= []).push(k);
    try {
      delete (Object.prototype as Record<string, unknown>)[k];
    } catch {
      // not configurable: it stays, and the message says the function added it
    }
  }
  return added;
}

function pollutedMessage(keys: string[]): string {
  const names = keys
    .slice(0, 5)
    .map((k) => JSON.stringify(k))
    .join(", ");
  const more = keys.length > 5 ? ` and ${keys.length - 5} more` : "";
  return (
    `the function added ${names}${more} to Object.prototype, which every object inherits ` +
    `(prototype pollution: a merge of input holding a "__proto__" key?); removed, and this call's response is not used`
  );
}

function encodeFatal(
  req: RunFunctionRequest,
  tag: string,
  message: string,
  log: LazyLog,
): { bytes: Uint8Array; sent: RunFunctionResponse } {
  log.get().error(message);
  const rsp = fatalResponse(req, tag, message);
  return { bytes: encodeResponse(rsp), sent: rsp };
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (typeof v !== "object") return typeof v;
  const t = (v as { $typeName?: unknown }).$typeName;
  return typeof t === "string" ? `a ${t}` : "a plain object";
}

function xrName(req: RunFunctionRequest): string | undefined {
  const xr = req.observed?.composite?.resource;
  if (!xr) return undefined;
  try {
    return `${getString(xr, "kind") ?? "?"}/${getString(xr, "metadata.name") ?? "?"}`;
  } catch {
    return undefined;
  }
}

const round = (ms: number): number => Math.round(ms * 100) / 100;
