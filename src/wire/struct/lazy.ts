// What an object holding values not decoded yet keeps (its Lazy, under a
// symbol of its own), and the questions asked of it: is this key's value still
// the request's bytes, never read, assigned nor redefined? The reader (read.ts)
// makes them; values.ts and emit.ts copy their bytes through.
import type { JsonObject } from "@bufbuild/protobuf";
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
