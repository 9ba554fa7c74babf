// Regular expressions on RE2 (re2js), in time linear in the string, for CEL's
// matches() wherever xfn evaluates CEL: the embedded API server's rules
// (apiserver/cel.ts) and the steps' expressions (steps/cel.ts). cel-js's own
// matches() is JavaScript's backtracking RegExp, which a pattern such as
// ^([a-z0-9]+-?)*$ turns exponential (a 33-byte string ran for minutes), and
// cel-js lets no function of that name be registered over it: parsed
// expressions are pointed at RE2_MATCHES instead (onRE2).
import { RE2JS } from "re2js";
import { messageOf } from "./sdk/errors.js";

/** RE2_MATCHES is the name matches() is run under (onRE2). */
export const RE2_MATCHES = "xfnRe2Matches";

/** Compiled regular expressions, by pattern: expressions match the same few patterns again and again. */
const REGEXES = new Map<string, RE2JS>();

/** re2 compiles a pattern with RE2, as cel-go does; one it does not take is an evaluation error, as there. */
export function re2(pattern: string): RE2JS {
  let re = REGEXES.get(pattern);
  if (re) return re;
  try {
    re = RE2JS.compile(pattern);
  } catch (err) {
    throw new Error(`invalid regular expression: ${messageOf(err)}`, { cause: err });
  }
  if (REGEXES.size >= 1000) REGEXES.clear();
  REGEXES.set(pattern, re);
  return re;
}

/** re2Matches is CEL's matches(): whether the pattern matches anywhere in s. */
export const re2Matches = (s: string, pattern: string): boolean => re2(pattern).matcher(s).find();

/** The declarations that register re2Matches in a cel-js Environment, as a method and as a function. */
export const RE2_DECLARATIONS = [`string.${RE2_MATCHES}(string): bool`, `${RE2_MATCHES}(string, string): bool`] as const;

/** onRE2 points a parsed expression's matches() calls at RE2_MATCHES. */
export function onRE2(node: unknown): void {
  if (Array.isArray(node)) return node.forEach(onRE2);
  if (typeof node !== "object" || node === null) return;
  const n = node as { op?: string; args?: unknown };
  if ((n.op === "rcall" || n.op === "call") && Array.isArray(n.args) && n.args[0] === "matches") n.args[0] = RE2_MATCHES;
  onRE2(n.args);
}
