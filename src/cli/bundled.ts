// The entry point of a bundled function package: `xfn serve` with the
// function built in. `xfn package` bundles this with one function module into
// a single file that runs on plain Node, without tsx or node_modules.
import { Command } from "commander";
import type { RunFunction } from "../function.js";
import { pickFunction } from "../module/pick.js";
import { isWorker, workerMain } from "../server/worker.js";
import { addServeFlags, startServing, type ServeFlags } from "./serve.js";

/**
 * main serves the function mod exports with the serve flags given in argv.
 * self is the bundle's own URL: pool workers run the bundle again, and in a
 * worker main serves the pool instead of the network.
 */
export async function main(mod: Record<string, unknown>, name: string, argv: string[], self: string): Promise<void> {
  const fn: RunFunction | undefined = pickFunction(mod);
  if (!fn) {
    process.stderr.write(`${name}: the bundled module exports no function (export one as default or as runFunction)\n`);
    process.exitCode = 1;
    return;
  }
  if (isWorker()) return workerMain(fn);
  await addServeFlags(new Command(name).description(`serve ${name} over gRPC (RunFunction v1 and v1beta1)`))
    .action((flags: ServeFlags) => startServing({ load: async () => fn, worker: { script: new URL(self) } }, flags, name))
    .parseAsync(argv, { from: "user" });
}
