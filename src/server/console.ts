// A function's console output, as log lines.
//
// Functions print with console.log as often as they log through ctx.log. In a
// pool worker, Node sends what a worker prints to the server's thread, which
// writes it to the process's standard output with nothing to bound it: one
// call printing 200,000 lines of 1 KB took the server from 160 MB to 824 MB
// resident with its output going to /dev/null, and to 986 MB with a reader of
// the output that was slow to start. The lines were also plain text among the
// JSON log lines, and a request printed whole showed its credentials.
//
// So under xfn serve the function's console writes log lines through the
// server's logger: one JSON line per console call, and per write to
// process.stdout or process.stderr, bounded as every log line is (worker.ts,
// log.ts), secret-bearing fields redacted before they are formatted.
import { Console } from "node:console";
import { inspect } from "node:util";
import type { Logger } from "pino";
import { messageOf } from "../sdk/errors.js";
import { soleCall } from "./call.js";
import { redactForDisplay } from "./log.js";

/** CallFields names the call behind a line of output, when it is known (handler.ts, soleCall). */
export type CallFields = () => Record<string, unknown> | undefined;

/** CONSOLE_LINE_CHARS is the most of one console call's text kept in its log line; the rest is cut, saying how much. */
export const CONSOLE_LINE_CHARS = 256 * 1024;

type Level = "debug" | "info" | "warn" | "error";

/** LEVELS maps console methods to log levels; methods not listed log at info. */
const LEVELS: Readonly<Record<string, Level>> = { debug: "debug", warn: "warn", error: "error", assert: "error" };

/** consoleText is one console call's text as logged: without its final newline, cut at CONSOLE_LINE_CHARS. */
export function consoleText(text: string): string {
  const end = text.endsWith("\n") ? text.length - 1 : text.length;
  if (end <= CONSOLE_LINE_CHARS) return text.slice(0, end);
  return `${text.slice(0, CONSOLE_LINE_CHARS)}... (${end - CONSOLE_LINE_CHARS} more characters cut)`;
}

/** METHODS are the console methods that print; each is routed. */
const METHODS = [
  "log",
  "info",
  "debug",
  "warn",
  "error",
  "trace",
  "dir",
  "dirxml",
  "table",
  "assert",
  "count",
  "countReset",
  "time",
  "timeEnd",
  "timeLog",
  "group",
  "groupCollapsed",
  "groupEnd",
] as const;

/**
 * routeConsole makes each printing method of target (the global console)
 * write one log line through log, with the method's name as the line's
 * source: console.warn and console.error as warnings and errors,
 * console.debug at debug level (shown with --debug), the rest at info. Plain
 * objects and arrays among the arguments are copied with secret-bearing
 * fields redacted before they are formatted, so console.log(req) shows no
 * credentials. Other methods (console.profile and the like) are left alone.
 * A line carries the tag, API version and XR of the call that printed it
 * when only one call is running in the thread (call).
 */
export function routeConsole(log: Logger, target: Console = console, call: CallFields = soleCall): void {
  let method = "log";
  const sink = {
    write(chunk: string | Uint8Array): boolean {
      const level = LEVELS[method] ?? "info";
      if (log.isLevelEnabled(level)) log[level]({ source: `console.${method}`, ...call() }, consoleText(textOf(chunk)));
      return true;
    },
  };
  // Formatting, group indentation, counters and timers are Node's own.
  const base = new Console({ stdout: sink as never, stderr: sink as never, colorMode: false, ignoreErrors: false });
  for (const name of METHODS) {
    const f = base[name] as (...a: unknown[]) => unknown;
    const level = LEVELS[name] ?? "info";
    (target as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      if (!log.isLevelEnabled(level)) return undefined; // console.debug without --debug: not even formatted
      const outer = method;
      method = name;
      try {
        // Copied as deep as util.inspect will show: the keys of the deepest objects shown
        // are redacted in their copies, and what lies below them shows as [Object].
        const limit = shownDepth(name, args);
        return f(...args.map((a) => shown(a, limit)));
      } finally {
        method = outer;
      }
    };
  }
}

/**
 * shown is a console argument as it is printed: redacted to limit levels, or,
 * if walking it throws (a Proxy whose traps throw), a placeholder saying so.
 * console.log must not throw where Node's would not, nor show what was not
 * redacted.
 */
function shown(arg: unknown, limit: number): unknown {
  try {
    return redactForDisplay(arg, 0, new Map(), limit);
  } catch (err) {
    return `[cannot be shown: ${messageOf(err)}]`;
  }
}

/**
 * shownDepth is how deep util.inspect prints console[name](...args):
 * util.inspect's default (2, unless the function changed
 * util.inspect.defaultOptions), at least 4 for a format string with %o,
 * console.dir's own depth option, and all of it for %j (JSON.stringify).
 */
export function shownDepth(name: string, args: readonly unknown[]): number {
  const depthOf = (d: unknown, otherwise: number) => (d === null || d === Infinity ? Infinity : typeof d === "number" ? d : otherwise);
  const usual = depthOf(inspect.defaultOptions.depth, 2);
  if (name === "dir") return depthOf((args[1] as { depth?: unknown } | null | undefined)?.depth, usual);
  const format = typeof args[0] === "string" ? args[0] : "";
  if (format.includes("%j")) return Infinity;
  if (format.includes("%o")) return Math.max(4, usual);
  return usual;
}

/**
 * routeOutput makes everything this thread prints log lines through log: its
 * console (routeConsole), and writes to process.stdout (info) and
 * process.stderr (warnings). A pool worker and xfn serve's own thread both
 * call it.
 */
export function routeOutput(log: Logger): void {
  routeConsole(log);
  routeStream(process.stdout, log, "info", "process.stdout");
  routeStream(process.stderr, log, "warn", "process.stderr");
}

/**
 * routeStream makes writes to stream (process.stdout or process.stderr) log
 * lines through log at level, a line per write, source named.
 */
export function routeStream(stream: NodeJS.WriteStream, log: Logger, level: Level, source: string, call: CallFields = soleCall): void {
  stream.write = ((chunk: string | Uint8Array, encoding?: unknown, cb?: unknown) => {
    const done = typeof encoding === "function" ? encoding : cb;
    const text = typeof chunk === "string" || chunk instanceof Uint8Array ? textOf(chunk) : String(chunk);
    if (text !== "" && log.isLevelEnabled(level)) log[level]({ source, ...call() }, consoleText(text));
    if (typeof done === "function") process.nextTick(done as () => void);
    return true;
  }) as typeof stream.write;
}

const decoder = new TextDecoder();
const textOf = (chunk: string | Uint8Array): string => (typeof chunk === "string" ? chunk : decoder.decode(chunk));
