// The Pipeline Inspector sidecar of a bundled function package: `xfn package`
// bundles this into inspect.mjs beside function.mjs, so a function's image
// carries the sidecar that Crossplane's Helm values run as
// `node /function/inspect.mjs` (docs/inspect.md). The same file is its writer
// thread: started as a worker, it writes cases instead of listening.
import { isMainThread } from "node:worker_threads";
import { inspectCommand } from "./inspect.js";

/** inspectMain runs `xfn inspect` with argv, or, in the writer thread the sidecar starts on self, the writer. */
export async function inspectMain(self: string, argv: string[]): Promise<void> {
  if (!isMainThread) {
    await import("../inspect/writer-worker.js");
    return;
  }
  await inspectCommand(new URL(self)).name("inspect.mjs").parseAsync(argv, { from: "user" });
}
