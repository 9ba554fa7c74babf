// One-pass encoding of JSON values as Struct, ListValue and Value bytes. A
// value never read from the request is copied through as its bytes (checked
// first: read.ts).
import type { JsonObject } from "@bufbuild/protobuf";
import { EncodeError, MAX_DEPTH } from "./base.js";
import { lazyOf, pending, type Lazy } from "./lazy.js";
import { checkRaw, depth as deep } from "./read.js";
import { messageOf } from "../../sdk/errors.js";

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

  /**
   * unread writes the bytes of a value never read (lazy's entry i) as they
   * came, once checked: a value that does not decode fails here, at path.
   */
  private unread(lazy: Lazy, i: number, path: string[]): void {
    const src = lazy.src;
    const start = lazy.e[i + 1] as number;
    const end = lazy.e[i + 2] as number;
    try {
      checkRaw(src, start, end, lazy.depth + 1);
    } catch (err) {
      throw new EncodeError(`holds bytes from the request that do not decode: ${messageOf(err)}`, path);
    }
    this.varint(end - start);
    this.room(end - start);
    this.pos += src.nb.copy(this.buf, this.pos, start, end);
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
        this.unread(lazy!, i, [`.${k}`]);
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
    if (2 * depth >= deep.from) return this.deepContainer(v, depth);
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
          // The path is added below, as for any error here.
          this.unread(f.lazy!, i, []);
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
