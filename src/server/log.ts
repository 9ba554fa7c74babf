// Structured JSON logs on stdout, one object per line (pino).
//
// Credentials and connection details must never reach a log line, even when a
// function logs a whole request: every logged object is walked and the values
// of secret-bearing keys are replaced before pino serialises it.
import { pino, type DestinationStream, type Logger, type LoggerOptions } from "pino";

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

/** redactSecrets returns value with every secret-bearing key's value replaced. */
export function redactSecrets(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== "object" || depth > MAX_DEPTH) return value;
  if (value instanceof Error) return value;
  if (ArrayBuffer.isView(value)) return value;
  if (Array.isArray(value)) return value.map((v) => redactSecrets(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEYS.has(k) ? REDACTED : redactSecrets(v, depth + 1);
  return out;
}

/** LogOptions choose the level and, for tests, where lines go. */
export interface LogOptions {
  debug?: boolean;
  destination?: DestinationStream;
}

/** createLogger returns the process logger. */
export function createLogger(opts: LogOptions = {}): Logger {
  const options: LoggerOptions = {
    level: opts.debug ? "debug" : "info",
    base: { component: "xfn" },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: {
      level: (label) => ({ level: label }),
      log: (obj) => redactSecrets(obj) as Record<string, unknown>,
    },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}
