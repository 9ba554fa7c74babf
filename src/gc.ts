// A full garbage collection on demand, where what a thread holds must be
// known (a worker held to its heap limit) or must come back at once (a
// sidecar that takes calls of megabytes and has a memory limit). V8 installs
// gc() in contexts made after --expose-gc is set: a new one hands it over.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

let collect: (() => void) | undefined;

/** collectGarbage runs a full garbage collection of this thread's heap. */
export function collectGarbage(): void {
  if (!collect) {
    setFlagsFromString("--expose-gc");
    collect = runInNewContext("gc") as () => void;
  }
  collect();
}
