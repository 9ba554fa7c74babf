// A logger that keeps its JSON lines in memory, for asserting on logs.
import type { Logger } from "pino";
import { createLogger } from "../../src/server/log.js";

export interface MemoryLog {
  log: Logger;
  text(): string;
  lines(): Array<Record<string, unknown>>;
}

export function memoryLog(debug = true): MemoryLog {
  let buf = "";
  const log = createLogger({ debug, destination: { write: (s: string) => void (buf += s) } });
  return {
    log,
    text: () => buf,
    lines: () =>
      buf
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
