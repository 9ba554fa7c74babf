// Which function answered a call: xfn serve sends its module, when it started
// and its process ID as response headers, and `xfn call --debug` prints
// them. A server left running from an earlier session (a background `npx xfn
// serve` that never got its SIGTERM) otherwise answers looking just like the
// one you meant to start.

/** SERVED_BY_HEADERS name the headers, in the order they are printed. */
export const SERVED_BY_HEADERS = { module: "xfn-module", started: "xfn-started", pid: "xfn-pid" } as const;

/** ServedBy is what the headers say. */
export interface ServedBy {
  module: string;
  started: Date;
  pid: number;
}

/**
 * servedByHeaders are the headers for module, serving since started, in this
 * process. A header value is printable ASCII: "%" and anything else are
 * percent-encoded (UTF-8), so any path comes back whole.
 */
export function servedByHeaders(module: string, started: Date, pid = process.pid): Record<string, string> {
  const escaped = Array.from(module, (c) => (/^[\x20-\x24\x26-\x7e]$/.test(c) ? c : encodeURIComponent(c))).join("");
  return {
    [SERVED_BY_HEADERS.module]: escaped,
    [SERVED_BY_HEADERS.started]: started.toISOString(),
    [SERVED_BY_HEADERS.pid]: String(pid),
  };
}

/** readServedBy reads the headers back, or undefined when they are not all there and well formed. */
export function readServedBy(headers: Readonly<Record<string, string>>): ServedBy | undefined {
  const module = headers[SERVED_BY_HEADERS.module];
  const started = new Date(headers[SERVED_BY_HEADERS.started] ?? "");
  const pid = Number(headers[SERVED_BY_HEADERS.pid]);
  if (module === undefined || Number.isNaN(started.getTime()) || !Number.isSafeInteger(pid)) return undefined;
  try {
    return { module: decodeURIComponent(module), started, pid };
  } catch {
    return undefined;
  }
}

/** describeServedBy says who answered, and how long it has been serving. */
export function describeServedBy(s: ServedBy | undefined, now = new Date()): string {
  if (!s) return "the server did not say which function answered: it is not xfn serve, or one older than these headers";
  const since = `${s.started.toISOString()} (${ago(now.getTime() - s.started.getTime())})`;
  return `answered by xfn serve ${s.module} (pid ${s.pid}), serving since ${since}`;
}

function ago(ms: number): string {
  if (ms < 0) return "in the future: the clocks differ";
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min ago`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h ago`;
}
