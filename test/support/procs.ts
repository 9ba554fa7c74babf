// Which processes still run, read from /proc (these tests run on Linux): a
// process that ended but was not yet reaped by whoever adopted it does not.
import { readdirSync, readFileSync } from "node:fs";

/** statOf is a process's state and process group, or undefined when it is gone. */
function statOf(pid: string | number): { state: string; pgrp: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so read after the last ")".
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { state: state!, pgrp: Number(pgrp) };
  } catch {
    return undefined;
  }
}

/** alive tells whether pid runs. */
export function alive(pid: number): boolean {
  const s = statOf(pid);
  return s !== undefined && s.state !== "Z";
}

/** inGroup lists the command lines of the live processes in process group pgid. */
export function inGroup(pgid: number): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    const s = statOf(pid);
    if (!s || s.pgrp !== pgid || s.state === "Z") continue;
    try {
      found.push(readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim());
    } catch {
      // gone meanwhile
    }
  }
  return found;
}
