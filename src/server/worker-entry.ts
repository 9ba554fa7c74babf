// The script each pool worker runs for `xfn serve <module>`: load the module
// (as it is, or compiled once by the server's thread: module/compile.ts), then
// serve the pool. A module that cannot be loaded is reported to the pool,
// which fails start-up with it. A TypeScript module compiled against the
// worker runtime (lib/worker-runtime.mjs) is the workers' whole script
// instead, and calls startWorker the same way.
import { workerData } from "node:worker_threads";
import { loadCompiled, loadFunction } from "../module/load.js";
import type { WorkerData } from "./worker.js";
import { startWorker } from "./worker-start.js";

const data = workerData as WorkerData;
await startWorker(() =>
  data.compiled
    ? loadCompiled({ url: data.compiled, needsTypeScript: data.compiledNeedsTypeScript ?? false }, data.label)
    : loadFunction(data.module!, undefined, data.label),
);
