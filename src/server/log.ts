// Structured JSON logs on stdout, one object per line (pino).
//
// Credentials and connection details must never reach a log line, even when a
// function logs a whole request: every logged object is walked and the values
// of secret-bearing keys are replaced before pino serialises it.
//
// Lines are written to stdout asynchronously, so a slow reader of the output
// never stalls the server's thread (gRPC, health checks). What waits for
// stdout is bounded (STDOUT_BUFFER_BYTES): a function logging in a tight loop
// in the server's thread (--workers 1) made the buffer grow until V8 ran out
// of heap and the process aborted. Past the bound lines are dropped, and a
// warning says how many once there is room.
import { destination, pino, type DestinationStream, type Logger, type LoggerOptions } from "pino";
import { setOwn } from "../own.js";
import { isLazyGetter } from "../wire/struct/lazy.js";

/** SECRET_KEYS are the field names whose values are never logged. */
export const SECRET_KEYS: ReadonlySet<string> = new Set([
  "credentials",
  "credentialData",
  "connectionDetails",
  "connection_details",
  "credential_data",
]);

const REDACTED = "[REDACTED]";
const MAX_DEPTH = 32;

/**
 * redactSecrets returns value with every secret-bearing key's value replaced,
 * as the JSON it will be written as: an object with a toJSON method (a Date, a
 * URL) is what that method returns, not a copy of its own keys ({} for both).
 */
export function redactSecrets(value: unknown, depth = 0, seen: Seen = new Map()): unknown {
  if (value === null || typeof value !== "object" || depth > MAX_DEPTH) return value;
  if (value instanceof Error) return value;
  if (ArrayBuffer.isView(value)) return value;
  const again = seen.get(value);
  if (again !== undefined) return again;
  if (Array.isArray(value)) return copyArray(value, seen, (v) => redactSecrets(v, depth + 1, seen));
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") {
    let json: unknown;
    try {
      json = toJSON.call(value);
    } catch {
      return value; // the serializer meets the same throw and says so
    }
    return redactSecrets(json, depth + 1, seen);
  }
  const out: Record<string, unknown> = {};
  seen.set(value, out);
  for (const [k, v] of Object.entries(value)) setOwn(out, k, SECRET_KEYS.has(k) ? REDACTED : redactSecrets(v, depth + 1, seen));
  return out;
}

/**
 * Seen maps each object already copied to its copy: an object met again (a
 * cycle, or one shared by several fields) is its one copy, so cycles stay
 * cycles and the walk stays linear. Without it, an object referring to itself
 * twice was copied 2^32 times: the thread logging it never returned.
 */
type Seen = Map<object, unknown>;

/** copyArray copies list through copy, noting the copy in seen before its elements are walked. */
function copyArray(list: unknown[], seen: Seen, copy: (v: unknown) => unknown): unknown[] {
  const out: unknown[] = [];
  seen.set(list, out);
  for (const v of list) out.push(copy(v));
  return out;
}

/**
 * redactForDisplay is redactSecrets for text made by util.inspect (console
 * output): arrays and plain objects (protobuf messages and decoded resources
 * are plain) are copied with secret-bearing values replaced; any other object
 * (a Date, a Map, a class instance) is kept, so it prints as it would.
 * Symbol-keyed properties are not copied, except a custom inspect hook; an
 * accessor of the function's own is copied as it is, not run. Objects deeper
 * than limit are left as they are: inspect shows them as [Object], and copying
 * them would decode all of a large request that console.log(req) shows two
 * levels of.
 */
export function redactForDisplay(value: unknown, depth = 0, seen: Seen = new Map(), limit = MAX_DEPTH): unknown {
  if (value === null || typeof value !== "object" || depth > limit || depth > MAX_DEPTH) return value;
  const again = seen.get(value);
  if (again !== undefined) return again;
  if (Array.isArray(value)) return copyArray(value, seen, (v) => redactForDisplay(v, depth + 1, seen, limit));
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  const out: Record<string, unknown> = proto === null ? (Object.create(null) as Record<string, unknown>) : {};
  seen.set(value, out);
  for (const k of Object.keys(value)) {
    const d = Object.getOwnPropertyDescriptor(value, k)!;
    if (d.get === undefined && d.set === undefined) {
      setOwn(out, k, SECRET_KEYS.has(k) ? REDACTED : redactForDisplay(d.value, depth + 1, seen, limit));
    } else if (isLazyGetter(d.get)) {
      // A value decoded from the request when read: read it, as the object's inspect hook would.
      setOwn(out, k, SECRET_KEYS.has(k) ? REDACTED : redactForDisplay(d.get!.call(value), depth + 1, seen, limit));
    } else {
      // The function's own accessor prints as [Getter], as it would: never run here, it may throw.
      Object.defineProperty(out, k, d);
    }
  }
  // A custom inspect hook still decides how the object prints (it sees the redacted copy as this).
  const hook = (value as Record<symbol, unknown>)[INSPECT];
  if (typeof hook === "function") Object.defineProperty(out, INSPECT, { value: hook });
  return out;
}

const INSPECT = Symbol.for("nodejs.util.inspect.custom");

/**
 * topLevel renames a top-level key "__proto__" (a resource from the wire may
 * hold one, and decoding keeps it) to "[__proto__]": pino looks each top-level
 * key up in its serializers, finds Object.prototype under that one and calls
 * it, so logging such an object threw, failing the call that logged it.
 */
function topLevel(o: Record<string, unknown>): Record<string, unknown> {
  if (!Object.hasOwn(o, "__proto__")) return o;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) setOwn(out, k === "__proto__" ? "[__proto__]" : k, v);
  return out;
}

/** LogOptions choose the level and, for tests, where lines go. */
export interface LogOptions {
  debug?: boolean;
  destination?: DestinationStream;
}

/** STDOUT_BUFFER_BYTES bounds the log output waiting to be written to stdout. */
export const STDOUT_BUFFER_BYTES = 8 * 1024 * 1024;

/** How soon after the first dropped line a warning says how many were dropped. */
export const DROPPED_REPORT_MS = 250;

/** droppedMessage is the warning for n dropped log lines. */
export function droppedMessage(n: number, why: string): string {
  return `dropped ${n} log line${n === 1 ? "" : "s"}: ${why}`;
}

/**
 * countDrops counts the lines out drops (its "drop" event) and logs how many
 * through log, DROPPED_REPORT_MS after the first. A warning that is itself
 * dropped is tried again later, with the count kept.
 */
export function countDrops(out: { on(event: "drop", f: (line?: unknown) => void): unknown }, log: Logger, why: string): void {
  let dropped = 0;
  let reporting = false;
  let lost = false;
  const report = () => {
    const n = dropped;
    dropped = 0;
    reporting = true;
    lost = false;
    try {
      log.warn({ droppedLines: n }, droppedMessage(n, why));
    } finally {
      reporting = false;
    }
    if (lost) {
      dropped += n;
      setTimeout(report, DROPPED_REPORT_MS).unref();
    }
  };
  out.on("drop", (line?: unknown) => {
    if (reporting) {
      lost = true;
      return;
    }
    const first = dropped === 0;
    dropped += linesIn(line);
    if (first) setTimeout(report, DROPPED_REPORT_MS).unref();
  });
}

/**
 * linesIn is how many log lines a dropped line stands for: a worker's own
 * report of lines it dropped (relayed by the pool) stands for those, so a
 * report lost here is counted, not the lines it told of.
 */
function linesIn(line: unknown): number {
  if (typeof line !== "string" || !line.includes('"droppedLines":')) return 1;
  try {
    const entry = JSON.parse(line) as { droppedLines?: unknown; msg?: unknown };
    const n = entry.droppedLines;
    const report = typeof entry.msg === "string" && entry.msg.startsWith("dropped ");
    if (report && typeof n === "number" && Number.isSafeInteger(n) && n > 0) return n;
  } catch {
    // not JSON: one line
  }
  return 1;
}

/** How often the calls refused after the first are summed up in one warning. */
export const REFUSED_REPORT_MS = 5000;

/** Refusals logs calls refused for want of room (refusals). */
export interface Refusals {
  /** refused logs a refused call, or counts it if a warning went out in this period. */
  refused(fields: Record<string, unknown>, details: string): void;
  /** flush logs the count not yet logged (the server is stopping). */
  flush(): void;
}

/** What refusals counts: the noun for one (its plural adds an s) and the fields of the summing warning. */
export interface Refused {
  noun: string;
  fields: Record<string, unknown>;
}

const CALLS: Refused = { noun: "call", fields: { code: "RESOURCE_EXHAUSTED" } };

/**
 * refusals logs the first refusal at once, then counts the ones after it and
 * logs their number every REFUSED_REPORT_MS while they keep coming, with the
 * latest one's details. An overloaded server refusing thousands of calls a
 * second (or a peer opening connections without a certificate as fast as it
 * can) would otherwise write a line for each: work it has no room for, and a
 * log in which nothing else can be found. The metrics count every call.
 */
export function refusals(log: Logger, ms = REFUSED_REPORT_MS, what: Refused = CALLS): Refusals {
  let timer: NodeJS.Timeout | undefined;
  let count = 0;
  let latest = "";
  const report = () => {
    if (count > 0)
      log.warn(
        { ...what.fields, refused: count },
        `refused ${count} more ${what.noun}${count === 1 ? "" : "s"} in the last ${ms / 1000} s; the latest: ${latest}`,
      );
    count = 0;
  };
  const tick = () => {
    const any = count > 0;
    report();
    // A quiet period ends the count: the next refusal is logged at once.
    timer = any ? setTimeout(tick, ms).unref() : undefined;
  };
  return {
    refused(fields, details) {
      if (timer !== undefined) {
        count++;
        latest = details;
        return;
      }
      log.warn(fields, details);
      timer = setTimeout(tick, ms).unref();
    },
    flush() {
      clearTimeout(timer);
      timer = undefined;
      report();
    },
  };
}

/** createLogger returns the process logger. */
export function createLogger(opts: LogOptions = {}): Logger {
  const options: LoggerOptions = {
    level: opts.debug ? "debug" : "info",
    base: { component: "xfn" },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: {
      level: (label) => ({ level: label }),
      log: (obj) => topLevel(redactSecrets(obj) as Record<string, unknown>),
    },
  };
  if (opts.destination) return pino(options, opts.destination);
  const out = destination({ dest: 1, sync: false, maxLength: STDOUT_BUFFER_BYTES });
  const log = pino(options, out);
  countDrops(out, log, "they came faster than standard output took them");
  return log;
}
