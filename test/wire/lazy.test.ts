// Lazy decoding: values decoded on first read must look and behave exactly
// like plain JSON, values never read must be copied through unchanged, and
// anything read, changed or replaced must be encoded as it is now.
import { create, fromBinary, toBinary, toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { deepStrictEqual } from "node:assert";
import { inspect } from "node:util";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { RunFunctionRequestSchema, RunFunctionResponseSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { createHandler } from "../../src/server/handler.js";
import * as response from "../../src/sdk/response.js";
import { decodeRequest, encodeResponse } from "../../src/wire/codec.js";
import { encodeStruct } from "../../src/wire/struct/emit.js";
import { isUnread } from "../../src/wire/struct/lazy.js";
import { peek, UNPEEKED } from "../../src/wire/struct/peek.js";
import { LAZY_MIN, setDeepFrom, setLazyMin } from "../../src/wire/struct/read.js";
import { cloneJson } from "../../src/wire/struct/values.js";
import { rng } from "../support/rng.js";
import { varintBytes as varint } from "../support/wire.js";
import { memoryLog } from "../support/log.js";

const L1 = suite("lazy Struct values");
// Every test again with every value read, checked, copied and written by the
// loops kept for deep values (json.ts DEEP_FROM), so they are held to the same rules.
const L2 = suite("lazy Struct values, through the deep-value loops");
let deepFromBefore = 0;
L2.before(() => void (deepFromBefore = setDeepFrom(0)));
L2.after(() => void setDeepFrom(deepFromBefore));
const L = (name: string, fn: () => unknown) => {
  L1(name, fn as () => void);
  L2(name, fn as () => void);
};

const big = (tag: string) => ({
  forProvider: { region: "eu-west-1", tags: Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`k${i}`, `${tag}-${i}`])) },
  list: Array.from({ length: 8 }, (_, i) => ({ i, name: `${tag}-${i}` })),
});
const obj = (name: string): JsonObject => ({
  apiVersion: "v1",
  kind: "Thing",
  metadata: { name, labels: { a: "b" } },
  spec: big(name),
  status: { conditions: [{ type: "Ready", status: "True" }], atProvider: big(`${name}-status`) },
});

/** requestBytes encodes a request whose observed and desired state hold these objects. */
function requestBytes(objs: Record<string, JsonObject>): Uint8Array {
  const resources = Object.fromEntries(Object.entries(objs).map(([k, o]) => [k, { resource: o }]));
  return toBinary(
    RunFunctionRequestSchema,
    create(RunFunctionRequestSchema, { meta: { tag: "t" }, observed: { resources }, desired: { resources } } as never),
  );
}

const decodedObject = (o: JsonObject) => decodeRequest(requestBytes({ x: o })).observed!.resources["x"]!.resource!;
const roundTrip = (o: JsonObject): JsonObject => {
  const rsp = create(RunFunctionResponseSchema, { desired: { resources: { x: { resource: o } } } });
  return toJson(RunFunctionResponseSchema, fromBinary(RunFunctionResponseSchema, encodeResponse(rsp)), {
    alwaysEmitImplicit: false,
  }) as never;
};
const desiredOf = (j: JsonObject) => (((j["desired"] as JsonObject)["resources"] as JsonObject)["x"] as JsonObject)["resource"];

L("big values are left undecoded, and read as the same JSON", () => {
  const o = decodedObject(obj("a"));
  const d = Object.getOwnPropertyDescriptor(o, "spec")!;
  assert.type(d.get, "function", "spec should be lazy at the default threshold");
  assert.type(Object.getOwnPropertyDescriptor(o, "apiVersion")!.value, "string");
  assert.equal(o, obj("a"));
  deepStrictEqual(o, obj("a"));
  assert.equal(JSON.parse(JSON.stringify(o)), obj("a"));
  assert.equal(structuredClone(o), obj("a"));
  assert.equal({ ...o }, obj("a"));
  assert.equal(Object.keys(o), ["apiVersion", "kind", "metadata", "spec", "status"]);
  assert.ok(!inspect(o, { depth: 10 }).includes("Getter"), inspect(o));
  assert.ok(inspect(o, { depth: 10 }).includes("eu-west-1"));
});

/** notPlain names the first place in v that is not a plain data property (a getter, a symbol key), if any. */
function notPlain(v: unknown, at = ""): string | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  if (Object.getOwnPropertySymbols(v).length > 0) return `${at || "the top"} has symbol keys`;
  for (const [k, d] of Object.entries(Object.getOwnPropertyDescriptors(v))) {
    if (!("value" in d)) return `${at}.${k} is an accessor`;
    const inner = notPlain(d.value, `${at}.${k}`);
    if (inner) return inner;
  }
  return undefined;
}

L("structuredClone of a value from the request is a plain copy that keeps nothing of the request", () => {
  // README: an object from the request keeps the request's bytes alive while it
  // is referenced; keep structuredClone(part) to hold it past the call.
  const o = decodedObject(obj("a"));
  assert.ok(isUnread(o, "spec"));
  assert.ok(notPlain(o), "the probe should see the lazy value");
  const copy = structuredClone(o);
  assert.is(notPlain(copy), undefined);
  assert.equal(copy, obj("a"));
});

L("a value never read is copied through byte for byte", () => {
  const bytes = requestBytes({ x: obj("a") });
  const req = decodeRequest(bytes);
  const rsp = response.to(req);
  const out = encodeResponse(rsp);
  // The desired state goes out exactly as it came in (same field, same bytes).
  const reqDesired = toBinary(
    RunFunctionRequestSchema,
    create(RunFunctionRequestSchema, { desired: fromBinary(RunFunctionRequestSchema, bytes).desired }),
  );
  const rspDesired = toBinary(
    RunFunctionResponseSchema,
    create(RunFunctionResponseSchema, { desired: fromBinary(RunFunctionResponseSchema, out).desired }),
  );
  assert.equal(rspDesired.subarray(1), reqDesired.subarray(1));
  assert.equal(desiredOf(toJson(RunFunctionResponseSchema, fromBinary(RunFunctionResponseSchema, out)) as JsonObject), obj("a"));
});

L("a value read and then changed is encoded as changed", () => {
  const o = decodedObject(obj("a"));
  ((o["spec"] as JsonObject)["forProvider"] as JsonObject)["region"] = "us-east-1";
  ((o["status"] as JsonObject)["atProvider"] as JsonObject)["list"] = [];
  const want = obj("a");
  ((want["spec"] as JsonObject)["forProvider"] as JsonObject)["region"] = "us-east-1";
  ((want["status"] as JsonObject)["atProvider"] as JsonObject)["list"] = [];
  assert.equal(desiredOf(roundTrip(o)), want);
});

L("assigning, deleting and re-adding, and redefining a lazy key all win over the original bytes", () => {
  const assigned = decodedObject(obj("a"));
  assigned["spec"] = { replaced: true };
  assert.equal((desiredOf(roundTrip(assigned)) as JsonObject)["spec"], { replaced: true });

  const readded = decodedObject(obj("a"));
  delete readded["spec"];
  assert.equal(Object.keys(readded), ["apiVersion", "kind", "metadata", "status"]);
  assert.not.ok("spec" in (desiredOf(roundTrip(readded)) as JsonObject));
  readded["spec"] = { again: 1 };
  assert.equal((desiredOf(roundTrip(readded)) as JsonObject)["spec"], { again: 1 });

  const redefined = decodedObject(obj("a"));
  Object.defineProperty(redefined, "spec", { value: { defined: "x" }, enumerable: true, writable: true, configurable: true });
  assert.equal((desiredOf(roundTrip(redefined)) as JsonObject)["spec"], { defined: "x" });
});

L("a frozen object still reads its lazy values, and encodes what was read", () => {
  const o = Object.freeze(decodedObject(obj("a")));
  const spec = o["spec"] as JsonObject;
  assert.equal(spec, big("a"));
  assert.is(o["spec"], spec, "the same object on every read");
  spec["extra"] = "kept";
  assert.equal((desiredOf(roundTrip(o)) as JsonObject)["spec"], { ...big("a"), extra: "kept" });
});

L("read through a Proxy (a user's wrapper, a state library's draft), lazy values read as the same JSON", () => {
  // The getter then runs with the proxy as this: it must still find the bytes.
  const o = decodedObject(obj("a"));
  const p = new Proxy(o, {});
  assert.equal(p["spec"], big("a"));
  assert.equal(JSON.parse(JSON.stringify(new Proxy(decodedObject(obj("b")), {}))), obj("b"));
  (p["status"] as JsonObject)["extra"] = "kept";
  const status = (desiredOf(roundTrip(o)) as JsonObject)["status"] as JsonObject;
  assert.is(status["extra"], "kept");
});

L("a deep freeze that walks every own key, symbols too, works and reads the same JSON", () => {
  const deepFreeze = (v: object): void => {
    Object.freeze(v);
    for (const k of Reflect.ownKeys(v)) {
      const c = (v as Record<PropertyKey, unknown>)[k];
      if (c && typeof c === "object" && !Object.isFrozen(c)) deepFreeze(c);
    }
  };
  const o = decodedObject(obj("a"));
  deepFreeze(o);
  assert.equal(o, obj("a"));
  assert.ok(Object.isFrozen(o["spec"]));
  assert.equal(desiredOf(roundTrip(o)), obj("a"));
});

L("cloneJson copies without decoding; the copy and the original are independent", () => {
  const o = decodedObject(obj("a"));
  const c = cloneJson(o);
  assert.type(Object.getOwnPropertyDescriptor(c, "spec")!.get, "function", "the copy's spec is still undecoded");
  (c["spec"] as JsonObject)["mine"] = 1;
  assert.not.ok("mine" in (o["spec"] as JsonObject));
  assert.equal(o, obj("a"));
  assert.equal(desiredOf(roundTrip(c)), { ...obj("a"), spec: { ...big("a"), mine: 1 } });
  // Not JSON: shared, not copied, so the encoder can name it.
  const when = new Date(0);
  assert.is(cloneJson({ when } as never)["when"], when);
});

L("with every value lazy, decoding agrees with protobuf-es on random requests and every cut", () => {
  const old = setLazyMin(0);
  try {
    const r = rng(7);
    const value = (d: number): unknown =>
      d > 3 || r.chance(0.4)
        ? ["s", 1.5, true, null, "ü✓"][r.int(5)]
        : r.chance(0.5)
          ? Array.from({ length: r.int(4) }, () => value(d + 1))
          : Object.fromEntries(Array.from({ length: r.int(4) }, (_, i) => [["a", "spec", "__proto__", "ü"][i]!, value(d + 1)]));
    for (let seed = 0; seed < 150; seed++) {
      const o = { k: value(0), spec: value(0), status: value(0) } as JsonObject;
      const bytes = requestBytes({ x: o, y: { o } });
      const theirs = toJson(RunFunctionRequestSchema, fromBinary(RunFunctionRequestSchema, bytes));
      assert.equal(toJson(RunFunctionRequestSchema, decodeRequest(bytes)), theirs, `seed ${seed}`);
      // Copied through untouched, then read back by protobuf-es.
      const rsp = response.to(decodeRequest(bytes));
      const back = toJson(RunFunctionResponseSchema, fromBinary(RunFunctionResponseSchema, encodeResponse(rsp))) as JsonObject;
      assert.equal(back["desired"], (theirs as JsonObject)["desired"], `seed ${seed}`);
    }
    const bytes = requestBytes({ x: obj("a") });
    for (let n = 0; n < bytes.length; n += 7) {
      let ours: unknown;
      let theirs: unknown;
      try {
        theirs = toJson(RunFunctionRequestSchema, fromBinary(RunFunctionRequestSchema, bytes.subarray(0, n)));
      } catch {
        theirs = "error";
      }
      try {
        ours = toJson(RunFunctionRequestSchema, decodeRequest(bytes.subarray(0, n)));
      } catch {
        ours = "error";
      }
      assert.equal(ours, theirs, `first ${n} bytes`);
    }
  } finally {
    setLazyMin(old);
  }
});

/** withBadSpec is a request whose x (observed and desired) has a big spec holding a string that is not UTF-8. */
function withBadSpec(): Uint8Array {
  // Longer than LAZY_MIN, so the spec holding it is left undecoded.
  const marker = "Q".repeat(LAZY_MIN + 72);
  const bytes = requestBytes({ x: { spec: { s: marker } } });
  const text = Buffer.from(bytes).toString("latin1");
  const out = Uint8Array.from(bytes);
  let corrupted = 0;
  for (let at = text.indexOf(marker); at >= 0; at = text.indexOf(marker, at + 1)) {
    out[at + 100] = 0xff;
    corrupted++;
  }
  assert.is(corrupted, 2);
  return out;
}

L("bytes never read are not checked; reading them or copying them through names what is wrong", () => {
  const req = decodeRequest(withBadSpec());
  const o = req.observed!.resources["x"]!.resource!;
  assert.throws(() => o["spec"], /cannot decode a value of the request: a string is not valid UTF-8/);
  const rsp = response.to(req);
  assert.throws(
    () => encodeResponse(rsp),
    /desired\.resources\[x\]\.resource\.spec holds bytes from the request that do not decode: .*not valid UTF-8/,
  );
});

L("through the server: a step reading a bad value, or copying one through, gets a Fatal result naming it", async () => {
  const run = async (read: boolean) => {
    const h = createHandler(
      (req) => {
        if (read) void req.observed!.resources["x"]!.resource!["spec"];
        return response.to(req);
      },
      { maxConcurrency: 1, maxQueue: 1, maxResponseBytes: 1 << 22 },
      memoryLog(false).log,
    );
    const out = await h.handle(withBadSpec(), { version: "v1", deadline: Infinity });
    assert.ok("ok" in out);
    return fromBinary(RunFunctionResponseSchema, (out as { ok: Uint8Array }).ok);
  };
  const read = await run(true);
  assert.is(read.results[0]?.severity, 1);
  assert.match(read.results[0]!.message, /function failed: cannot decode a value of the request: a string is not valid UTF-8/);
  const copied = await run(false);
  assert.match(copied.results[0]!.message, /cannot encode the function's response: desired\.resources\[x\]\.resource\.spec holds bytes/);
});

L("a key repeated on the wire: the last one wins, lazy or not", () => {
  const bigBytes = encodeStruct({ v: big("first") });
  const small = encodeStruct({ v: 1 });
  const bigAgain = encodeStruct({ v: big("last") });
  for (const [parts, want] of [
    [[bigBytes, small], 1],
    [[small, bigBytes], big("first")],
    [[bigBytes, bigAgain], big("last")],
  ] as const) {
    const struct = Buffer.concat(parts.map((p) => Buffer.from(p)));
    const req = Buffer.concat([Buffer.from([0x22]), Buffer.from(varint(struct.length)), struct]);
    const input = decodeRequest(req).input!;
    assert.equal(Object.keys(input), ["v"]);
    assert.equal(input["v"], want);
    assert.equal(fromBinary(RunFunctionRequestSchema, req).input, { v: want });
  }
});

/** walk reads path from o as plain JSON: what peek must answer, or UNPEEKED where the way is not an object. */
function walk(o: unknown, path: readonly string[]): unknown {
  let cur = o;
  for (const k of path) {
    if (typeof cur !== "object" || cur === null || Array.isArray(cur)) return UNPEEKED;
    if (!Object.hasOwn(cur, k)) return undefined;
    cur = (cur as JsonObject)[k];
  }
  return cur;
}

L("peek reads one value out of unread bytes, as reading the object would, and leaves it unread", () => {
  const old = setLazyMin(0);
  try {
    const r = rng(11);
    // No __proto__: protobuf-es, which writes these bytes, drops such keys.
    const keys = ["a", "spec", "status", "ü", ""];
    const value = (d: number): unknown =>
      d > 3 || r.chance(0.3)
        ? ["s", 1.5, true, null, "ü✓"][r.int(5)]
        : r.chance(0.25)
          ? Array.from({ length: r.int(3) }, () => value(d + 1))
          : Object.fromEntries(Array.from({ length: r.int(5) }, (_, i) => [keys[i]!, value(d + 1)]));
    let answered = 0;
    for (let seed = 0; seed < 300; seed++) {
      const plain = { k: value(0), spec: value(0) } as JsonObject;
      const bytes = requestBytes({ x: plain });
      const want = plain;
      for (let q = 0; q < 8; q++) {
        const path = [r.chance(0.5) ? "k" : "spec", ...Array.from({ length: r.int(4) }, () => keys[r.int(keys.length)]!)];
        const o = decodeRequest(bytes).observed!.resources["x"]!.resource!;
        const got = peek(o, path);
        const first = want[path[0]!];
        const lazy = typeof first === "object" && first !== null;
        if (!lazy) {
          assert.ok(got === UNPEEKED, `seed ${seed} ${JSON.stringify(path)}: a value decoded already is not peeked`);
          continue;
        }
        const expect = walk(want, path);
        // (uvu cannot print a symbol in a diff: compare UNPEEKED first.)
        assert.ok(
          (got === UNPEEKED) === (expect === UNPEEKED),
          `seed ${seed} ${JSON.stringify(path)}: ${String(got)} vs ${String(expect)}`,
        );
        assert.equal(got, expect, `seed ${seed} ${JSON.stringify(path)}`);
        if (got !== UNPEEKED) answered++;
        assert.ok(isUnread(o, path[0]!), "peeking must leave the value unread");
        // Once read, the value is the object's, not the bytes': peek steps aside.
        void o[path[0]!];
        assert.not.ok(isUnread(o, path[0]!));
        assert.is(peek(o, path), UNPEEKED);
      }
    }
    assert.ok(answered > 300, `only ${answered} paths answered from the bytes`);
  } finally {
    setLazyMin(old);
  }
});

L(
  'peek: the last of a repeated key wins, a key-less entry is "", a value-less entry is null, a bad wire type or a changed value steps aside',
  () => {
    const old = setLazyMin(0);
    try {
      // meta is a Struct whose entries are written by hand.
      const entry = (key: Uint8Array | undefined, value: Uint8Array | undefined) => {
        const body = Buffer.concat([
          key ? Buffer.from([0x0a, ...varint(key.length), ...key]) : Buffer.alloc(0),
          value ? Buffer.from([0x12, ...varint(value.length), ...value]) : Buffer.alloc(0),
        ]);
        return Buffer.from([0x0a, ...varint(body.length), ...body]);
      };
      const str = (s: string) => Buffer.from([0x1a, ...varint(Buffer.byteLength(s)), ...Buffer.from(s)]);
      const k = (s: string) => Buffer.from(s);
      const inner = Buffer.concat([
        entry(k("name"), str("first")),
        entry(k("name"), str("last")),
        entry(undefined, str("no key")),
        entry(k("gone"), undefined),
        entry(k("odd"), Buffer.from([0x2d, 0, 0, 0, 0])),
      ]);
      const innerValue = Buffer.from([0x2a, ...varint(inner.length), ...inner]);
      const outer = entry(k("meta"), innerValue);
      const req = Buffer.concat([Buffer.from([0x22]), Buffer.from(varint(outer.length)), outer]);
      const input = () => decodeRequest(req).input!;
      assert.is(peek(input(), ["meta", "name"]), "last");
      assert.is(peek(input(), ["meta", ""]), "no key");
      assert.is(peek(input(), ["meta", "gone"]), null);
      assert.is(peek(input(), ["meta", "gone", "deeper"]), UNPEEKED);
      assert.is(peek(input(), ["meta", "missing"]), undefined);
      assert.is(peek(input(), ["meta", "missing", "deeper"]), undefined);
      assert.is(peek(input(), ["meta", "odd"]), UNPEEKED);
      assert.throws(() => (input()["meta"] as JsonObject)["odd"], /wrong wire type/);
      const changed = input();
      (changed as { meta: JsonValue })["meta"] = { name: "mine" };
      assert.is(peek(changed, ["meta", "name"]), UNPEEKED);
      const deleted = input();
      delete deleted["meta"];
      assert.is(peek(deleted, ["meta", "name"]), UNPEEKED);
      assert.is(peek({ meta: { name: "plain" } }, ["meta", "name"]), UNPEEKED);
    } finally {
      setLazyMin(old);
    }
  },
);

L(
  "random edits a function might make to lazy objects (set, delete, alias, spread, clone, freeze) encode as the same edits to plain JSON",
  () => {
    const r = rng(23);
    const KEYS = ["a", "b", "spec", "status", "list", "ü"];
    const value = (d: number): JsonValue => {
      const k = r.int(d > 3 ? 3 : 6);
      if (k === 0) return r.chance(0.5) ? `s${r.int(100)}` : "x".repeat(r.int(200));
      if (k === 1) return r.int(1000) / 7;
      if (k === 2) return r.chance(0.3) ? null : r.chance(0.5);
      if (k === 5) return Array.from({ length: r.int(4) }, () => value(d + 1));
      return Object.fromEntries(Array.from({ length: r.int(5) }, () => [KEYS[r.int(KEYS.length)]!, value(d + 1)]));
    };
    const plain = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
    const old = setLazyMin(0);
    try {
      for (let n = 0; n < 300; n++) {
        if (n === 150) setLazyMin(64);
        const objs = Object.fromEntries(
          ["r0", "r1", "r2"].map((k, i) => [k, { spec: value(0), status: value(0), meta: { big: "y".repeat(150), n: i } } as JsonObject]),
        );
        const rsp = response.to(decodeRequest(requestBytes(objs)));
        // The model: the same objects as plain JSON, edited the same way.
        const model = plain(objs) as Record<string, JsonObject>;
        const steps: string[] = [];
        for (let op = 0; op < 8; op++) {
          const name = `r${r.int(3)}`;
          let l = rsp.desired!.resources[name]!.resource as Record<string, unknown>;
          let m = model[name] as Record<string, unknown>;
          // Down a few levels, in step.
          for (let d = 0; d < 3 && r.chance(0.6); d++) {
            const ks = Object.keys(m).filter((k) => typeof m[k] === "object" && m[k] !== null);
            if (ks.length === 0) break;
            const k = ks[r.int(ks.length)]!;
            l = l[k] as Record<string, unknown>;
            m = m[k] as Record<string, unknown>;
          }
          if (Object.isFrozen(l)) continue;
          const ks = Object.keys(m);
          const k =
            ks.length > 0 && r.chance(0.7) ? ks[r.int(ks.length)]! : Array.isArray(m) ? String(m.length) : KEYS[r.int(KEYS.length)]!;
          const kind = r.int(7);
          steps.push(`${name} ${k} ${kind}`);
          const has = m[k] !== undefined;
          const isObj = has && typeof m[k] === "object" && m[k] !== null;
          if (kind === 0) void l[k];
          else if (kind === 1) {
            const v = value(2);
            l[k] = cloneJson(v);
            m[k] = plain(v);
          } else if (kind === 2 && !Array.isArray(m)) {
            delete l[k];
            delete m[k];
          } else if (kind === 3 && isObj && !Array.isArray(m[k])) {
            l[k] = { ...(l[k] as object) }; // shallow: nested objects stay shared
            m[k] = { ...(m[k] as object) };
          } else if (kind === 4 && has) {
            l[k] = r.chance(0.5) ? structuredClone(l[k]) : cloneJson(l[k] as JsonValue);
            m[k] = plain(m[k]);
          } else if (kind === 5 && has && !Array.isArray(m)) {
            const k2 = KEYS[r.int(KEYS.length)]!; // one object under two keys
            l[k2] = l[k];
            m[k2] = m[k];
          } else if (kind === 6 && isObj) Object.freeze(l[k]);
        }
        const want = Object.fromEntries(Object.entries(model).map(([k, v]) => [k, plain(v)]));
        const read = Object.fromEntries(Object.entries(rsp.desired!.resources).map(([k, v]) => [k, plain(v.resource)]));
        assert.equal(read, want, `case ${n}, read: ${steps.join("; ")}`);
        const back = toJson(RunFunctionResponseSchema, fromBinary(RunFunctionResponseSchema, encodeResponse(rsp))) as JsonObject;
        const encoded = Object.fromEntries(
          Object.entries((back["desired"] as JsonObject)["resources"] as JsonObject).map(([k, v]) => [k, (v as JsonObject)["resource"]]),
        );
        assert.equal(encoded, want, `case ${n}, encoded: ${steps.join("; ")}`);
      }
    } finally {
      setLazyMin(old);
    }
  },
);

L1.run();
L2.run();
