// How a pool worker starts: its log and its guard against signalling the
// server's process first, then the function module (whose top-level code may
// print, or call process.kill), then the pool's calls.
import { parentPort } from "node:worker_threads";
import type { RunFunction } from "../function.js";
import { refuseKill } from "../module/exit.js";
import { workerLog, workerMain, type FromWorker } from "./worker.js";

/** startWorker loads the function with load and serves the pool, or tells the pool why it cannot. */
export async function startWorker(load: () => Promise<RunFunction>): Promise<void> {
  workerLog();
  refuseKill();
  try {
    workerMain(await load());
  } catch (err) {
    // The stack of what was thrown (source-mapped), for xfn serve --debug.
    const cause = err instanceof Error ? err.cause : undefined;
    const stack = cause instanceof Error ? cause.stack : err instanceof Error ? err.stack : undefined;
    parentPort!.postMessage({
      type: "failed",
      message: err instanceof Error ? err.message : String(err),
      ...(stack ? { stack } : {}),
    } satisfies FromWorker);
  }
}
