import { suite } from "uvu";
import * as assert from "uvu/assert";
import { WorkQueue } from "../../src/host/queue.js";
import { sleep, until } from "../support/cluster.js";

const Q = suite("work queue");

Q("deduplicates queued keys and reruns a key added while it runs, exactly once", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const runs: string[] = [];
  const q = new WorkQueue(async (k) => {
    runs.push(k);
    if (runs.length === 1) await gate;
  });
  q.add("a");
  await until("the first run", () => runs.length === 1);
  q.add("a");
  q.add("a");
  q.add("a");
  release();
  await until("two runs", () => runs.length === 2);
  await q.idle();
  await sleep(30);
  assert.equal(runs, ["a", "a"]);
  q.stop();
});

Q("never runs one key on two workers; different keys run in parallel", async () => {
  let concurrentA = 0;
  let maxA = 0;
  let both = false;
  const q = new WorkQueue(
    async (k) => {
      if (k === "a") {
        concurrentA++;
        maxA = Math.max(maxA, concurrentA);
        await sleep(30);
        concurrentA--;
      } else both = concurrentA > 0;
    },
    { workers: 4 },
  );
  q.add("a");
  q.add("b");
  q.add("a");
  await sleep(100);
  await q.idle();
  assert.is(maxA, 1);
  assert.ok(both, "b ran while a was running");
  q.stop();
});

Q("failures back off per key; success resets; requeueAfter schedules the next run", async () => {
  const times: number[] = [];
  let n = 0;
  const errors: number[] = [];
  const q = new WorkQueue(
    async () => {
      times.push(Date.now());
      if (++n <= 3) throw new Error("not yet");
      return n === 4 ? { requeueAfterMs: 30 } : undefined;
    },
    { baseBackoffMs: 20, maxBackoffMs: 1000 },
    (_k, _e, retry) => errors.push(retry),
  );
  q.add("k");
  await until("five runs", () => times.length >= 5, 3000);
  assert.equal(errors, [20, 40, 80]);
  q.stop();
});

Q.run();
