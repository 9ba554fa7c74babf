// Checks and copies of JSON values that may hold values not read yet: they
// leave those unread (their bytes were checked, or will be when used).
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { EncodeError, MAX_DEPTH } from "./base.js";
import { attach, defer, lazyOf, pending, type Lazy } from "./lazy.js";
import { depth as deep, putValue as put } from "./read.js";

/**
 * checkEncodable throws the EncodeError encoding v would throw (naming the
 * path), without encoding it: a response setter calls it so that a value the
 * wire cannot carry fails where it was handed over, not later. Values not read
 * from the request's bytes yet are known to be good and are not visited. It
 * walks with a stack of its own, as deep as the encoder goes.
 */
export function checkEncodable(v: unknown): void {
  checkJson(v, 0);
}

/**
 * checkJson is checkEncodable by recursion, allocating nothing on the way
 * (setters call it for every composed resource); past the depth where the
 * codec switches to loops, it hands over to checkDeep. The path is built only
 * on the way out of a failure.
 */
function checkJson(x: unknown, depth: number): void {
  switch (typeof x) {
    case "string":
    case "boolean":
      return;
    case "number":
      if (!Number.isFinite(x)) throw new EncodeError(`is ${x}, which JSON cannot hold`);
      return;
    case "object": {
      if (x === null) return;
      if (2 * depth >= deep.from) return checkDeep(x, depth);
      if (Array.isArray(x)) {
        for (let i = 0; i < x.length; i++) {
          const e = x[i] as unknown;
          if (typeof e === "string") continue;
          try {
            checkJson(e, depth + 1);
          } catch (err) {
            if (err instanceof EncodeError) err.through(`[${i}]`, x);
            throw err;
          }
        }
        return;
      }
      const proto = Object.getPrototypeOf(x);
      if (proto !== Object.prototype && proto !== null)
        throw new EncodeError(
          `is a ${(x as { constructor?: { name?: string } }).constructor?.name ?? "non-plain object"}, not a JSON object`,
        );
      const o = x as JsonObject;
      const lazy = lazyOf(o);
      for (const k in o) {
        if (lazy && pending(o, lazy, k) >= 0) continue;
        const e = o[k] as unknown;
        if (typeof e === "string") continue;
        try {
          checkJson(e, depth + 1);
        } catch (err) {
          if (err instanceof EncodeError) err.through(`.${k}`, o);
          throw err;
        }
      }
      return;
    }
    default:
      throw new EncodeError(`is ${x === undefined ? "undefined" : `a ${typeof x}`}, which JSON cannot hold`);
  }
}

/** checkDeep is checkJson with a stack of its own, for values nested past the codec's recursion limit. */
function checkDeep(v: unknown, depth0: number): void {
  interface Frame {
    v: unknown;
    depth: number;
    step: string;
    up: Frame | undefined;
  }
  const fail = (f: Frame, err: EncodeError): never => {
    for (let at: Frame | undefined = f; at.up; at = at.up) err.through(at.step, at.up.v as object);
    throw err;
  };
  const stack: Frame[] = [{ v, depth: depth0, step: "", up: undefined }];
  while (stack.length > 0) {
    const f = stack.pop()!;
    const x = f.v;
    switch (typeof x) {
      case "string":
      case "boolean":
        continue;
      case "number":
        if (!Number.isFinite(x)) fail(f, new EncodeError(`is ${x}, which JSON cannot hold`));
        continue;
      case "object": {
        if (x === null) continue;
        if (f.depth > MAX_DEPTH) fail(f, EncodeError.tooDeep());
        if (Array.isArray(x)) {
          for (let i = x.length - 1; i >= 0; i--) stack.push({ v: x[i], depth: f.depth + 1, step: `[${i}]`, up: f });
          continue;
        }
        const proto = Object.getPrototypeOf(x);
        if (proto !== Object.prototype && proto !== null)
          fail(
            f,
            new EncodeError(
              `is a ${(x as { constructor?: { name?: string } }).constructor?.name ?? "non-plain object"}, not a JSON object`,
            ),
          );
        const o = x as JsonObject;
        const lazy = lazyOf(o);
        for (const k in o) {
          if (lazy && pending(o, lazy, k) >= 0) continue;
          stack.push({ v: o[k], depth: f.depth + 1, step: `.${k}`, up: f });
        }
        continue;
      }
      default:
        fail(f, new EncodeError(`is ${x === undefined ? "undefined" : `a ${typeof x}`}, which JSON cannot hold`));
    }
  }
}

/**
 * cloneJson deep-copies a JSON value. Values not read yet stay unread in the
 * copy (both refer to the same bytes, which nothing changes). It is a JSON
 * copy: an object with another prototype is not copied but shared.
 */
export function cloneJson<T extends JsonValue>(v: T, depth = 0): T {
  if (typeof v !== "object" || v === null) return v;
  if (2 * depth >= deep.from) return deepClone(v, depth) as T;
  if (depth > MAX_DEPTH) throw new Error(`cannot copy a value nested more than ${MAX_DEPTH} deep (a cycle?)`);
  if (Array.isArray(v)) return v.map((e) => cloneJson(e, depth + 1)) as T;
  const o = v as JsonObject;
  // Not JSON (a Date, a Map): returned as it is, for the encoder to refuse by path.
  const proto = Object.getPrototypeOf(o);
  if (proto !== Object.prototype && proto !== null) return v;
  const lazy = lazyOf(o);
  const out: JsonObject = {};
  let copy: Lazy | undefined;
  for (const k in o) {
    const i = lazy ? pending(o, lazy, k) : -1;
    if (i >= 0) {
      const start = lazy!.e[i + 1] as number;
      const end = lazy!.e[i + 2] as number;
      if (copy) defer(out, copy, k, start, end);
      else copy = attach(out, lazy!.src, lazy!.depth, k, start, end);
    } else put(out, k, cloneJson(o[k]!, depth + 1), copy);
  }
  return out as T;
}

/** deepClone copies as cloneJson does, with a stack of its own instead of recursion. */
function deepClone(root: JsonValue, depth: number): JsonValue {
  interface CloneFrame {
    from: JsonObject | JsonValue[];
    out: JsonObject | JsonValue[];
    keys: string[] | null;
    i: number;
    lazy: Lazy | undefined;
    copy: Lazy | undefined;
  }
  const stack: CloneFrame[] = [];
  // start returns v's copy: itself for a scalar or a non-JSON object, else a new
  // container whose content is copied as the loop reaches it.
  const start = (v: JsonValue, depth: number): JsonValue => {
    if (typeof v !== "object" || v === null) return v;
    if (depth > MAX_DEPTH) throw new Error(`cannot copy a value nested more than ${MAX_DEPTH} deep (a cycle?)`);
    if (Array.isArray(v)) {
      const out: JsonValue[] = [];
      stack.push({ from: v, out, keys: null, i: 0, lazy: undefined, copy: undefined });
      return out;
    }
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) return v;
    const out: JsonObject = {};
    const keys: string[] = [];
    for (const k in v) keys.push(k);
    stack.push({ from: v, out, keys, i: 0, lazy: lazyOf(v), copy: undefined });
    return out;
  };
  const result = start(root, depth);
  while (stack.length > 0) {
    const f = stack[stack.length - 1]!;
    const d = depth + stack.length;
    if (f.keys === null) {
      const from = f.from as JsonValue[];
      if (f.i >= from.length) {
        stack.pop();
        continue;
      }
      const i = f.i++;
      (f.out as JsonValue[])[i] = start(from[i]!, d);
      continue;
    }
    if (f.i >= f.keys.length) {
      stack.pop();
      continue;
    }
    const k = f.keys[f.i++]!;
    const from = f.from as JsonObject;
    const out = f.out as JsonObject;
    const i = f.lazy ? pending(from, f.lazy, k) : -1;
    if (i >= 0) {
      const start = f.lazy!.e[i + 1] as number;
      const end = f.lazy!.e[i + 2] as number;
      if (f.copy) defer(out, f.copy, k, start, end);
      else f.copy = attach(out, f.lazy!.src, f.lazy!.depth, k, start, end);
    } else put(out, k, start(from[k]!, d), f.copy);
  }
  return result;
}
