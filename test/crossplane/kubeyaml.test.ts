// YAML read as Kubernetes reads it: sigs.k8s.io/yaml v1.6.0's YAMLToJSON (what
// kubectl's decoder, kube-apiserver's apply patches and Crossplane's CLI read
// manifests with), built from its module by scripts/anchors.mjs
// (test/support/kubeyaml), is the oracle in this run. Every text of a corpus
// (hand-picked scalars: YAML 1.1 booleans, octal, underscores, big and signed
// ints, floats, timestamps, specials; then generated ones, seed printed),
// as a value and as a key, must read the same through each of xfn's readers:
// render's (engine/docs.ts), xfn validate's fast one (validate/yaml.ts) and
// the embedded API server's (apiserver/body.ts). Where sigs.k8s.io/yaml
// refuses a text, xfn's readers are not held to it: .inf and .nan values
// (JSON has none; xfn reads them as numbers), and the one difference kept
// (docs/render-and-test.md): a merge key after an explicit key of the same
// name, where go-yaml v2 lets the merged value win and YAML's merge rules (the
// `yaml` package) the explicit one.
import { spawnSync } from "node:child_process";
import fc from "fast-check";
import { suite } from "uvu";
import * as assert from "uvu/assert";
// @ts-expect-error -- a plain .mjs script without types
import { build } from "../../scripts/anchors.mjs";
import { parseBody } from "../../src/apiserver/body.js";
import { parseDocs } from "../../src/engine/docs.js";
import { documents } from "../../src/validate/yaml.js";
import { needs } from "../support/needs.js";

const K = suite("YAML as Kubernetes reads it (sigs.k8s.io/yaml, built from its module): xfn's readers read the same");
const G = needs(K, "go1.26");

/** kube answers each text as sigs.k8s.io/yaml's YAMLToJSON does: its JSON, or its error. */
function kube(texts: string[]): Array<{ json?: unknown; error?: string }> {
  const bin = (build("kubeyaml") as Record<string, string>)["kubeyaml"]!;
  const r = spawnSync(bin, { input: JSON.stringify(texts), encoding: "utf8", maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`kubeyaml exited ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout) as Array<{ json?: unknown; error?: string }>;
}

/** canon is a value's JSON with object keys sorted (Go's encoder sorts them; xfn keeps the document's order). */
const canon = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1))) : x,
  );

/** readers are xfn's ways of reading one YAML document, each answering its JSON or "error". */
const readers: Record<string, (text: string) => string> = {
  "render (engine/docs.ts)": (t) => canon(parseDocs(t, "case.yaml")[0]),
  "validate (validate/yaml.ts)": (t) => canon([...documents(t, "case.yaml")][0]),
  "the embedded API server (apiserver/body.ts)": (t) => canon(parseBody(t, true)),
};

const SCALARS = [
  ...["y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF", "oN", "yES"],
  ...["true", "True", "TRUE", "tRue", "false", "FALSE", "t", "f", "T", "F", "o", "O"],
  ...["", "~", "null", "Null", "NULL", "nULL"],
  ...["0", "00", "-0", "+0", "07", "0777", "08", "09", "0_7", "0o17", "0O17", "0o8", "0x1F", "0X1f", "-0x1F", "+0x1F", "0x", "0x_1F"],
  ...["0b101", "-0b11", "+0b1", "0b_1", "0b2", "1_000", "1__2", "_1", "1_", "12", "+12", "-12", "+-1", "+", "-1_0"],
  ...["9007199254740993", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809"],
  ...["18446744073709551615", "18446744073709551616", "99999999999999999999"],
  ...["1e3", "1E3", "1e+3", "1e-7", "0e0", "0e", "1e", "e1", "1.", "1.5", "-1.5e-3", ".5", ".5e3", "._5", "+.5", "-.5", "0.5_0"],
  ...["0.1", "3.14159", "0.0001", "1e400", "1.2.3", "1,5", "1:20", "12:30:45", "-1:20", "123abc", "0x1p3"],
  ...["2024-01-02", "2024-1-2", "2024-01-02T10:00:00Z", "2024-01-02t10:00:00Z", "2024-01-02 10:00:00", "2024-13-01"],
  ...["2024-01-02T10:00:00.123+02:00", "2024-1-2 3:4:5.120"],
  ...[".inf", "-.Inf", "+.INF", ".nan", ".NaN", "NaN", "Infinity", "-Infinity", "<<x", "="],
];

/** texts puts each scalar as a value, and as a key where YAML lets it be one. */
const texts = (scalars: string[]) =>
  scalars.flatMap((s) => [`v: ${s}\n`, `list: [${s || "''"}, x]\n`, ...(s && !/^[!&*]/.test(s) ? [`${s}: v\n`] : [])]);

/** check puts texts to sigs.k8s.io/yaml and to each reader; the differences, one line each. */
function check(all: string[]): { compared: number; refused: number; diffs: string[] } {
  const answers = kube(all);
  const diffs: string[] = [];
  let compared = 0;
  let refused = 0;
  all.forEach((text, i) => {
    const a = answers[i]!;
    if (a.error !== undefined) {
      refused++;
      return;
    }
    compared++;
    const want = canon(a.json);
    for (const [name, read] of Object.entries(readers)) {
      let got: string;
      try {
        got = read(text);
      } catch (err) {
        got = `error: ${(err as Error).message.split("\n")[0]}`;
      }
      if (got !== want) diffs.push(`${name}: ${JSON.stringify(text)}: kube ${want}, xfn ${got}`);
    }
  });
  return { compared, refused, diffs };
}

G("hand-picked scalars, as values and keys: each reader reads what kube-apiserver and kubectl read", () => {
  const all = [
    ...texts(SCALARS),
    // Merge keys, anchors, nesting, flow style, quoting (never resolved), and a document of many kinds at once.
    "a: &x {b: 1}\nc:\n  <<: *x\n  d: 2\n",
    "<<: [{a: 1}, {a: 2, b: 3}]\nc: 4\n",
    "a: '0777'\nb: \"yes\"\nc: !!str 12\nd: |\n  yes\ne: >-\n  0777\n",
    "spec:\n  replicas: 03\n  template: {spec: {containers: [{name: c, securityContext: {privileged: yes}}]}}\n  mode: 0644\n",
  ];
  const { compared, refused, diffs } = check(all);
  process.stderr.write(`kubeyaml: ${compared} texts compared, ${refused} refused by sigs.k8s.io/yaml\n`);
  assert.ok(compared > 300, `${compared} compared`);
  assert.equal(diffs, []);
});

G("generated scalars (seed printed): the same", () => {
  const seed = Number(process.env["XFN_KUBEYAML_SEED"] || Date.now() % 100_000);
  const chars = fc.constantFrom(..."0123456789+-._:eExXoObByYnNtTfF~aZ ".split(""));
  const scalars = fc.sample(
    fc.oneof(
      fc.string({ unit: chars, maxLength: 12 }),
      fc.integer().map(String),
      fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
      fc.bigInt({ min: -(2n ** 65n), max: 2n ** 65n }).map(String),
    ),
    { seed, numRuns: 2_000 },
  );
  // Left out: what would not be one plain scalar on a line (a space before a comment sign, ": ", a trailing space), and
  // one ending in ":", which a flow list reads as a key in YAML 1.2 (the `yaml` package) and as text in go-yaml v2's
  // YAML 1.1: a difference of syntax, not of what a scalar means, kept (docs/render-and-test.md).
  const plain = [...new Set(scalars)].filter((s) => s === s.trim() && !/: |\s#|^[-?:] |^[-?:]$|:$/.test(s));
  const { compared, diffs } = check(texts(plain));
  process.stderr.write(`kubeyaml: seed ${seed}: ${compared} generated texts compared\n`);
  assert.equal(diffs.slice(0, 20), [], `seed ${seed}`);
});

K.run();
