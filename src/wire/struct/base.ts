// The google.protobuf.Struct codec: plain JSON straight to and from the wire,
// decoding lazily and passing untouched values through as bytes.
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
//
// The codec's files, one concern each:
// - base.ts (this file): limits, errors, the bytes being read.
// - read.ts: the reader. It alone holds the cursor (where in which bytes it
//   is); decoding, leaving values for later, checking bytes copied through and
//   walking bytes for peek all move it.
// - lazy.ts: what an object with values not read yet keeps, and questions
//   about it (is this key still unread?).
// - peek.ts: one value out of bytes not read yet.
// - values.ts: checks and copies of JSON values (checkEncodable, cloneJson).
// - emit.ts: one-pass encoding, copying unread values' bytes through.
// MAX_DEPTH is how deeply JSON values may nest, in levels (an object in an
// object is 2). Go's protobuf decoder, which Crossplane uses, accepts 10,000
// nested messages, and a level of JSON is two (a Struct or ListValue and the
// Value holding it; a map entry is not counted), so it accepts about 5,000
// levels. The decoder counts a Struct and its Value apart, as Go does.
export const MAX_DEPTH = 5000;
export const MAX_DECODE_DEPTH = 2 * MAX_DEPTH;

/** DecodeError names what is malformed. */
export class DecodeError extends Error {}

export const fail = (msg: string): never => {
  throw new DecodeError(msg);
};

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

/** UNPEEKED is peek's answer when it cannot answer from the bytes: read the object as usual. */
export const UNPEEKED = Symbol("unpeeked");

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
