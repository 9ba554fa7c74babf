// The thread long regular-expression matches run on (offthread.ts): it
// compiles each pattern with RE2 and answers whether it is found in the
// string, one request at a time.
import { parentPort } from "node:worker_threads";
import { re2 } from "../re2.js";

parentPort!.on("message", (m: { id: number; pattern: string; s: string }) => {
  let found = false;
  let error: string | undefined;
  try {
    found = re2(m.pattern).matcher(m.s).find();
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
  }
  parentPort!.postMessage({ id: m.id, found, error });
});
