// What the server's thread and a pool worker say to each other (pool.ts,
// worker.ts): the worker's data, the messages both ways, the shared clock,
// and how request and response bytes are made transferable. Kept apart from
// the worker so that the server's thread loads none of what runs the function
// (the handler, protobuf-es, the generated types).

import type { CallReport } from "./call.js";

/** WorkerData is what the pool hands each worker. */
export interface WorkerData {
  xfnWorker: true;
  /**
   * Started before the server loaded (early.ts): the rest of this arrives in
   * the pool's first message ("config"), and the worker waits for it before
   * it serves.
   */
  early?: true;
  /** The function module to load (xfn serve); a bundle's worker has its function built in. */
  module?: string;
  /** The module compiled once for every worker (a data: URL, module/compile.ts), loaded instead of module. */
  compiled?: string;
  /** Whether the compiled module's imports are TypeScript too (the worker then registers tsx). */
  compiledNeedsTypeScript?: boolean;
  label: string;
  debug: boolean;
  maxResponseBytes: number;
  /** The worker thread's nice value (Linux; 0 leaves it as it is). */
  nice?: number;
  /** One Int32: characters of log lines posted to the pool and not written yet (see LOG_BACKLOG_CHARS). */
  logBacklog?: SharedArrayBuffer;
  /** Two Float64s the worker writes for the memory guard: bytes its thread holds, and when it wrote that (see MEMORY_REPORT_MS). */
  memory?: SharedArrayBuffer;
  /** --max-worker-heap: the live heap past which the worker asks to be ended (watchHeap); V8's own limit is above it. */
  maxHeapMB?: number;
}

/**
 * MEMORY_REPORT_MS is how often a worker writes down the memory its thread
 * holds: its heap, and what its objects keep outside it (Buffers, strings of a
 * megabyte or more), which no heap limit bounds. The server's thread cannot
 * read another thread's heap on Node 20, so each worker writes its own, for
 * the memory guard (pool.ts). It is written while the worker's event loop
 * turns: a call stuck in a loop stops the writing, which the guard notices.
 */
export const MEMORY_REPORT_MS = 100;

/**
 * LOG_BACKLOG_CHARS bounds the log lines a worker has posted that the server's
 * thread has not written yet. A function logging in a tight loop produces
 * lines faster than the server's thread parses, redacts and writes them, and
 * the lines wait in memory: 2 million lines of 1 KB from one call got the
 * server killed in a 1 GiB container, with its output going to /dev/null.
 * Past the bound, lines are dropped, and how many is logged once the worker is
 * free again. In process (--workers 1) the lines go straight to the logger's
 * own bounded stdout buffer (log.ts).
 */
export const LOG_BACKLOG_CHARS = 2 * 1024 * 1024;

/** ToWorker is a message from the pool. */
export type ToWorker =
  | {
      type: "run";
      id: number;
      buf: ArrayBuffer;
      off: number;
      len: number;
      version: "v1" | "v1beta1";
      deadline: number;
      /** Set when deadline is the server's --timeout: that timeout, in ms. */
      timeoutMs?: number;
      at: number;
      /** When the pool posted the call (monotonicMs). */
      sent: number;
      /** The call is traced: answer with its CallReport. */
      trace?: true;
    }
  | { type: "cancel"; id: number }
  /** To a worker started early (WorkerData.early): what it would otherwise have been started with. */
  | { type: "config"; workerData: WorkerData };

/** FromWorker is a message to the pool. */
export type FromWorker =
  | { type: "ready" }
  | { type: "failed"; message: string; stack?: string }
  | { type: "done"; id: number; buf: ArrayBuffer; off: number; len: number; waited: number; report?: CallReport }
  | { type: "status"; id: number; code: number; details: string; waited: number }
  | { type: "log"; line: string }
  /** Its live heap is over WorkerData.maxHeapMB: end it. */
  | { type: "heap"; heapMB: number }
  /** Sent every BEAT_MS while it holds a call: its thread is not stuck (the pool's stalled()). */
  | { type: "beat" };

/**
 * monotonicMs is the process's monotonic clock in ms: the same in every
 * thread (performance.now() is not: each thread has its own origin).
 */
export const monotonicMs = () => Number(process.hrtime.bigint()) / 1e6;

/** exclusive returns bytes whose ArrayBuffer holds nothing else, so it can be transferred (a copy if they share it). */
export function exclusive(b: Uint8Array): Uint8Array {
  if (b.buffer instanceof ArrayBuffer && ownsBuffer(b)) return b;
  return new Uint8Array(b);
}

/**
 * OWN_MIN and OWN_SLACK say when bytes own their ArrayBuffer though they do
 * not fill it: grpc-js hands a request over as a view 5 bytes into the buffer
 * it framed the message in (its length prefix first). Node makes a Buffer of
 * 4 KiB or more its own ArrayBuffer (smaller ones share an 8 KiB pool), so a
 * view of at least OWN_MIN bytes with at most OWN_SLACK bytes around it is
 * the only thing in its buffer, and the buffer can be transferred instead of
 * copied (a 3.5 MiB request was copied once more on the main thread).
 */
const OWN_MIN = 4096;
const OWN_SLACK = 16;

function ownsBuffer(b: Uint8Array): boolean {
  if (b.byteOffset === 0 && b.byteLength === b.buffer.byteLength) return true;
  return b.byteLength >= OWN_MIN && b.buffer.byteLength - b.byteLength <= OWN_SLACK;
}
