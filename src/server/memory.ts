// How much JavaScript heap each worker thread may use.
//
// V8 sizes every isolate's heap from the memory the process may use: in a
// container, from its memory limit (Node reads the cgroup), and then each
// isolate may grow to about half of it. The server's thread and three workers
// could so ask for twice what the container has, and two workers running a
// function that leaks get the whole process killed by the kernel's OOM killer,
// dropping every call in flight (seen in a 1 GiB memory cgroup: four leaking
// calls at once killed the server). Limiting each worker to its share makes
// the worker that runs out end alone: its calls fail, it is replaced, and the
// server serves on.
import { totalmem } from "node:os";
import { STREAM_WINDOW } from "./limits.js";

/** What the heap limit is worked out from. */
export interface MemoryBudget {
  /** Workers the server runs. */
  workers: number;
  /** --max-concurrency: the server's thread holds up to 2x that many request bodies whole. */
  maxConcurrency: number;
  /** --max-queue: each call waiting holds up to one HTTP/2 stream window (STREAM_WINDOW). */
  maxQueue: number;
  /** --max-recv-message-size, in MB. */
  maxRecvMB: number;
  /** Memory the process may use, in MB (memoryMB() by default). */
  memoryMB?: number;
}

/** The server's own thread at rest: its heap, code, grpc-js (measured about 50 MB), with room for what it allocates per call. */
export const SERVER_BASE_MB = 96;
/** Each worker besides its old generation: young generation, code, its copy of the function's module. */
export const WORKER_BASE_MB = 48;
/** No worker gets less: below this a function that decodes a few MB of request cannot run. */
export const MIN_WORKER_HEAP_MB = 64;
/** V8's own ceiling for one isolate's old generation (pointer compression). */
export const MAX_WORKER_HEAP_MB = 4096;

/**
 * v8HeapLimitMB is the limit V8 itself is given for a worker whose heap is
 * limited to limitMB (--max-worker-heap): the limit again (at least 64 MB)
 * above it, within MAX_WORKER_HEAP_MB. (A call stuck on the CPU while its
 * heap grows reaches it: the headroom is also how much further it gets.) At V8's limit Node ends the worker,
 * granting 16 MB to do so; an allocation larger than that, made near the
 * limit (one array of 100 MB, kept, a second call running over 128), is one
 * V8 cannot refuse a single thread: it aborts the whole process. So the worker
 * watches its own heap against limitMB (worker.ts, watchHeap) and asks to be
 * ended once its live heap is over, and V8's limit only catches an allocation
 * that outruns the watch, with room for one large one.
 */
export function v8HeapLimitMB(limitMB: number): number {
  return Math.min(MAX_WORKER_HEAP_MB, limitMB + Math.max(limitMB, 64));
}

/** GUARD_SHARE is the share of the memory at which the pool ends the worker holding the most of it (guard.ts, guardMemory). */
export const GUARD_SHARE = 0.85;

/**
 * memoryMB is the memory this process may use: the container's limit
 * (cgroup) when there is one below the machine's memory, else the machine's.
 */
export function memoryMB(
  constrained: number = process.constrainedMemory(),
  total: number = totalmem(),
): { mb: number; container: boolean } {
  const container = constrained > 0 && constrained < total;
  return { mb: Math.floor((container ? constrained : total) / 2 ** 20), container };
}

/**
 * workerHeapMB is each worker's share of the memory: what is left after the
 * server's own thread with the most request bytes admission lets it hold
 * (docs/serving.md, "Memory") and each worker's fixed part, split evenly,
 * within MIN_WORKER_HEAP_MB and MAX_WORKER_HEAP_MB. tooSmall says the share
 * came out below the minimum (the minimum is used).
 */
export function workerHeapMB(b: MemoryBudget): { mb: number; tooSmall: boolean } {
  const memory = b.memoryMB ?? memoryMB().mb;
  const requests = 2 * b.maxConcurrency * b.maxRecvMB + ((b.maxConcurrency + b.maxQueue) * STREAM_WINDOW) / 2 ** 20;
  const share = Math.floor((memory - SERVER_BASE_MB - requests - b.workers * WORKER_BASE_MB) / b.workers);
  if (share < MIN_WORKER_HEAP_MB) return { mb: MIN_WORKER_HEAP_MB, tooSmall: true };
  return { mb: Math.min(share, MAX_WORKER_HEAP_MB), tooSmall: false };
}
