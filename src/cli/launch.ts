// The entry of a bundled function package (function.mjs): it starts the
// first pool worker, then loads the server bundle (server.mjs) itself, so
// that the two load side by side (server/early.ts says why). Every pool
// worker runs this file too, and loads the worker bundle (worker.mjs: the
// function without the server) from here: a worker below normal CPU priority
// (pool.ts, BUSY_NICE) takes it before it parses anything, and so loads in
// the time the server and the first worker leave over, instead of taking a
// core from the first answers.
import { workerData } from "node:worker_threads";
import { startEarlyWorker, type EarlyWorker } from "../server/early.js";
import { isWorker, lowerPriority } from "../server/thread.js";

/** The server bundle's export the launcher calls (see package.ts). */
export interface ServerBundle {
  /** start serves with argv; script is what pool workers run, early the first of them. */
  start(argv: string[], script?: string, early?: EarlyWorker): Promise<void>;
}

/**
 * launch serves with argv from the server bundle at server; self is this
 * file, which workers run, and load the worker bundle at worker from (the
 * function without the server: bundled-worker.ts).
 */
export async function launch(self: string, server: URL, worker: URL, argv: string[]): Promise<void> {
  if (isWorker()) {
    // workerMain sets it again, and logs why when it cannot.
    const nice = (workerData as { nice?: unknown }).nice;
    if (typeof nice === "number") lowerPriority(nice);
    await import(worker.href);
    return;
  }
  const early = startEarlyWorker(new URL(self), argv);
  let bundle: ServerBundle;
  try {
    bundle = (await import(server.href)) as ServerBundle;
  } catch (err) {
    early?.discard();
    throw err;
  }
  await bundle.start(argv, self, early);
}
