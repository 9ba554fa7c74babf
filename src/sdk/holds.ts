// holds: the drift check a controller makes before it writes.
import { getOwn } from "../own.js";

/**
 * holds tells whether seen carries every value want sets: objects may have
 * more keys (the API server and a provider default fields), arrays and
 * scalars must be equal. Applying want to seen with server-side apply would
 * then change nothing it sets. It reads every field of seen that want names.
 */
export function holds(seen: unknown, want: unknown): boolean {
  if (seen === want) return true;
  if (typeof seen !== "object" || typeof want !== "object" || seen === null || want === null) return false;
  if (Array.isArray(want)) {
    if (!Array.isArray(seen) || seen.length !== want.length) return false;
    for (let i = 0; i < want.length; i++) if (!holds(seen[i], want[i])) return false;
    return true;
  }
  if (Array.isArray(seen)) return false;
  const s = seen as Record<string, unknown>;
  // Own keys only: a seen object without __proto__ has nothing there, not Object.prototype.
  for (const k in want) if (!holds(getOwn(s, k), (want as Record<string, unknown>)[k])) return false;
  return true;
}
