// What an object holding values not decoded yet keeps (its Lazy, under a
// symbol of its own), the getters and setters its keys get, and the questions
// asked of it: is this key's value still the request's bytes, never read,
// assigned nor redefined? The reader (read.ts) makes them and decodes a value
// when it is first read; values.ts and emit.ts copy their bytes through.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { setOwn } from "../../own.js";
import { MAX_DEPTH, type Src } from "./base.js";

export const LAZY = Symbol("xfn.lazy");

/**
 * Lazy is what an object with values not decoded yet keeps: where each
 * value's bytes are, and the value once read or assigned. Such a key stays a
 * getter and setter for good: turning it into a data property on first read
 * costs V8 far more than the getter does.
 */
export class Lazy {
  // Private, so that walking an object's own keys (a deep-freeze helper using
  // Reflect.ownKeys, say) never reaches the request's bytes: a typed array
  // cannot be frozen.
  readonly #src: Src;
  /**
   * Per key, four entries: the key, the start and end of its bytes, and the
   * value (UNREAD until read or assigned). Made with the first key's entries,
   * exactly four long: most objects have one or two lazy values, and an array
   * grown from empty by push reserves 17 slots.
   */
  readonly e: unknown[];
  constructor(
    src: Src,
    readonly depth: number,
    key: string,
    start: number,
    end: number,
  ) {
    this.#src = src;
    this.e = [key, start, end, UNREAD];
  }
  get src(): Src {
    return this.#src;
  }
}

/** find returns where key's four entries start, or -1. */
export function find(lazy: Lazy, key: string): number {
  const e = lazy.e;
  for (let i = 0; i < e.length; i += 4) if (e[i] === key) return i;
  return -1;
}

export const UNREAD = Symbol("unread");

/** The getters of lazy values, so encoding can tell a key still ours from one redefined. */
export const GETTERS = new WeakSet<object>();

/** pending returns the index of o's value for key if it was never read, assigned nor redefined, else -1. */
export function pending(o: JsonObject, lazy: Lazy, key: string): number {
  const i = find(lazy, key);
  if (i < 0 || lazy.e[i + 3] !== UNREAD) return -1;
  // The getter without a descriptor object (getOwnPropertyDescriptor makes one
  // per call): undefined for a data property; o's own key is found first.
  const get = lookupGetter.call(o, key);
  return get !== undefined && GETTERS.has(get) ? i : -1;
}

/** isLazyGetter tells whether get is the getter of a value decoded only when read (reading it runs no code of a function's). */
export function isLazyGetter(get: unknown): boolean {
  return typeof get === "function" && GETTERS.has(get);
}

const lookupGetter = (Object.prototype as unknown as { __lookupGetter__(key: string): object | undefined }).__lookupGetter__;

export const lazyOf = (o: object): Lazy | undefined => (o as { [LAZY]?: Lazy })[LAZY];

/**
 * readAll reads every value under v, decoding whatever is still lazy, so that
 * malformed bytes in it throw now. Messages holding JSON (a Resource, a State)
 * are walked too; byte arrays are not.
 */
export function readAll(v: unknown): void {
  // Depth first, in key order, as recursion would: with a stack of its own, for any depth.
  const stack: { o: Record<string, unknown>; keys: string[]; i: number }[] = [];
  let x = v;
  for (;;) {
    if (typeof x === "object" && x !== null && !ArrayBuffer.isView(x) && stack.length <= MAX_DEPTH) {
      const o = x as Record<string, unknown>;
      const keys: string[] = [];
      for (const k in o) keys.push(k);
      stack.push({ o, keys, i: 0 });
    }
    let top = stack[stack.length - 1];
    while (top && top.i >= top.keys.length) {
      stack.pop();
      top = stack[stack.length - 1];
    }
    if (!top) return;
    x = top.o[top.keys[top.i++]!];
  }
}

/** isUnread reports whether o[key] is still bytes of the request, never read (for tests). */
export function isUnread(o: JsonObject, key: string): boolean {
  const lazy = lazyOf(o);
  return lazy !== undefined && pending(o, lazy, key) >= 0;
}

// --- keys whose values are still bytes ------------------------------------------------

/**
 * How the reader (read.ts) decodes a value's bytes, and checks bytes no one
 * will decode: it gives them here when it loads (it imports this module, so
 * this one cannot import it).
 */
interface Reader {
  decode(s: Src, start: number, end: number, depth: number): JsonValue;
  check(s: Src, start: number, end: number, depth: number): void;
}
let decodeBytes: Reader["decode"] = () => null;
let checkBytes: Reader["check"] = () => {};

/** useReader is called once, by read.ts. */
export function useReader(r: Reader): void {
  decodeBytes = r.decode;
  checkBytes = r.check;
}

const INSPECT = Symbol.for("nodejs.util.inspect.custom");
const DESCRIPTORS = new Map<string, PropertyDescriptor>();

function descriptor(key: string): PropertyDescriptor {
  let d = DESCRIPTORS.get(key);
  if (d) return d;
  const get = function (this: JsonObject): unknown {
    const lazy = lazyOf(this);
    if (!lazy) return undefined;
    const i = find(lazy, key);
    const e = lazy.e;
    let v = e[i + 3];
    if (v === UNREAD) v = e[i + 3] = decodeBytes(lazy.src, e[i + 1] as number, e[i + 2] as number, lazy.depth + 1);
    return v;
  };
  const set = function (this: JsonObject, v: unknown): void {
    const lazy = lazyOf(this);
    if (lazy) lazy.e[find(lazy, key) + 3] = v;
  };
  GETTERS.add(get);
  d = { get, set, enumerable: true, configurable: true };
  // Keys are few in practice (metadata, spec, status, ...); do not grow without bound.
  if (DESCRIPTORS.size < 10_000) DESCRIPTORS.set(key, d);
  return d;
}

const INSPECT_DESCRIPTOR: PropertyDescriptor = {
  // util.inspect would print [Getter/Setter]: show a plain copy instead. Deeper
  // than inspect prints (depth < 0), the object itself: it shows as [Object]
  // without its values being decoded.
  value: function (this: JsonObject, depth?: number) {
    if (typeof depth === "number" && depth < 0) return this;
    const out: JsonObject = {};
    for (const k in this) setOwn(out, k, this[k]!);
    return out;
  },
};

const HIDDEN: PropertyDescriptor = { value: undefined };

/** attach makes o's Lazy, holding its first lazy value, key, and defines the key. */
export function attach(o: JsonObject, s: Src, depth: number, key: string, start: number, end: number): Lazy {
  const lazy = new Lazy(s, depth, key, start, end);
  HIDDEN.value = lazy;
  Object.defineProperty(o, LAZY, HIDDEN);
  HIDDEN.value = undefined;
  Object.defineProperty(o, INSPECT, INSPECT_DESCRIPTOR);
  Object.defineProperty(o, key, descriptor(key));
  return lazy;
}

/** defer makes key of o (which has lazy) a lazy value. */
export function defer(o: JsonObject, lazy: Lazy, key: string, start: number, end: number): void {
  const i = find(lazy, key);
  if (i >= 0) {
    checkReplaced(lazy, i);
    lazy.e[i + 1] = start;
    lazy.e[i + 2] = end;
    lazy.e[i + 3] = UNREAD;
  } else lazy.e.push(key, start, end, UNREAD);
  Object.defineProperty(o, key, descriptor(key));
}

/**
 * checkReplaced checks the bytes of a lazy value that a later entry with the
 * same key replaces while decoding (the last one wins): decoding eagerly would
 * have read them, so a malformed one must fail here too, not vanish unread.
 */
export function checkReplaced(lazy: Lazy, i: number): void {
  if (lazy.e[i + 3] === UNREAD) checkBytes(lazy.src, lazy.e[i + 1] as number, lazy.e[i + 2] as number, lazy.depth + 1);
}
