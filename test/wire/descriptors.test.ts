// A guard against the hand-written codec drifting from the proto: every field
// of RunFunctionRequest and RunFunctionResponse, v1 and v1beta1, is walked from
// the generated descriptors, set to a value, and round-tripped through xfn's
// codec, both ways (the server decodes requests and encodes responses; xfn
// call, render and test do the opposite). A field the proto gains and the
// codec does not know fails here.
import {
  create,
  fromBinary,
  toBinary,
  toJson,
  type DescField,
  type DescMessage,
  type JsonObject,
  type JsonValue,
} from "@bufbuild/protobuf";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import { ScalarType } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import * as v1 from "../../src/gen/fn/v1/run_function_pb.js";
import * as v1beta1 from "../../src/gen/fn/v1beta1/zz_generated_run_function_pb.js";
import { decodeRequest, decodeResponse, encodeRequest, encodeResponse } from "../../src/wire/codec.js";

const G = suite("wire: every descriptor field round-trips through the codec");

const STRUCT: JsonObject = { s: "x", n: 1.5, b: true, z: null, l: [1, "two", { three: 3 }], o: { deep: { deeper: ["a"] } } };

function scalar(t: ScalarType, name: string): unknown {
  switch (t) {
    case ScalarType.STRING:
      return `v-${name}`;
    case ScalarType.BOOL:
      return true;
    case ScalarType.BYTES:
      return new Uint8Array([1, 2, 255]);
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return 2.5;
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return 7n;
    default:
      return 7;
  }
}

/** valueFor is a value for one (non-repeated) element of field's type. */
function element(field: DescField, depth: number, variant: number): unknown {
  if (
    field.fieldKind === "scalar" ||
    (field.fieldKind === "list" && field.listKind === "scalar") ||
    (field.fieldKind === "map" && field.mapKind === "scalar")
  ) {
    return scalar(field.scalar!, field.name);
  }
  if (
    field.fieldKind === "enum" ||
    (field.fieldKind === "list" && field.listKind === "enum") ||
    (field.fieldKind === "map" && field.mapKind === "enum")
  ) {
    const values = field.enum!.values;
    return values[values.length - 1]!.number;
  }
  const msg = field.message!;
  if (msg.typeName === "google.protobuf.Struct") return STRUCT;
  if (msg.typeName === "google.protobuf.Value") return STRUCT["l"];
  if (msg.typeName === "google.protobuf.ListValue") return STRUCT["l"];
  if (msg.typeName === "google.protobuf.Duration") return create(DurationSchema, { seconds: 61n, nanos: 5 });
  return build(msg, depth + 1, variant);
}

/**
 * build makes a message with every field set. variant picks which case of
 * each oneof is set (i mod the number of cases), so that every case of every
 * oneof appears in some variant.
 */
function build(desc: DescMessage, depth = 0, variant = 0): unknown {
  if (depth > 6) throw new Error(`${desc.typeName} nests too deeply for the walk (a recursive message?)`);
  const init: Record<string, unknown> = {};
  for (const f of desc.fields) {
    if (f.oneof) continue;
    if (f.fieldKind === "list") init[f.localName] = [element(f, depth, variant), element(f, depth, variant)];
    else if (f.fieldKind === "map") init[f.localName] = { "key-a": element(f, depth, variant), "key-b": element(f, depth, variant) };
    else init[f.localName] = element(f, depth, variant);
  }
  for (const o of desc.oneofs) {
    const f = o.fields[variant % o.fields.length]!;
    init[o.localName] = { case: f.localName, value: element(f, depth, variant) };
  }
  return create(desc, init as never);
}

/** variants is how many messages make every oneof case appear. */
function variants(desc: DescMessage, seen = new Set<string>()): number {
  if (seen.has(desc.typeName)) return 1;
  seen.add(desc.typeName);
  let n = Math.max(1, ...desc.oneofs.map((o) => o.fields.length));
  for (const f of desc.fields)
    if (f.message && !f.message.typeName.startsWith("google.protobuf.")) n = Math.max(n, variants(f.message, seen));
  return n;
}

/** fieldsSet lists every field path set in a message's JSON form, so the walk is seen to reach every field. */
function paths(desc: DescMessage, prefix = "", seen = new Set<string>()): string[] {
  if (seen.has(desc.typeName)) return [];
  seen.add(desc.typeName);
  return desc.fields.flatMap((f) => {
    const p = `${prefix}${f.jsonName}`;
    const child = f.message && !f.message.typeName.startsWith("google.protobuf.") ? paths(f.message, `${p}.`, new Set(seen)) : [];
    return [p, ...child];
  });
}

function present(json: JsonValue, path: string[]): boolean {
  if (path.length === 0) return true;
  if (Array.isArray(json)) return json.some((e) => present(e, path));
  if (typeof json !== "object" || json === null) return false;
  const [head, ...rest] = path;
  if (Object.hasOwn(json, head!)) return present(json[head!]!, rest);
  // A map: every value has the same fields.
  return Object.values(json).some(
    (v) => typeof v === "object" && v !== null && !Array.isArray(v) && Object.hasOwn(v, head!) && present(v[head!]!, rest),
  );
}

const versions = [
  { name: "v1", req: v1.RunFunctionRequestSchema, rsp: v1.RunFunctionResponseSchema },
  { name: "v1beta1", req: v1beta1.RunFunctionRequestSchema, rsp: v1beta1.RunFunctionResponseSchema },
] as const;

for (const ver of versions) {
  G(`${ver.name} RunFunctionRequest: every field and oneof case set, decoded by xfn, equal`, () => {
    const n = variants(ver.req);
    const seen: JsonValue[] = [];
    for (let i = 0; i < n; i++) {
      const msg = build(ver.req, 0, i) as never;
      const bytes = toBinary(ver.req, msg);
      const decoded = decodeRequest(bytes);
      // Back to this version's own schema through v1's bytes: the two are wire-identical.
      const again = fromBinary(ver.req, toBinary(v1.RunFunctionRequestSchema, decoded));
      const want = toJson(ver.req, msg);
      assert.equal(toJson(ver.req, again), want, `variant ${i}`);
      // xfn's request encoder (xfn call, render, test) writes the same bytes protobuf-es does.
      const asV1 = fromBinary(v1.RunFunctionRequestSchema, bytes);
      const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
      assert.is(hex(encodeRequest(asV1)), hex(toBinary(v1.RunFunctionRequestSchema, asV1)), `variant ${i}: encodeRequest`);
      seen.push(want);
    }
    for (const p of paths(ver.req))
      assert.ok(
        seen.some((j) => present(j, p.split("."))),
        `the walk never set ${p}`,
      );
  });

  G(`${ver.name} RunFunctionResponse: every field and oneof case set, encoded by xfn, equal`, () => {
    const n = variants(ver.rsp);
    const seen: JsonValue[] = [];
    for (let i = 0; i < n; i++) {
      const msg = build(ver.rsp, 0, i) as never;
      const asV1 = fromBinary(v1.RunFunctionResponseSchema, toBinary(ver.rsp, msg));
      const bytes = encodeResponse(asV1);
      const want = toJson(ver.rsp, msg);
      assert.equal(toJson(ver.rsp, fromBinary(ver.rsp, bytes)), want, `variant ${i}`);
      // xfn's response decoder (xfn call, render, test) reads what protobuf-es wrote.
      assert.equal(toJson(v1.RunFunctionResponseSchema, decodeResponse(toBinary(ver.rsp, msg))), want, `variant ${i}: decodeResponse`);
      seen.push(want);
    }
    for (const p of paths(ver.rsp))
      assert.ok(
        seen.some((j) => present(j, p.split("."))),
        `the walk never set ${p}`,
      );
  });
}

G.run();
