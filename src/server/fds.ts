// Watching the process's open file descriptors.
//
// File descriptors belong to the process, not to a worker: a function that
// opens files (or sockets) and never closes them takes them from the whole
// server, and once they are gone it accepts no connection and can read no
// file. Ending the function's worker does not give back what it opened with
// fs.openSync: Node closes a worker's handles, not raw descriptors. Only a
// restart does. Measured: 5,000 descriptors leaked per call reached a limit of
// 20,000 after four calls; the next calls failed with EMFILE, and the memory
// guard could no longer read the resident memory. So the server says so, early.
import { readdirSync, readFileSync } from "node:fs";
import type { Logger } from "pino";
import { messageOf } from "../sdk/errors.js";

/** FD_WARN_SHARE: past this share of the limit, a warning; FD_CLEAR_SHARE: below it, the next rise warns again. */
export const FD_WARN_SHARE = 0.8;
export const FD_CLEAR_SHARE = 0.6;

/** FD_CHECK_MS is how often the count is read (a directory listing of /proc/self/fd). */
export const FD_CHECK_MS = 5000;

/** Descriptors says how many are open (undefined: none left to count with) and the soft limit. */
export interface Descriptors {
  open(): number | undefined;
  limit(): number | undefined;
}

/** linux reads /proc/self: the entries of fd/, and "Max open files" in limits. */
export const linux: Descriptors = {
  open() {
    try {
      return readdirSync("/proc/self/fd").length;
    } catch (err) {
      if ((err as { code?: string }).code === "EMFILE" || (err as { code?: string }).code === "ENFILE") return undefined;
      throw err;
    }
  },
  limit() {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "utf8"));
    return m ? Number(m[1]) : undefined;
  },
};

/** FdState is what the watch remembers between checks. */
export interface FdState {
  warned: boolean;
}

/**
 * checkDescriptors reads the count once and warns, once per rise, when it
 * passes FD_WARN_SHARE of the limit (or when none is left to read it with).
 * It returns what it logged, for tests.
 */
export function checkDescriptors(d: Descriptors, limit: number, state: FdState, log: Logger): string | undefined {
  const open = d.open();
  if (open !== undefined && open < FD_CLEAR_SHARE * limit) state.warned = false;
  if (state.warned || (open !== undefined && open < FD_WARN_SHARE * limit)) return undefined;
  state.warned = true;
  const count = open === undefined ? `all ${limit}` : `${open} of ${limit}`;
  const msg =
    `open file descriptors: ${count}; something keeps them open (a function that opens files or sockets and never closes ` +
    `them?). They are the process's: ending a worker does not give them back, and once they are gone the server ` +
    `accepts no connection; restart it`;
  log.warn({ openFiles: open ?? limit, limit }, msg);
  return msg;
}

/**
 * watchDescriptors checks every FD_CHECK_MS where /proc is there to read
 * (Linux); elsewhere it does nothing. It returns the timer to clear.
 */
export function watchDescriptors(log: Logger, d: Descriptors = linux, everyMs = FD_CHECK_MS): NodeJS.Timeout | undefined {
  let limit: number | undefined;
  try {
    limit = d.limit();
    d.open();
  } catch {
    return undefined; // no /proc: not Linux
  }
  if (limit === undefined || !Number.isFinite(limit) || limit <= 0) return undefined;
  const state: FdState = { warned: false };
  const timer = setInterval(() => {
    try {
      checkDescriptors(d, limit, state, log);
    } catch (err) {
      log.debug({ err: messageOf(err) }, "cannot count open file descriptors");
    }
  }, everyMs);
  timer.unref();
  return timer;
}
