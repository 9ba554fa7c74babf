import { suite } from "uvu";
import * as assert from "uvu/assert";
import { mismatches } from "../src/testing/expect.js";

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
  TypeMismatch: { expected: { a: { x: 1 }, b: [1] }, want: ["$.a: expected an object, got 1", '$.b: expected a list, got {"c":"x","d":[1,{"e":true,"f":2}]}'] },
};
for (const [name, tc] of Object.entries(cases)) M(name, () => assert.equal(mismatches(actual, tc.expected), tc.want));
M.run();
