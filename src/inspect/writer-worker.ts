// The thread `xfn inspect` writes cases in (writer.ts): it takes each call the
// sidecar answered, one after another, and tells the sidecar what became of it.
import { parentPort, workerData } from "node:worker_threads";
import { collectGarbage } from "../gc.js";
import { CaseWriter, LARGE_CALL_BYTES, type Job, type Outcome } from "./writer.js";
import { messageOf } from "../sdk/errors.js";

const data = workerData as { root: string; functions: Array<[string, string]>; follow: boolean };
const writer = new CaseWriter(data.root, new Map(data.functions), data.follow);
let chain = Promise.resolve();
parentPort!.on("message", (job: Job) => {
  chain = chain.then(async () => {
    let out: Outcome;
    try {
      out = await writer.handle(job);
    } catch (err) {
      out = { written: false, drop: { why: "write failed", fields: { err: messageOf(err) } } };
    }
    parentPort!.postMessage(out);
    // What a call of megabytes left is given back at once, not when the heap next grows: the sidecar has a memory limit.
    if (job.bytes.length >= LARGE_CALL_BYTES) collectGarbage();
  });
});
