// Partial expectations over JSON: only what the expectation writes must match.
//
// - An object matches when every key the expectation names matches; other keys
//   of the actual object are ignored.
// - A list matches element by element (each element partially) and must have
//   the same length, so an unexpected extra result or resource is caught.
// - The string "$absent" matches only a missing value.
// - Anything else must be equal.

/** ABSENT in an expectation means "this key must not be there". */
export const ABSENT = "$absent";

function show(v: unknown): string {
  return v === undefined ? "nothing" : JSON.stringify(v);
}

/** mismatches lists, by JSON path, where actual fails the partial expectation. */
export function mismatches(actual: unknown, expected: unknown, path = "$"): string[] {
  if (expected === ABSENT) return actual === undefined ? [] : [`${path}: expected it absent, got ${show(actual)}`];
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return [`${path}: expected a list, got ${show(actual)}`];
    const out: string[] = [];
    if (actual.length !== expected.length) out.push(`${path}: expected ${expected.length} items, got ${actual.length}: ${show(actual)}`);
    for (let i = 0; i < Math.min(actual.length, expected.length); i++) out.push(...mismatches(actual[i], expected[i], `${path}[${i}]`));
    return out;
  }
  if (typeof expected === "object" && expected !== null) {
    if (typeof actual !== "object" || actual === null || Array.isArray(actual)) return [`${path}: expected an object, got ${show(actual)}`];
    const out: string[] = [];
    for (const [k, v] of Object.entries(expected)) {
      const sub = /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`;
      out.push(...mismatches((actual as Record<string, unknown>)[k], v, sub));
    }
    return out;
  }
  return Object.is(actual, expected) ? [] : [`${path}: expected ${show(expected)}, got ${show(actual)}`];
}
