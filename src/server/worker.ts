// The worker side of the function pool (pool.ts): one thread running the
// function through the same handler as the in-process server, fed requests
// by the main thread, answering with response bytes. The request and
// response bytes move between threads as transferred ArrayBuffers, never
// copied.
import { EventEmitter } from "node:events";
import { getHeapStatistics } from "node:v8";
import { parentPort, workerData } from "node:worker_threads";
import type { RunFunction } from "../function.js";
import { collectGarbage } from "../gc.js";
import { Cancel, createHandler, type HandlerResult } from "./handler.js";
import type { Logger } from "pino";
import { routeOutput } from "./console.js";
import { countDrops, createLogger } from "./log.js";
import { lowerPriority } from "./thread.js";

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
    }
  | { type: "cancel"; id: number }
  /** To a worker started early (WorkerData.early): what it would otherwise have been started with. */
  | { type: "config"; workerData: WorkerData };

/** How often a worker holding calls says it is not stuck (under the pool's STALLED_MS). */
const BEAT_MS = 250;

/** FromWorker is a message to the pool. */
export type FromWorker =
  | { type: "ready" }
  | { type: "failed"; message: string; stack?: string }
  | { type: "done"; id: number; buf: ArrayBuffer; off: number; len: number; waited: number }
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

let logger: Logger | undefined;
/** This worker's data: workerData, or what the pool sent a worker started early. */
let settings: WorkerData | undefined;
const dataOf = () => settings ?? (workerData as WorkerData);

/**
 * workerLog is this worker's logger, made on first use: its lines go to the
 * pool, which writes them through the server's own logger, as long as not too
 * many are waiting there. From then on the function's console, and anything
 * written to this thread's process.stdout and process.stderr, are log lines
 * through it (console.ts).
 */
export function workerLog(): Logger {
  if (logger) return logger;
  const data = dataOf();
  const port = parentPort!;
  const backlog = data.logBacklog ? new Int32Array(data.logBacklog) : undefined;
  const destination = Object.assign(new EventEmitter(), {
    write: (line: string) => {
      if (backlog && Atomics.load(backlog, 0) + line.length > LOG_BACKLOG_CHARS) {
        destination.emit("drop", line);
        return;
      }
      if (backlog) Atomics.add(backlog, 0, line.length);
      port.postMessage({ type: "log", line } satisfies FromWorker);
    },
  });
  const log = createLogger({ debug: data.debug, destination });
  countDrops(destination, log, "the function logged faster than the server could write");
  routeOutput(log);
  return (logger = log);
}

/**
 * workerMain serves fn to the pool until the thread is terminated. A worker
 * started early first waits for the pool to send what it is to serve with.
 */
export function workerMain(fn: RunFunction): void {
  const data = workerData as WorkerData;
  if (!data.early) return serveWorker(fn, data);
  parentPort!.once("message", (m: ToWorker) => {
    if (m.type !== "config") throw new Error(`a worker started early got "${m.type}" before its config`);
    serveWorker(fn, (settings = m.workerData));
  });
}

/**
 * watchHeap holds the worker to its heap limit (--max-worker-heap): V8's own
 * limit is set above it (memory.ts, v8HeapLimitMB), so one large allocation
 * near the limit ends this worker instead of aborting the process. Every
 * MEMORY_REPORT_MS, and after each call, a heap over the limit is collected
 * fully; if what is live is still over, the pool is told (once), and ends the
 * worker. It returns the check, for after each call.
 */
function watchHeap(limitMB: number, over: (heapMB: number) => void): () => void {
  const limit = limitMB * 2 ** 20;
  let told = false;
  const check = () => {
    if (told || getHeapStatistics().used_heap_size <= limit) return;
    collectGarbage();
    const used = getHeapStatistics().used_heap_size;
    if (used <= limit) return;
    told = true;
    over(Math.round(used / 2 ** 20));
  };
  setInterval(check, MEMORY_REPORT_MS).unref();
  return check;
}

function serveWorker(fn: RunFunction, data: WorkerData): void {
  const port = parentPort!;
  const niceErr = lowerPriority(data.nice ?? 0);
  const log = workerLog();
  if (data.memory) {
    const held = new Float64Array(data.memory);
    const report = () => {
      const h = getHeapStatistics();
      held[0] = h.used_heap_size + h.external_memory;
      held[1] = performance.timeOrigin + performance.now();
    };
    report();
    setInterval(report, MEMORY_REPORT_MS).unref();
  }
  const checkHeap = data.maxHeapMB
    ? watchHeap(data.maxHeapMB, (heapMB) => port.postMessage({ type: "heap", heapMB } satisfies FromWorker))
    : undefined;
  if (niceErr) log.warn({ err: niceErr }, "cannot lower this worker's CPU priority; small calls are not favoured");
  // The pool bounds concurrency and queueing; here every request runs at once.
  const handler = createHandler(fn, { maxConcurrency: Infinity, maxQueue: Infinity, maxResponseBytes: data.maxResponseBytes }, log);
  const running = new Map<number, Cancel>();
  // While it holds calls, the thread says now and then that it is not stuck on the CPU.
  let beat: NodeJS.Timeout | undefined;
  const beating = () => {
    if (running.size > 0 && !beat) beat = setInterval(() => port.postMessage({ type: "beat" } satisfies FromWorker), BEAT_MS);
    else if (running.size === 0 && beat) beat = void clearInterval(beat);
  };
  port.on("message", (m: ToWorker) => {
    if (m.type === "cancel") {
      running.get(m.id)?.cancel();
      return;
    }
    if (m.type !== "run") return;
    // How long the call waited to be picked up: the pool's measure of whether this thread gets the CPU.
    const waited = monotonicMs() - m.sent;
    const cancel = new Cancel();
    running.set(m.id, cancel);
    beating();
    void handler
      .handle(new Uint8Array(m.buf, m.off, m.len), {
        version: m.version,
        deadline: m.deadline,
        cancel,
        at: m.at,
        ...(m.timeoutMs !== undefined ? { timeoutMs: m.timeoutMs } : {}),
      })
      .then((res: HandlerResult) => {
        running.delete(m.id);
        beating();
        if ("ok" in res) {
          const b = exclusive(res.ok);
          port.postMessage(
            { type: "done", id: m.id, buf: b.buffer as ArrayBuffer, off: b.byteOffset, len: b.byteLength, waited } satisfies FromWorker,
            [b.buffer as ArrayBuffer],
          );
        } else {
          port.postMessage({ type: "status", id: m.id, code: res.code, details: res.details, waited } satisfies FromWorker);
        }
        checkHeap?.();
      });
  });
  port.postMessage({ type: "ready" } satisfies FromWorker);
}

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
