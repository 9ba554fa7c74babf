// What the server's thread knows of a call without loading the handler: the
// call's transport facts, its result, how it is cancelled, and which calls
// run in this thread. The pool, the gRPC intake and the server import it from
// here; the handler (handler.ts: the function, protobuf-es and the generated
// types) loads only where a function runs, so a bundle's server thread starts
// without it.
import type { Logger } from "pino";
import type { Code } from "./codes.js";
import { messageOf } from "../sdk/errors.js";

/**
 * runResponseHook runs the response hook (recording, --record-dir) for a call
 * already answered or about to be: a throw is logged, never the call's.
 */
export function runResponseHook(log: Logger, hook: () => void): void {
  try {
    hook();
  } catch (err) {
    log.error({ err: messageOf(err) }, "cannot record this call (--record-dir); it was answered");
  }
}

/** CallInfo is what the transport knows about one call. */
export interface CallInfo {
  /** Which API version the caller used, for logs. */
  version: "v1" | "v1beta1";
  /** Absolute deadline in ms since the epoch, or Infinity. */
  deadline: number;
  /** The instant the function sees as now, when another thread chose it (a worker pool); default: the clock. */
  at?: number;
  /** When deadline is the server's --timeout rather than the caller's own, that timeout in ms (for what the call is told). */
  timeoutMs?: number;
  /** How the transport ends the call early (the client cancels, the server stops). None: it never does. */
  cancel?: Cancel;
  /** Whether the call is traced: the handler then answers with a CallReport (telemetry/calls.ts makes its spans). */
  trace?: boolean;
}

/** StepTiming is one pipeline step of a traced call: when it ran (ms since the epoch), how it ended, what the response then held. */
export interface StepTiming {
  name: string;
  start: number;
  end: number;
  /** Why it failed, when it threw. */
  failed?: string;
  /** Desired composed resources after it. */
  resources: number;
  /** Results it added, and the most severe of them ("" for none). */
  results: number;
  severity: Severity;
}

/** Severity is a result's severity by name, "" for no result. */
export type Severity = "Fatal" | "Warning" | "Normal" | "";

/** CallReport is what a traced call's span says of it, made where the function ran. */
export interface CallReport {
  tag: string;
  /** The XR, as kind/name (namespace/kind/name when namespaced), when the request has one. */
  xr?: string;
  requestBytes: number;
  responseBytes: number;
  observed: number;
  desiredIn: number;
  desiredOut: number;
  results: number;
  severity: Severity;
  /** The pipeline's steps, when the function is one (pipeline.ts); none otherwise. */
  steps: StepTiming[];
}

/**
 * Cancel lets the transport end a call early. It is a plain object, not an
 * AbortController: making an AbortController and listening on its signal cost
 * more than decoding a small request, and a call needs one only if its
 * function reads ctx.signal.
 */
export class Cancel {
  cancelled = false;
  private fn: (() => void) | undefined;
  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.fn?.();
  }
  /** onCancel sets the one listener (the handler's). */
  onCancel(fn: (() => void) | undefined): void {
    this.fn = fn;
  }
}

/** HandlerResult is either encoded response bytes or a gRPC status. */
export type HandlerResult = { ok: Uint8Array; report?: CallReport } | { code: Code; details: string };

/** DEADLINE_DETAILS is what a call ended by its caller's deadline is told. */
const DEADLINE_DETAILS = "function did not finish before the deadline";

/** deadlineDetails is what a call ended at its deadline is told: the server's --timeout (timeoutMs) or the caller's deadline. */
export function deadlineDetails(timeoutMs?: number): string {
  return timeoutMs === undefined ? DEADLINE_DETAILS : `function did not finish within the server's --timeout of ${timeoutMs / 1000} s`;
}

/** DEFAULT_MAX_RESPONSE_BYTES is grpc-go's default client receive limit, which Crossplane uses. */
export const DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

/** The calls running their function in this thread (one handler or several), for soleCall. */
export const running = new Set<{ fields(): Record<string, unknown> }>();

/** runningCalls are the log fields of every call running its function in this thread (tests wait for a quiet thread with it). */
export const runningCalls = (): Record<string, unknown>[] => [...running].map((r) => r.fields());

/**
 * soleCall returns the log fields of the call running its function in this
 * thread when exactly one is, else undefined: what the function prints with
 * console (console.ts) carries no request, so it is named only when it can
 * only be that call's. Tracking costs a Set add and delete per call.
 */
export function soleCall(): Record<string, unknown> | undefined {
  if (running.size !== 1) return undefined;
  for (const r of running) return r.fields();
  return undefined;
}
