// The script each pool worker runs for `xfn serve <module>`: load the module
// (as compiled once by the server's thread when it is TypeScript, else as it
// is), then serve the pool. A module that
// cannot be loaded is reported to the pool, which fails start-up with it.
import { parentPort, workerData } from "node:worker_threads";
import { refuseKill } from "../module/exit.js";
import { loadCompiled, loadFunction } from "../module/load.js";
import { workerLog, workerMain, type FromWorker, type WorkerData } from "./worker.js";

const data = workerData as WorkerData;
// Before the module loads: what its top-level code prints is logged too, and
// it cannot signal the server's process (process.exit ends only this worker).
workerLog();
refuseKill();
try {
  const fn = data.compiled
    ? await loadCompiled({ url: data.compiled, needsTypeScript: data.compiledNeedsTypeScript ?? false }, data.label)
    : await loadFunction(data.module!, undefined, data.label);
  workerMain(fn);
} catch (err) {
  parentPort!.postMessage({ type: "failed", message: err instanceof Error ? err.message : String(err) } satisfies FromWorker);
}
