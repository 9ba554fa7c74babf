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
import {
  exclusive,
  LOG_BACKLOG_CHARS,
  MEMORY_REPORT_MS,
  monotonicMs,
  type FromWorker,
  type ToWorker,
  type WorkerData,
} from "./protocol.js";

// The pool's side of the protocol, for those who import it from here.
export { exclusive, LOG_BACKLOG_CHARS, MEMORY_REPORT_MS, monotonicMs } from "./protocol.js";
export type { FromWorker, ToWorker, WorkerData } from "./protocol.js";

/** How often a worker holding calls says it is not stuck (under the pool's STALLED_MS). */
const BEAT_MS = 250;

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
        ...(m.trace ? { trace: true } : {}),
      })
      .then((res: HandlerResult) => {
        running.delete(m.id);
        beating();
        if ("ok" in res) {
          const b = exclusive(res.ok);
          port.postMessage(
            {
              type: "done",
              id: m.id,
              buf: b.buffer as ArrayBuffer,
              off: b.byteOffset,
              len: b.byteLength,
              waited,
              ...(res.report ? { report: res.report } : {}),
            } satisfies FromWorker,
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
