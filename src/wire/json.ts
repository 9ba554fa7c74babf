// google.protobuf.Struct straight to and from plain JSON, decoding lazily and
// passing untouched values through as bytes.
//
// Nearly all of a RunFunctionRequest is Structs: every Kubernetes object, the
// observed and the desired state. Most functions read a few fields of each
// object (an annotation, a condition) and return the desired state they were
// given plus a little. So:
//
// - Decoding builds plain objects, but a struct or list value of LAZY_MIN bytes
//   or more is not decoded until first read. Its key is an enumerable property
//   with a getter and setter; the first read decodes the bytes and keeps the
//   value (the key stays an accessor: V8 handles turning it into a data
//   property badly). Object.keys, for..in, spread, JSON.stringify,
//   structuredClone, util.inspect and deep-equality helpers see a plain JSON
//   object either way.
// - peek reads one value deep inside a value not read yet (an annotation, the
//   conditions) by walking its bytes, leaving it unread.
// - Encoding a value that was never read copies its original bytes. A value
//   that was read, assigned or redefined is encoded from what it holds now.
//   Encoding is one pass (Emitter).
// - cloneJson copies an object without decoding the values not read yet, so a
//   response that starts as a copy of the request's desired state costs little.
//
// Bytes are checked when they are used: decoding a value checks its wire
// types, lengths and UTF-8, and so does copying a value through on encoding. A
// malformed value that is neither read nor returned is never looked at.
import { isUtf8 } from "node:buffer";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { setOwn } from "../own.js";

// MAX_DEPTH is how deeply JSON values may nest, in levels (an object in an
// object is 2). Go's protobuf decoder, which Crossplane uses, accepts 10,000
// nested messages, and a level of JSON is two (a Struct or ListValue and the
// Value holding it; a map entry is not counted), so it accepts about 5,000
// levels. The decoder counts a Struct and its Value apart, as Go does.
const MAX_DEPTH = 5000;
const MAX_DECODE_DEPTH = 2 * MAX_DEPTH;

// DEEP_FROM is the depth, in the decoder's levels, from which values are
// decoded, checked, copied and encoded by loops keeping a stack of their own
// instead of by recursion: JavaScript's default stack holds some 3,000 levels
// of the recursive code (the fast path for everything real: CRD schemas nest a
// few dozen levels). The encoder and the copier count JSON levels: half.
const DEEP_FROM = 600;
let deepFrom = DEEP_FROM;

/** setDeepFrom changes DEEP_FROM (tests use 0 to take every value through the loops); it returns the old one. */
export function setDeepFrom(n: number): number {
  const old = deepFrom;
  deepFrom = n;
  return old;
}

/**
 * LAZY_MIN is the encoded size at which a struct or list value is decoded on
 * first read. A lazy value costs a getter, its entry and a property definition,
 * about what decoding 200 bytes costs: below that, decoding at once wins if the
 * value is ever read, and a function passing large values through unread costs
 * the same either way (measured: bench/README.md, "Why the code is as it is").
 */
export const LAZY_MIN = 256;
let lazyMin = LAZY_MIN;

/** setLazyMin changes the lazy threshold (tests use 0 to make every value lazy); it returns the old one. */
export function setLazyMin(n: number): number {
  const old = lazyMin;
  lazyMin = n;
  return old;
}

/** DecodeError names what is malformed. */
export class DecodeError extends Error {}

const fail = (msg: string): never => {
  throw new DecodeError(msg);
};

// --- reading ------------------------------------------------------------------

/** Src is one buffer being read: the bytes, a Buffer view of them and a DataView. */
export interface Src {
  readonly bytes: Uint8Array;
  readonly nb: Buffer;
  readonly view: DataView;
}

/** source wraps bytes for reading; keep it for every Struct read from the same bytes. */
export function source(bytes: Uint8Array): Src {
  return {
    bytes,
    nb: Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
    view: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength),
  };
}

// The reader's state. Decoding never calls out to other code, so one cursor
// serves every call; entry points set it and clear it.
const EMPTY = source(new Uint8Array(0));
let src: Src = EMPTY;
let buf: Uint8Array = EMPTY.bytes;
let p = 0;

const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function varint(): number {
  let b = buf[p++]!;
  if (b < 0x80) return b;
  let v = b & 0x7f;
  b = buf[p++]!;
  v |= (b & 0x7f) << 7;
  if (b < 0x80) return v;
  b = buf[p++]!;
  v |= (b & 0x7f) << 14;
  if (b < 0x80) return v;
  b = buf[p++]!;
  v |= (b & 0x7f) << 21;
  if (b < 0x80) return v >>> 0;
  b = buf[p++]!;
  v = (v >>> 0) + (b & 0x7f) * 2 ** 28;
  if (b < 0x80) return v;
  // A 64-bit varint (a negative enum, say): the high bytes do not matter here.
  for (let i = 0; i < 5; i++) if (buf[p++]! < 0x80) return v;
  return fail("invalid varint");
}

/** len reads a length and checks it fits before end. */
function len(end: number): number {
  const n = varint();
  if (n > end - p) fail("a length-delimited field overruns its message");
  return n;
}

// Short strings repeat: keys (apiVersion, metadata, type, status) and many
// values (True, Ready, a region). A direct-mapped cache keyed by a hash of the
// bytes returns the same string again without allocating one (V8 would
// otherwise also look every new key up in its string table). The hash reads
// at most three words, not every byte: a hit is then one pass comparing the
// bytes with a copy of the cached string's bytes, which also proves them
// ASCII. (Comparing with the string itself was slower: a string used as a
// property key becomes a thin reference to V8's interned copy.)
const CACHE_BITS = 12;
const CACHE_MASK = (1 << CACHE_BITS) - 1;
const CACHE_MAX_LEN = 64;
const cacheStrings: string[] = new Array<string>(1 << CACHE_BITS).fill("");
const cacheLengths = new Int32Array(1 << CACHE_BITS).fill(-1);
const cacheBytes = new Uint8Array((1 << CACHE_BITS) * CACHE_MAX_LEN);
const cacheView = new DataView(cacheBytes.buffer);

function str(n: number): string {
  const b = buf;
  const s = p;
  const e = p + n;
  p = e;
  if (n > CACHE_MAX_LEN) {
    for (let i = s; i < e; i++) if (b[i]! >= 0x80) return utf8(s, e);
    return src.nb.toString("latin1", s, e);
  }
  let h: number;
  if (n >= 4) {
    const v = src.view;
    h = Math.imul(v.getInt32(s, true), 0x9e3779b1) ^ Math.imul(v.getInt32(e - 4, true), 0x85ebca6b) ^ v.getInt32(s + (n >> 1) - 2, true);
  } else {
    h = 0;
    for (let i = s; i < e; i++) h = (h << 8) | b[i]!;
  }
  h = Math.imul(h ^ (h >>> 15) ^ n, 0x2c1b3c6d);
  const slot = (h ^ (h >>> 17)) & CACHE_MASK;
  const at = slot * CACHE_MAX_LEN;
  if (cacheLengths[slot] === n) {
    // Four bytes at a time, then the rest.
    const v = src.view;
    let i = 0;
    while (i + 4 <= n && cacheView.getInt32(at + i, true) === v.getInt32(s + i, true)) i += 4;
    if (i + 4 > n) {
      while (i < n && cacheBytes[at + i] === b[s + i]) i++;
      if (i === n) return cacheStrings[slot]!;
    }
  }
  // A miss: check the bytes are ASCII while copying them into the slot.
  cacheLengths[slot] = -1;
  for (let i = 0; i < n; i++) {
    const c = b[s + i]!;
    if (c >= 0x80) return utf8(s, e);
    cacheBytes[at + i] = c;
  }
  let r: string;
  // Below about 7 characters, concatenating beats the call into Buffer.
  if (n < 7) {
    r = "";
    for (let i = s; i < e; i++) r += String.fromCharCode(b[i]!);
  } else r = src.nb.toString("latin1", s, e);
  cacheStrings[slot] = r;
  cacheLengths[slot] = n;
  return r;
}

function utf8(s: number, e: number): string {
  try {
    return STRICT_UTF8.decode(buf.subarray(s, e));
  } catch {
    return fail("a string is not valid UTF-8");
  }
}

/** skip skips a field of wire type wt (the tag already read). */
function skip(tag: number, end: number): void {
  // Field numbers run from 1 to 2^29 - 1: a tag outside is not protobuf.
  if (tag < 8 || tag > 0xffffffff) fail(`invalid field number ${Math.floor(tag / 8)}`);
  switch (tag & 7) {
    case 0:
      varint();
      break;
    case 1:
      p += 8;
      break;
    case 2: {
      // Not p += len(end): that reads p before len moves it past the length.
      const n = len(end);
      p += n;
      break;
    }
    case 3:
      for (;;) {
        if (p >= end) fail("unterminated group");
        const t = varint();
        if ((t & 7) === 4) {
          if (t >>> 3 !== tag >>> 3) fail("mismatched end of group");
          break;
        }
        skip(t, end);
      }
      break;
    case 5:
      p += 4;
      break;
    default:
      fail(`invalid wire type ${tag & 7}`);
  }
  if (p > end) fail("a field overruns its message");
}

function wrongType(field: string): never {
  return fail(`field ${field} has the wrong wire type`);
}

function readValue(end: number, depth: number): JsonValue {
  if (depth >= deepFrom) return deepValue(end, depth);
  if (depth > MAX_DECODE_DEPTH) fail(`a value is nested more than ${MAX_DEPTH} levels deep`);
  let v: JsonValue = null;
  while (p < end) {
    const tag = varint();
    switch (tag) {
      case 0x08: // null_value
        varint();
        v = null;
        break;
      case 0x11: // number_value
        if (end - p < 8) fail("a number overruns its message");
        v = src.view.getFloat64(p, true);
        p += 8;
        break;
      case 0x1a: // string_value
        v = str(len(end));
        break;
      case 0x20: // bool_value
        v = varint() !== 0;
        break;
      case 0x2a: {
        // struct_value
        const e = len(end) + p;
        v = readStruct(e, depth + 1);
        break;
      }
      case 0x32: {
        // list_value
        const e = len(end) + p;
        v = readList(e, depth + 1);
        break;
      }
      default:
        if (tag >>> 3 >= 1 && tag >>> 3 <= 6) wrongType(`Value.${VALUE_FIELDS[tag >>> 3]}`);
        skip(tag, end);
    }
  }
  if (p !== end) fail("a Value overruns its length");
  return v;
}

const VALUE_FIELDS = ["", "null_value", "number_value", "string_value", "bool_value", "struct_value", "list_value"];

// Lists are read onto one shared stack and copied off at their length: an
// array grown from empty by push reserves 17 slots, and most lists here hold
// one or two values (conditions, finalizers, owner references).
const listStack: JsonValue[] = [];
let listTop = 0;

function readList(end: number, depth: number): JsonValue[] {
  if (depth > MAX_DECODE_DEPTH) fail(`a value is nested more than ${MAX_DEPTH} levels deep`);
  const base = listTop;
  try {
    while (p < end) {
      const tag = varint();
      if (tag === 0x0a) {
        const e = len(end) + p;
        const v = readValue(e, depth + 1);
        listStack[listTop++] = v;
      } else {
        if (tag >>> 3 === 1) wrongType("ListValue.values");
        skip(tag, end);
      }
    }
    if (p !== end) fail("a ListValue overruns its length");
    return listStack.slice(base, listTop);
  } finally {
    // Let go of the values, so the stack keeps no request alive, and of the
    // room a very long list needed.
    listStack.fill(null, base, listTop);
    listTop = base;
    if (base === 0 && listStack.length > 1 << 16) listStack.length = 0;
  }
}

function readStruct(end: number, depth: number): JsonObject {
  if (depth > MAX_DECODE_DEPTH) fail(`a value is nested more than ${MAX_DEPTH} levels deep`);
  const out: JsonObject = {};
  let lazy: Lazy | undefined;
  while (p < end) {
    const tag = varint();
    if (tag !== 0x0a) {
      if (tag >>> 3 === 1) wrongType("Struct.fields");
      skip(tag, end);
      continue;
    }
    const entryEnd = len(end) + p;
    let key = "";
    let value: JsonValue = null;
    let rawStart = -1;
    let rawEnd = -1;
    while (p < entryEnd) {
      const t = varint();
      if (t === 0x0a) key = str(len(entryEnd));
      else if (t === 0x12) {
        // A second Value in one entry wins; the first must still be well formed.
        if (rawStart >= 0) checkRaw(src, rawStart, rawEnd, depth + 1);
        const n = len(entryEnd);
        const first = buf[p];
        if (n >= lazyMin && n > 0 && (first === 0x2a || first === 0x32)) {
          rawStart = p;
          rawEnd = p + n;
          p = rawEnd;
        } else {
          rawStart = -1;
          value = readValue(p + n, depth + 1);
        }
      } else {
        if (t >>> 3 === 1 || t >>> 3 === 2) wrongType(t >>> 3 === 1 ? "Struct.fields.key" : "Struct.fields.value");
        skip(t, entryEnd);
      }
    }
    if (p !== entryEnd) fail("a Struct entry overruns its length");
    if (rawStart >= 0) {
      if (lazy) defer(out, lazy, key, rawStart, rawEnd);
      else lazy = attach(out, src, depth, key, rawStart, rawEnd);
    } else put(out, key, value, lazy);
  }
  if (p !== end) fail("a Struct overruns its length");
  return out;
}

// --- deep values: the same grammar, read by a loop --------------------------------

const VALUE = 0;
const LIST = 1;
const STRUCT = 2;

/** Frame is one message deepValue is in the middle of. */
interface Frame {
  kind: typeof VALUE | typeof LIST | typeof STRUCT;
  end: number;
  depth: number;
  /** A Value's content so far; a Struct entry's value so far. */
  v: JsonValue;
  /** The list or object being built. */
  out: JsonValue[] | JsonObject | null;
  /** A Struct's current entry: where it ends (-1 between entries), and its key. */
  entryEnd: number;
  key: string;
}

/**
 * deepValue reads a Value as readValue does, with the same checks, errors
 * and result, but eagerly (nothing lazy: values this deep are rare) and
 * without recursion, so any depth up to MAX_DEPTH fits the stack.
 */
function deepValue(end: number, depth: number): JsonValue {
  const stack: Frame[] = [];
  const push = (kind: Frame["kind"], end: number, depth: number, out: Frame["out"]) => {
    if (depth > MAX_DECODE_DEPTH) fail(`a value is nested more than ${MAX_DEPTH} levels deep`);
    stack.push({ kind, end, depth, v: null, out, entryEnd: -1, key: "" });
  };
  push(VALUE, end, depth, null);
  let done: JsonValue = null;
  let returned = false;
  for (;;) {
    const f = stack[stack.length - 1]!;
    if (returned) {
      // The message f opened last is read: it is f's value (a list's next element).
      returned = false;
      if (f.kind === LIST) (f.out as JsonValue[]).push(done);
      else f.v = done;
    }
    let opened = false;
    if (f.kind === VALUE) {
      while (!opened && p < f.end) {
        const tag = varint();
        switch (tag) {
          case 0x08:
            varint();
            f.v = null;
            break;
          case 0x11:
            if (f.end - p < 8) fail("a number overruns its message");
            f.v = src.view.getFloat64(p, true);
            p += 8;
            break;
          case 0x1a:
            f.v = str(len(f.end));
            break;
          case 0x20:
            f.v = varint() !== 0;
            break;
          case 0x2a:
          case 0x32: {
            const e = len(f.end) + p;
            push(tag === 0x2a ? STRUCT : LIST, e, f.depth + 1, tag === 0x2a ? {} : []);
            opened = true;
            break;
          }
          default:
            if (tag >>> 3 >= 1 && tag >>> 3 <= 6) wrongType(`Value.${VALUE_FIELDS[tag >>> 3]}`);
            skip(tag, f.end);
        }
      }
      if (opened) continue;
      if (p !== f.end) fail("a Value overruns its length");
      done = f.v;
    } else if (f.kind === LIST) {
      while (!opened && p < f.end) {
        const tag = varint();
        if (tag === 0x0a) {
          const e = len(f.end) + p;
          push(VALUE, e, f.depth + 1, null);
          opened = true;
        } else {
          if (tag >>> 3 === 1) wrongType("ListValue.values");
          skip(tag, f.end);
        }
      }
      if (opened) continue;
      if (p !== f.end) fail("a ListValue overruns its length");
      done = f.out;
    } else {
      for (;;) {
        if (f.entryEnd >= 0) {
          while (!opened && p < f.entryEnd) {
            const t = varint();
            if (t === 0x0a) f.key = str(len(f.entryEnd));
            else if (t === 0x12) {
              // A second Value in one entry wins; the first was read, so it was checked.
              const n = len(f.entryEnd);
              push(VALUE, p + n, f.depth + 1, null);
              opened = true;
            } else {
              if (t >>> 3 === 1 || t >>> 3 === 2) wrongType(t >>> 3 === 1 ? "Struct.fields.key" : "Struct.fields.value");
              skip(t, f.entryEnd);
            }
          }
          if (opened) break;
          if (p !== f.entryEnd) fail("a Struct entry overruns its length");
          setOwn(f.out as JsonObject, f.key, f.v);
          f.entryEnd = -1;
          f.key = "";
          f.v = null;
        }
        if (p >= f.end) break;
        const tag = varint();
        if (tag !== 0x0a) {
          if (tag >>> 3 === 1) wrongType("Struct.fields");
          skip(tag, f.end);
          continue;
        }
        f.entryEnd = len(f.end) + p;
      }
      if (opened) continue;
      if (p !== f.end) fail("a Struct overruns its length");
      done = f.out;
    }
    stack.pop();
    if (stack.length === 0) return done;
    returned = true;
  }
}

/** put sets o[key] as an own data property: through setOwn, or over a lazy value the wire gave first under the same key. */
function put(o: JsonObject, key: string, value: JsonValue, lazy?: Lazy): void {
  // A lazy value under the same key (the wire repeated it; the last one wins)
  // is replaced by data, not written through its setter.
  const i = lazy ? find(lazy, key) : -1;
  if (i < 0) return setOwn(o, key, value);
  checkReplaced(lazy!, i);
  Object.defineProperty(o, key, { value, writable: true, enumerable: true, configurable: true });
}

/**
 * decodeStruct decodes the Struct in bytes[start, end). Values of LAZY_MIN
 * bytes or more keep s (and so the bytes) until they are read.
 */
export function decodeStruct(s: Src, start: number, end: number): JsonObject {
  return reading(s, start, () => readStruct(end, 0));
}

/** reading points the reader at s from start for read, and lets go of the bytes after. */
function reading<T>(s: Src, start: number, read: () => T): T {
  src = s;
  buf = s.bytes;
  p = start;
  try {
    return read();
  } finally {
    src = EMPTY;
    buf = EMPTY.bytes;
  }
}

// --- lazy values ----------------------------------------------------------------

const LAZY = Symbol("xfn.lazy");
const INSPECT = Symbol.for("nodejs.util.inspect.custom");

/**
 * Lazy is what an object with values not decoded yet keeps: where each
 * value's bytes are, and the value once read or assigned. Such a key stays a
 * getter and setter for good: turning it into a data property on first read
 * costs V8 far more than the getter does.
 */
class Lazy {
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
function find(lazy: Lazy, key: string): number {
  const e = lazy.e;
  for (let i = 0; i < e.length; i += 4) if (e[i] === key) return i;
  return -1;
}

const UNREAD = Symbol("unread");

/** The getters of lazy values, so encoding can tell a key still ours from one redefined. */
const GETTERS = new WeakSet<object>();
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
    if (v === UNREAD) v = e[i + 3] = decodeValue(lazy.src, e[i + 1] as number, e[i + 2] as number, lazy.depth + 1);
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
    for (const k in this) put(out, k, this[k]!);
    return out;
  },
};

const HIDDEN: PropertyDescriptor = { value: undefined };

/** attach makes o's Lazy, holding its first lazy value, key, and defines the key. */
function attach(o: JsonObject, s: Src, depth: number, key: string, start: number, end: number): Lazy {
  const lazy = new Lazy(s, depth, key, start, end);
  HIDDEN.value = lazy;
  Object.defineProperty(o, LAZY, HIDDEN);
  HIDDEN.value = undefined;
  Object.defineProperty(o, INSPECT, INSPECT_DESCRIPTOR);
  Object.defineProperty(o, key, descriptor(key));
  return lazy;
}

/** defer makes key of o (which has lazy) a lazy value. */
function defer(o: JsonObject, lazy: Lazy, key: string, start: number, end: number): void {
  const i = find(lazy, key);
  if (i >= 0) {
    checkReplaced(lazy, i);
    lazy.e[i + 1] = start;
    lazy.e[i + 2] = end;
    lazy.e[i + 3] = UNREAD;
  } else lazy.e.push(key, start, end, UNREAD);
  Object.defineProperty(o, key, descriptor(key));
}

function decodeValue(s: Src, start: number, end: number, depth: number): JsonValue {
  try {
    return reading(s, start, () => readValue(end, depth));
  } catch (err) {
    if (err instanceof DecodeError) throw new DecodeError(`cannot decode a value of the request: ${err.message}`);
    throw err;
  }
}

/**
 * checkReplaced checks the bytes of a lazy value that a later entry with the
 * same key replaces while decoding (the last one wins): decoding eagerly would
 * have read them, so a malformed one must fail here too, not vanish unread.
 */
function checkReplaced(lazy: Lazy, i: number): void {
  if (lazy.e[i + 3] === UNREAD) checkRaw(lazy.src, lazy.e[i + 1] as number, lazy.e[i + 2] as number, lazy.depth + 1);
}

/** pending returns the index of o's value for key if it was never read, assigned nor redefined, else -1. */
function pending(o: JsonObject, lazy: Lazy, key: string): number {
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

const lazyOf = (o: object): Lazy | undefined => (o as { [LAZY]?: Lazy })[LAZY];

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
      if (2 * depth >= deepFrom) return checkDeep(x, depth);
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
  if (2 * depth >= deepFrom) return deepClone(v, depth) as T;
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

// --- reading one value out of unread bytes -----------------------------------------

/** UNPEEKED is peek's answer when it cannot answer from the bytes: read the object as usual. */
export const UNPEEKED = Symbol("unpeeked");

/** The UTF-8 bytes of keys peek has looked for (a handful: annotation names, "status"). */
const KEY_BYTES = new Map<string, Uint8Array>();

function keyBytes(key: string): Uint8Array {
  let b = KEY_BYTES.get(key);
  if (b) return b;
  b = Buffer.from(key, "utf8");
  if (KEY_BYTES.size < 1000) KEY_BYTES.set(key, b);
  return b;
}

/**
 * peek reads o[keys[0]][keys[1]]... when o[keys[0]] is a value not read yet,
 * walking its bytes to the value at the end and decoding only that. Reading one
 * annotation of an observed object so costs a scan, not the decoding of its
 * whole metadata (the lifecycle steps read a few such fields of every observed
 * resource on every call). The object stays unread.
 *
 * The answer is undefined when a key on the way is absent, and UNPEEKED when
 * there is no o, when o[keys[0]] was already read (or was never lazy), when a value on the way is
 * not an object, or when the bytes on the way do not decode: the caller then
 * reads the object as usual, which gives the same value or names the problem.
 */
export function peek(o: JsonObject | undefined, keys: readonly string[]): JsonValue | undefined | typeof UNPEEKED {
  if (o === undefined) return UNPEEKED;
  const lazy = lazyOf(o);
  if (!lazy || keys.length === 0) return UNPEEKED;
  const i = pending(o, lazy, keys[0]!);
  if (i < 0) return UNPEEKED;
  const s = lazy.src;
  src = s;
  buf = s.bytes;
  try {
    let start = lazy.e[i + 1] as number;
    let end = lazy.e[i + 2] as number;
    for (let k = 1; k < keys.length; k++) {
      const at = structIn(start, end);
      if (at < 0) return UNPEEKED;
      const found = entryOf(at, p, keyBytes(keys[k]!));
      if (found === ABSENT) return undefined;
      if (found === NULL_ENTRY) return k === keys.length - 1 ? null : UNPEEKED;
      if (found === BAD) return UNPEEKED;
      start = found;
      end = p;
    }
    p = start;
    return readValue(end, lazy.depth + 2 * keys.length - 1);
  } catch (err) {
    if (err instanceof DecodeError) return UNPEEKED;
    throw err;
  } finally {
    src = EMPTY;
    buf = EMPTY.bytes;
  }
}

/**
 * structIn finds the Struct a Value in [start, end) holds: its start is
 * returned and its end left in p. -1 when the Value holds anything else (the
 * last of its fields wins, as when decoding).
 */
function structIn(start: number, end: number): number {
  p = start;
  let at = -1;
  let e = -1;
  while (p < end) {
    const tag = varint();
    if (tag === 0x2a) {
      const n = len(end);
      at = p;
      e = p + n;
      p = e;
    } else {
      if (tag >>> 3 >= 1 && tag >>> 3 <= 6) at = -1;
      skip(tag, end);
    }
  }
  if (p !== end) return -1;
  p = e;
  return at;
}

const ABSENT = -1;
const NULL_ENTRY = -2;
const BAD = -3;

/**
 * entryOf finds key in the Struct fields in [start, end): the start of its
 * Value is returned and its end left in p. The last entry with the key wins, as
 * when decoding. ABSENT if no entry has it, NULL_ENTRY if the entry has no
 * Value (null), BAD for a field of the wrong wire type.
 */
function entryOf(start: number, end: number, key: Uint8Array): number {
  p = start;
  let found = ABSENT;
  let foundEnd = -1;
  while (p < end) {
    const tag = varint();
    if (tag !== 0x0a) {
      if (tag >>> 3 === 1) return BAD;
      skip(tag, end);
      continue;
    }
    const entryEnd = len(end) + p;
    let match = key.length === 0; // an entry without a key has the key ""
    let vs = NULL_ENTRY;
    let ve = -1;
    while (p < entryEnd) {
      const t = varint();
      if (t === 0x0a) {
        const n = len(entryEnd);
        match = n === key.length && sameBytes(p, key);
        p += n;
      } else if (t === 0x12) {
        const n = len(entryEnd);
        vs = p;
        ve = p + n;
        p = ve;
      } else {
        if (t >>> 3 === 1 || t >>> 3 === 2) return BAD;
        skip(t, entryEnd);
      }
    }
    if (p !== entryEnd) return BAD;
    if (match) {
      found = vs;
      foundEnd = ve;
    }
  }
  if (p !== end) return BAD;
  p = foundEnd;
  return found;
}

function sameBytes(at: number, key: Uint8Array): boolean {
  for (let i = 0; i < key.length; i++) if (buf[at + i] !== key[i]) return false;
  return true;
}

// --- checking bytes copied through ------------------------------------------------

function checkValue(end: number, depth: number): void {
  if (depth >= deepFrom) {
    deepValue(end, depth);
    return;
  }
  if (depth > MAX_DECODE_DEPTH) fail(`a value is nested more than ${MAX_DEPTH} levels deep`);
  while (p < end) {
    const tag = varint();
    switch (tag) {
      case 0x08:
      case 0x20:
        varint();
        break;
      case 0x11:
        p += 8;
        break;
      case 0x1a:
        checkString(len(end));
        break;
      case 0x2a:
      case 0x32: {
        const e = len(end) + p;
        checkFields(e, depth + 1, tag === 0x2a);
        break;
      }
      default:
        if (tag >>> 3 >= 1 && tag >>> 3 <= 6) wrongType(`Value.${VALUE_FIELDS[tag >>> 3]}`);
        skip(tag, end);
    }
  }
  if (p !== end) fail("a Value overruns its length");
}

/** checkFields checks a Struct (entries of key and Value) or a ListValue (Values). */
function checkFields(end: number, depth: number, struct: boolean): void {
  while (p < end) {
    const tag = varint();
    if (tag !== 0x0a) {
      if (tag >>> 3 === 1) wrongType(struct ? "Struct.fields" : "ListValue.values");
      skip(tag, end);
      continue;
    }
    const e = len(end) + p;
    if (!struct) {
      checkValue(e, depth + 1);
      continue;
    }
    while (p < e) {
      const t = varint();
      if (t === 0x0a) checkString(len(e));
      else if (t === 0x12) {
        const ve = len(e) + p;
        checkValue(ve, depth + 1);
      } else {
        if (t >>> 3 === 1 || t >>> 3 === 2) wrongType(t >>> 3 === 1 ? "Struct.fields.key" : "Struct.fields.value");
        skip(t, e);
      }
    }
    if (p !== e) fail("a Struct entry overruns its length");
  }
  if (p !== end) fail(struct ? "a Struct overruns its length" : "a ListValue overruns its length");
}

function checkString(n: number): void {
  const s = p;
  const e = p + n;
  p = e;
  for (let i = s; i < e; i++) {
    if (buf[i]! >= 0x80) {
      if (!isUtf8(buf.subarray(s, e))) fail("a string is not valid UTF-8");
      return;
    }
  }
}

/**
 * checkRaw checks that bytes[start, end) of s are a well-formed Value: bytes
 * about to be copied through, or dropped while decoding. The reader's position
 * is kept, so a decoding in progress goes on where it was.
 */
function checkRaw(s: Src, start: number, end: number, depth: number): void {
  const s0 = src;
  const b0 = buf;
  const p0 = p;
  src = s;
  buf = s.bytes;
  p = start;
  try {
    checkValue(end, depth);
  } finally {
    src = s0;
    buf = b0;
    p = p0;
  }
}

// --- encoding ---------------------------------------------------------------------

/**
 * EncodeError is a value that cannot be encoded. path is filled in innermost
 * first as the error passes up through each container (through). A value
 * nested too deep also records those containers (chain), so that a cycle is
 * told apart from deep data and named where it first closes.
 */
export class EncodeError extends Error {
  constructor(
    readonly detail: string,
    readonly path: string[] = [],
    readonly chain?: object[],
  ) {
    super(detail);
  }

  /** tooDeep is the error for a value nested past MAX_DEPTH. */
  static tooDeep(): EncodeError {
    return new EncodeError(`is nested more than ${MAX_DEPTH} deep`, [], []);
  }

  /** through records that the failure is under step (.key or [i]) of container c. */
  through(step: string, c: object): void {
    this.path.push(step);
    this.chain?.push(c);
  }

  /**
   * explain gives the path's steps (outermost first) and what is wrong
   * there. When the containers on a too-deep path repeat, that is a cycle:
   * the path is cut where it first comes back to a container it passed
   * through, and the error's message becomes what is said of it.
   */
  explain(): { steps: string[]; detail: string } {
    const steps = [...this.path].reverse();
    if (!this.chain) return { steps, detail: this.detail };
    // steps[0, outer) lead to the JSON value; from there, steps[outer + j] leads out of container chain[m - 1 - j].
    const m = this.chain.length;
    const outer = steps.length - m;
    const seen = new Map<object, number>();
    for (let j = 0; j < m; j++) {
      const c = this.chain[m - 1 - j]!;
      const i = seen.get(c);
      if (i !== undefined) {
        const up = j - i;
        const levels = `${up} level${up === 1 ? "" : "s"}`;
        this.message = `is the same object as the value ${levels} up, which holds it: a cycle, which JSON cannot hold`;
        return { steps: steps.slice(0, outer + j), detail: this.message };
      }
      seen.set(c, j);
    }
    return { steps, detail: this.detail };
  }

  /** at names the path under prefix (a long path shortened in the middle). */
  at(prefix: string): string {
    const { steps, detail } = this.explain();
    return `${prefix}${shortPath(steps)} ${detail}`;
  }
}

/** shortPath writes a path of up to 24 steps whole, and of a longer one the first 16 and the last 4 steps. */
export function shortPath(steps: readonly string[]): string {
  if (steps.length <= 24) return steps.join("");
  return `${steps.slice(0, 16).join("")}...(${steps.length - 20} more)...${steps.slice(-4).join("")}`;
}

const varintLength = (n: number): number => (n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5);

// A string of at most SHORT UTF-16 units takes at most 3 * SHORT = 126 bytes
// of UTF-8, so its length is one byte: the emitter measures such a string as it
// writes it.
const SHORT = 42;

// --- one-pass encoding ---------------------------------------------------------------

// A buffer kept for the next encoding: responses are written into it and copied
// out at their size, so a response grows a buffer only when it is the largest
// yet. (Writing each response into a fresh buffer sized by the last one and
// returning it without the copy measured the same.) An encoding that starts
// while another holds it gets its own.
let spareBuf: Buffer | undefined;
const SPARE_BUF_MAX = 8 << 20;

/**
 * Emitter writes in one pass. A length-delimited value gets one byte for its
 * length before its content is written; if the content turns out to be 128
 * bytes or more, the content moves up to make room for the longer length
 * (close). No sizing pass, and small values (most of them) never move.
 */
export class Emitter {
  buf: Buffer;
  pos = 0;
  view: DataView;

  /** capacity: start with a buffer of this size (tests: growth everywhere) instead of the kept one. */
  constructor(capacity?: number) {
    if (capacity === undefined) {
      this.buf = spareBuf ?? Buffer.allocUnsafe(1 << 16);
      spareBuf = undefined;
    } else this.buf = Buffer.allocUnsafe(capacity);
    this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
  }

  /** room makes sure n more bytes fit. */
  room(n: number): void {
    if (this.pos + n > this.buf.length) this.grow(n);
  }

  private grow(n: number): void {
    const b = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(b, 0, 0, this.pos);
    this.buf = b;
    this.view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }

  /** finish returns a copy of what was written, and keeps the buffer for the next encoding. */
  finish(): Uint8Array {
    const out = Buffer.allocUnsafe(this.pos);
    this.buf.copy(out, 0, 0, this.pos);
    this.release();
    return out;
  }

  /** release hands the buffer on; the emitter may not be used after. */
  release(): void {
    if (this.buf.length <= SPARE_BUF_MAX) spareBuf = this.buf;
  }

  byte(b: number): void {
    this.buf[this.pos++] = b;
  }

  varint(n: number): void {
    this.pos = putVarint(this.buf, this.pos, n);
  }

  bytes(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  /** open reserves one byte for a length; close(at) fills it in. Callers make room for that byte. */
  open(): number {
    return this.pos++;
  }

  close(at: number): void {
    const len = this.pos - at - 1;
    if (len < 0x80) {
      this.buf[at] = len;
      return;
    }
    const k = varintLength(len) - 1;
    this.room(k);
    const buf = this.buf;
    buf.copyWithin(at + 1 + k, at + 1, this.pos);
    this.pos += k;
    putVarint(buf, at, len);
  }

  /** close2 closes two nested lengths at once (a holds b, both ending here). */
  close2(a: number, b: number): void {
    const end = this.pos;
    const lb = end - b - 1;
    const db = varintLength(lb) - 1;
    const la = end - a - 1 + db;
    const da = varintLength(la) - 1;
    if (da + db === 0) {
      this.buf[a] = la;
      this.buf[b] = lb;
      return;
    }
    this.room(da + db);
    const buf = this.buf;
    buf.copyWithin(b + 1 + da + db, b + 1, end);
    buf.copyWithin(a + 1 + da, a + 1, b);
    this.pos = end + da + db;
    putVarint(buf, a, la);
    putVarint(buf, b + da, lb);
  }

  /**
   * close3 closes three nested lengths at once (a holds b holds c, all ending
   * here: a Struct entry, its Value, the Struct or list in it), so the content
   * moves once, not three times.
   */
  close3(a: number, b: number, c: number): void {
    const end = this.pos;
    const lc = end - c - 1;
    const dc = varintLength(lc) - 1;
    const lb = end - b - 1 + dc;
    const db = varintLength(lb) - 1;
    const la = end - a - 1 + dc + db;
    const da = varintLength(la) - 1;
    const buf0 = this.buf;
    if (da + db + dc === 0) {
      buf0[a] = la;
      buf0[b] = lb;
      buf0[c] = lc;
      return;
    }
    this.room(da + db + dc);
    const buf = this.buf;
    // Rightmost first, so nothing is overwritten before it moves.
    buf.copyWithin(c + 1 + da + db + dc, c + 1, end);
    buf.copyWithin(b + 1 + da + db, b + 1, c);
    buf.copyWithin(a + 1 + da, a + 1, b);
    this.pos = end + da + db + dc;
    putVarint(buf, a, la);
    putVarint(buf, b + da, lb);
    putVarint(buf, c + da + db, lc);
  }

  /** string writes s with its length. */
  string(s: string): void {
    const n = s.length;
    this.room(3 * n + 5);
    const buf = this.buf;
    if (n <= SHORT) {
      // One length byte whatever the content: measured while written.
      const at = this.pos;
      let pos = at + 1;
      for (let i = 0; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) {
          const w = buf.write(s, at + 1, "utf8");
          buf[at] = w;
          this.pos = at + 1 + w;
          return;
        }
        buf[pos++] = c;
      }
      buf[at] = n;
      this.pos = pos;
      return;
    }
    const bytes = Buffer.byteLength(s, "utf8");
    this.varint(bytes);
    this.pos += buf.write(s, this.pos, bytes, bytes === n ? "latin1" : "utf8");
  }

  /** struct writes the fields of a Struct holding o. */
  struct(o: JsonObject, depth: number): void {
    if (depth > MAX_DEPTH) throw EncodeError.tooDeep();
    const lazy = lazyOf(o);
    for (const k in o) {
      this.room(4);
      this.buf[this.pos++] = 0x0a; // fields, length-delimited
      const entry = this.open();
      this.buf[this.pos++] = 0x0a; // key
      this.string(k);
      this.room(7);
      this.buf[this.pos++] = 0x12; // value
      const i = lazy ? pending(o, lazy, k) : -1;
      if (i >= 0) {
        const src = lazy!.src;
        const start = lazy!.e[i + 1] as number;
        const end = lazy!.e[i + 2] as number;
        try {
          checkRaw(src, start, end, lazy!.depth + 1);
        } catch (err) {
          throw new EncodeError(`holds bytes from the request that do not decode: ${(err as Error).message}`, [`.${k}`]);
        }
        this.varint(end - start);
        this.room(end - start);
        this.pos += src.nb.copy(this.buf, this.pos, start, end);
        this.close(entry);
      } else {
        const value = this.open();
        const v = o[k];
        try {
          if (typeof v === "object" && v !== null) {
            const c = this.container(v, depth + 1);
            this.close3(entry, value, c);
            continue;
          }
          this.value(v, depth + 1);
        } catch (err) {
          if (err instanceof EncodeError) err.through(`.${k}`, o);
          throw err;
        }
        this.close(value);
        this.close(entry);
      }
    }
  }

  /**
   * container writes the Value field of an object or array v (tag, one byte
   * reserved for the length, content) and returns where that byte is, for the
   * caller to close.
   */
  container(v: object, depth: number): number {
    if (2 * depth >= deepFrom) return this.deepContainer(v, depth);
    this.room(2);
    if (Array.isArray(v)) {
      if (depth > MAX_DEPTH) throw EncodeError.tooDeep();
      this.buf[this.pos++] = 0x32;
      const list = this.open();
      for (let i = 0; i < v.length; i++) {
        this.room(2);
        this.buf[this.pos++] = 0x0a;
        const e = this.open();
        const x = v[i];
        try {
          if (typeof x === "object" && x !== null) this.close2(e, this.container(x, depth + 1));
          else {
            this.value(x, depth + 1);
            this.close(e);
          }
        } catch (err) {
          if (err instanceof EncodeError) err.through(`[${i}]`, v);
          throw err;
        }
      }
      return list;
    }
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null)
      throw new EncodeError(`is a ${v.constructor?.name ?? "non-plain object"}, not a JSON object`);
    this.buf[this.pos++] = 0x2a;
    const s = this.open();
    this.struct(v as JsonObject, depth);
    return s;
  }

  /**
   * deepContainer writes what container writes, with the same checks and
   * errors, keeping a stack of its own instead of recursing.
   */
  private deepContainer(root: object, depth: number): number {
    interface EmitFrame {
      list: unknown[] | null;
      obj: JsonObject | null;
      keys: string[];
      lazy: Lazy | undefined;
      i: number;
      /** The container's length byte, and the current element's (a list) or entry's and value's (an object). */
      at: number;
      item: number;
      value: number;
    }
    const stack: EmitFrame[] = [];
    // open writes v's Value tag and reserves its length; its content follows as the loop reaches it.
    const open = (v: object, depth: number): number => {
      this.room(2);
      if (Array.isArray(v)) {
        if (depth > MAX_DEPTH) throw EncodeError.tooDeep();
        this.buf[this.pos++] = 0x32;
        const at = this.open();
        stack.push({ list: v, obj: null, keys: [], lazy: undefined, i: 0, at, item: -1, value: -1 });
        return at;
      }
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null)
        throw new EncodeError(`is a ${v.constructor?.name ?? "non-plain object"}, not a JSON object`);
      this.buf[this.pos++] = 0x2a;
      const at = this.open();
      if (depth > MAX_DEPTH) throw EncodeError.tooDeep();
      const o = v as JsonObject;
      const keys: string[] = [];
      for (const k in o) keys.push(k);
      stack.push({ list: null, obj: o, keys, lazy: lazyOf(o), i: 0, at, item: -1, value: -1 });
      return at;
    };
    const result = open(root, depth);
    try {
      while (stack.length > 0) {
        const f = stack[stack.length - 1]!;
        const d = depth + stack.length;
        if (f.item >= 0) {
          // The container f's current item held is written: close its lengths.
          const child = this.lastClosed;
          this.close(child);
          if (f.value >= 0) this.close(f.value);
          this.close(f.item);
          f.item = f.value = -1;
          f.i++;
        }
        if (f.list) {
          if (f.i >= f.list.length) {
            this.lastClosed = f.at;
            stack.pop();
            continue;
          }
          this.room(2);
          this.buf[this.pos++] = 0x0a;
          const e = this.open();
          const x = f.list[f.i];
          if (typeof x === "object" && x !== null) {
            f.item = e;
            open(x, d);
            continue;
          }
          this.value(x, d);
          this.close(e);
          f.i++;
          continue;
        }
        if (f.i >= f.keys.length) {
          this.lastClosed = f.at;
          stack.pop();
          continue;
        }
        const k = f.keys[f.i]!;
        const o = f.obj!;
        this.room(4);
        this.buf[this.pos++] = 0x0a;
        const entry = this.open();
        this.buf[this.pos++] = 0x0a;
        this.string(k);
        this.room(7);
        this.buf[this.pos++] = 0x12;
        const i = f.lazy ? pending(o, f.lazy, k) : -1;
        if (i >= 0) {
          const src = f.lazy!.src;
          const start = f.lazy!.e[i + 1] as number;
          const end = f.lazy!.e[i + 2] as number;
          try {
            checkRaw(src, start, end, f.lazy!.depth + 1);
          } catch (err) {
            throw new EncodeError(`holds bytes from the request that do not decode: ${(err as Error).message}`);
          }
          this.varint(end - start);
          this.room(end - start);
          this.pos += src.nb.copy(this.buf, this.pos, start, end);
          this.close(entry);
          f.i++;
          continue;
        }
        const value = this.open();
        const v = o[k];
        if (typeof v === "object" && v !== null) {
          f.item = entry;
          f.value = value;
          open(v, d);
          continue;
        }
        this.value(v, d);
        this.close(value);
        this.close(entry);
        f.i++;
      }
    } catch (err) {
      // The path of what failed, innermost first, as recursion would have built it.
      if (err instanceof EncodeError)
        for (let j = stack.length - 1; j >= 0; j--) {
          const f = stack[j]!;
          err.through(f.list ? `[${f.i}]` : `.${f.keys[f.i]}`, (f.list ?? f.obj)!);
        }
      throw err;
    }
    return result;
  }

  /** The length byte of the container deepContainer finished last. */
  private lastClosed = -1;

  /** value writes the fields of a Value holding v. */
  value(v: unknown, depth: number): void {
    switch (typeof v) {
      case "string":
        this.room(1);
        this.buf[this.pos++] = 0x1a;
        this.string(v);
        return;
      case "number":
        if (!Number.isFinite(v)) throw new EncodeError(`is ${v}, which JSON cannot hold`);
        this.room(9);
        this.buf[this.pos++] = 0x11;
        this.view.setFloat64(this.pos, v, true);
        this.pos += 8;
        return;
      case "boolean":
        this.room(2);
        this.buf[this.pos++] = 0x20;
        this.buf[this.pos++] = v ? 1 : 0;
        return;
      case "object": {
        if (v === null) {
          this.room(2);
          this.buf[this.pos++] = 0x08;
          this.buf[this.pos++] = 0;
          return;
        }
        this.close(this.container(v, depth));
        return;
      }
      default:
        throw new EncodeError(`is ${v === undefined ? "undefined" : `a ${typeof v}`}, which JSON cannot hold`);
    }
  }
}

/** putVarint writes n at buf[at] and returns where it ends. */
function putVarint(buf: Uint8Array, at: number, n: number): number {
  while (n >= 0x80) {
    buf[at++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  buf[at] = n;
  return at + 1;
}

/** encodeStruct returns the wire bytes of a Struct holding o. */
export function encodeStruct(o: JsonObject): Uint8Array {
  const w = new Emitter();
  try {
    w.struct(o, 0);
  } catch (err) {
    w.release();
    throw err;
  }
  return w.finish();
}
