// A fast codec for RunFunctionRequest and RunFunctionResponse.
//
// Nearly all of a request's bytes are google.protobuf.Struct values (every
// Kubernetes object). protobuf-es decodes a Struct into Struct/Value messages
// and then converts those to JSON, and encodes the other way round; at 1000
// composed resources that is about 25 times the cost of moving the bytes. This
// codec reads Struct straight into plain JSON, lazily, and writes it straight
// from plain JSON, copying through values never read (struct/); the small
// messages (meta, results, credentials, requirements) go through protobuf-es.
// The wire format is the same. Wire types, field numbers (1 to 2^29 - 1),
// lengths (no field may run past the message holding it) and UTF-8 are
// checked for everything decoded or copied through, and for a value the wire
// replaces with a later one; bytes nobody reads or returns are not (struct/read.ts).
// protobuf-es is more lenient here (it lets a field run past its message), so
// tests compare the two on well-formed random messages and hold malformed ones
// to the protobuf rules (test/wire/malformed.test.ts). One difference from
// protobuf, in what Crossplane never sends: a message field given twice is
// taken from its last occurrence, not merged with the first.
import { create, fromBinary, toBinary, type JsonObject } from "@bufbuild/protobuf";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { EncodeError, source, type Src } from "./struct/base.js";
import { Emitter } from "./struct/emit.js";
import { readAll } from "./struct/lazy.js";
import { decodeStruct, setLazyMin } from "./struct/read.js";
import {
  ConditionSchema,
  CredentialDataSchema,
  CredentialsSchema,
  RequirementsSchema,
  ResourceSchema,
  ResourceSelectorSchema,
  ResourcesSchema,
  RequestMetaSchema,
  ResponseMetaSchema,
  ResultSchema,
  RunFunctionRequestSchema,
  RunFunctionResponseSchema,
  SchemaSchema,
  SchemaSelectorSchema,
  StateSchema,
  type Credentials,
  type Requirements,
  type Resource,
  type Resources,
  type RunFunctionRequest,
  type RunFunctionResponse,
  type State,
} from "../gen/fn/v1/run_function_pb.js";
import { setOwn } from "../own.js";
import { messageOf } from "../sdk/errors.js";

function fail(msg: string): never {
  throw new Error(msg);
}

function expect(wt: WireType, want: WireType, field: string): void {
  if (wt !== want) fail(`field ${field} has wire type ${wt}, want ${want}`);
}

/** ended checks that a message's last field ended where its length said it would. */
function ended(r: BinaryReader, end: number, what: string): void {
  if (r.pos !== end) fail(`a field overruns its ${what}`);
}

/**
 * checkDropped takes a value the wire gives again (a map key or a message
 * field repeated: the last one is kept) and reads its lazy values now, so that
 * malformed bytes fail the request as they would if it were decoded in full,
 * instead of vanishing unread.
 */
function checkDropped(v: unknown): void {
  if (v !== undefined) readAll(v);
}

/** setEntry sets a map entry decoded from the wire: an own key whatever its name, the last one winning. */
function setEntry<T>(map: Record<string, T>, k: string, v: T): void {
  if (Object.hasOwn(map, k)) checkDropped(map[k]);
  setOwn(map, k, v);
}

/** readStruct decodes the Struct at the reader's position (its length first), lazily. */
function readStruct(r: BinaryReader): JsonObject {
  const n = r.uint32();
  const start = r.pos;
  if (n > r.len - start) fail("a field overruns the message");
  r.pos = start + n;
  return decodeStruct(reading, start, start + n);
}

/** The request being decoded. */
let reading: Src = source(new Uint8Array(0));

// --- Resource, State ----------------------------------------------------------

function readResource(r: BinaryReader, end: number): Resource {
  let resource: JsonObject | undefined;
  const connectionDetails: Record<string, Uint8Array> = {};
  let ready = 0;
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no === 1) {
      expect(wt, WireType.LengthDelimited, "Resource.resource");
      checkDropped(resource);
      resource = readStruct(r);
    } else if (no === 2) {
      expect(wt, WireType.LengthDelimited, "Resource.connection_details");
      const [k, v] = readBytesEntry(r, r.uint32() + r.pos);
      setEntry(connectionDetails, k, v);
    } else if (no === 3) {
      expect(wt, WireType.Varint, "Resource.ready");
      ready = r.int32();
    } else r.skip(wt, no);
  }
  ended(r, end, "Resource");
  // What create(ResourceSchema) builds, without its per-field reflection.
  const out: Resource = { $typeName: ResourceSchema.typeName, connectionDetails, ready };
  if (resource) out.resource = resource;
  return out;
}

function readBytesEntry(r: BinaryReader, end: number): [string, Uint8Array] {
  let k = "";
  let v: Uint8Array = new Uint8Array();
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no === 1) {
      expect(wt, WireType.LengthDelimited, "map key");
      k = r.string(true);
    } else if (no === 2) {
      expect(wt, WireType.LengthDelimited, "map value");
      v = r.bytes();
    } else r.skip(wt, no);
  }
  ended(r, end, "map entry");
  return [k, v];
}

/**
 * readCredentials reads a Credentials message. Not fromBinary: protobuf-es
 * writes map entries by assignment, and a Secret key named __proto__ (a valid
 * one) would be dropped.
 */
function readCredentials(r: BinaryReader, end: number): Credentials {
  const out = create(CredentialsSchema);
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no !== 1) {
      r.skip(wt, no);
      continue;
    }
    expect(wt, WireType.LengthDelimited, "Credentials.credential_data");
    const e = r.uint32() + r.pos;
    // A second credential_data merges into the first, as protobuf's decoding does.
    const data: Record<string, Uint8Array> = out.source.case === "credentialData" ? out.source.value.data : {};
    while (r.pos < e) {
      const [dno, dwt] = r.tag();
      if (dno === 1) {
        expect(dwt, WireType.LengthDelimited, "CredentialData.data");
        const [k, v] = readBytesEntry(r, r.uint32() + r.pos);
        setEntry(data, k, v);
      } else r.skip(dwt, dno);
    }
    ended(r, e, "CredentialData");
    out.source = { case: "credentialData", value: { $typeName: CredentialDataSchema.typeName, data } };
  }
  ended(r, end, "Credentials");
  return out;
}

/**
 * readRequirements reads a Requirements message: its map keys here (as own
 * keys, a name __proto__ included), each selector through protobuf-es.
 */
function readRequirements(r: BinaryReader, end: number, bytes: Uint8Array): Requirements {
  const out = create(RequirementsSchema);
  const message = (e: number): Uint8Array => {
    const start = r.pos;
    r.pos = e;
    return bytes.subarray(start, e);
  };
  const resource = (e: number) => fromBinary(ResourceSelectorSchema, message(e));
  const schema = (e: number) => fromBinary(SchemaSelectorSchema, message(e));
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no === 1 || no === 2) {
      expect(wt, WireType.LengthDelimited, no === 1 ? "Requirements.extra_resources" : "Requirements.resources");
      const [k, v] = readEntry(r, r.uint32() + r.pos, resource, () => create(ResourceSelectorSchema));
      setEntry(no === 1 ? out.extraResources : out.resources, k, v);
    } else if (no === 3) {
      expect(wt, WireType.LengthDelimited, "Requirements.schemas");
      const [k, v] = readEntry(r, r.uint32() + r.pos, schema, () => create(SchemaSelectorSchema));
      setEntry(out.schemas, k, v);
    } else r.skip(wt, no);
  }
  ended(r, end, "Requirements");
  return out;
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
      checkDropped(v);
      v = read(r.uint32() + r.pos);
    } else r.skip(wt, no);
  }
  ended(r, end, "map entry");
  return [k, v ?? empty()];
}

function readState(r: BinaryReader, end: number): State {
  const state = create(StateSchema);
  while (r.pos < end) {
    const [no, wt] = r.tag();
    if (no === 1) {
      expect(wt, WireType.LengthDelimited, "State.composite");
      checkDropped(state.composite);
      state.composite = readResource(r, r.uint32() + r.pos);
    } else if (no === 2) {
      expect(wt, WireType.LengthDelimited, "State.resources");
      const [k, v] = readEntry(
        r,
        r.uint32() + r.pos,
        (e) => readResource(r, e),
        () => create(ResourceSchema),
      );
      setEntry(state.resources, k, v);
    } else r.skip(wt, no);
  }
  ended(r, end, "State");
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
  ended(r, end, "Resources");
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
  reading = source(bytes);
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
          checkDropped(req.observed);
          req.observed = readState(r, r.uint32() + r.pos);
          break;
        case 3:
          expect(wt, WireType.LengthDelimited, "desired");
          checkDropped(req.desired);
          req.desired = readState(r, r.uint32() + r.pos);
          break;
        case 4:
          expect(wt, WireType.LengthDelimited, "input");
          checkDropped(req.input);
          req.input = readStruct(r);
          break;
        case 5:
          expect(wt, WireType.LengthDelimited, "context");
          checkDropped(req.context);
          req.context = readStruct(r);
          break;
        case 6:
        case 8: {
          expect(wt, WireType.LengthDelimited, no === 6 ? "extra_resources" : "required_resources");
          const [k, v] = readEntry(
            r,
            r.uint32() + r.pos,
            (e) => readResources(r, e),
            () => create(ResourcesSchema),
          );
          setEntry(no === 6 ? req.extraResources : req.requiredResources, k, v);
          break;
        }
        case 7: {
          expect(wt, WireType.LengthDelimited, "credentials");
          const [k, v] = readEntry(
            r,
            r.uint32() + r.pos,
            (e) => readCredentials(r, e),
            () => create(CredentialsSchema),
          );
          setEntry(req.credentials, k, v);
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
                  checkDropped(s.openapiV3);
                  s.openapiV3 = readStruct(r);
                } else r.skip(swt, sno);
              }
              ended(r, e, "Schema");
              return s;
            },
            () => create(SchemaSchema),
          );
          setEntry(req.requiredSchemas, k, v);
          break;
        }
        default:
          r.skip(wt, no);
      }
    }
    if (r.pos !== r.len) fail("premature end of input");
  } catch (err) {
    // One kind of error whatever read the bytes (protobuf-es's reader throws RangeError).
    throw new Error(messageOf(err));
  } finally {
    reading = source(new Uint8Array(0));
  }
  return req;
}

/**
 * decodeResponse decodes a RunFunctionResponse (xfn call, render, test) with
 * the same reader as requests, in full (nothing lazy), so JSON nests as deep
 * as Go's decoder allows: protobuf-es's own recursive decoder runs out of
 * stack some 600 levels down. It throws naming what is malformed.
 */
export function decodeResponse(bytes: Uint8Array): RunFunctionResponse {
  const r = new BinaryReader(bytes);
  const rsp = create(RunFunctionResponseSchema);
  const lazy = setLazyMin(Infinity);
  reading = source(bytes);
  try {
    while (r.pos < r.len) {
      const [no, wt] = r.tag();
      switch (no) {
        case 1:
          expect(wt, WireType.LengthDelimited, "meta");
          rsp.meta = fromBinary(ResponseMetaSchema, sub(r, bytes));
          break;
        case 2:
          expect(wt, WireType.LengthDelimited, "desired");
          rsp.desired = readState(r, r.uint32() + r.pos);
          break;
        case 3:
          expect(wt, WireType.LengthDelimited, "results");
          rsp.results.push(fromBinary(ResultSchema, sub(r, bytes)));
          break;
        case 4:
          expect(wt, WireType.LengthDelimited, "context");
          rsp.context = readStruct(r);
          break;
        case 5:
          expect(wt, WireType.LengthDelimited, "requirements");
          rsp.requirements = readRequirements(r, r.uint32() + r.pos, bytes);
          break;
        case 6:
          expect(wt, WireType.LengthDelimited, "conditions");
          rsp.conditions.push(fromBinary(ConditionSchema, sub(r, bytes)));
          break;
        case 7:
          expect(wt, WireType.LengthDelimited, "output");
          rsp.output = readStruct(r);
          break;
        default:
          r.skip(wt, no);
      }
    }
    if (r.pos !== r.len) fail("premature end of input");
  } catch (err) {
    throw new Error(`cannot decode RunFunctionResponse: ${messageOf(err)}`);
  } finally {
    setLazyMin(lazy);
    reading = source(new Uint8Array(0));
  }
  return rsp;
}

// Encoding writes the message in one pass into one buffer (struct/emit.ts Emitter:
// a length gets one byte up front and the content moves up only when it turns
// out to need more). The small messages (meta, results, conditions,
// requirements, credentials) go through protobuf-es and are copied in as bytes.

const READY = Array.from({ length: 0x80 }, (_, i) => Uint8Array.of(i));

class MessageEmitter extends Emitter {
  /** blob writes a field holding bytes encoded already. */
  blob(tag: number, b: Uint8Array): void {
    this.room(6);
    this.byte(tag);
    this.varint(b.length);
    this.bytes(b);
  }
  // A path for an error is put together only when one is thrown (EncodeError
  // collects it innermost first), not built for every resource of every
  // response in case one fails.
  structField(tag: number, o: JsonObject): void {
    this.room(2);
    this.byte(tag);
    const at = this.open();
    this.struct(o, 0);
    this.close(at);
  }
  resource(res: Resource): void {
    if (res.resource) {
      try {
        this.structField(0x0a, res.resource);
      } catch (err) {
        if (err instanceof EncodeError) err.path.push(".resource");
        throw err;
      }
    }
    for (const k in res.connectionDetails) {
      this.blob(
        0x12,
        new BinaryWriter()
          .tag(1, WireType.LengthDelimited)
          .string(k)
          .tag(2, WireType.LengthDelimited)
          .bytes(res.connectionDetails[k]!)
          .finish(),
      );
    }
    if (res.ready !== 0) {
      // An enum is an int32 varint: ten bytes when negative.
      this.room(1);
      this.byte(0x18);
      this.bytes(res.ready > 0 && res.ready < 0x80 ? READY[res.ready]! : new BinaryWriter().int32(res.ready).finish());
    }
  }
  /** resourcesMap writes map<string, Resources> entries (extra_resources, required_resources) under tag. */
  resourcesMap(tag: number, map: Record<string, Resources>): void {
    ownMap(map, "");
    for (const k in map) {
      this.room(2);
      this.byte(tag);
      const entry = this.open();
      this.room(1);
      this.byte(0x0a);
      this.string(k);
      this.room(2);
      this.byte(0x12);
      const at = this.open();
      try {
        for (const item of map[k]!.items) {
          this.room(2);
          this.byte(0x0a);
          const r = this.open();
          this.resource(item);
          this.close(r);
        }
      } catch (err) {
        if (err instanceof EncodeError) err.path.push(`[${k}]`);
        throw err;
      }
      this.close2(entry, at);
    }
  }
  /** messageMap writes map<string, message> entries under tag, each value encoded by write. */
  messageMap<T>(tag: number, map: Record<string, T>, write: (v: T) => void): void {
    ownMap(map, "");
    for (const k in map) {
      this.room(2);
      this.byte(tag);
      const entry = this.open();
      this.room(1);
      this.byte(0x0a);
      this.string(k);
      this.room(2);
      this.byte(0x12);
      const at = this.open();
      try {
        write(map[k]!);
      } catch (err) {
        if (err instanceof EncodeError) err.path.push(`[${k}]`);
        throw err;
      }
      this.close2(entry, at);
    }
  }
  state(s: State): void {
    if (s.composite) {
      this.room(2);
      this.byte(0x0a);
      const at = this.open();
      try {
        this.resource(s.composite);
      } catch (err) {
        if (err instanceof EncodeError) err.path.push(".composite");
        throw err;
      }
      this.close(at);
    }
    ownMap(s.resources, ".resources", "a resource");
    for (const k in s.resources) {
      // resources: map entry (key, Resource)
      this.room(2);
      this.byte(0x12);
      const entry = this.open();
      this.room(1);
      this.byte(0x0a);
      this.string(k);
      this.room(2);
      this.byte(0x12);
      const at = this.open();
      try {
        this.resource(s.resources[k]!);
      } catch (err) {
        if (err instanceof EncodeError) err.path.push(`.resources[${k}]`);
        throw err;
      }
      this.close2(entry, at);
    }
  }
}

/** ownMap refuses a map whose prototype was replaced (a key named __proto__ set by assignment): its entries would be lost. */
function ownMap(map: object, path: string, what = "an entry"): void {
  const proto = Object.getPrototypeOf(map);
  if (proto !== Object.prototype && proto !== null) {
    throw new EncodeError(
      `has a prototype that is not Object's (${what} named __proto__ set by assignment? setDesiredComposedResource keeps such a name)`,
      [path],
    );
  }
}

/**
 * encodeRequest encodes a RunFunctionRequest (xfn call, render, test) as
 * encodeResponse does a response: JSON of any depth Go accepts, and a value
 * JSON cannot hold is an error naming its path.
 */
export function encodeRequest(req: RunFunctionRequest): Uint8Array {
  const w = new MessageEmitter();
  let where = "";
  try {
    if (req.meta) w.blob(0x0a, toBinary(RequestMetaSchema, req.meta));
    for (const [tag, state, name] of [
      [0x12, req.observed, "observed"],
      [0x1a, req.desired, "desired"],
    ] as const) {
      if (!state) continue;
      where = name;
      w.room(2);
      w.byte(tag);
      const at = w.open();
      w.state(state);
      w.close(at);
    }
    where = "input";
    if (req.input) w.structField(0x22, req.input);
    where = "context";
    if (req.context) w.structField(0x2a, req.context);
    where = "extraResources";
    w.resourcesMap(0x32, req.extraResources);
    where = "credentials";
    w.messageMap(0x3a, req.credentials, (c) => w.bytes(toBinary(CredentialsSchema, c)));
    where = "requiredResources";
    w.resourcesMap(0x42, req.requiredResources);
    where = "requiredSchemas";
    w.messageMap(0x4a, req.requiredSchemas, (s) => {
      if (s.openapiV3) w.structField(0x0a, s.openapiV3);
    });
    return w.finish();
  } catch (err) {
    w.release();
    if (err instanceof EncodeError) throw new Error(`cannot encode RunFunctionRequest: ${err.at(where)}`);
    throw err;
  }
}

/**
 * encodeResponse encodes a RunFunctionResponse. A Struct holding something
 * JSON cannot (undefined, a BigInt, a Date, NaN) is an error naming its path,
 * where protobuf-es would silently write null.
 */
export function encodeResponse(rsp: RunFunctionResponse): Uint8Array {
  const w = new MessageEmitter();
  let where = "";
  try {
    if (rsp.meta) w.blob(0x0a, toBinary(ResponseMetaSchema, rsp.meta));
    if (rsp.desired) {
      where = "desired";
      w.room(2);
      w.byte(0x12);
      const at = w.open();
      w.state(rsp.desired);
      w.close(at);
    }
    for (const r of rsp.results) w.blob(0x1a, toBinary(ResultSchema, r));
    where = "context";
    if (rsp.context) w.structField(0x22, rsp.context);
    if (rsp.requirements) w.blob(0x2a, toBinary(RequirementsSchema, rsp.requirements));
    for (const c of rsp.conditions) w.blob(0x32, toBinary(ConditionSchema, c));
    where = "output";
    if (rsp.output) w.structField(0x3a, rsp.output);
    return w.finish();
  } catch (err) {
    w.release();
    if (err instanceof EncodeError) throw new Error(err.at(where));
    throw err;
  }
}
