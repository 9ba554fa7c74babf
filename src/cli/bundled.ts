// The entry point of a bundled function package: `xfn serve` with the
// function built in. `npm run package` bundles this with one function module
// into a single file that runs on plain Node, without tsx or node_modules.
import { Command } from "commander";
import type { RunFunction } from "../function.js";
import { addServeFlags, startServing, type ServeFlags } from "./serve.js";

/** main serves fn with the serve flags given in argv. */
export async function main(fn: RunFunction, name: string, argv: string[]): Promise<void> {
  await addServeFlags(new Command(name).description(`serve ${name} over gRPC (RunFunction v1 and v1beta1)`))
    .action((flags: ServeFlags) => startServing(async () => fn, flags, name))
    .parseAsync(argv, { from: "user" });
}
