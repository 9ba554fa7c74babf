// How far V8 lets a function server's heap grow between full collections.
//
// A function server is idle between reconciles, and then V8's memory reducer
// shrinks the heap: the old generation's limit ends up a few MB above what is
// live, and V8 keeps growing it slowly from there for as long as the heap stays
// small. Each call of a large request promotes a little of what it had in
// flight, so every second or third call then ends in a full mark-compact
// (measured: bench/README.md, "Why the code is as it is"). Fixing the growing
// factor at 3 keeps room above the live heap after the reducer has run.
import { setFlagsFromString } from "node:v8";

/** HEAP_GROWING_PERCENT is the V8 flag's value: the old generation may grow to 3x what survived the last full collection. */
export const HEAP_GROWING_PERCENT = 200;

const GIVEN = /^--heap[-_]growing[-_]percent(=|$)/;

/**
 * tuneHeap sets V8's --heap-growing-percent for this process and the worker
 * threads it starts later, unless node was started with the flag (then the
 * user's value stands; 0 restores V8's own heuristics). It returns the flag it
 * set, or undefined. The flag is read at each full collection, so setting it
 * after start-up takes effect from the next one.
 *
 * xfn serve and bundled function packages call it; serve() does not, as a
 * library should not change process-wide V8 settings of the program it runs in.
 */
export function tuneHeap(
  execArgv: readonly string[] = process.execArgv,
  set: (flags: string) => void = setFlagsFromString,
): string | undefined {
  if (execArgv.some((a) => GIVEN.test(a))) return undefined;
  const flag = `--heap-growing-percent=${HEAP_GROWING_PERCENT}`;
  set(flag);
  return flag;
}
