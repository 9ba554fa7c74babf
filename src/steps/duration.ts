// Durations in Go's notation ("300ms", "5m", "1h30m"), as Kubernetes and
// Crossplane users write them.

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** parseDuration returns milliseconds; it throws naming the text on anything else. */
export function parseDuration(text: string): number {
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    total += Number(m[1]) * UNITS[m[2]!]!;
    matched = re.lastIndex;
  }
  if (text === "" || matched !== text.length) {
    throw new Error(`${JSON.stringify(text)} is not a duration (examples: 30s, 5m, 1h30m)`);
  }
  return total;
}

/** formatDuration renders milliseconds as e.g. "7m12s". */
export function formatDuration(ms: number): string {
  let s = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  return `${h ? `${h}h` : ""}${h || m ? `${m}m` : ""}${s}s`;
}
