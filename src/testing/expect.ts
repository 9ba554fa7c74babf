// Partial expectations over JSON: only what the expectation writes must match.
//
// - An object matches when every key the expectation names matches; other keys
//   of the actual object are ignored.
// - A list matches element by element, each element partially, and must have
//   the same length, so an extra result or resource is caught. When every
//   expected and actual element is an object with a "name" (or else "type")
//   field, elements are paired by it instead of by position, as conditions are.
// - The string "$absent" matches only a missing value.
// - Anything else must be equal, or be what the caller's `same` accepts (a
//   time the function read from its clock: see clockWindow in cases.ts).

import { isObject } from "../json.js";
import { getOwn, setOwn } from "../own.js";

/** ABSENT in an expectation means "this key must not be there". */
export const ABSENT = "$absent";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => isObject(v);
const show = (v: unknown): string => (v === undefined ? "nothing" : JSON.stringify(v));

/** listKey returns the field that pairs the elements of two lists, if there is one. */
function listKey(actual: unknown[], expected: unknown[]): string | undefined {
  if (expected.length === 0) return undefined;
  for (const k of ["name", "type"]) {
    const keyed = (xs: unknown[]) => xs.every((x) => isObj(x) && typeof x[k] === "string");
    if (keyed(expected) && keyed(actual)) return k;
  }
  return undefined;
}

const sub = (path: string, k: string) => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`);

/** Same says whether two leaf values that are not equal match all the same. */
export type Same = (actual: unknown, expected: unknown) => boolean;

/** mismatches lists, by JSON path, where actual fails the partial expectation. */
export function mismatches(actual: unknown, expected: unknown, path = "$", same?: Same): string[] {
  if (expected === ABSENT) return actual === undefined ? [] : [`${path}: expected it absent, got ${show(actual)}`];
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return [`${path}: expected a list, got ${show(actual)}`];
    const out: string[] = [];
    if (actual.length !== expected.length) out.push(`${path}: expected ${expected.length} items, got ${actual.length}: ${show(actual)}`);
    const key = listKey(actual, expected);
    if (key) {
      for (const e of expected as Obj[]) {
        const a = (actual as Obj[]).find((x) => x[key] === e[key]);
        const p = `${path}[${key}=${JSON.stringify(e[key])}]`;
        if (a === undefined) out.push(`${p}: missing`);
        else out.push(...mismatches(a, e, p, same));
      }
      return out;
    }
    for (let i = 0; i < Math.min(actual.length, expected.length); i++)
      out.push(...mismatches(actual[i], expected[i], `${path}[${i}]`, same));
    return out;
  }
  if (isObj(expected)) {
    if (!isObj(actual)) return [`${path}: expected an object, got ${show(actual)}`];
    const out: string[] = [];
    for (const [k, v] of Object.entries(expected)) out.push(...mismatches(getOwn(actual, k), v, sub(path, k), same));
    return out;
  }
  return Object.is(actual, expected) || same?.(actual, expected) ? [] : [`${path}: expected ${show(expected)}, got ${show(actual)}`];
}

/**
 * project trims actual to the shape of expected, so that printing the two side
 * by side shows only what the expectation is about (plus any extra list items).
 */
export function project(actual: unknown, expected: unknown): unknown {
  if (expected === ABSENT) return actual === undefined ? ABSENT : actual;
  if (Array.isArray(expected) && Array.isArray(actual)) {
    const key = listKey(actual, expected);
    if (key) {
      const paired = (expected as Obj[]).map((e) => (actual as Obj[]).find((a) => a[key] === e[key])).filter((a) => a !== undefined);
      const extra = (actual as Obj[]).filter((a) => !(expected as Obj[]).some((e) => e[key] === a[key]));
      return [
        ...paired.map((a) =>
          project(
            a,
            (expected as Obj[]).find((e) => e[key] === a![key]),
          ),
        ),
        ...extra,
      ];
    }
    return actual.map((a, i) => (i < expected.length ? project(a, expected[i]) : a));
  }
  if (isObj(expected) && isObj(actual)) {
    const out: Obj = {};
    for (const k of Object.keys(expected)) {
      const p = project(getOwn(actual, k), expected[k]);
      if (p !== undefined) setOwn<unknown>(out, k, p);
    }
    return out;
  }
  return actual;
}
