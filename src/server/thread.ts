// What a pool worker thread needs to know about itself before anything heavy
// loads: whether it is one, and how to lower its CPU priority. A bundle's
// entry (cli/launch.ts) uses both before it parses the server bundle, and the
// worker (worker.ts) once it serves, so they live here, with no imports of
// xfn's server code.
import { setPriority } from "node:os";
import { parentPort, workerData } from "node:worker_threads";

/** isWorker tells whether this thread is a pool worker. */
export function isWorker(): boolean {
  return parentPort !== null && (workerData as { xfnWorker?: unknown } | null)?.xfnWorker === true;
}

/**
 * lowerPriority sets this thread's nice value (Linux only: there setpriority
 * of "process 0" changes only the calling thread; elsewhere it would change
 * the whole server process, so it is left alone). It returns why it could
 * not, if it could not; 0 or less does nothing.
 */
export function lowerPriority(nice: number): string | undefined {
  if (!(nice > 0) || process.platform !== "linux") return undefined;
  try {
    setPriority(0, nice);
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}
