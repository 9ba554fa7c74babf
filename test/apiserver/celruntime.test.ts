// What a CRD's rule costs while it runs, charged by the size of its operands
// as cel-go's runtime cost tracker charges it (github.com/google/cel-go
// v0.31.0 interpreter/runtimecost.go costCall, ext/sets.go trackSetsCost), so
// kube's per-call limit stops the rules that pass the estimate at CRD write
// (their values untyped, x-kubernetes-preserve-unknown-fields) but would run
// for minutes: equality of two 25,000-entry objects in a 10,000-item all(),
// matches() over a long string in one. What cel-go charges 1 for (size() of a
// map, sets.* of one-element lists) stays cheap here too: maps reach a rule as
// Maps, and an object's canonical form is made once.
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { actualSize, withMeter } from "../../src/schema/celmeter.js";
import { celValue, compileRule } from "../../src/schema/cel.js";
import { canonical, NAMESPACES } from "../../src/schema/cellibs.js";
import { compileNode } from "../../src/schema/schema.js";
import { CRD_KEY, Store, typeKeyOf } from "../../src/apiserver/store.js";
import { crd } from "../support/cluster.js";

const R = suite("dev-cluster: CEL run-time cost by operand size (cel-go runtimecost.go)");

/** store serves Widgets whose spec has the rule over l (integers, at most 10,000) and untyped objects a and b. */
function store(rule: string): Store {
  const s = new Store();
  const untyped = { type: "object", "x-kubernetes-preserve-unknown-fields": true };
  const spec = {
    type: "object",
    "x-kubernetes-validations": [{ rule }],
    properties: { l: { type: "array", maxItems: 10_000, items: { type: "integer" } }, a: untyped, b: untyped },
  };
  const schema = { openAPIV3Schema: { type: "object", properties: { spec } } };
  s.create(
    CRD_KEY,
    undefined,
    crd("example.org", "Widget", "widgets", "Namespaced", [{ name: "v1", served: true, storage: true, schema }]) as JsonObject,
  );
  return s;
}

const entries = (n: number, v: string) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, `${v}${i}`]));
const l = Array.from({ length: 10_000 }, (_, i) => i);

function write(rule: string, spec: JsonObject): string {
  try {
    store(rule).create(typeKeyOf("example.org", "widgets"), "default", {
      apiVersion: "example.org/v1",
      kind: "Widget",
      metadata: { name: "w" },
      spec,
    });
    return "stored";
  } catch (err) {
    return (err as Error).message;
  }
}

const stopped = (rule: string) =>
  `Widget.example.org "w" is invalid: spec: Invalid value: "object": 'operation cancelled: actual cost limit exceeded': ` +
  `no further validation rules will be run due to call cost exceeds limit for rule: ${rule}`;

R("equality charges the smaller operand's size: two 25,000-entry objects compared 10,000 times pass the per-call limit", () => {
  const big = { l, a: entries(25_000, "x"), b: entries(25_000, "y") };
  for (const rule of ["self.l.all(x, self.a != self.b)", "self.l.all(x, self.a == self.a)"]) assert.is(write(rule, big), stopped(rule));
  // Small objects cost little: the same rules over 10-entry objects are taken (10,000 × ceil(10 × 0.1)).
  const small = { l, a: entries(10, "x"), b: entries(10, "y") };
  assert.is(write("self.l.all(x, self.a != self.b)", small), "stored");
});

/** costOf is what one run of rule costs over self, as the meter counts it. */
function costOf(rule: string, self: unknown): number {
  const r = compileRule({ rule }, "rule");
  const cost = { used: 0 };
  withMeter(() => r.run({ ...NAMESPACES, self } as never), cost);
  return cost.used;
}
/** extra is what growing self's operands from small to big adds to a rule's cost: the operand charge alone. */
const extra = (rule: string, small: unknown, big: unknown) => costOf(rule, big) - costOf(rule, small);
const text = (n: number) => "ab".repeat(n / 2);

// Below, each figure is cel-go's formula (runtimecost.go costCall; sets.go trackSetsCost) for the operands'
// sizes, minus the same for the small ones; the steps themselves cost the same for both.
R("matches() charges ceil((1 + the string's length) × 0.1) × ceil(the pattern's length × 0.25)", () => {
  const rule = "self.s.matches('[ab]*a[ab]{20}$')"; // a 15-character pattern: × 4
  assert.is(extra(rule, { s: "" }, { s: text(20_000) }), (2001 - 1) * 4);
  assert.is(extra("matches(self.s, 'ab')", { s: "" }, { s: text(20_000) }), (2001 - 1) * 1, "as a function too");
});

R("contains() charges the product of both lengths × 0.1; startsWith/endsWith the prefix's length × 0.1", () => {
  assert.is(extra("self.s.contains(self.t)", { s: "a", t: "b" }, { s: text(2000), t: text(100) }), 200 * 10 - 1);
  assert.is(extra("self.s.startsWith(self.t)", { s: "a", t: "b" }, { s: text(2000), t: text(100) }), 10 - 1);
  assert.is(extra("self.s.endsWith(self.t)", { s: "a", t: "b" }, { s: text(2000), t: text(100) }), 10 - 1);
});

R("equality and ordering charge the smaller operand's size × 0.1; + of strings their sum × 0.1; `in` a list its length", () => {
  const m = (n: number) => new Map(Object.entries(entries(n, "x")));
  assert.is(extra("self.a == self.b", { a: m(1), b: m(1) }, { a: m(25_000), b: m(30_000) }), 2500 - 1);
  assert.is(extra("self.a != self.b", { a: text(10), b: text(10) }, { a: text(1000), b: text(10) }), 0, "the smaller one");
  assert.is(extra("self.a < self.b", { a: "a", b: "b" }, { a: text(1000), b: text(2000) }), 100 - 1);
  // The sum's charge, and the string + makes (a tenth of its length, as every string a step makes).
  assert.is(extra("size(self.a + self.b) > 0", { a: "a", b: "b" }, { a: text(2000), b: text(2000) }), 400 - 1 + 400);
  assert.is(extra("1 in self.l", { l: [0] }, { l: Array.from({ length: 5000 }, (_, i) => BigInt(i)) }), 5000 - 1);
});

R("sets.contains and sets.intersects charge 1 + the product of the sizes; sets.equivalent twice the product", () => {
  const list = (n: number) => Array.from({ length: n }, (_, i) => BigInt(i));
  assert.is(extra("sets.contains(self.a, self.b)", { a: list(1), b: list(1) }, { a: list(1000), b: list(100) }), 100_000 - 1);
  assert.is(extra("sets.intersects(self.a, self.b)", { a: list(1), b: list(1) }, { a: list(1000), b: list(100) }), 100_000 - 1);
  assert.is(extra("sets.equivalent(self.a, self.b)", { a: list(1), b: list(1) }, { a: list(100), b: list(100) }), 20_000 - 2);
});

R("what cel-go charges 1 for stays cheap: size() of a map, sets.* of one-element lists, a 25,000-entry object", () => {
  const big = { l, a: entries(25_000, "x"), b: entries(25_000, "y") };
  assert.is(write("self.l.all(x, size(self.a) > 0)", big), "stored");
  assert.is(write("self.l.all(x, sets.equivalent([self.a], [self.a]))", big), "stored");
  // How: a map reaches a rule as a Map (cel-js reads a Map's size at once, a plain object's by walking its keys) ...
  const node = compileNode({ type: "object", additionalProperties: { type: "string" } }, "");
  const v = celValue(entries(3, "x"), node);
  assert.ok(v instanceof Map, "a map is a Map to a rule");
  assert.is(actualSize(v), 3);
  // ... and an object's canonical form (what sets.* compare) is made once, however often it is asked for.
  let walks = 0;
  class Counted extends Map<string, unknown> {
    override [Symbol.iterator]() {
      walks++;
      return super[Symbol.iterator]();
    }
  }
  const m = new Counted(Object.entries(entries(100, "x")));
  const first = canonical(m);
  for (let i = 0; i < 10; i++) assert.is(canonical(m), first);
  assert.is(walks, 1, "the map was walked once");
});

R.run();
