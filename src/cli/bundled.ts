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
import { workerMain } from "../server/worker.js";
import { addServeFlags, startServing, type ServeFlags } from "./serve.js";

/**
 * main serves the function mod exports with the serve flags given in argv.
 * script is what pool workers run: the bundle's own URL, or its launcher's,
 * which loads the bundle; in a worker main serves the pool instead of the
 * network. early is the first worker, when the launcher started it before
 * this bundle loaded.
 */
export async function main(mod: Record<string, unknown>, name: string, argv: string[], script: string, early?: EarlyWorker): Promise<void> {
  const fn: RunFunction | undefined = pickFunction(mod);
  if (!fn) {
    early?.discard();
    process.stderr.write(`${name}: the bundled module exports no function (export one as default or as runFunction)\n`);
    process.exitCode = 1;
    return;
  }
  if (isWorker()) return workerMain(fn);
  await addServeFlags(new Command(name).description(`serve ${name} over gRPC (RunFunction v1 and v1beta1)`))
    .action((flags: ServeFlags) =>
      startServing({ load: async () => fn, worker: { script: new URL(script), ...(early ? { early } : {}) } }, flags, name),
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
