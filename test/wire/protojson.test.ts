// Protobuf JSON form for the local tools: every map and Struct key survives,
// __proto__ included, and everything else reads and writes as protobuf-es does.
import { create, fromJson, toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { RunFunctionRequestSchema, RunFunctionResponseSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { decodeRequest, decodeResponse, encodeRequest, encodeResponse } from "../../src/wire/codec.js";
import { copyMessage, depthOf, messageFromJson, messageToJson } from "../../src/wire/protojson.js";
import { nest } from "../support/requests.js";
import { rng } from "../support/rng.js";

const P = suite("wire: protobuf JSON keeping every key");

/** rename deeply copies v, naming `to` every key `from` (the oracle's own, simple renaming). */
function rename(v: unknown, from: string, to: string): unknown {
  if (Array.isArray(v)) return v.map((x) => rename(x, from, to));
  if (typeof v !== "object" || v === null) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v))
    Object.defineProperty(out, k === from ? to : k, { value: rename(x, from, to), enumerable: true, writable: true, configurable: true });
  return out;
}

/** viaProtobufEs is what protobuf-es makes of json when __proto__ is spelled otherwise. */
function viaProtobufEs(json: unknown, schema: typeof RunFunctionRequestSchema | typeof RunFunctionResponseSchema): string {
  const alias = "proto-alias";
  const msg = fromJson(schema as typeof RunFunctionRequestSchema, rename(json, "__proto__", alias) as JsonValue);
  return JSON.stringify(rename(toJson(schema as typeof RunFunctionRequestSchema, msg), alias, "__proto__"));
}

const b64 = (s: string) => Buffer.from(s).toString("base64");

// Each names a place a key __proto__ can sit in a request: a map entry or a Struct field.
const requests: Record<string, string> = {
  "an observed composed resource": `{"observed": {"resources": {"__proto__": {"resource": {"kind": "K"}}, "b": {"resource": {"kind": "B"}}}}}`,
  "a field of a resource": `{"observed": {"composite": {"resource": {"kind": "X", "spec": {"__proto__": {"deep": [1, {"__proto__": "x"}]}}}}}}`,
  "a connection detail": `{"observed": {"composite": {"resource": {"kind": "X"}, "connectionDetails": {"__proto__": "${b64("pw")}"}}}}`,
  "a desired composed resource": `{"desired": {"resources": {"a": {"resource": {"kind": "A"}}, "__proto__": {"resource": {"kind": "K"}, "ready": "READY_TRUE"}}}}`,
  "a credential and a Secret key": `{"credentials": {"__proto__": {"credentialData": {"data": {"__proto__": "${b64("s")}", "user": "${b64("u")}"}}}}}`,
  "a context key": `{"context": {"__proto__": {"a": 1}, "apiextensions.crossplane.io/environment": {"x": "y"}}}`,
  "a required resource": `{"requiredResources": {"__proto__": {"items": [{"resource": {"kind": "K"}, "connectionDetails": {"__proto__": "${b64("c")}"}}]}}}`,
  "an extra resource": `{"extraResources": {"__proto__": {"items": [{"resource": {"kind": "K"}}]}}}`,
  "a required schema": `{"requiredSchemas": {"__proto__": {"openapiV3": {"type": "object", "properties": {"__proto__": {"type": "string"}}}}}}`,
  "the input": `{"input": {"apiVersion": "a/v1", "kind": "Input", "__proto__": {"x": 1}}}`,
};

for (const [where, text] of Object.entries(requests)) {
  P(`a request keeps __proto__ as ${where}, and otherwise reads as protobuf-es reads it`, () => {
    const json = JSON.parse(text) as unknown;
    const req = messageFromJson(RunFunctionRequestSchema, json);
    assert.is(JSON.stringify(messageToJson(RunFunctionRequestSchema, req)), viaProtobufEs(json, RunFunctionRequestSchema));
    assert.ok(JSON.stringify(messageToJson(RunFunctionRequestSchema, req)).includes(`"__proto__"`), "the key is gone");
    // And xfn's codec carries it over the wire.
    const back = messageToJson(RunFunctionRequestSchema, decodeRequest(encodeRequest(req)));
    assert.is(JSON.stringify(back), viaProtobufEs(json, RunFunctionRequestSchema));
    // Nothing the name could have turned into a prototype.
    assert.is(Object.getPrototypeOf(req.observed?.resources ?? {}), Object.prototype);
    assert.is(Object.getPrototypeOf(req.credentials), Object.prototype);
  });
}

P("a response keeps a desired resource, a context key and a requirement named __proto__", () => {
  const json = JSON.parse(`{
    "meta": {"tag": "t", "ttl": "60s"},
    "desired": {"resources": {"__proto__": {"resource": {"kind": "K", "metadata": {"labels": {"__proto__": "v"}}}}}},
    "context": {"__proto__": "c"},
    "requirements": {"resources": {"__proto__": {"apiVersion": "v1", "kind": "Secret", "matchName": "s"}}}
  }`) as unknown;
  const rsp = messageFromJson(RunFunctionResponseSchema, json);
  assert.ok(Object.hasOwn(rsp.desired!.resources, "__proto__"));
  const want = viaProtobufEs(json, RunFunctionResponseSchema);
  assert.is(JSON.stringify(messageToJson(RunFunctionResponseSchema, rsp)), want);
  assert.is(JSON.stringify(messageToJson(RunFunctionResponseSchema, decodeResponse(encodeResponse(rsp)))), want);
});

P("key order is kept", () => {
  const json = JSON.parse(`{"observed": {"composite": {"resource": {"z": 1, "__proto__": 2, "a": 3}}}}`) as unknown;
  const out = messageToJson(RunFunctionRequestSchema, messageFromJson(RunFunctionRequestSchema, json)) as {
    observed: { composite: { resource: object } };
  };
  assert.equal(Object.keys(out.observed.composite.resource), ["z", "__proto__", "a"]);
});

P("a key that looks like the placeholder is kept apart from __proto__", () => {
  const json = JSON.parse(`{"context": {"__proto__": 1, "__proto__\\u0000xfn": 2, "__proto__\\u0000xfn\\u0000": 3}}`) as unknown;
  const req = messageFromJson(RunFunctionRequestSchema, json);
  assert.equal(Object.entries(req.context!), [
    ["__proto__", 1],
    ["__proto__\u0000xfn", 2],
    ["__proto__\u0000xfn\u0000", 3],
  ]);
  assert.is(JSON.stringify(messageToJson(RunFunctionRequestSchema, req)), JSON.stringify(json));
});

P("errors name __proto__, not the placeholder", () => {
  for (const text of [`{"meta": {"__proto__": "x"}}`, `{"observed": {"resources": {"__proto__": {"ready": "MAYBE"}}}}`]) {
    try {
      messageFromJson(RunFunctionRequestSchema, JSON.parse(text));
      assert.unreachable(`${text} was accepted`);
    } catch (err) {
      const msg = (err as Error).message;
      assert.not.ok(msg.includes("\u0000"), msg);
      assert.ok(/__proto__|MAYBE/.test(msg), msg);
    }
  }
  // protobuf-es's own words for the same input with another name.
  assert.throws(() => messageFromJson(RunFunctionRequestSchema, JSON.parse(`{"meta": {"__proto__": "x"}}`)), /key "__proto__" is unknown/);
});

P("the input object is not changed", () => {
  const json = JSON.parse(`{"context": {"__proto__": {"a": 1}}}`) as { context: object };
  const before = JSON.stringify(json);
  messageFromJson(RunFunctionRequestSchema, json);
  assert.is(JSON.stringify(json), before);
  assert.ok(Object.hasOwn(json.context, "__proto__"));
});

P("copyMessage copies deeply, keeping __proto__, messages' prototypes and byte arrays' contents", () => {
  const req = messageFromJson(
    RunFunctionRequestSchema,
    JSON.parse(
      `{"meta": {"tag": "t"}, "observed": {"resources": {"__proto__": {"resource": {"kind": "K"}, "connectionDetails": {"k": "${b64("v")}"}}}}}`,
    ),
  );
  const copy = copyMessage(req);
  assert.is(copy.$typeName, req.$typeName);
  assert.is(Object.getPrototypeOf(copy), Object.getPrototypeOf(req));
  assert.ok(Object.hasOwn(copy.observed!.resources, "__proto__"));
  copy.observed!.resources["__proto__"]!.connectionDetails["k"] = new Uint8Array([1]);
  (copy.observed!.resources["__proto__"]!.resource as { kind: string }).kind = "Changed";
  assert.is(Buffer.from(req.observed!.resources["__proto__"]!.connectionDetails["k"]!).toString(), "v");
  assert.is(req.observed!.resources["__proto__"]!.resource!["kind"], "K");
});

/** nested is a request whose context nests `levels` levels in all (the request object is the first). */
const nested = (levels: number) => ({ context: nest(levels - 1) });

P("JSON form reads and writes up to 500 levels (protobuf-es alone stops near 98), and refuses deeper by name", () => {
  for (const levels of [99, 150, 500]) {
    const req = messageFromJson(RunFunctionRequestSchema, nested(levels));
    assert.is(depthOf(messageToJson(RunFunctionRequestSchema, req)), levels);
    assert.is(depthOf(copyMessage(req)), levels);
  }
  const tooDeep = /the message nests more than 500 levels deep, more than xfn's tools read or write in JSON or YAML form/;
  assert.throws(() => messageFromJson(RunFunctionRequestSchema, nested(501)), tooDeep);
  // A message made another way (decoded from the wire, where 5,000 levels are allowed).
  const wire = decodeRequest(
    encodeRequest(create(RunFunctionRequestSchema, { context: (nested(3000) as { context: JsonObject }).context })),
  );
  assert.throws(() => messageToJson(RunFunctionRequestSchema, wire), tooDeep);
  assert.throws(() => copyMessage(wire), tooDeep);
});

P("depthOf counts objects and arrays, not byte arrays, and stops counting past its limit", () => {
  assert.is(depthOf("x"), 0);
  assert.is(depthOf({}), 1);
  assert.is(depthOf({ a: [1, { b: new Uint8Array(4) }] }), 3);
  assert.is(depthOf(nested(10_000), 20), 21);
});

// Without __proto__, the wrappers are protobuf-es: random requests read and written both ways agree.
const KEYS = ["a", "spec", "metadata", "ünïcödé", "", "with space", "0", "__proto__"];
function value(r: ReturnType<typeof rng>, depth: number): JsonValue {
  switch (depth > 3 ? r.int(4) : r.int(6)) {
    case 0:
      return null;
    case 1:
      return r.int(2) === 0;
    case 2:
      return r.int(1000) - 500;
    case 3:
      return r.pick(KEYS);
    case 4:
      return Array.from({ length: r.int(4) }, () => value(r, depth + 1));
    default:
      return object(r, depth + 1);
  }
}
function object(r: ReturnType<typeof rng>, depth: number): Record<string, JsonValue> {
  const o: Record<string, JsonValue> = {};
  for (let i = r.int(4); i > 0; i--)
    Object.defineProperty(o, r.pick(KEYS), { value: value(r, depth), enumerable: true, writable: true, configurable: true });
  return o;
}
P("200 random requests read and write as protobuf-es does, __proto__ spelled otherwise for it", () => {
  for (let seed = 0; seed < 200; seed++) {
    const r = rng(seed);
    const resources: Record<string, JsonValue> = {};
    for (let i = r.int(4); i > 0; i--)
      Object.defineProperty(resources, r.pick(KEYS), {
        value: { resource: object(r, 0) },
        enumerable: true,
        writable: true,
        configurable: true,
      });
    const json = { meta: { tag: `t${seed}` }, observed: { composite: { resource: object(r, 0) }, resources }, context: object(r, 0) };
    const got = JSON.stringify(messageToJson(RunFunctionRequestSchema, messageFromJson(RunFunctionRequestSchema, json)));
    assert.is(got, viaProtobufEs(json, RunFunctionRequestSchema), `seed ${seed}`);
  }
});

P.run();
