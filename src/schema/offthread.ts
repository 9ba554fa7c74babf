// Long regular-expression matches off the serving thread. RE2 matches in time
// linear in the string, but the factor is the pattern's program: a pattern
// such as [ab]*a[ab]{500}$ (506 instructions) over a 1.4 MB value is 700
// million steps, 9-28 s here, and the embedded API server has one thread:
// every other client (watches, /readyz, SIGTERM) waited for it. kube-apiserver
// runs the same match, as long, on the request's own goroutine.
//
// A write runs under offThread: its validation (a schema's pattern, a rule's
// matches()) asks find(), which answers a long match (string length times
// program size past OFF_THREAD_UNITS, about 50 ms here) provisionally and
// records it; the store checks before it commits (checkDeferred) and, with any
// recorded, throws MatchesDeferred. offThread then runs the recorded matches
// on a worker thread, awaiting them, and runs the write again with the
// answers: the same validation, now with no provisional answer, on whatever
// the store holds by then (as a request arriving later would).
import { fileURLToPath, pathToFileURL } from "node:url";
import { dirname, extname, resolve } from "node:path";
import { Worker } from "node:worker_threads";
import type { RE2JS } from "re2js";

/** Matches of more string length × program size than this (about 50 ms of RE2 here) run off the serving thread. */
export const OFF_THREAD_UNITS = 5_000_000;

interface Collector {
  answers: Map<string, boolean>;
  pending: Map<string, { pattern: string; s: string }>;
}

/** The running write's long matches (undefined: not in a write, e.g. a function's own CEL; they run here). */
let collector: Collector | undefined;

/** MatchesDeferred stops a write whose validation met long matches answered provisionally. */
export class MatchesDeferred extends Error {
  constructor() {
    super("long regular-expression matches to run off the serving thread");
  }
}

/** find is whether re (compiled from pattern) is found in s; a long one, in a write, is answered provisionally and recorded. */
export function find(pattern: string, re: RE2JS, s: string): boolean {
  if (!collector || s.length * re.programSize() < OFF_THREAD_UNITS) return re.matcher(s).find();
  const key = `${pattern.length}:${pattern}${s}`;
  const known = collector.answers.get(key);
  if (known !== undefined) return known;
  collector.pending.set(key, { pattern, s });
  return true;
}

/** checkDeferred throws MatchesDeferred if the running write answered a match provisionally: it must not commit. */
export function checkDeferred(): void {
  if (collector && collector.pending.size > 0) throw new MatchesDeferred();
}

/** offThread runs write, running its long matches on a worker thread and write again with their answers, until none is left. */
export async function offThread<T>(write: () => T): Promise<T> {
  const c: Collector = { answers: new Map(), pending: new Map() };
  for (;;) {
    collector = c;
    try {
      return write();
    } catch (err) {
      if (!(err instanceof MatchesDeferred)) throw err;
    } finally {
      collector = undefined;
    }
    const jobs = [...c.pending];
    c.pending.clear();
    for (const [key, { pattern, s }] of jobs) c.answers.set(key, await matcher().find(pattern, s));
  }
}

/** The matcher thread, started at the first long match, and ended with the process (closeMatcher, or unref'd). */
let thread: MatcherThread | undefined;
const matcher = () => (thread ??= new MatcherThread());

/** closeMatcher ends the matcher thread (a match under way is abandoned: its write is failed). */
export async function closeMatcher(): Promise<void> {
  const t = thread;
  thread = undefined;
  await t?.close();
}

class MatcherThread {
  private readonly worker: Worker;
  private readonly waiting = new Map<number, { resolve: (found: boolean) => void; reject: (e: Error) => void }>();
  private next = 0;

  constructor() {
    this.worker = new Worker(script());
    this.worker.unref();
    this.worker.on("message", (m: { id: number; found: boolean; error?: string }) => {
      const w = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      if (m.error !== undefined) w?.reject(new Error(m.error));
      else w?.resolve(m.found);
    });
    const fail = (why: string) => {
      if (thread === this) thread = undefined;
      for (const w of this.waiting.values()) w.reject(new Error(`the regular-expression thread ended: ${why}`));
      this.waiting.clear();
    };
    this.worker.on("error", (err) => fail(err.message));
    this.worker.on("exit", (code) => fail(`exit code ${code}`));
  }

  find(pattern: string, s: string): Promise<boolean> {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.worker.postMessage({ id, pattern, s });
    });
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}

/** The matcher's script: the compiled one (from src/, this repository's tests, the one npm run build wrote). */
function script(): URL {
  const here = fileURLToPath(import.meta.url);
  return extname(here) === ".ts"
    ? pathToFileURL(resolve(dirname(here), "../../lib/schema/match-worker.js"))
    : new URL("./match-worker.js", import.meta.url);
}
