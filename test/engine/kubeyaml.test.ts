// YAML's plain scalars as Kubernetes reads them (src/engine/kubeyaml.ts), on a
// machine with only Node. The answers are sigs.k8s.io/yaml v1.6.0's
// (YAMLToJSON over go.yaml.in/yaml/v2 v2.4.3's resolve.go), as its binary
// printed them here on 2026-11-30; test/crossplane/kubeyaml.test.ts asks the
// real one, built from its module, in every run of the crossplane tier, with
// these and thousands of generated texts.
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parseBody } from "../../src/apiserver/body.js";
import { parseDocs } from "../../src/engine/docs.js";
import { documents } from "../../src/validate/yaml.js";

const K = suite("YAML read as Kubernetes reads it");

const readers = {
  render: (t: string) => parseDocs(t, "x.yaml")[0],
  validate: (t: string) => [...documents(t, "x.yaml")][0],
  apiserver: (t: string) => parseBody(t, true),
};

const CASES: Array<[string, unknown]> = [
  // YAML 1.1's booleans, values and keys: a key `n` is false.
  ["a: yes\nb: On\nc: y\nd: NO\ne: off\nf: tRue\n", { a: true, b: true, c: true, d: false, e: false, f: "tRue" }],
  ["y: 1\nn: 2\n", { true: 1, false: 2 }],
  // Octal with a leading 0, 0o and 0x, underscores; 08 is no octal and so a float, 8.
  ["a: 0777\nb: 0o17\nc: 0x1F\nd: 1_000\ne: 08\nf: -0b11\ng: 0_7\n", { a: 511, b: 15, c: 31, d: 1000, e: 8, f: -3, g: 7 }],
  // Floats: an exponent without a point is one; a float key is written as Go writes a float32.
  ["a: 1e3\nb: .5\nc: 1.\n5e9: d\n0.1: e\n", { a: 1000, b: 0.5, c: 1, "5e+09": "d", "0.1": "e" }],
  // Not resolved: timestamps and sexagesimal stay text, as do quoted and block scalars.
  ["a: 2024-01-02\nb: 1:20\nc: '0777'\nd: \"yes\"\ne: |\n  yes\n", { a: "2024-01-02", b: "1:20", c: "0777", d: "yes", e: "yes\n" }],
  // Beyond 2^53 an int key keeps its digits.
  ["9223372036854775807: a\n", { "9223372036854775807": "a" }],
  // A merge key, as go-yaml v2 merges it.
  ["base: &b {x: 1}\nuse:\n  <<: *b\n  z: on\n", { base: { x: 1 }, use: { x: 1, z: true } }],
];

for (const [name, read] of Object.entries(readers))
  K(`${name}: YAML 1.1 booleans, Go's ints and floats, keys as Go writes them`, () => {
    for (const [text, want] of CASES) assert.equal(read(text), want, JSON.stringify(text));
  });

K("a key Kubernetes refuses (null, or an int beyond int64) is refused by name", () => {
  for (const [text, why] of [
    ["~: a\n", /a map key that is null/],
    ["9223372036854775808: a\n", /a map key that is 9223372036854775808: Kubernetes reads only text, booleans and numbers up to 2\^63-1/],
  ] as const) {
    assert.throws(
      () => parseDocs(text, "x.yaml"),
      (e: Error) => e.message.startsWith("cannot parse x.yaml: ") && why.test(e.message),
    );
    assert.throws(() => [...documents(text, "x.yaml")], why);
    assert.throws(() => parseBody(text, true), why);
  }
});

K.run();
