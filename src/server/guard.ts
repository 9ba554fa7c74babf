// The memory guard of the function pool: before the server's resident memory
// reaches the container's limit (where the kernel would kill the whole
// server), the worker holding the most is ended and replaced, its calls
// failing with a message that says why.
import type { Worker } from "node:worker_threads";
import type { Logger } from "pino";
import { messageOf } from "../sdk/errors.js";
import { MEMORY_REPORT_MS } from "./protocol.js";

/** How often the memory guard looks. */
const GUARD_INTERVAL_MS = 50;

/** Guarded is what the guard sees of a pool's worker. */
export interface Guarded {
  n: number;
  worker: Pick<Worker, "terminate">;
  /** The calls it holds, and when each was handed to it (performance.now()). */
  pending: Map<number, { started: number }>;
  gone: boolean;
  retiring: boolean;
  /** Why it is being ended (its calls fail saying so). */
  ending?: string;
  /** What the worker writes: bytes its thread holds, and when (worker.ts, MEMORY_REPORT_MS). */
  held: Float64Array;
}

/**
 * A worker whose memory figure is older than STALE_MS has not turned its event
 * loop for that long: a call holds its thread (it writes one every
 * MEMORY_REPORT_MS otherwise).
 */
const STALE_MS = 5 * MEMORY_REPORT_MS;

/** A worker is ended only if it holds at least this share of the guard: ending one that holds little gives little back. */
const GUARD_MIN_SHARE = 0.1;

/**
 * guardMemory watches the process's resident memory. A function can grow
 * memory that no heap limit covers (Buffers, ArrayBuffers, strings of a
 * megabyte or more live outside V8's heap), and past the container's limit
 * the kernel kills the whole server. Before that, at limitMB, the worker
 * holding the most is ended: its calls (if any) fail naming why, it is
 * replaced, and the guard waits until every worker being ended has exited
 * (its memory given back) before it may end another.
 *
 * Each worker writes down what its thread holds (worker.ts). A worker whose
 * call keeps its thread busy cannot: the growth since the guard started that
 * no worker's figure accounts for is put down to such a worker (a leak in a
 * loop), and among several, to the one whose call has run longest. An idle
 * worker holding the most (a cache that grows across calls) is ended without
 * failing any call. When no worker holds at least GUARD_MIN_SHARE of the
 * guard, nothing is ended, and a warning says so once.
 */
export function guardMemory(limitMB: number, rss: () => number, slots: Guarded[], log: Logger): NodeJS.Timeout {
  const live = () => slots.filter((s) => !s.gone && !s.retiring);
  const heldBy = (ss: Guarded[]) => ss.reduce((n, s) => n + s.held[0]!, 0);
  // What the process holds besides the workers' own figures, when the guard starts.
  const base = rss() - heldBy(live());
  let warned = false;
  // The bytes the worker last ended was taken to hold.
  let ended = 0;
  // Freed by ended workers and kept by the C allocator (see retainedNow), and what was measured last.
  let retained = 0;
  let lastRss = 0;
  let lastHeld = 0;
  let unreadable = false;
  return setInterval(() => {
    // A worker being ended is still giving its memory back: wait for it.
    if (slots.some((s) => s.retiring && !s.gone)) return;
    let bytes: number;
    try {
      bytes = rss();
    } catch (err) {
      // Node reads /proc/self/stat for it: with every file descriptor taken (a
      // function that opens files and never closes them), it cannot. Before, the
      // throw was logged as a function's stray error, every 50 ms.
      if (!unreadable)
        log.warn({ err: messageOf(err) }, "the memory guard cannot read the server's resident memory; it checks again once it can");
      unreadable = true;
      return;
    }
    unreadable = false;
    const workers = live();
    const held = heldBy(workers);
    // What an ended worker held is freed once it is gone; what the process shows of it is counted apart.
    retained = retainedNow(retained + ended, bytes - lastRss, held - lastHeld);
    ended = 0;
    lastRss = bytes;
    lastHeld = held;
    // In use: what the process shows, less what was freed and is kept for reuse.
    const mb = Math.round((bytes - retained) / 2 ** 20);
    if (mb < limitMB) {
      warned = false;
      return;
    }
    const measured = { rssMB: Math.round(bytes / 2 ** 20), ...(retained ? { retainedMB: Math.round(retained / 2 ** 20) } : {}), limitMB };
    const now = performance.timeOrigin + performance.now();
    const unexplained = Math.max(0, bytes - retained - base - held);
    // The worker holding the most by its own figure, and the busy one whose call has run longest.
    let holder: Guarded | undefined;
    let busy: Guarded | undefined;
    let busySince = Infinity;
    for (const s of workers) {
      if (!holder || s.held[0]! > holder.held[0]!) holder = s;
      if (s.pending.size === 0 || now - s.held[1]! <= STALE_MS) continue;
      for (const p of s.pending.values())
        if (p.started < busySince) {
          busySince = p.started;
          busy = s;
        }
    }
    const stuck = busy !== undefined && busy.held[0]! + unexplained > holder!.held[0]!;
    const victim = stuck ? busy : holder;
    const best = victim ? victim.held[0]! + (stuck ? unexplained : 0) : 0;
    const heldMB = Math.round(best / 2 ** 20);
    if (!victim || heldMB < GUARD_MIN_SHARE * limitMB) {
      if (!warned)
        log.warn(
          { ...measured, mostHeldMB: Math.max(0, heldMB) },
          "the server's memory reached its guard, but no worker holds much of it; none is ended",
        );
      warned = true;
      return;
    }
    const over = `the server's memory reached ${mb} MB (its guard is ${limitMB} MB)`;
    const calls = victim.pending.size;
    if (stuck) {
      const seconds = Math.round((performance.now() - busySince) / 100) / 10;
      log.error(
        { worker: victim.n, ...measured, heldMB, callSeconds: seconds, calls },
        "the server's memory reached its guard; ending the worker whose call has kept its thread busy " +
          "(taken to hold what no worker accounts for)",
      );
      victim.ending =
        `it was ended because ${over} while its call had kept its thread busy for ${seconds} s, ` +
        `so it is taken to hold the ${heldMB} MB no worker accounts for`;
    } else {
      log.error(
        { worker: victim.n, ...measured, heldMB, calls },
        "the server's memory reached its guard; ending the worker holding the most",
      );
      victim.ending = `it was ended because ${over} and it held the most of it, ${heldMB} MB`;
    }
    victim.retiring = true;
    // A busy worker's share of the unexplained growth is a guess: only its own figure is counted as freed.
    ended = stuck ? victim.held[0]! : best;
    void victim.worker.terminate();
  }, GUARD_INTERVAL_MS).unref();
}

/**
 * retainedNow is the memory freed by ended workers that the process still
 * shows as resident, after the resident memory changed by changed bytes and
 * the workers' own figures grew by grown bytes. glibc keeps much of what a
 * thread frees (large Buffers come from its arenas once one such block was
 * freed) and hands it out again, to the replacement worker first: measured
 * here, a worker holding 650 MB of Buffers left the process at 526 MB after
 * it exited, and the next worker's 650 MB brought it to 709, not 1176.
 * Counted as in use, it made the guard end worker after worker, each freeing
 * nothing the kernel could see. The count falls by every change of the
 * resident memory (a fall is memory returned; a rise is memory the kept part
 * did not supply, and counts towards the kernel's limit all the same) and by
 * whatever the workers' figures grow by (as if it came from what was kept),
 * so memory in use is never underestimated by more than what is kept and
 * still unused.
 */
export function retainedNow(retained: number, changed: number, grown: number): number {
  return Math.max(0, retained - Math.abs(changed) - Math.max(0, grown));
}
