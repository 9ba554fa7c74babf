// A bundled function's pool workers: the function and the worker's side of
// the pool, which `xfn package` bundles into worker.mjs without the server
// (grpc-js and the protobufjs it requires, commander, the metrics and the
// CLI), which only the server's thread runs. A worker loading worker.mjs
// parses a third of what server.mjs holds; launch.ts loads it in every worker.
import { pickFunction } from "../module/pick.js";
import { workerMain } from "../server/worker.js";

/** workerEntry serves the pool with the function mod exports. */
export function workerEntry(mod: Record<string, unknown>, name: string): void {
  const fn = pickFunction(mod);
  // The server's thread says so too, and does not start: this worker only ends.
  if (!fn) throw new Error(`${name}: the bundled module exports no function (export one as default or as runFunction)`);
  workerMain(fn);
}
