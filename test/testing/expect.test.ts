import { suite } from "uvu";
import * as assert from "uvu/assert";
import { mismatches, project } from "../../src/testing/expect.js";

const M = suite("partial expectations");
const actual = { a: 1, b: { c: "x", d: [1, { e: true, f: 2 }] }, g: null };
const cases: Record<string, { expected: unknown; want: string[] }> = {
  SubsetMatches: { expected: { b: { d: [1, { e: true }] } }, want: [] },
  ScalarDiffers: { expected: { b: { c: "y" } }, want: ['$.b.c: expected "y", got "x"'] },
  MissingKey: { expected: { z: 1 }, want: ["$.z: expected 1, got nothing"] },
  ListLength: { expected: { b: { d: [1] } }, want: ['$.b.d: expected 1 items, got 2: [1,{"e":true,"f":2}]'] },
  Absent: { expected: { z: "$absent", a: "$absent" }, want: ["$.a: expected it absent, got 1"] },
  NullIsNotAbsent: { expected: { g: "$absent" }, want: ["$.g: expected it absent, got null"] },
  OddKeys: { expected: { "crossplane.io/x": 1 }, want: ['$["crossplane.io/x"]: expected 1, got nothing'] },
  TypeMismatch: {
    expected: { a: { x: 1 }, b: [1] },
    want: ["$.a: expected an object, got 1", '$.b: expected a list, got {"c":"x","d":[1,{"e":true,"f":2}]}'],
  },
};
for (const [name, tc] of Object.entries(cases)) M(name, () => assert.equal(mismatches(actual, tc.expected), tc.want));

// Keys Object.prototype holds: an actual object without them has nothing there.
// (JSON.parse, as YAML parsing does, makes __proto__ an own key.)
const inherited: Record<string, { actual: unknown; expected: string; want: string[] }> = {
  ProtoMissing: { actual: { a: 1 }, expected: `{"__proto__": {}}`, want: ["$.__proto__: expected an object, got nothing"] },
  ProtoAbsent: { actual: { a: 1 }, expected: `{"__proto__": "$absent", "constructor": "$absent", "toString": "$absent"}`, want: [] },
  ProtoPresent: { actual: JSON.parse(`{"__proto__": {"kind": "K"}}`), expected: `{"__proto__": {"kind": "K"}}`, want: [] },
  ProtoDiffers: {
    actual: JSON.parse(`{"__proto__": {"kind": "K"}}`),
    expected: `{"__proto__": {"kind": "X"}}`,
    want: ['$.__proto__.kind: expected "X", got "K"'],
  },
  ProtoNotAbsent: {
    actual: JSON.parse(`{"__proto__": 1}`),
    expected: `{"__proto__": "$absent"}`,
    want: ["$.__proto__: expected it absent, got 1"],
  },
  ConstructorMissing: { actual: {}, expected: `{"constructor": "x"}`, want: ['$.constructor: expected "x", got nothing'] },
};
for (const [name, tc] of Object.entries(inherited)) M(name, () => assert.equal(mismatches(tc.actual, JSON.parse(tc.expected)), tc.want));

M("project keeps a key __proto__ and leaves out one the actual object lacks", () => {
  const p = project(JSON.parse(`{"__proto__": {"kind": "K", "x": 1}, "b": 2}`), JSON.parse(`{"__proto__": {"kind": "K"}}`)) as object;
  assert.equal(Object.keys(p), ["__proto__"]);
  assert.is(JSON.stringify(p), `{"__proto__":{"kind":"K"}}`);
  assert.is(JSON.stringify(project({ b: 2 }, JSON.parse(`{"__proto__": {}, "constructor": 1}`))), "{}");
});

const conditions = [
  { type: "Ready", status: "False", reason: "Creating" },
  { type: "Synced", status: "True" },
];
M("lists of objects with a type are paired by it, in any order", () => {
  assert.equal(
    mismatches(conditions, [
      { type: "Synced", status: "True" },
      { type: "Ready", reason: "Creating" },
    ]),
    [],
  );
  assert.equal(mismatches(conditions, [{ type: "Synced", status: "False" }, { type: "Ready" }]), [
    '$[type="Synced"].status: expected "False", got "True"',
  ]);
  assert.equal(mismatches(conditions, [{ type: "Ready" }, { type: "Healthy" }]), ['$[type="Healthy"]: missing']);
  assert.equal(mismatches(conditions, [{ type: "Ready" }]).length, 1, "an extra condition is a mismatch");
});

M("project trims actual to the expectation's shape, keeping extra list items", () => {
  assert.equal(project(actual, { b: { c: "y" }, z: "$absent" }), { b: { c: "x" }, z: "$absent" });
  assert.equal(project(conditions, [{ type: "Synced" }]), [{ type: "Synced" }, { type: "Ready", status: "False", reason: "Creating" }]);
  assert.equal(project({ a: 1 }, { a: "$absent" }), { a: 1 });
});
M.run();
