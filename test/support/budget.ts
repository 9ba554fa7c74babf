// Time limits in tests that stretch with the machine. A test waits "5 s" for
// work that takes 1 s on an idle machine; beside two CPU-bound processes the
// same work takes three times as long, and a fixed 5 s window fails a test
// that is right. A Budget counts wall time at the rate the machine gives CPU
// time: the share of time in which no task waited for a CPU (the kernel's
// pressure stall information, /proc/pressure/cpu), or, without it, the cores
// over the load average; never slower than 1/SLOWEST. On an idle machine a
// 5 s budget is 5 s; on one with twice the work its cores can do, about 10 s.
import { availableParallelism, loadavg } from "node:os";
import { readFileSync } from "node:fs";

/** SLOWEST bounds how far a budget stretches: a wait never lasts more than this many times its budget. */
export const SLOWEST = 8;

/** stallMicros reads the CPU pressure: microseconds in which some task waited for a CPU (undefined where the kernel does not say). */
function stallMicros(): number | undefined {
  try {
    const m = /^some .*total=(\d+)/m.exec(readFileSync("/proc/pressure/cpu", "utf8"));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Budget is a time limit counted at the rate the machine gives CPU time. */
export class Budget {
  private spentMs = 0;
  private lastWall = performance.now();
  private lastStall = stallMicros();

  constructor(readonly ms: number) {}

  /** spent is the time counted so far, in ms. */
  spent(): number {
    const wall = performance.now();
    const stall = stallMicros();
    const dt = wall - this.lastWall;
    let rate: number;
    if (stall !== undefined && this.lastStall !== undefined && dt > 0) {
      rate = 1 - Math.min(1, (stall - this.lastStall) / 1000 / dt);
    } else {
      rate = Math.min(1, availableParallelism() / Math.max(loadavg()[0]!, 1e-9));
    }
    this.spentMs += dt * Math.max(rate, 1 / SLOWEST);
    this.lastWall = wall;
    this.lastStall = stall;
    return this.spentMs;
  }

  /** over says whether the budget is spent. */
  over(): boolean {
    return this.spent() >= this.ms;
  }

  /** describe says how long was waited: the budget, and the wall time when that was longer. */
  describe(startedWall: number): string {
    const wall = Math.round(performance.now() - startedWall);
    return wall > this.ms * 1.2 ? `${this.ms} ms (${wall} ms of wall time on this busy machine)` : `${this.ms} ms`;
  }
}

/**
 * deadline calls onOver once the budget of ms is spent, checking every 100 ms,
 * and returns a function that cancels it. For limits that a fixed setTimeout
 * set before: a child that must start, a run that must end.
 */
export function deadline(ms: number, onOver: () => void): () => void {
  const budget = new Budget(ms);
  const timer = setInterval(() => {
    if (!budget.over()) return;
    clearInterval(timer);
    onOver();
  }, 100);
  timer.unref?.();
  return () => clearInterval(timer);
}
