// The thread `xfn inspect` writes cases in (writer.ts): it takes each call the
// sidecar answered, one after another, and tells the sidecar what became of it.
import { parentPort, workerData } from "node:worker_threads";
import { collectGarbage } from "../gc.js";
import { CaseWriter, LARGE_CALL_BYTES, type Job, type Outcome } from "./writer.js";
import { messageOf } from "../sdk/errors.js";
import { pino } from "pino";
import { startStepSpans } from "./spans.js";

const data = workerData as { root: string; functions: Array<[string, string]>; follow: boolean };
// Spans of each step with Crossplane's IDs, when the OTEL_ variables ask for traces (spans.ts); the jobs wait for the start.
// It logs nothing of its own (the sidecar's thread said where spans go): a silent logger.
const spans = await startStepSpans(pino({ enabled: false }));
const writer = new CaseWriter(data.root, new Map(data.functions), data.follow, undefined, spans?.record);
let chain = Promise.resolve();
parentPort!.on("message", (job: Job | { kind: "end" }) => {
  // The sidecar stops: what spans are pending go out first.
  if (job.kind === "end") {
    chain = chain.then(async () => {
      await spans?.shutdown();
      parentPort!.postMessage({ ended: true });
    });
    return;
  }
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
