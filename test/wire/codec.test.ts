// The fast codec must agree with protobuf-es on everything: random requests
// and responses, and every truncation of a request.
import { create, fromBinary, fromJson, toBinary, toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import {
  CredentialDataSchema,
  CredentialsSchema,
  RunFunctionRequestSchema,
  RunFunctionResponseSchema,
} from "../../src/gen/fn/v1/run_function_pb.js";
import { decodeRequest, decodeResponse, encodeRequest, encodeResponse } from "../../src/wire/codec.js";
import { StructSchema } from "@bufbuild/protobuf/wkt";
import { Emitter, encodeStruct } from "../../src/wire/struct/emit.js";
import { LAZY_MIN, setDeepFrom, setLazyMin } from "../../src/wire/struct/read.js";
import { rng } from "../support/rng.js";
import { lengthDelimited, varintBytes } from "../support/wire.js";
import * as response from "../../src/sdk/response.js";

const KEYS = ["a", "spec", "metadata", "crossplane.io/external-name", "ünïcödé", "", "__proto__", "with space", "0"];
function value(r: ReturnType<typeof rng>, depth: number): JsonValue {
  const k = r.int(depth > 3 ? 4 : 6);
  switch (k) {
    case 0:
      return null;
    case 1:
      return [0, -1.5, 1e300, 42, 2 ** 53, -0.000001][r.int(6)]!;
    case 2:
      return ["", "x", "héllo wörld ✓", "a\nb", "😀"][r.int(5)]!;
    case 3:
      return r.chance(0.5);
    case 4:
      return object(r, depth + 1);
    default:
      return Array.from({ length: r.int(4) }, () => value(r, depth + 1));
  }
}
function object(r: ReturnType<typeof rng>, depth: number): JsonObject {
  const o: JsonObject = {};
  for (let i = r.int(5); i > 0; i--) {
    const key = KEYS[r.int(KEYS.length)]!;
    Object.defineProperty(o, key, { value: value(r, depth), enumerable: true, writable: true, configurable: true });
  }
  return o;
}
const bytes = (r: ReturnType<typeof rng>) => Uint8Array.from({ length: r.int(5) }, () => r.int(256));
const resource = (r: ReturnType<typeof rng>) => ({
  ...(r.chance(0.9) ? { resource: object(r, 0) } : {}),
  connectionDetails: r.chance(0.3) ? { pw: bytes(r), user: bytes(r) } : {},
  ready: r.int(3),
});
const state = (r: ReturnType<typeof rng>) => ({
  ...(r.chance(0.8) ? { composite: resource(r) } : {}),
  resources: Object.fromEntries(Array.from({ length: r.int(4) }, (_, i) => [`res-${i}`, resource(r)])),
});

function randomRequest(seed: number) {
  const r = rng(seed);
  return create(RunFunctionRequestSchema, {
    ...(r.chance(0.9) ? { meta: { tag: `t${seed}`, capabilities: [1, 2, 4] } } : {}),
    ...(r.chance(0.9) ? { observed: state(r) } : {}),
    ...(r.chance(0.7) ? { desired: state(r) } : {}),
    ...(r.chance(0.5) ? { input: object(r, 0) } : {}),
    ...(r.chance(0.5) ? { context: object(r, 0) } : {}),
    extraResources: r.chance(0.3) ? { old: { items: [resource(r)] } } : {},
    credentials: r.chance(0.3) ? { aws: { source: { case: "credentialData", value: { data: { key: bytes(r) } } } } } : {},
    requiredResources: r.chance(0.3) ? { cfg: { items: [resource(r), resource(r)] }, none: {} } : {},
    requiredSchemas: r.chance(0.3) ? { s: { openapiV3: object(r, 0) }, missing: {} } : {},
  } as never);
}

function randomResponse(seed: number) {
  const r = rng(seed);
  return create(RunFunctionResponseSchema, {
    ...(r.chance(0.9) ? { meta: { tag: `t${seed}`, ttl: { seconds: 60n, nanos: r.int(1000) } } } : {}),
    ...(r.chance(0.9) ? { desired: state(r) } : {}),
    results: r.chance(0.5) ? [{ severity: 3, message: "m", reason: "R", target: 2 }] : [],
    ...(r.chance(0.5) ? { context: object(r, 0) } : {}),
    ...(r.chance(0.3)
      ? { requirements: { resources: { a: { apiVersion: "v1", kind: "K", match: { case: "matchName", value: "n" } } } } }
      : {}),
    conditions: r.chance(0.5) ? [{ type: "T", status: 2, reason: "R" }] : [],
    ...(r.chance(0.3) ? { output: object(r, 0) } : {}),
  } as never);
}

const C1 = suite("fast codec");
// Every test again with every value read, checked, copied and written by the
// loops kept for deep values (json.ts DEEP_FROM), so they are held to the same rules.
const C2 = suite("fast codec, through the deep-value loops");
let deepFromBefore = 0;
C2.before(() => void (deepFromBefore = setDeepFrom(0)));
C2.after(() => void setDeepFrom(deepFromBefore));
const C = (name: string, fn: () => unknown) => {
  C1(name, fn as () => void);
  C2(name, fn as () => void);
};
const CASES = 400;

C(`decodeRequest agrees with protobuf-es on ${CASES} random requests`, () => {
  for (let seed = 1; seed <= CASES; seed++) {
    const b = toBinary(RunFunctionRequestSchema, randomRequest(seed));
    assert.equal(
      toJson(RunFunctionRequestSchema, decodeRequest(b)),
      toJson(RunFunctionRequestSchema, fromBinary(RunFunctionRequestSchema, b)),
      `seed ${seed}`,
    );
  }
});

C(`encodeResponse writes what protobuf-es reads back identically, ${CASES} random responses`, () => {
  for (let seed = 1; seed <= CASES; seed++) {
    const rsp = randomResponse(seed);
    assert.equal(
      toJson(RunFunctionResponseSchema, fromBinary(RunFunctionResponseSchema, encodeResponse(rsp))),
      toJson(RunFunctionResponseSchema, rsp),
      `seed ${seed}`,
    );
  }
});

C("every truncation of a request fails in both decoders, or decodes identically in both", () => {
  for (let seed = 1; seed <= 20; seed++) {
    const b = toBinary(RunFunctionRequestSchema, randomRequest(seed));
    for (let n = 0; n < b.length; n++) {
      const cut = b.subarray(0, n);
      let theirs: unknown;
      let ours: unknown;
      try {
        theirs = toJson(RunFunctionRequestSchema, fromBinary(RunFunctionRequestSchema, cut));
      } catch {
        theirs = "error";
      }
      try {
        ours = toJson(RunFunctionRequestSchema, decodeRequest(cut));
      } catch {
        ours = "error";
      }
      assert.equal(ours, theirs, `seed ${seed}, first ${n} of ${b.length} bytes`);
    }
  }
});

/**
 * withUnknown rewrites an encoded Struct, adding fields no schema knows (one of
 * each wire type: varint, fixed64, length-delimited, group, fixed32) to every
 * Struct, Value and ListValue in it, and to every map entry if entries is set.
 * Decoders must skip them. (protobuf-es misreads unknown fields inside a map
 * entry, so it is compared only without those.)
 */
function withUnknown(struct: Uint8Array, entries = false): Uint8Array {
  const UNKNOWN = [0x48, 0x96, 0x01, 0x51, 1, 2, 3, 4, 5, 6, 7, 8, 0x5a, 0x03, 0x78, 0x79, 0x7a, 0x6b, 0x08, 0x01, 0x6c, 0x65, 1, 2, 3, 4];
  // Each message: its length-delimited fields, rewritten when they are messages we know.
  const fields = (b: Uint8Array, nested: Record<number, (x: Uint8Array) => number[]>, unknown = UNKNOWN): number[] => {
    const res: number[] = [...unknown];
    let p = 0;
    while (p < b.length) {
      const tag = b[p++]!;
      if ((tag & 7) !== 2) {
        // Scalars of Value: a varint (null, bool) or 8 bytes (number).
        const n = (tag & 7) === 1 ? 8 : 1;
        res.push(tag, ...b.subarray(p, p + n));
        p += n;
        continue;
      }
      let n = 0;
      for (let s = 0; ; s += 7) {
        const x = b[p++]!;
        n |= (x & 0x7f) << s;
        if (x < 0x80) break;
      }
      const body = b.subarray(p, p + n);
      p += n;
      const rewrite = nested[tag];
      res.push(...lengthDelimited(tag, rewrite ? rewrite(body) : [...body]));
    }
    return [...res, ...unknown];
  };
  const structOf = (b: Uint8Array): number[] => fields(b, { 0x0a: entry });
  const entry = (b: Uint8Array): number[] => fields(b, { 0x12: valueOf }, entries ? UNKNOWN : []);
  const valueOf = (b: Uint8Array): number[] => fields(b, { 0x2a: structOf, 0x32: listOf });
  const listOf = (b: Uint8Array): number[] => fields(b, { 0x0a: valueOf });
  return Uint8Array.from(structOf(struct));
}

C(
  "lengths around 128, 16384 and 2^21 bytes, nested up to three deep, encode byte for byte as protobuf-es encodes them, from a buffer that grows at every step",
  () => {
    const shapes: [string, (s: string) => JsonObject][] = [
      ["string", (s) => ({ a: s })],
      ["struct", (s) => ({ a: { b: s } })],
      ["struct in struct", (s) => ({ a: { b: { c: s } } })],
      ["list", (s) => ({ a: [s] })],
      ["struct in list", (s) => ({ a: [{ b: s }, 1] })],
      ["list in struct in list", (s) => ({ k: true, a: [{ b: [s, null] }] })],
    ];
    const sizes = [...range(100, 140), ...range(16330, 16400), ...range(2 ** 21 - 40, 2 ** 21 + 10, 7)];
    for (const [name, shape] of shapes) {
      for (const n of sizes) {
        const o = shape("x".repeat(n));
        const theirs = Buffer.from(toBinary(StructSchema, fromJson(StructSchema, o)));
        for (const capacity of [1, undefined]) {
          const e = new Emitter(capacity);
          e.struct(o, 0);
          const ours = Buffer.from(e.finish());
          assert.ok(ours.equals(theirs), `${name}, ${n} bytes, starting from ${capacity ?? "the kept"} buffer`);
        }
      }
    }
    // Numbers reserve exactly what they write, so a buffer sized to the content
    // is full when the lengths are closed, and closing must make room.
    for (const [name, shape] of shapes) {
      for (const n of [...range(10, 20), ...range(1815, 1825)]) {
        const o = JSON.parse(
          JSON.stringify(shape("x")).replace('"x"', JSON.stringify(Array.from({ length: n }, (_, i) => i + 0.5))),
        ) as JsonObject;
        const theirs = Buffer.from(toBinary(StructSchema, fromJson(StructSchema, o)));
        for (let capacity = theirs.length - 8; capacity <= theirs.length; capacity++) {
          const e = new Emitter(capacity);
          e.struct(o, 0);
          assert.ok(Buffer.from(e.finish()).equals(theirs), `${name} of ${n} numbers, starting from ${capacity} bytes`);
          // The same Struct as a message field (as the response writes context).
          const f = new Emitter(capacity + 2);
          f.byte(0x22);
          const at = f.open();
          f.struct(o, 0);
          f.close(at);
          assert.ok(
            Buffer.from(f.finish()).equals(Buffer.concat([Buffer.from([0x22, ...varintBytes(theirs.length)]), theirs])),
            `${name} of ${n} numbers as a field`,
          );
        }
      }
    }
  },
);
function range(from: number, to: number, step = 1): number[] {
  const out: number[] = [];
  for (let i = from; i <= to; i += step) out.push(i);
  return out;
}

C("fields no schema knows, of every wire type, anywhere in a Struct are skipped as protobuf-es skips them", () => {
  for (let seed = 1; seed <= 60; seed++) {
    const input = object(rng(seed), 0);
    const struct = withUnknown(encodeStruct(input));
    const req = Uint8Array.from([0x22, ...varintBytes(struct.length), ...struct]);
    const theirs = toJson(RunFunctionRequestSchema, fromBinary(RunFunctionRequestSchema, req));
    for (const lazyMin of [LAZY_MIN, 0]) {
      const old = setLazyMin(lazyMin);
      try {
        assert.equal(toJson(RunFunctionRequestSchema, decodeRequest(req)), theirs, `seed ${seed}, lazy from ${lazyMin} bytes`);
        // With unknown fields in the entries too, the same JSON still (as Go's protobuf reads it).
        const all = withUnknown(encodeStruct(input), true);
        const req2 = Uint8Array.from([0x22, ...varintBytes(all.length), ...all]);
        assert.equal(
          toJson(RunFunctionRequestSchema, decodeRequest(req2)),
          theirs,
          `seed ${seed}, unknown fields in entries, lazy from ${lazyMin} bytes`,
        );
        // As the context, copied through to the response unread: checked, and read back by protobuf-es.
        const ctx = Uint8Array.from([0x2a, ...varintBytes(struct.length), ...struct]);
        const back = fromBinary(RunFunctionResponseSchema, encodeResponse(response.to(decodeRequest(ctx))));
        assert.equal(back.context ?? {}, (theirs as JsonObject)["input"] ?? {}, `seed ${seed}, copied through, lazy from ${lazyMin} bytes`);
      } finally {
        setLazyMin(old);
      }
    }
  }
});

C("strings that are not UTF-8 are refused, as protobuf-es refuses them", () => {
  // input = {"k": "\xff"}, then a key that is not UTF-8.
  for (const b of [
    Uint8Array.of(0x22, 0x0a, 0x0a, 0x08, 0x0a, 0x01, 0x6b, 0x12, 0x03, 0x1a, 0x01, 0xff),
    Uint8Array.of(0x22, 0x07, 0x0a, 0x05, 0x0a, 0x01, 0xff, 0x12, 0x00),
  ]) {
    assert.throws(() => fromBinary(RunFunctionRequestSchema, b));
    assert.throws(() => decodeRequest(b), /utf-8/i);
  }
});

C("a non-JSON value is an error naming its path", () => {
  const rsp = create(RunFunctionResponseSchema, {
    desired: { resources: { x: { resource: { spec: { list: [1, undefined as never] } } } } },
  });
  assert.throws(() => encodeResponse(rsp), /desired\.resources\[x\]\.resource\.spec\.list\[1\] is undefined, which JSON cannot hold/);
  const d = create(RunFunctionResponseSchema, { context: { when: new Date() as never } });
  assert.throws(() => encodeResponse(d), /context\.when is a Date, not a JSON object/);
  const o = create(RunFunctionResponseSchema, { output: { a: [NaN] }, desired: {} });
  assert.throws(() => encodeResponse(o), /^output\.a\[0\] is NaN, which JSON cannot hold$/);
  const x = create(RunFunctionResponseSchema, { desired: { composite: { resource: { s: { d: new Map() as never } } } } });
  assert.throws(() => encodeResponse(x), /desired\.composite\.resource\.s\.d is a Map, not a JSON object/);
});

C(
  "short strings come back right from the string cache: near-identical strings, non-ASCII, every length up to past the cache's limit",
  () => {
    // Strings sharing their first, middle and last bytes, many of each length,
    // so that slots collide and get replaced; decoded twice (misses, then hits).
    const r = rng(7);
    const alphabet = ["a", "b", "c", "é", "0", "-", "✓"];
    const strings: string[] = [];
    for (let n = 0; n <= 34; n++) {
      for (let k = 0; k < 300; k++) {
        const chars = Array.from({ length: n }, (_, i) =>
          i < 4 || i >= n - 4 || Math.abs(i - n / 2) < 3 ? "x" : alphabet[r.int(alphabet.length)]!,
        );
        if (n > 0 && r.chance(0.1)) chars[r.int(n)] = "é";
        strings.push(chars.join(""));
      }
    }
    const input: JsonObject = {};
    strings.forEach((s, i) => (input[`${s}`] = s + String(i % 3 === 0 ? "" : i)));
    const b = toBinary(RunFunctionRequestSchema, create(RunFunctionRequestSchema, { input }));
    const want = toJson(RunFunctionRequestSchema, fromBinary(RunFunctionRequestSchema, b));
    for (let pass = 0; pass < 2; pass++) assert.equal(toJson(RunFunctionRequestSchema, decodeRequest(b)), want, `pass ${pass + 1}`);
  },
);

C("strings and keys near the one-byte length boundary encode byte for byte as protobuf-es encodes them", () => {
  // Up to 42 UTF-16 units a string's UTF-8 length fits one byte whatever it
  // holds, and the encoder measures such strings as it writes them; longer ones first.
  const units = ["a", "é", "✓", "😀", "\ud800"]; // 1, 2, 3, 4 (two units) and 3 (a lone surrogate) bytes
  const o: JsonObject = {};
  for (const u of units) {
    for (let n = 38; n <= 46; n++) {
      const s = u.repeat(Math.ceil(n / u.length)).slice(0, n);
      o[`v-${s}`] = s;
      o[s] = [s, { [s]: s }];
    }
  }
  const ours = encodeStruct(o);
  const theirs = toBinary(StructSchema, fromJson(StructSchema, o));
  assert.equal(Buffer.from(ours).equals(Buffer.from(theirs)), true);
});

C("the encoder's reused buffer survives a failed encoding and grows for large values", () => {
  const big: JsonObject = Object.fromEntries(Array.from({ length: 6000 }, (_, i) => [`k${i}`, { n: i, s: `v${i}`, l: [i, `${i}`] }]));
  const want = Buffer.from(toBinary(StructSchema, fromJson(StructSchema, big)));
  assert.equal(Buffer.from(encodeStruct(big)).equals(want), true);
  const bad = create(RunFunctionResponseSchema, { desired: { resources: { x: { resource: { a: big, b: undefined as never } } } } });
  assert.throws(() => encodeResponse(bad), /resource\.b is undefined/);
  assert.equal(Buffer.from(encodeStruct(big)).equals(want), true);
  assert.equal(
    Buffer.from(encodeStruct({ small: "x" })).equals(Buffer.from(toBinary(StructSchema, fromJson(StructSchema, { small: "x" })))),
    true,
  );
});

// protobuf-es writes map entries by assignment, so its decoding drops a key
// named __proto__. The codec reads the maps inside credentials and
// requirements itself, keeping every key.
C("credentials: a credential and a Secret key named __proto__ survive decoding", () => {
  const own = <T>(entries: [string, T][]) => Object.fromEntries(entries) as Record<string, T>;
  const data = own([
    ["__proto__", new TextEncoder().encode("s3cret")],
    ["user", new TextEncoder().encode("admin")],
  ]);
  const req = create(RunFunctionRequestSchema);
  req.credentials = own([
    ["__proto__", create(CredentialsSchema, { source: { case: "credentialData", value: { data: { k: new Uint8Array([1]) } } } })],
    ["db", { ...create(CredentialsSchema), source: { case: "credentialData", value: { ...create(CredentialDataSchema), data } } }],
  ]);
  const back = decodeRequest(encodeRequest(req));
  assert.equal(Object.keys(back.credentials).sort(), ["__proto__", "db"]);
  const got = back.credentials["db"]!.source;
  assert.is(got.case, "credentialData");
  const kept = got.case === "credentialData" ? got.value.data : {};
  assert.equal(Object.keys(kept).sort(), ["__proto__", "user"]);
  assert.ok(Object.hasOwn(kept, "__proto__"));
  assert.is(new TextDecoder().decode(kept["__proto__"]), "s3cret");
  assert.is(Object.getPrototypeOf(kept), Object.prototype);
  // Two credential_data fields in one Credentials merge, as protobuf-es decodes them.
  const part = (k: string, v: number) =>
    lengthDelimited(0x0a, lengthDelimited(0x0a, lengthDelimited(0x0a, [...Buffer.from(k)]), lengthDelimited(0x12, [v])));
  const twice = Uint8Array.from(
    lengthDelimited(0x3a, lengthDelimited(0x0a, [0x61]), lengthDelimited(0x12, part("x", 1), part("y", 2), part("x", 3))),
  );
  assert.equal(
    toJson(RunFunctionRequestSchema, decodeRequest(twice)),
    toJson(RunFunctionRequestSchema, fromBinary(RunFunctionRequestSchema, twice)),
  );
  assert.equal(toJson(RunFunctionRequestSchema, decodeRequest(twice)), {
    credentials: { a: { credentialData: { data: { x: "Aw==", y: "Ag==" } } } },
  });
  // Everything else as protobuf-es decodes it.
  const plain = create(RunFunctionRequestSchema, {
    credentials: { db: { source: { case: "credentialData", value: { data: { a: new Uint8Array([7]) } } } } },
  });
  const b = toBinary(RunFunctionRequestSchema, plain);
  assert.equal(
    toJson(RunFunctionRequestSchema, decodeRequest(b)),
    toJson(RunFunctionRequestSchema, fromBinary(RunFunctionRequestSchema, b)),
  );
});

C("credentials: a malformed Credentials or CredentialData names the field", () => {
  const entry = (credentials: number[]) =>
    Uint8Array.from(lengthDelimited(0x3a, lengthDelimited(0x0a, [0x61]), lengthDelimited(0x12, credentials)));
  assert.throws(() => decodeRequest(entry([0x08, 0x01])), /credential_data has wire type 0, want 2/);
  assert.throws(() => decodeRequest(entry(lengthDelimited(0x0a, [0x08, 0x01]))), /CredentialData\.data has wire type 0, want 2/);
  assert.throws(() => decodeRequest(entry([0x0a, 0x05, 0x0a])), /premature EOF/);
});

C("requirements: names __proto__ are kept when set and when decoded", () => {
  const rsp = response.to(create(RunFunctionRequestSchema));
  response.requireResources(rsp, "__proto__", { apiVersion: "v1", kind: "ConfigMap", matchName: "a" });
  response.requireExtraResources(rsp, "__proto__", { apiVersion: "v1", kind: "Secret", matchLabels: { app: "x" } });
  response.requireSchema(rsp, "__proto__", { apiVersion: "example.org/v1", kind: "Thing" });
  response.requireResources(rsp, "plain", { apiVersion: "v1", kind: "ConfigMap", matchName: "b" });
  for (const r of [rsp.requirements!, decodeResponse(encodeResponse(rsp)).requirements!]) {
    assert.equal(Object.keys(r.resources).sort(), ["__proto__", "plain"]);
    assert.is(r.resources["__proto__"]!.match.value, "a");
    assert.equal(Object.keys(r.extraResources), ["__proto__"]);
    assert.is(r.extraResources["__proto__"]!.kind, "Secret");
    assert.equal(Object.keys(r.schemas), ["__proto__"]);
    assert.is(r.schemas["__proto__"]!.kind, "Thing");
  }
  assert.throws(
    () => decodeResponse(Uint8Array.from(lengthDelimited(0x2a, [0x10, 0x01]))),
    /Requirements\.resources has wire type 0, want 2/,
  );
  // A selector cut short, or longer than its entry: refused, not read past.
  const entry = (field: number, value: number[]) =>
    Uint8Array.from(lengthDelimited(0x2a, lengthDelimited(field, lengthDelimited(0x0a, [0x61]), value)));
  for (const bad of [
    entry(0x12, [0x12, 0x09, 0x0a]),
    entry(0x12, lengthDelimited(0x12, [0x08])),
    entry(0x1a, lengthDelimited(0x12, [0x0a, 0x05])),
  ])
    assert.throws(() => decodeResponse(bad), /cannot decode RunFunctionResponse: premature EOF/);
});

C1.run();
C2.run();
