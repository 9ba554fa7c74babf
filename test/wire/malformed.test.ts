// Malformed and unusual requests. protobuf-es is lenient in places (a field
// may run past the end of the message holding it; unknown fields inside a map
// entry are misread), so these tests hold the codec to protobuf's rules (field
// numbers, lengths) rather than to protobuf-es, and to itself: decoding lazily
// must accept and refuse exactly what decoding everything at once does.
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { create, toBinary, toJson, type JsonObject } from "@bufbuild/protobuf";
import { isDeepStrictEqual } from "node:util";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ResourceSchema, RunFunctionRequestSchema, RunFunctionResponseSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { getAnnotation, getLabel, getObjectCondition, isDeleting } from "../../src/sdk/object.js";
import * as response from "../../src/sdk/response.js";
import { decodeRequest, encodeResponse } from "../../src/wire/codec.js";
import { encodeStruct } from "../../src/wire/struct/emit.js";
import { setDeepFrom, setLazyMin } from "../../src/wire/struct/read.js";
import { rng } from "../support/rng.js";
import { lengthDelimited as field, varintBytes } from "../support/wire.js";

const M1 = suite("malformed requests");
// Every test again with every value read, checked, copied and written by the
// loops kept for deep values (json.ts DEEP_FROM), so they are held to the same rules.
const M2 = suite("malformed requests, through the deep-value loops");
let deepFromBefore = 0;
M2.before(() => void (deepFromBefore = setDeepFrom(0)));
M2.after(() => void setDeepFrom(deepFromBefore));
const M = (name: string, fn: () => unknown) => {
  M1(name, fn as () => void);
  M2(name, fn as () => void);
};

const bytesOf = (s: string) => [...Buffer.from(s)];
/** entry is a Struct entry: key and Value bytes. */
const entry = (key: string, value: number[]) => field(0x0a, field(0x0a, bytesOf(key)), field(0x12, value));
/** stringValue is a Value holding s. */
const stringValue = (s: string) => field(0x1a, bytesOf(s));
/** bigValue is a Value holding a struct large enough to be decoded lazily; bad makes one of its strings invalid UTF-8. */
function bigValue(bad: boolean): number[] {
  const struct = [...encodeStruct({ s: "Q".repeat(200) })];
  if (bad) struct[struct.length - 100] = 0xff;
  return field(0x2a, struct);
}
/** input is a request whose input Struct holds these entries. */
const input = (...entries: number[][]) => Uint8Array.from(field(0x22, entries.flat()));

/** both decodes b lazily and eagerly and expects both to fail with a message matching re. */
function bothFail(b: Uint8Array, re: RegExp, what: string): void {
  for (const lazyMin of [128, Infinity]) {
    const old = setLazyMin(lazyMin);
    try {
      assert.throws(() => toJson(RunFunctionRequestSchema, decodeRequest(b)), re, `${what} (lazy from ${lazyMin} bytes)`);
    } finally {
      setLazyMin(old);
    }
  }
}

M("a tag with field number 0, or one past 2^29 - 1, is refused anywhere in a Struct", () => {
  // An otherwise well-formed entry with an extra varint field numbered 0.
  const zero = [0x00, 0x00];
  bothFail(input(field(0x0a, field(0x0a, bytesOf("k")), field(0x12, stringValue("v")), zero)), /invalid field number 0/, "in an entry");
  bothFail(input(entry("k", [...stringValue("v"), ...zero])), /invalid field number 0/, "in a Value");
  bothFail(input([...zero, ...entry("k", stringValue("v"))]), /invalid field number 0/, "in a Struct");
  // Field number 2^29 (the tag 2^32: varint, wire type 0): one past the largest there is.
  const huge = [0x80, 0x80, 0x80, 0x80, 0x10, 0x00];
  bothFail(input(entry("k", [...stringValue("v"), ...huge])), /invalid field number 536870912/, "in a Value");
  // The largest field number is skipped as an unknown field.
  const largest = [...varintBytes((2 ** 29 - 1) * 8), 0x00];
  assert.equal(decodeRequest(input(entry("k", [...stringValue("v"), ...largest]))).input, { k: "v" });
});

M("a field running past the end of the message holding it is refused, though the outer message has room for it", () => {
  const struct = [...encodeStruct({ a: "b" })];
  const resource = field(0x0a, struct); // Resource { resource: Struct }
  // The Resource claims two bytes fewer than its field needs; the map entry
  // around it has room for them.
  const short = [0x12, resource.length - 2, ...resource];
  const key = field(0x0a, bytesOf("x"));
  bothFail(Uint8Array.from(field(0x12, field(0x12, key, short))), /a field overruns its Resource/, "a Resource");
  // A State (observed) one byte shorter than the map entry in it.
  const e = field(0x12, key, field(0x12, resource));
  bothFail(Uint8Array.from([0x12, e.length - 1, ...e]), /a field overruns its State/, "a State");
  // Well formed, the same bytes decode.
  assert.equal(decodeRequest(Uint8Array.from(field(0x12, e))).observed!.resources["x"]!.resource, { a: "b" });
});

M("a map key or value of the wrong wire type is refused, naming it", () => {
  // observed.resources["x"] = Resource { connection_details: entry }
  const withDetail = (detail: number[]) =>
    Uint8Array.from(field(0x12, field(0x12, field(0x0a, bytesOf("x")), field(0x12, field(0x12, detail)))));
  assert.equal(
    Object.keys(
      decodeRequest(withDetail([...field(0x0a, bytesOf("pw")), ...field(0x12, [1])])).observed!.resources["x"]!.connectionDetails,
    ),
    ["pw"],
  );
  bothFail(withDetail([0x08, 0x02, ...field(0x12, [1])]), /field map key has wire type 0, want 2/, "a varint key");
  bothFail(withDetail([...field(0x0a, bytesOf("pw")), 0x10, 0x01]), /field map value has wire type 0, want 2/, "a varint value");
});

M("a malformed value the wire replaces with a later one still fails the request, lazy as when decoded in full", () => {
  const good = bigValue(false);
  const bad = bigValue(true);
  // Two Values in one entry: the last wins.
  const twice = (first: number[], second: number[]) =>
    input(field(0x0a, field(0x0a, bytesOf("k")), field(0x12, first), field(0x12, second)));
  bothFail(twice(bad, stringValue("v")), /not valid UTF-8/, "a Value repeated in an entry");
  assert.equal(decodeRequest(twice(good, stringValue("v"))).input, { k: "v" });
  // The key repeated in a later entry, given data or a lazy value.
  bothFail(input(entry("k", bad), entry("k", stringValue("v"))), /not valid UTF-8/, "a key repeated, then data");
  bothFail(input(entry("k", bad), entry("k", good)), /not valid UTF-8/, "a key repeated, then a lazy value");
  assert.equal(decodeRequest(input(entry("k", good), entry("k", stringValue("v")))).input, { k: "v" });
  // A composed resource repeated under its name in observed, and input given twice.
  const resource = (v: number[]) => field(0x12, field(0x0a, bytesOf("x")), field(0x12, field(0x0a, entry("spec", v))));
  const observed = (...rs: number[][]) => Uint8Array.from(field(0x12, rs.flat()));
  bothFail(observed(resource(bad), resource(good)), /not valid UTF-8/, "a resources map key repeated");
  assert.equal(decodeRequest(observed(resource(good), resource(stringValue("s")))).observed!.resources["x"]!.resource, { spec: "s" });
  const inputTwice = Uint8Array.from([...input(entry("k", bad)), ...input(entry("j", stringValue("v")))]);
  bothFail(inputTwice, /not valid UTF-8/, "input repeated");
});

// A realistic request, corrupted a few bytes at a time.
const big = (tag: string) => ({
  forProvider: { region: "eu-west-1", tags: Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`k${i}`, `${tag}-${i}`])) },
  list: Array.from({ length: 3 }, (_, i) => ({ i, name: `${tag}-${i}` })),
});
const obj = (name: string): JsonObject => ({
  apiVersion: "v1",
  kind: "Thing",
  metadata: {
    name,
    labels: { a: "b" },
    annotations: { "crossplane.io/external-name": `ext-${name}`, pad: "p".repeat(130) },
    deletionTimestamp: "2026-01-01T00:00:00Z",
  },
  spec: big(name),
  status: {
    conditions: [
      { type: "Synced", status: "True" },
      { type: "Ready", status: "True", reason: "Available" },
    ],
    atProvider: big(`${name}-status`),
  },
});
const resources = { x: { resource: obj("x") }, y: { resource: obj("y") } };
const base = toBinary(
  RunFunctionRequestSchema,
  create(RunFunctionRequestSchema, {
    meta: { tag: "t" },
    observed: { resources },
    desired: { resources },
    input: obj("in"),
    context: { c: big("c") },
  } as never),
);

type Outcome = { ok: unknown } | { error: string };
/** outcome runs f; an exception must be an Error of the codec's own (no TypeError or RangeError from a bad read). */
function outcome(f: () => unknown, what: string): Outcome {
  try {
    return { ok: f() };
  } catch (err) {
    const name = (err as Error).constructor.name;
    assert.ok(name === "Error" || name === "DecodeError" || name === "FieldPathError", `${what}: ${name}: ${(err as Error).message}`);
    return { error: "failed" };
  }
}
const decoded = (b: Uint8Array, lazyMin: number, what: string) => {
  const old = setLazyMin(lazyMin);
  try {
    return outcome(() => toJson(RunFunctionRequestSchema, decodeRequest(b)), what);
  } finally {
    setLazyMin(old);
  }
};
/** asRequest makes a request whose desired state is the desired state of an encoded response. */
function asRequest(rsp: Uint8Array): Uint8Array {
  const r = new BinaryReader(rsp);
  const out: number[] = [];
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 2) out.push(...field(0x1a, r.bytes()));
    else r.skip(wt, no);
  }
  return Uint8Array.from(out);
}
/** desiredOf re-reads the desired state of an encoded response as JSON. */
const desiredOf = (rsp: Uint8Array): unknown =>
  (toJson(RunFunctionRequestSchema, decodeRequest(asRequest(rsp))) as JsonObject)["desired"] ?? {};

M(
  "corrupted requests: lazy and eager decoding agree, errors are the codec's, peeked fields and copied-through state match a full read",
  () => {
    const r = rng(1);
    const helpers = [
      (o?: JsonObject) => getAnnotation(o, "crossplane.io/external-name"),
      (o?: JsonObject) => getLabel(o, "a"),
      (o?: JsonObject) => getObjectCondition(o, "Ready"),
      (o?: JsonObject) => isDeleting(o),
    ];
    let accepted = 0;
    const CASES = 1500;
    for (let n = 0; n < CASES; n++) {
      const b = Uint8Array.from(base);
      for (let k = 1 + r.int(3); k > 0; k--) {
        const at = r.int(b.length);
        b[at] = r.chance(0.5) ? b[at]! ^ (1 << r.int(8)) : r.int(256);
      }
      const what = `case ${n}`;
      const eager = decoded(b, Infinity, what);
      for (const lazyMin of [0, 128]) assert.equal(decoded(b, lazyMin, what), eager, `${what}, lazy from ${lazyMin} bytes`);
      if (!("ok" in eager)) continue;
      accepted++;
      for (const lazyMin of [0, 128]) {
        const old = setLazyMin(lazyMin);
        try {
          const unread = decodeRequest(b);
          const read = decodeRequest(b);
          for (const [name, res] of Object.entries(read.observed?.resources ?? {})) {
            outcome(() => JSON.stringify(res.resource), what); // read everything first
            for (const h of helpers) {
              const peeked = outcome(() => h(unread.observed!.resources[name]!.resource), what);
              assert.ok(
                isDeepStrictEqual(
                  peeked,
                  outcome(() => h(res.resource), what),
                ),
                `${what}, ${name}: ${JSON.stringify(peeked)}`,
              );
            }
          }
          const copied = encodeResponse(response.to(decodeRequest(b)));
          assert.equal(desiredOf(copied), (eager.ok as JsonObject)["desired"] ?? {}, `${what}, copied through`);
        } finally {
          setLazyMin(old);
        }
      }
    }
    // Enough of them decode for the checks past the first to mean something.
    assert.ok(accepted > CASES / 10, `only ${accepted} of ${CASES} decoded`);
  },
);

M("a resource or connection detail named __proto__ is a name like any other, not the map's prototype", () => {
  // observed and desired: { __proto__: Resource { resource: {a: "b"}, connection_details: { __proto__: "pw" } } }
  const res = field(
    0x12,
    field(0x0a, bytesOf("__proto__")),
    field(0x12, field(0x0a, entry("a", stringValue("b"))), field(0x12, field(0x0a, bytesOf("__proto__")), field(0x12, bytesOf("pw")))),
  );
  const req = decodeRequest(Uint8Array.from([...field(0x12, res), ...field(0x1a, res)]));
  const observed = req.observed!.resources;
  assert.equal(Object.keys(observed), ["__proto__"]);
  assert.equal(Object.getPrototypeOf(observed), Object.prototype);
  assert.equal(observed["__proto__"]!.resource, { a: "b" });
  assert.equal(Object.keys(observed["__proto__"]!.connectionDetails), ["__proto__"]);
  const rsp = response.to(req);
  assert.equal(Object.keys(rsp.desired!.resources), ["__proto__"]);
  response.setDesiredComposedResource(rsp, "__proto__", { a: "c" });
  assert.equal(Object.getPrototypeOf(rsp.desired!.resources), Object.prototype);
  // Read back with this codec (protobuf-es's toJson would make it the prototype again).
  const back = decodeRequest(asRequest(encodeResponse(rsp))).desired!.resources;
  assert.equal(Object.keys(back), ["__proto__"]);
  assert.equal(back["__proto__"]!.resource, { a: "c" });
  // An assignment makes it the map's prototype: refused, naming why.
  const assigned = create(RunFunctionResponseSchema, { desired: {} });
  (assigned.desired!.resources as Record<string, unknown>)["__proto__"] = create(ResourceSchema, { resource: { a: "d" } });
  assert.throws(
    () => encodeResponse(assigned),
    /desired\.resources has a prototype that is not Object's \(a resource named __proto__ set by assignment/,
  );
});

M1.run();
M2.run();
