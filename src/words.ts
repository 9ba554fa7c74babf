// Lists of names as Crossplane words them in conditions and Events. Kept
// apart from the engine, so that a function's steps can use it without
// loading the engine where the function is served.

/**
 * firstNAndSomeMore names the first three of names (sorted) and counts the
 * rest, as crossplane-runtime's StableNAndSomeMore: "a, b, and c",
 * "a, b, c, and 2 more".
 */
export function firstNAndSomeMore(names: string[], n = 3): string {
  const sorted = [...names].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  if (sorted.length > n) return `${sorted.slice(0, n).join(", ")}, and ${sorted.length - n} more`;
  if (sorted.length === n) return `${sorted.slice(0, n - 1).join(", ")}, and ${sorted[n - 1]}`;
  return sorted.join(", ");
}
