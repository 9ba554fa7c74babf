// Each worker's heap limit: a share of the memory the process may use, so that
// a function that leaks ends its own worker before the kernel's OOM killer
// ends the server (measured in a 1 GiB memory cgroup: with V8's own sizing,
// half the container per isolate, three leaking calls and a flood of requests
// got the server SIGKILLed; with the share, the three calls failed and the
// server served on).
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { MAX_WORKER_HEAP_MB, memoryMB, MIN_WORKER_HEAP_MB, workerHeapMB } from "../../src/server/memory.js";
import { retainedNow } from "../../src/server/guard.js";

const M = suite("server: worker heap limit");

const GiB = 2 ** 30;
const UNLIMITED = 2 ** 64; // what Node reports for a cgroup without a limit

const memory: Record<string, { constrained: number; total: number; want: { mb: number; container: boolean } }> = {
  "a container limit below the machine's memory": { constrained: GiB, total: 24 * GiB, want: { mb: 1024, container: true } },
  "no container limit (Node reports 2^64)": { constrained: UNLIMITED, total: 24 * GiB, want: { mb: 24 * 1024, container: false } },
  "no cgroup at all (Node reports 0)": { constrained: 0, total: 8 * GiB, want: { mb: 8 * 1024, container: false } },
  "a limit above the machine's memory": { constrained: 64 * GiB, total: 8 * GiB, want: { mb: 8 * 1024, container: false } },
};
for (const [name, tc] of Object.entries(memory)) {
  M(`the memory the process may use: ${name}`, () => {
    assert.equal(memoryMB(tc.constrained, tc.total), tc.want);
  });
}

// Defaults: --max-concurrency 16, --max-queue 128, --max-recv-message-size 4. The server's
// thread is given 96 MB, plus 2 x 16 bodies of 4 MB and 144 stream windows of 1 MB (368 MB);
// each worker 48 MB besides its heap.
const defaults = { maxConcurrency: 16, maxQueue: 128, maxRecvMB: 4 };
const shares: Record<string, { memoryMB: number; workers: number; flags?: Partial<typeof defaults>; mb: number; tooSmall?: boolean }> = {
  "1 GiB container, three workers (the default on two cores)": { memoryMB: 1024, workers: 3, mb: 170 },
  "1 GiB container, two workers": { memoryMB: 1024, workers: 2, mb: 280 },
  "2 GiB container, three workers": { memoryMB: 2048, workers: 3, mb: 512 },
  "a large machine: V8's own ceiling": { memoryMB: 24 * 1024, workers: 3, mb: MAX_WORKER_HEAP_MB },
  "512 MiB with the default flags: the minimum, with a warning": { memoryMB: 512, workers: 3, mb: MIN_WORKER_HEAP_MB, tooSmall: true },
  "512 MiB with fewer calls held": { memoryMB: 512, workers: 3, flags: { maxConcurrency: 4, maxQueue: 16 }, mb: 73 },
  "larger requests leave less": { memoryMB: 2048, workers: 3, flags: { maxRecvMB: 16 }, mb: 384 },
};
for (const [name, tc] of Object.entries(shares)) {
  M(`each worker's share: ${name}`, () => {
    const got = workerHeapMB({ ...defaults, ...tc.flags, workers: tc.workers, memoryMB: tc.memoryMB });
    assert.equal(got, { mb: tc.mb, tooSmall: tc.tooSmall ?? false });
  });
}

M("the shares and what the server's thread holds fit in the memory", () => {
  for (const memoryMB of [768, 1024, 1536, 2048, 4096]) {
    for (const workers of [2, 3, 5]) {
      const { mb, tooSmall } = workerHeapMB({ ...defaults, workers, memoryMB });
      if (tooSmall) continue;
      assert.ok(96 + 128 + 144 + workers * (mb + 48) <= memoryMB, `${memoryMB} MB, ${workers} workers: ${mb} MB each`);
    }
  }
});

M.run();

const R = suite("server: memory freed by ended workers and kept by the allocator");

// retainedNow(retained, changed, grown): MB for reading; the function takes any unit.
const retainedCases: Record<string, [retained: number, changed: number, grown: number, want: number]> = {
  "nothing returned, nothing grown: all still kept": [640, 0, 0, 640],
  "the resident memory fell: that much was returned": [640, -600, 0, 40],
  "more returned than was counted: none kept": [640, -900, 0, 0],
  "the workers grew: assumed to reuse what was kept": [640, 0, 100, 540],
  "returned and grown in one step": [640, -200, 300, 140],
  "the resident memory rose (a busy worker that cannot write its figure): that much less": [640, 150, 0, 490],
  "rose while the figures grew: both counted, never too little in use": [640, 100, 100, 440],
  "a worker's figure fell: kept unchanged": [640, 0, -80, 640],
  "nothing kept": [0, 0, 10, 0],
};
for (const [name, [retained, changed, grown, want]] of Object.entries(retainedCases))
  R(name, () => assert.is(retainedNow(retained, changed, grown), want));

R.run();
