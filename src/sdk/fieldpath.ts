// Field paths address a value inside a Kubernetes object held as plain JSON,
// with crossplane-runtime's syntax and meaning (pkg/fieldpath), which
// Compositions and functions written in Go use:
//
//   spec.forProvider.region
//   spec.containers[0].image
//   metadata.annotations[crossplane.io/external-name]
//   metadata.labels['app.hash']          quotes around a key are dropped
//   spec.containers[*].image             a wildcard: every element or key
//
// A dot separates object fields. Brackets hold an array index (an unsigned
// 32-bit integer) or else an object key, in which dots mean nothing; a field
// may follow "]" directly. Single and double quotes at either end of a key are
// removed. Reads never throw for a missing value; they throw a FieldPathError
// when the path itself is malformed or runs through a value of the wrong type,
// because silently answering "missing" there hides bugs. Writes create missing
// objects and arrays on the way, grow arrays up to index 1024 as Crossplane
// does, and never write through the prototype chain.
//
// Readers and writers take any object: a JsonObject, or one typed by an
// interface such as those `xfn generate types` writes (TypeScript cannot see
// an interface as a JsonObject, having no index signature), with no cast.
// Every value on the way is checked as it is walked either way.
//
// Where xfn differs: an empty path is an error (crossplane-runtime parses it
// to nothing and answers nil); a null on the way reads as missing and is
// replaced on a write (crossplane-runtime errors); `__proto__` is refused.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { getOwn, setOwn } from "../own.js";
import { isObject } from "../json.js";
import { XfnError } from "./errors.js";

/** Segment is one step of a parsed field path. A field "*" is a wildcard. */
export type Segment = { readonly field: string } | { readonly index: number };

/** FieldPathError names the path and what is wrong with it. */
export class FieldPathError extends XfnError {
  override readonly name: string = "FieldPathError";
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super(`field path ${JSON.stringify(path)}: ${detail}`);
  }
}

/** WILDCARD is the field that stands for every element of an array or key of an object. */
export const WILDCARD = "*";

/** MAX_SET_INDEX is the largest array index a write may use (crossplane-runtime's DefaultMaxFieldPathIndex). */
export const MAX_SET_INDEX = 1024;

const MAX_UINT32 = 4294967295;

// Keys that would reach Object.prototype through a plain property access.
const UNSAFE_KEYS = new Set(["__proto__"]);

const parsed = new Map<string, readonly Segment[]>();
const PARSE_CACHE_LIMIT = 1024;

/** parsePath splits a field path into segments. Results are cached. */
export function parsePath(path: string): readonly Segment[] {
  const hit = parsed.get(path);
  if (hit) return hit;
  const segments = parseUncached(path);
  if (parsed.size >= PARSE_CACHE_LIMIT) parsed.clear();
  parsed.set(path, segments);
  return segments;
}

/** A key with the quotes at either end removed, as crossplane-runtime's Field does. */
function field(text: string): Segment {
  return { field: text.replace(/^['"]+|['"]+$/g, "") };
}

/** Bracket content: an index when it reads as an unsigned 32-bit integer, else a key. */
function fieldOrIndex(text: string): Segment {
  if (/^\d+$/.test(text)) {
    const n = Number(text);
    if (n <= MAX_UINT32) return { index: n };
  }
  return field(text);
}

function parseUncached(path: string): Segment[] {
  if (path === "") throw new FieldPathError(path, "is empty");
  const out: Segment[] = [];
  const fail = (at: number, what: string) => new FieldPathError(path, `${what} at position ${at}`);
  let i = 0;
  // Each turn reads a field name (perhaps empty) up to a ".", a "[" or the end.
  for (;;) {
    let j = i;
    while (j < path.length && path[j] !== "." && path[j] !== "[") {
      if (path[j] === "]") throw fail(j, 'unexpected "]"');
      j++;
    }
    if (j > i) out.push(field(path.slice(i, j)));
    if (j === path.length) break;
    if (path[j] === ".") {
      if (j === 0 || j === path.length - 1) throw fail(j, 'unexpected "."');
      if (path[j + 1] === ".") throw fail(j + 1, 'unexpected "."');
      if (path[j + 1] === "[") throw fail(j + 1, 'unexpected "["');
      i = j + 1;
      continue;
    }
    // "[": a key or an index up to the next "]".
    const close = path.indexOf("]", j + 1);
    if (close < 0) throw fail(j, 'unterminated "["');
    if (close === j + 1) throw fail(j + 1, 'unexpected "]"');
    const nested = path.indexOf("[", j + 1);
    if (nested >= 0 && nested < close) throw fail(nested, 'unexpected "["');
    out.push(fieldOrIndex(path.slice(j + 1, close)));
    i = close + 1;
  }
  for (const s of out) {
    if ("field" in s && UNSAFE_KEYS.has(s.field)) throw new FieldPathError(path, `the key ${s.field} is not allowed`);
  }
  return out;
}

/** formatPath writes segments back as a path parsePath reads (keys with dots or "*" in brackets). */
export function formatPath(segments: readonly Segment[]): string {
  let s = "";
  for (const seg of segments) {
    if ("index" in seg) s += `[${seg.index}]`;
    else if (seg.field === WILDCARD || /[.[\]]/.test(seg.field) || seg.field === "") s += `[${seg.field}]`;
    else s += s === "" ? seg.field : `.${seg.field}`;
  }
  return s;
}

const hasWildcard = (segments: readonly Segment[]) => segments.some((s) => "field" in s && s.field === WILDCARD);

/** isObject is true for a JSON object (not null, not an array). */
export { isObject } from "../json.js";

function describe(v: JsonValue | undefined): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : `a ${typeof v}`;
}

/**
 * getValue returns the value at path, or undefined when any part of it is
 * absent. A path with a wildcard over a value that is there is refused: use
 * getValues (one whose wildcard meets a missing or null value is not found).
 */
export function getValue(obj: object | undefined, path: string): JsonValue | undefined {
  const segments = parsePath(path);
  const at = segments.findIndex((s) => "field" in s && s.field === WILDCARD);
  if (at >= 0) {
    // As in crossplane-runtime, a path through a missing or null value is not found, wildcard or not.
    const base = getAt(obj as JsonObject | undefined, segments.slice(0, at), path);
    if (base === undefined || base === null) return undefined;
    throw new FieldPathError(path, "has a wildcard: read it with getValues, or expandWildcards first");
  }
  return getAt(obj as JsonObject | undefined, segments, path);
}

function getAt(obj: JsonValue | undefined, segments: readonly Segment[], path: string): JsonValue | undefined {
  let cur: JsonValue | undefined = obj;
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    if (cur === undefined || cur === null) return undefined;
    if ("field" in s) {
      if (!isObject(cur)) throw new FieldPathError(path, `${render(segments, i)} is ${describe(cur)}, not an object`);
      cur = getOwn(cur, s.field);
    } else {
      if (!Array.isArray(cur)) throw new FieldPathError(path, `${render(segments, i)} is ${describe(cur)}, not an array`);
      cur = cur[s.index];
    }
  }
  return cur;
}

/**
 * expandWildcards returns the paths a path with wildcards stands for in obj, as
 * crossplane-runtime's ExpandWildcards does: each "*" becomes every index of
 * the array or every key of the object found there (in order), and only paths
 * that exist are returned. A path without wildcards comes back alone if it
 * exists. A wildcard over a value that is neither array nor object is an
 * error; one over a missing or null value matches nothing.
 */
export function expandWildcards(obj: object | undefined, path: string): string[] {
  return expand(obj as JsonObject | undefined, parsePath(path), path).map(formatPath);
}

/** expand does expandWildcards' work; with existingOnly false, what follows the last wildcard need not exist (for writes). */
function expand(obj: JsonValue | undefined, segments: readonly Segment[], path: string, existingOnly = true): Segment[][] {
  const out: Segment[][] = [];
  // Explicit stack, so that a wide object does not recurse deeply; reversed to keep document order.
  const todo: Segment[][] = [[...segments]];
  while (todo.length > 0) {
    const segs = todo.pop()!;
    const at = segs.findIndex((s) => "field" in s && s.field === WILDCARD);
    if (at < 0) {
      if (!existingOnly || getAt(obj, segs, path) !== undefined) out.push(segs);
      continue;
    }
    const base = getAt(obj, segs.slice(0, at), path);
    if (base === undefined || base === null) continue;
    let choices: Segment[];
    if (Array.isArray(base)) choices = base.map((_, index) => ({ index }));
    else if (isObject(base)) choices = Object.keys(base).map((k) => ({ field: k }));
    else throw new FieldPathError(path, `the wildcard after ${render(segs, at)} meets ${describe(base)}, not an array or object`);
    for (let c = choices.length - 1; c >= 0; c--) todo.push([...segs.slice(0, at), choices[c]!, ...segs.slice(at + 1)]);
  }
  return out;
}

/** getValues returns the value at every path a path with wildcards expands to (see expandWildcards). */
export function getValues(obj: object | undefined, path: string): JsonValue[] {
  const segments = parsePath(path);
  const o = obj as JsonObject | undefined;
  return expand(o, segments, path).map((s) => getAt(o, s, path)!);
}

function typed<T>(check: (v: JsonValue) => v is T & JsonValue, want: string) {
  return (obj: object | undefined, path: string): T | undefined => {
    const v = getValue(obj, path);
    if (v === undefined || v === null) return undefined;
    if (!check(v)) throw new FieldPathError(path, `is ${describe(v)}, not ${want}`);
    return v;
  };
}

/** getString returns the string at path; undefined if absent or null. */
export const getString = typed((v): v is string => typeof v === "string", "a string");
/** getNumber returns the number at path; undefined if absent or null. */
export const getNumber = typed((v): v is number => typeof v === "number", "a number");
/** getBoolean returns the boolean at path; undefined if absent or null. */
export const getBoolean = typed((v): v is boolean => typeof v === "boolean", "a boolean");
/** getObject returns the object at path; undefined if absent or null. */
export const getObject = typed(isObject, "an object");
/** getArray returns the array at path; undefined if absent or null. */
export const getArray = typed((v): v is JsonValue[] => Array.isArray(v), "an array");

/**
 * getStringArray returns the array of strings at path; undefined if absent or
 * null. Like crossplane-runtime's GetStringArray, an array holding anything
 * but strings is an error.
 */
export function getStringArray(obj: object | undefined, path: string): string[] | undefined {
  const a = getArray(obj, path);
  if (a === undefined) return undefined;
  if (!a.every((x) => typeof x === "string")) throw new FieldPathError(path, "is not an array of strings");
  return [...a];
}

/**
 * getStringObject returns the object of strings at path (labels,
 * annotations); undefined if absent or null. Like crossplane-runtime's
 * GetStringObject, an object with a value that is not a string is an error.
 */
export function getStringObject(obj: object | undefined, path: string): Record<string, string> | undefined {
  const o = getObject(obj, path);
  if (o === undefined) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(o)) {
    if (typeof v !== "string") throw new FieldPathError(path, "is not an object with string field values");
    setOwn(out, k, v);
  }
  return out;
}

function render(segments: readonly Segment[], upTo: number): string {
  return upTo === 0 ? "the root" : formatPath(segments.slice(0, upTo));
}

function put(container: JsonObject | JsonValue[], s: Segment, value: JsonValue): void {
  if ("field" in s) {
    // defineProperty never invokes a setter on the prototype chain.
    Object.defineProperty(container, s.field, { value, writable: true, enumerable: true, configurable: true });
  } else {
    (container as JsonValue[])[s.index] = value;
  }
}

/**
 * setValue writes value at path, creating objects (for field segments) and
 * arrays (for index segments) that do not exist yet. An index past the end of
 * an array grows it, the gap filled with null, as crossplane-runtime does, up
 * to index 1024 (MAX_SET_INDEX). A path with wildcards writes below every
 * element or key its wildcards match (what follows the last wildcard is
 * created, where crossplane-runtime's expansion keeps only paths that exist),
 * and is an error if they match none, as Crossplane's patches refuse a
 * toFieldPath that expands to nothing. A path through a value of the wrong
 * type is an error.
 */
export function setValue(target: object, path: string, value: JsonValue): void {
  const obj = target as JsonObject;
  const segments = parsePath(path);
  for (const s of segments) {
    if ("index" in s && s.index > MAX_SET_INDEX)
      throw new FieldPathError(path, `index ${s.index} is greater than the largest allowed, ${MAX_SET_INDEX}`);
  }
  if (hasWildcard(segments)) {
    const all = expand(obj, segments, path, false);
    if (all.length === 0) throw new FieldPathError(path, "the wildcards match nothing to set");
    for (const s of all) setAt(obj, s, path, value);
    return;
  }
  setAt(obj, segments, path, value);
}

function setAt(obj: JsonObject, segments: readonly Segment[], path: string, value: JsonValue): void {
  let cur: JsonObject | JsonValue[] = obj;
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    checkContainer(path, segments, i, cur);
    if ("index" in s) {
      const a = cur as JsonValue[];
      while (a.length < s.index) a.push(null);
    }
    if (i === segments.length - 1) {
      put(cur, s, value);
      return;
    }
    let next: JsonValue | undefined = "field" in s ? getOwn(cur as JsonObject, s.field) : (cur as JsonValue[])[s.index];
    if (next === undefined || next === null) {
      next = "field" in segments[i + 1]! ? {} : [];
      put(cur, s, next);
    }
    if (typeof next !== "object") {
      throw new FieldPathError(path, `${render(segments, i + 1)} is ${describe(next)}, cannot descend into it`);
    }
    cur = next;
  }
}

function checkContainer(path: string, segments: readonly Segment[], i: number, cur: JsonObject | JsonValue[]): void {
  const s = segments[i]!;
  if ("field" in s && Array.isArray(cur)) {
    throw new FieldPathError(path, `${render(segments, i)} is an array, not an object`);
  }
  if ("index" in s && !Array.isArray(cur)) {
    throw new FieldPathError(path, `${render(segments, i)} is an object, not an array`);
  }
}

/**
 * deleteValue removes the value at path: a key from its object, or an element
 * from its array (the later ones move down). It returns whether anything was
 * removed; a missing value (or a null on the way) removes nothing. A path
 * through a value of the wrong type is an error, as in crossplane-runtime's
 * DeleteField. A path with wildcards removes every value it expands to.
 */
export function deleteValue(target: object, path: string): boolean {
  const obj = target as JsonObject;
  const segments = parsePath(path);
  if (hasWildcard(segments)) {
    // Last first, so that removing an element does not move the ones still to remove.
    const all = expand(obj, segments, path).reverse();
    let removed = false;
    for (const s of all) removed = deleteAt(obj, s, path) || removed;
    return removed;
  }
  return deleteAt(obj, segments, path);
}

function deleteAt(obj: JsonObject, segments: readonly Segment[], path: string): boolean {
  let cur: JsonValue | undefined = obj;
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    if (cur === undefined || cur === null) return false;
    if ("field" in s) {
      if (!isObject(cur)) throw new FieldPathError(path, `${render(segments, i)} is ${describe(cur)}, not an object`);
      if (i === segments.length - 1) {
        if (!Object.hasOwn(cur, s.field)) return false;
        delete cur[s.field];
        return true;
      }
      cur = getOwn(cur, s.field);
    } else {
      if (!Array.isArray(cur)) throw new FieldPathError(path, `${render(segments, i)} is ${describe(cur)}, not an array`);
      if (i === segments.length - 1) {
        if (s.index >= cur.length) return false;
        cur.splice(s.index, 1);
        return true;
      }
      cur = cur[s.index];
    }
  }
  return false;
}
