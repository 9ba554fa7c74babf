// A bundled function's first worker, started before the server's own code
// has loaded. A worker takes about as long to load the bundle as the server's
// thread does (node, then parsing and running two megabytes), and the server
// answers only once a worker has loaded the function: one after the other,
// the first answer came some 700 ms after start on two cores, where either
// alone takes about 300. The bundle's entry (cli/launch.ts) starts this worker
// first, then loads the server, and the two load side by side; the pool then
// takes the worker as its first (pool.ts), handing it what a worker is
// otherwise given at its start in one "config" message.
//
// A worker's heap limit is fixed when it starts, before the server has read
// its flags: it is worked out here from the defaults, as `xfn serve` works it
// out, and a pool given another limit (--max-worker-heap, or flags that change
// the share) ends this worker and starts its own.
import { Worker } from "node:worker_threads";
import { tuneHeap } from "./heap.js";
import { DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_QUEUE, DEFAULT_MAX_RECV_MB, DEFAULT_WORKERS } from "./limits.js";
import { memoryMB, v8HeapLimitMB, workerHeapMB } from "./memory.js";

/** EarlyWorker is a worker started before the server, for the pool to take or end. */
export interface EarlyWorker {
  /** The heap limit it was started with (MB). */
  readonly maxHeapMB: number;
  /** Why it ended before the pool took it (it failed to load the function, or was ended), if it did. */
  ended(): string | undefined;
  /** take hands the worker to the pool: it keeps the process running from now on, and its events are the pool's. */
  take(): Worker;
  /** discard ends the worker (the pool does not want it, or nothing will serve). */
  discard(): void;
}

/** Flags after which no server starts (help, version), or that change the workers (their number): no early worker then. */
const NOT_EARLY = /^(-h|--help|-V|--version|--workers(=.*)?)$/;

/**
 * startEarlyWorker starts a pool worker on script (the bundle, which serves
 * the function when it runs as a worker), unless argv asks for what no early
 * worker helps. The worker does not keep the process running until the pool
 * takes it: a server that fails to start exits as it would without it.
 */
export function startEarlyWorker(script: URL, argv: readonly string[]): EarlyWorker | undefined {
  if (argv.some((a) => NOT_EARLY.test(a))) return undefined;
  const { mb: maxHeapMB } = workerHeapMB({
    workers: DEFAULT_WORKERS,
    maxConcurrency: DEFAULT_MAX_CONCURRENCY,
    maxQueue: DEFAULT_MAX_QUEUE,
    maxRecvMB: DEFAULT_MAX_RECV_MB,
    memoryMB: memoryMB().mb,
  });
  // Workers read V8's flags when they start: set them as the server does first (serve.ts sets them again, the same).
  tuneHeap();
  const worker = new Worker(script, {
    workerData: { xfnWorker: true, early: true },
    resourceLimits: { maxOldGenerationSizeMb: v8HeapLimitMB(maxHeapMB) },
  });
  worker.unref();
  let ended: string | undefined;
  const onError = (err: Error) => (ended ??= err.message);
  const onExit = (code: number) => (ended ??= `it exited with code ${code}`);
  worker.on("error", onError);
  worker.on("exit", onExit);
  let taken = false;
  return {
    maxHeapMB,
    ended: () => ended,
    take() {
      if (taken) throw new Error("the early worker was taken already");
      taken = true;
      worker.off("error", onError);
      worker.off("exit", onExit);
      worker.ref();
      return worker;
    },
    discard() {
      if (taken) return;
      taken = true;
      ended ??= "discarded";
      // An error from here on (its load failing as it ends) is this worker's last word, and no one's concern.
      worker.off("error", onError);
      worker.on("error", () => {});
      void worker.terminate();
    },
  };
}
