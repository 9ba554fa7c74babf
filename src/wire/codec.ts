// A fast codec for RunFunctionRequest and RunFunctionResponse.
//
// Nearly all of a request's bytes are google.protobuf.Struct values (every
// Kubernetes object). protobuf-es decodes a Struct into Struct/Value messages
// and then converts those to JSON, and encodes the other way round; at 1000
// composed resources that is about 25 times the cost of moving the bytes. This
// codec reads and writes Struct, Value and ListValue straight from and to plain
// JSON, and hands every other (small) message to protobuf-es. The wire format
// is the same; protobuf-es's reader still checks wire types and UTF-8, so a
// malformed request fails here as it would there. Tests compare the two on
// random messages.
import { create, fromBinary, toBinary, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  ConditionSchema,
  CredentialsSchema,
  RequirementsSchema,
  ResourceSchema,
  ResourcesSchema,
  RequestMetaSchema,
  ResponseMetaSchema,
  ResultSchema,
  RunFunctionRequestSchema,
  SchemaSchema,
  StateSchema,
  type Resource,
  type RunFunctionRequest,
  type RunFunctionResponse,
  type State,
} from "../gen/fn/v1/run_function_pb.js";

const MAX_DEPTH = 100;

function fail(msg: string): never {
  throw new Error(`cannot decode RunFunctionRequest: ${msg}`);
}

function expect(wt: WireType, want: WireType, field: string): void {
  if (wt !== want) fail(`field ${field} has wire type ${wt}, want ${want}`);
}

// --- Struct, Value, ListValue -------------------------------------------------

function readStruct(r: BinaryReader, end: number, depth: number): JsonObject {
  if (depth > MAX_DEPTH) fail("Struct nested too deeply");
  const out: JsonObject = {};
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no !== 1) {
      r.skip(wt, no);
      continue;
    }
    expect(wt, WireType.LengthDelimited, "Struct.fields");
    const entryEnd = r.uint32() + r.pos;
    let key = "";
    let value: JsonValue = null;
    while (r.pos < entryEnd) {
      const [eno, ewt] = r.tag();
      if (eno === 1) {
        expect(ewt, WireType.LengthDelimited, "Struct.fields.key");
        key = r.string(true);
      } else if (eno === 2) {
        expect(ewt, WireType.LengthDelimited, "Struct.fields.value");
        value = readValue(r, r.uint32() + r.pos, depth + 1);
      } else r.skip(ewt, eno);
    }
    // defineProperty: a key named __proto__ must not reach the prototype.
    if (key === "__proto__") Object.defineProperty(out, key, { value, writable: true, enumerable: true, configurable: true });
    else out[key] = value;
  }
  if (r.pos !== end) fail("Struct overruns its length");
  return out;
}

function readValue(r: BinaryReader, end: number, depth: number): JsonValue {
  let v: JsonValue = null;
  while (r.pos < end) {
    const [no, wt] = r.tag();
    switch (no) {
      case 1:
        expect(wt, WireType.Varint, "Value.null_value");
        r.int32();
        v = null;
        break;
      case 2:
        expect(wt, WireType.Bit64, "Value.number_value");
        v = r.double();
        break;
      case 3:
        expect(wt, WireType.LengthDelimited, "Value.string_value");
        v = r.string(true);
        break;
      case 4:
        expect(wt, WireType.Varint, "Value.bool_value");
        v = r.bool();
        break;
      case 5:
        expect(wt, WireType.LengthDelimited, "Value.struct_value");
        v = readStruct(r, r.uint32() + r.pos, depth + 1);
        break;
      case 6: {
        expect(wt, WireType.LengthDelimited, "Value.list_value");
        const listEnd = r.uint32() + r.pos;
        const list: JsonValue[] = [];
        while (r.pos < listEnd) {
          const [lno, lwt] = r.tag();
          if (lno !== 1) {
            r.skip(lwt, lno);
            continue;
          }
          expect(lwt, WireType.LengthDelimited, "ListValue.values");
          list.push(readValue(r, r.uint32() + r.pos, depth + 1));
        }
        v = list;
        break;
      }
      default:
        r.skip(wt, no);
    }
  }
  if (r.pos !== end) fail("Value overruns its length");
  return v;
}

class EncodeError extends Error {
  constructor(
    readonly detail: string,
    readonly path: string[] = [],
  ) {
    super(detail);
  }
}

// Encoding a Struct in two passes: the first walks the value, checks it is
// JSON and records every length (and every string's UTF-8 length) in traversal
// order; the second writes into one buffer of exactly the right size. The
// general-purpose writer copies at every nesting level instead.

function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

const varintLength = (n: number) => (n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5);

/** sizeStruct returns the encoded length of a Struct's fields, pushing the lengths the write pass needs. */
function sizeStruct(o: JsonObject, sizes: number[]): number {
  let total = 0;
  for (const k in o) {
    const kl = utf8Length(k);
    sizes.push(kl);
    const slot = sizes.length;
    sizes.push(0); // the value's length, filled in below
    let vl: number;
    try {
      vl = sizeValue(o[k], sizes);
    } catch (err) {
      if (err instanceof EncodeError) err.path.push(`.${k}`);
      throw err;
    }
    sizes[slot] = vl;
    const entry = 1 + varintLength(kl) + kl + 1 + varintLength(vl) + vl;
    total += 1 + varintLength(entry) + entry;
  }
  return total;
}

function sizeValue(v: unknown, sizes: number[]): number {
  switch (typeof v) {
    case "string": {
      const l = utf8Length(v);
      sizes.push(l);
      return 1 + varintLength(l) + l;
    }
    case "number":
      if (!Number.isFinite(v)) throw new EncodeError(`is ${v}, which JSON cannot hold`);
      return 9;
    case "boolean":
      return 2;
    case "object": {
      if (v === null) return 2;
      if (Array.isArray(v)) {
        const slot = sizes.length;
        sizes.push(0);
        let l = 0;
        for (let i = 0; i < v.length; i++) {
          const eslot = sizes.length;
          sizes.push(0);
          let el: number;
          try {
            el = sizeValue(v[i], sizes);
          } catch (err) {
            if (err instanceof EncodeError) err.path.push(`[${i}]`);
            throw err;
          }
          sizes[eslot] = el;
          l += 1 + varintLength(el) + el;
        }
        sizes[slot] = l;
        return 1 + varintLength(l) + l;
      }
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) throw new EncodeError(`is a ${(v as object).constructor?.name ?? "non-plain object"}, not a JSON object`);
      const slot = sizes.length;
      sizes.push(0);
      const l = sizeStruct(v as JsonObject, sizes);
      sizes[slot] = l;
      return 1 + varintLength(l) + l;
    }
    default:
      throw new EncodeError(`is ${v === undefined ? "undefined" : `a ${typeof v}`}, which JSON cannot hold`);
  }
}

class StructWriter {
  pos = 0;
  i = 0;
  readonly view: DataView;
  constructor(
    readonly buf: Uint8Array,
    readonly sizes: number[],
  ) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  varint(n: number): void {
    while (n >= 0x80) {
      this.buf[this.pos++] = (n & 0x7f) | 0x80;
      n >>>= 7;
    }
    this.buf[this.pos++] = n;
  }
  string(s: string, bytes: number): void {
    this.varint(bytes);
    if (bytes === s.length) {
      for (let i = 0; i < s.length; i++) this.buf[this.pos++] = s.charCodeAt(i);
    } else {
      const r = ENCODER.encodeInto(s, this.buf.subarray(this.pos, this.pos + bytes));
      this.pos += r.written;
    }
  }
  struct(o: JsonObject): void {
    for (const k in o) {
      const kl = this.sizes[this.i++]!;
      const vslot = this.i++;
      const vl = this.sizes[vslot]!;
      const entry = 1 + varintLength(kl) + kl + 1 + varintLength(vl) + vl;
      this.buf[this.pos++] = 0x0a; // field 1, length-delimited
      this.varint(entry);
      this.buf[this.pos++] = 0x0a; // key
      this.string(k, kl);
      this.buf[this.pos++] = 0x12; // value
      this.varint(vl);
      this.value(o[k]);
    }
  }
  value(v: unknown): void {
    switch (typeof v) {
      case "string":
        this.buf[this.pos++] = 0x1a;
        this.string(v, this.sizes[this.i++]!);
        return;
      case "number":
        this.buf[this.pos++] = 0x11;
        this.view.setFloat64(this.pos, v, true);
        this.pos += 8;
        return;
      case "boolean":
        this.buf[this.pos++] = 0x20;
        this.buf[this.pos++] = v ? 1 : 0;
        return;
      default:
        if (v === null) {
          this.buf[this.pos++] = 0x08;
          this.buf[this.pos++] = 0;
          return;
        }
        if (Array.isArray(v)) {
          this.buf[this.pos++] = 0x32;
          this.varint(this.sizes[this.i++]!);
          for (const e of v) {
            this.buf[this.pos++] = 0x0a;
            this.varint(this.sizes[this.i++]!);
            this.value(e);
          }
          return;
        }
        this.buf[this.pos++] = 0x2a;
        this.varint(this.sizes[this.i++]!);
        this.struct(v as JsonObject);
    }
  }
}

const ENCODER = new TextEncoder();

/** encodeStruct returns the wire bytes of a Struct holding o. */
export function encodeStruct(o: JsonObject): Uint8Array {
  const sizes: number[] = [];
  const total = sizeStruct(o, sizes);
  const w = new StructWriter(new Uint8Array(total), sizes);
  w.struct(o);
  if (w.pos !== total) throw new Error(`internal error: encoded ${w.pos} bytes of a Struct sized ${total}`);
  return w.buf;
}

/** writeStructField writes a Struct-typed field, naming the path of a non-JSON value on failure. */
function writeStructField(w: BinaryWriter, no: number, o: JsonObject, path: string): void {
  let bytes: Uint8Array;
  try {
    bytes = encodeStruct(o);
  } catch (err) {
    if (err instanceof EncodeError) throw new Error(`${path}${err.path.reverse().join("")} ${err.detail}`);
    throw err;
  }
  w.tag(no, WireType.LengthDelimited).bytes(bytes);
}

// --- Resource, State ----------------------------------------------------------

function readResource(r: BinaryReader, end: number): Resource {
  let resource: JsonObject | undefined;
  const connectionDetails: Record<string, Uint8Array> = {};
  let ready = 0;
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no === 1) {
      expect(wt, WireType.LengthDelimited, "Resource.resource");
      resource = readStruct(r, r.uint32() + r.pos, 0);
    } else if (no === 2) {
      expect(wt, WireType.LengthDelimited, "Resource.connection_details");
      const [k, v] = readBytesEntry(r, r.uint32() + r.pos);
      connectionDetails[k] = v;
    } else if (no === 3) {
      expect(wt, WireType.Varint, "Resource.ready");
      ready = r.int32();
    } else r.skip(wt, no);
  }
  const out = create(ResourceSchema, { connectionDetails, ready });
  if (resource) out.resource = resource;
  return out;
}

function readBytesEntry(r: BinaryReader, end: number): [string, Uint8Array] {
  let k = "";
  let v: Uint8Array = new Uint8Array();
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no === 1) k = r.string(true);
    else if (no === 2) {
      expect(wt, WireType.LengthDelimited, "map value");
      v = r.bytes();
    } else r.skip(wt, no);
  }
  return [k, v];
}

/** readEntry reads a map entry whose value is a message, decoding the value with read. */
function readEntry<T>(r: BinaryReader, end: number, read: (end: number) => T, empty: () => T): [string, T] {
  let k = "";
  let v: T | undefined;
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no === 1) {
      expect(wt, WireType.LengthDelimited, "map key");
      k = r.string(true);
    } else if (no === 2) {
      expect(wt, WireType.LengthDelimited, "map value");
      v = read(r.uint32() + r.pos);
    } else r.skip(wt, no);
  }
  return [k, v ?? empty()];
}

function readState(r: BinaryReader, end: number): State {
  const state = create(StateSchema);
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no === 1) {
      expect(wt, WireType.LengthDelimited, "State.composite");
      state.composite = readResource(r, r.uint32() + r.pos);
    } else if (no === 2) {
      expect(wt, WireType.LengthDelimited, "State.resources");
      const [k, v] = readEntry(r, r.uint32() + r.pos, (e) => readResource(r, e), () => create(ResourceSchema));
      state.resources[k] = v;
    } else r.skip(wt, no);
  }
  return state;
}

function readResources(r: BinaryReader, end: number) {
  const out = create(ResourcesSchema);
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no === 1) {
      expect(wt, WireType.LengthDelimited, "Resources.items");
      out.items.push(readResource(r, r.uint32() + r.pos));
    } else r.skip(wt, no);
  }
  return out;
}

/** sub returns the bytes of the length-delimited field at the reader's position, and skips them. */
const sub = (r: BinaryReader, bytes: Uint8Array) => {
  const len = r.uint32();
  const start = r.pos;
  r.pos += len;
  if (r.pos > r.len) fail("a field overruns the message");
  return bytes.subarray(start, start + len);
};

/** decodeRequest decodes a RunFunctionRequest; it throws naming what is malformed. */
export function decodeRequest(bytes: Uint8Array): RunFunctionRequest {
  const r = new BinaryReader(bytes);
  const req = create(RunFunctionRequestSchema);
  try {
    while (r.pos < r.len) {
      const [no, wt] = r.tag();
      switch (no) {
        case 1:
          expect(wt, WireType.LengthDelimited, "meta");
          req.meta = fromBinary(RequestMetaSchema, sub(r, bytes));
          break;
        case 2:
          expect(wt, WireType.LengthDelimited, "observed");
          req.observed = readState(r, r.uint32() + r.pos);
          break;
        case 3:
          expect(wt, WireType.LengthDelimited, "desired");
          req.desired = readState(r, r.uint32() + r.pos);
          break;
        case 4:
          expect(wt, WireType.LengthDelimited, "input");
          req.input = readStruct(r, r.uint32() + r.pos, 0);
          break;
        case 5:
          expect(wt, WireType.LengthDelimited, "context");
          req.context = readStruct(r, r.uint32() + r.pos, 0);
          break;
        case 6:
        case 8: {
          expect(wt, WireType.LengthDelimited, no === 6 ? "extra_resources" : "required_resources");
          const [k, v] = readEntry(r, r.uint32() + r.pos, (e) => readResources(r, e), () => create(ResourcesSchema));
          (no === 6 ? req.extraResources : req.requiredResources)[k] = v;
          break;
        }
        case 7: {
          expect(wt, WireType.LengthDelimited, "credentials");
          const [k, v] = readEntry(
            r,
            r.uint32() + r.pos,
            (e) => {
              const start = r.pos;
              r.pos = e;
              return fromBinary(CredentialsSchema, bytes.subarray(start, e));
            },
            () => create(CredentialsSchema),
          );
          req.credentials[k] = v;
          break;
        }
        case 9: {
          expect(wt, WireType.LengthDelimited, "required_schemas");
          const [k, v] = readEntry(
            r,
            r.uint32() + r.pos,
            (e) => {
              const s = create(SchemaSchema);
              while (r.pos < e) {
                const [sno, swt] = r.tag();
                if (sno === 1) {
                  expect(swt, WireType.LengthDelimited, "Schema.openapi_v3");
                  s.openapiV3 = readStruct(r, r.uint32() + r.pos, 0);
                } else r.skip(swt, sno);
              }
              return s;
            },
            () => create(SchemaSchema),
          );
          req.requiredSchemas[k] = v;
          break;
        }
        default:
          r.skip(wt, no);
      }
    }
    if (r.pos !== r.len) fail("premature end of input");
  } catch (err) {
    const msg = (err as Error).message;
    throw new Error(msg.startsWith("cannot decode") ? msg.slice("cannot decode RunFunctionRequest: ".length) : msg);
  }
  return req;
}

function writeResource(w: BinaryWriter, res: Resource, path: string): void {
  if (res.resource) writeStructField(w, 1, res.resource, `${path}.resource`);
  for (const k in res.connectionDetails) {
    w.tag(2, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).string(k).tag(2, WireType.LengthDelimited).bytes(res.connectionDetails[k]!).join();
  }
  if (res.ready !== 0) w.tag(3, WireType.Varint).int32(res.ready);
}

function writeState(w: BinaryWriter, s: State, path: string): void {
  if (s.composite) {
    w.tag(1, WireType.LengthDelimited).fork();
    writeResource(w, s.composite, `${path}.composite`);
    w.join();
  }
  for (const k in s.resources) {
    w.tag(2, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).string(k).tag(2, WireType.LengthDelimited).fork();
    writeResource(w, s.resources[k]!, `${path}.resources[${k}]`);
    w.join().join();
  }
}

/**
 * encodeResponse encodes a RunFunctionResponse. A Struct holding something
 * JSON cannot (undefined, a BigInt, a Date, NaN) is an error naming its path,
 * where protobuf-es would silently write null.
 */
export function encodeResponse(rsp: RunFunctionResponse): Uint8Array {
  const w = new BinaryWriter();
  if (rsp.meta) w.tag(1, WireType.LengthDelimited).bytes(toBinary(ResponseMetaSchema, rsp.meta));
  if (rsp.desired) {
    w.tag(2, WireType.LengthDelimited).fork();
    writeState(w, rsp.desired, "desired");
    w.join();
  }
  for (const r of rsp.results) w.tag(3, WireType.LengthDelimited).bytes(toBinary(ResultSchema, r));
  if (rsp.context) writeStructField(w, 4, rsp.context, "context");
  if (rsp.requirements) w.tag(5, WireType.LengthDelimited).bytes(toBinary(RequirementsSchema, rsp.requirements));
  for (const c of rsp.conditions) w.tag(6, WireType.LengthDelimited).bytes(toBinary(ConditionSchema, c));
  if (rsp.output) writeStructField(w, 7, rsp.output, "output");
  return w.finish();
}

