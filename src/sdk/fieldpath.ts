// Field paths address a value inside a Kubernetes object held as plain JSON,
// in the syntax Crossplane users already write in Compositions:
//
//   spec.forProvider.region
//   spec.containers[0].image
//   metadata.annotations[crossplane.io/external-name]
//
// A dot separates object fields. Brackets hold either an array index (only
// digits) or an object key that may itself contain dots or slashes. Reads never
// throw for a missing value; they throw a FieldPathError when the path itself is
// malformed or runs through a value of the wrong type, because silently
// answering "missing" there hides bugs. Writes create missing objects and arrays
// on the way and never write through the prototype chain.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

/** Segment is one step of a parsed field path. */
export type Segment = { readonly field: string } | { readonly index: number };

/** FieldPathError names the path and what is wrong with it. */
export class FieldPathError extends Error {
  override readonly name = "FieldPathError";
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super(`field path ${JSON.stringify(path)}: ${detail}`);
  }
}

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

function parseUncached(path: string): Segment[] {
  if (path === "") throw new FieldPathError(path, "is empty");
  const out: Segment[] = [];
  let i = 0;
  let expectField = true; // at the start or right after a dot
  while (i < path.length) {
    const ch = path[i];
    if (ch === "[") {
      const close = path.indexOf("]", i + 1);
      if (close < 0) throw new FieldPathError(path, `unclosed "[" at offset ${i}`);
      const inner = path.slice(i + 1, close);
      if (inner === "") throw new FieldPathError(path, `empty brackets at offset ${i}`);
      out.push(/^\d+$/.test(inner) ? { index: Number(inner) } : { field: inner });
      i = close + 1;
      expectField = false;
      if (i < path.length && path[i] !== "[" && path[i] !== ".") {
        throw new FieldPathError(path, `expected "." or "[" after "]" at offset ${i}`);
      }
    } else if (ch === ".") {
      if (expectField || i === path.length - 1) throw new FieldPathError(path, `empty field name at offset ${i}`);
      i++;
      expectField = true;
      if (path[i] === "[") throw new FieldPathError(path, `"[" cannot follow "." at offset ${i}`);
    } else if (ch === "]") {
      throw new FieldPathError(path, `unexpected "]" at offset ${i}`);
    } else {
      if (!expectField) throw new FieldPathError(path, `expected "." or "[" at offset ${i}`);
      let j = i;
      while (j < path.length && path[j] !== "." && path[j] !== "[" && path[j] !== "]") j++;
      out.push({ field: path.slice(i, j) });
      i = j;
      expectField = false;
    }
  }
  for (const s of out) {
    if ("field" in s && UNSAFE_KEYS.has(s.field)) throw new FieldPathError(path, `the key ${s.field} is not allowed`);
  }
  return out;
}

/** isObject is true for a JSON object (not null, not an array). */
export const isObject = (v: JsonValue | undefined): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

function describe(v: JsonValue | undefined): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : `a ${typeof v}`;
}

/** getValue returns the value at path, or undefined when any part of it is absent. */
export function getValue(obj: JsonObject | undefined, path: string): JsonValue | undefined {
  let cur: JsonValue | undefined = obj;
  const segments = parsePath(path);
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    if (cur === undefined || cur === null) return undefined;
    if ("field" in s) {
      if (!isObject(cur)) throw new FieldPathError(path, `${render(segments, i)} is ${describe(cur)}, not an object`);
      cur = Object.hasOwn(cur, s.field) ? cur[s.field] : undefined;
    } else {
      if (!Array.isArray(cur)) throw new FieldPathError(path, `${render(segments, i)} is ${describe(cur)}, not an array`);
      cur = cur[s.index];
    }
  }
  return cur;
}

function typed<T>(check: (v: JsonValue) => v is T & JsonValue, want: string) {
  return (obj: JsonObject | undefined, path: string): T | undefined => {
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

function render(segments: readonly Segment[], upTo: number): string {
  if (upTo === 0) return "the root";
  let s = "";
  for (const seg of segments.slice(0, upTo)) {
    if ("index" in seg) s += `[${seg.index}]`;
    else if (/[.[\]]/.test(seg.field)) s += `[${seg.field}]`;
    else s += s === "" ? seg.field : `.${seg.field}`;
  }
  return s;
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
 * arrays (for index segments) that do not exist yet. An index may address an
 * existing element or append one past the end; a larger index is an error, as
 * is a path that runs through a value of the wrong type.
 */
export function setValue(obj: JsonObject, path: string, value: JsonValue): void {
  const segments = parsePath(path);
  let cur: JsonObject | JsonValue[] = obj;
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    checkContainer(path, segments, i, cur);
    if ("index" in s && s.index > (cur as JsonValue[]).length) {
      throw new FieldPathError(path, `index ${s.index} is past the end of ${render(segments, i)} (length ${(cur as JsonValue[]).length})`);
    }
    if (i === segments.length - 1) {
      put(cur, s, value);
      return;
    }
    let next: JsonValue | undefined =
      "field" in s ? (Object.hasOwn(cur, s.field) ? (cur as JsonObject)[s.field] : undefined) : (cur as JsonValue[])[s.index];
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

/** deleteValue removes the value at path. It returns whether anything was removed. */
export function deleteValue(obj: JsonObject, path: string): boolean {
  const segments = parsePath(path);
  const parentPath = segments.slice(0, -1);
  let cur: JsonValue | undefined = obj;
  for (const s of parentPath) {
    if (cur === null || typeof cur !== "object") return false;
    cur =
      "field" in s
        ? Array.isArray(cur) || !Object.hasOwn(cur, s.field)
          ? undefined
          : cur[s.field]
        : Array.isArray(cur)
          ? cur[s.index]
          : undefined;
  }
  const last = segments[segments.length - 1]!;
  if ("field" in last) {
    if (!isObject(cur) || !Object.hasOwn(cur, last.field)) return false;
    delete cur[last.field];
    return true;
  }
  if (!Array.isArray(cur) || last.index >= cur.length) return false;
  cur.splice(last.index, 1);
  return true;
}
