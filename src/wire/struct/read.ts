// The reader: Struct, ListValue and Value bytes to plain JSON. It alone holds
// the cursor (which bytes, and where in them); every entry point here sets it
// and lets go of the bytes after. Values of LAZY_MIN bytes or more are left as
// bytes, decoded on first read (lazy.ts keeps them on the object, and asks the
// reader to decode them); bytes about to be copied through or dropped unread
// are checked here too, and peek's walk to one value deep in unread bytes is
// done here.
import { isUtf8 } from "node:buffer";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { setOwn } from "../../own.js";
import { DecodeError, fail, MAX_DECODE_DEPTH, MAX_DEPTH, source, UNPEEKED, type Src } from "./base.js";
import { attach, checkReplaced, defer, find, type Lazy, useReader } from "./lazy.js";

// DEEP_FROM is the depth, in the decoder's levels, from which values are
// decoded, checked, copied and encoded by loops keeping a stack of their own
// instead of by recursion: JavaScript's default stack holds some 3,000 levels
// of the recursive code (the fast path for everything real: CRD schemas nest a
// few dozen levels). The encoder and the copier count JSON levels: half.
const DEEP_FROM = 600;
let deepFrom = DEEP_FROM;
/**
 * depth.from is DEEP_FROM as it is now, for the other modules (emit.ts,
 * values.ts). The reader keeps its own copy in a module variable: it reads it
 * for every value, and an exported binding costs more to read (measured with
 * bench/ab.ts --modules).
 */
export const depth = { from: DEEP_FROM };

/** setDeepFrom changes DEEP_FROM (tests use 0 to take every value through the loops); it returns the old one. */
export function setDeepFrom(n: number): number {
  const old = deepFrom;
  deepFrom = n;
  depth.from = n;
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

// --- reading ------------------------------------------------------------------

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

/** putValue is put, for the other modules: calls to an exported function cost the reader more (bench/ab.ts --modules). */
export const putValue = put;

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

function decodeValue(s: Src, start: number, end: number, depth: number): JsonValue {
  try {
    return reading(s, start, () => readValue(end, depth));
  } catch (err) {
    if (err instanceof DecodeError) throw new DecodeError(`cannot decode a value of the request: ${err.message}`);
    throw err;
  }
}

// Lazy values decode through the reader when first read.
useReader({ decode: decodeValue, check: (s, start, end, depth) => checkRaw(s, start, end, depth) });

// --- walking unread bytes to one value (peek.ts) -----------------------------------

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
 * valueAt reads the value at keys[1], keys[2]... of the Value in s's bytes
 * [start, end) (the value of keys[0] in an object at depth), walking the bytes
 * and decoding only the value at the end: undefined when a key on the way is
 * absent, UNPEEKED when a value on the way is not an object or the bytes on the
 * way do not decode (see peek.ts).
 */
export function valueAt(
  s: Src,
  start: number,
  end: number,
  depth: number,
  keys: readonly string[],
): JsonValue | undefined | typeof UNPEEKED {
  src = s;
  buf = s.bytes;
  try {
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
    return readValue(end, depth + 2 * keys.length - 1);
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
export function checkRaw(s: Src, start: number, end: number, depth: number): void {
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
