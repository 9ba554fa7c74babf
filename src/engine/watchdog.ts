// A thread that ends the process when a function run in the process's own
// thread (xfn render, xfn test) stays on the CPU past its deadline: no timer of
// that thread can fire while it runs (a loop, a regular expression that
// backtracks), so --timeout would not hold. The watchdog, on a thread of its
// own, says which function and ends the process (SIGKILL: its only thread
// cannot be asked).
import { Worker } from "node:worker_threads";

/** GRACE_MS is how long past its deadline a call may hold the thread before the watchdog ends the process. */
export const WATCHDOG_GRACE_MS = 1_000;

export interface Watchdog {
  /** arm watches a call until its deadline (epoch ms); what says, in one line, what will have held the process. */
  arm(deadline: number, what: string): void;
  disarm(): void;
  stop(): void;
}

const SOURCE = `
const { parentPort } = require("node:worker_threads");
const { writeSync } = require("node:fs");
let armed;
parentPort.on("message", (m) => { armed = m.until ? m : undefined; });
setInterval(() => {
  if (!armed || Date.now() <= armed.until) return;
  try { writeSync(2, armed.text + "\\n"); } catch {}
  process.kill(process.pid, "SIGKILL");
}, 100);
`;

let shared: Watchdog | undefined;

/** sharedWatchdog is the process's one watchdog, started on first use; calls are watched one at a time. */
export function sharedWatchdog(): Watchdog {
  return (shared ??= startWatchdog());
}

/** startWatchdog starts the watching thread; it keeps no process running on its own. */
export function startWatchdog(graceMs = WATCHDOG_GRACE_MS): Watchdog {
  const worker = new Worker(SOURCE, { eval: true });
  worker.unref();
  return {
    arm: (deadline, what) => worker.postMessage({ until: deadline + graceMs, text: what }),
    disarm: () => worker.postMessage({ until: 0 }),
    stop: () => void worker.terminate(),
  };
}
