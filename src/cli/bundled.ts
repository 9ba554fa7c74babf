// The server of a bundled function package: `xfn serve` with the function
// built in. `xfn package` bundles this with one function module into
// server.mjs, which runs on plain Node without tsx or node_modules; its
// function.mjs (launch.ts) starts the first worker, then this.
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import type { RunFunction } from "../function.js";
import { pickFunction } from "../module/pick.js";
import type { EarlyWorker } from "../server/early.js";
import { isWorker } from "../server/thread.js";
import { addServeFlags, startServing, type ServeFlags } from "./serve.js";

/**
 * main serves the function the module load imports with the serve flags
 * given in argv. script is what pool workers run: the bundle's own URL, or
 * its launcher's, which loads the bundle; in a worker main serves the pool
 * instead of the network. early is the first worker, when the launcher
 * started it before this bundle loaded. The module is imported only where
 * the function runs (a worker, or --workers 1): the server's thread of a pool
 * starts without it and what it imports (protobuf-es, the generated types),
 * and a module that exports no function is refused by the first worker, as a
 * module `xfn serve` cannot load is.
 */
export async function main(
  load: () => Promise<Record<string, unknown>>,
  name: string,
  argv: string[],
  script: string,
  early?: EarlyWorker,
): Promise<void> {
  const fn = async (): Promise<RunFunction> => {
    const f = pickFunction(await load());
    if (!f) throw new Error(`${name}: the bundled module exports no function (export one as default or as runFunction)`);
    return f;
  };
  if (isWorker()) return (await import("../server/worker.js")).workerMain(await fn());
  await addServeFlags(new Command(name).description(`serve ${name} over gRPC (RunFunction v1 and v1beta1)`))
    .action((flags: ServeFlags) =>
      startServing({ load: fn, worker: { script: new URL(script), ...(early ? { early } : {}) } }, flags, name),
    )
    .parseAsync(argv, { from: "user" });
}

/**
 * runsItself tells whether the bundle at self should start on its own: it is
 * a pool worker, or it is the program node was given (`node server.mjs`),
 * not imported by its launcher.
 */
export function runsItself(self: string): boolean {
  if (isWorker()) return true;
  const program = process.argv[1];
  if (!program) return false;
  try {
    return realpathSync(program) === realpathSync(fileURLToPath(self));
  } catch {
    return false;
  }
}
