// xfn validate's fast YAML reader (src/validate/yaml.ts) against the `yaml`
// package every other command reads with (engine/docs.ts parseDocs): the same
// documents, in the same number and order, or the same error, for texts made
// of generated documents in the layouts YAML allows (markers, end markers,
// comments, CRLF, flow and block styles, scalars of every core type).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { stringify } from "yaml";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parseDocs } from "../../src/engine/docs.js";
import { documents, fileDocuments } from "../../src/validate/yaml.js";

const Y = suite("xfn validate's YAML reader reads as the yaml package reads");

const answer = (f: () => unknown[]): string => {
  try {
    return JSON.stringify(f(), (_k, v: unknown) => (typeof v === "number" && !Number.isFinite(v) ? String(v) : v));
  } catch (err) {
    return `error: ${(err as Error).message}`;
  }
};
const same = (text: string) =>
  assert.is(
    answer(() => [...documents(text, "f.yaml")]),
    answer(() => parseDocs(text, "f.yaml")),
    JSON.stringify(text),
  );

/** Plain scalars of every core type and their near misses, as YAML text. */
const SCALARS = [
  "1",
  "-0",
  "+12",
  "017",
  "0o17",
  "0x1F",
  "0X1F",
  "-0x1F",
  "0b101",
  "1_000",
  ".5",
  "+.5",
  "1.",
  "1e3",
  "1E+3",
  "1e",
  ".inf",
  "-.Inf",
  ".NaN",
  "~",
  "null",
  "Null",
  "NULL",
  "nULL",
  "true",
  "True",
  "TRUE",
  "tRue",
  "yes",
  "on",
  "n",
  "2001-12-14",
  "12:30:00",
  "9007199254740993",
  "'1'",
  '"x\\ty"',
  "!!str 1",
  "''",
  "a b",
  "-a",
  "[1, 2]",
  "{a: 1}",
  "|\n  block\n",
  ">-\n  folded\n  text\n",
];

Y("each core scalar and its near misses", () => {
  for (const s of SCALARS) same(`k: ${s}\n`);
});

Y("document layouts: markers, end markers, comments before and between, CRLF, empty documents", () => {
  for (const t of [
    "",
    "# only\n",
    "a: 1",
    "---\na: 1",
    "a: 1\n---\n",
    "a: 1\n---",
    "a: 1\n...\n",
    "a: 1\n...\nb: 2",
    "a: 1\n...\n---\nb: 2",
    "---\n---\n",
    "# c\n---\na: 1\n",
    "a: 1\r\n---\r\nb: 2\r\n",
    "--- {a: 1}\n--- [1]\n",
    "k: |\n  x\n---\nb: 2",
    "a: 1\n--- \nb: 2\n",
    "a: 1\n---x: 1\n",
    "- 1\n- 2\n---\n- 3",
    "%YAML 1.2\n---\na: 1\n",
    "a: &x 1\nb: *x\n",
    "a: 1\na: 2\n",
    "a: [1\n",
    "a: 1\n---\nb: [\n",
    "\ta: 1\n",
    "a: !!int '3'\n",
    "a: !custom 1\n",
  ])
    same(t);
});

const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom(...SCALARS.slice(0, 36)).map((s) => ({ raw: s })),
    fc.string(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), tie("value"), { maxKeys: 4 }),
  ),
})).value;

/** yamlOf writes v as YAML in a style drawn for it; {raw} is a scalar written as it is. */
function yamlOf(v: unknown, flow: boolean): string {
  const raw = JSON.parse(JSON.stringify(v), (_k, x: unknown) => x);
  const text = stringify(raw, { collectionStyle: flow ? "flow" : "block" });
  return text.replace(/\{\s*raw: ([^\n}]*)\s*\}/g, (_m, s: string) => s);
}

Y("generated texts of several documents: the same documents or the same error (fast-check)", () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(json, fc.boolean(), fc.constantFrom("---\n", "--- \n", "...\n---\n", "# between\n---\n", "---\r\n")), {
        minLength: 1,
        maxLength: 5,
      }),
      fc.boolean(),
      (docs, crlf) => {
        let text = docs.map(([v, flow, marker], i) => `${i > 0 ? marker : ""}${yamlOf(v, flow)}`).join("");
        if (crlf) text = text.replace(/\r?\n/g, "\r\n");
        same(text);
      },
    ),
    { numRuns: 300, seed: 20261129 },
  );
});

Y("a file of many documents is read one at a time (the generator yields before reading the rest)", () => {
  const text = Array.from({ length: 1000 }, (_, i) => `a: ${i}\n`).join("---\n") + "---\na: [unclosed\n";
  const it = documents(text, "f.yaml");
  assert.equal(it.next().value, { a: 0 });
  assert.equal(it.next().value, { a: 1 });
  // The broken last document is reported by the yaml package's words when reached, naming it.
  assert.throws(() => [...it], /cannot parse f\.yaml \(document 1001\)/);
});

Y("a file is read a megabyte at a time: documents and UTF-8 characters across the reads come whole", () => {
  const dir = mkdtempSync(join(tmpdir(), "xfn-yaml-"));
  try {
    // Documents of about 100 KB of multi-byte characters, so that reads end inside a character and a document.
    const docs = Array.from({ length: 25 }, (_, i) => `i: ${i}\ntext: "${"é😀".repeat(20_000 + i)}"\n`);
    const text = docs.join("---\n");
    writeFileSync(join(dir, "big.yaml"), text);
    const got = [...fileDocuments(join(dir, "big.yaml"))];
    assert.is(got.length, 25);
    assert.equal(got, parseDocs(text, "big.yaml"));
    // A document this reader leaves to the yaml package (an alias) mid-file: the rest comes from it.
    writeFileSync(join(dir, "alias.yaml"), `${docs.slice(0, 3).join("---\n")}---\na: &x 1\nb: *x\n---\nc: 2\n`);
    assert.equal([...fileDocuments(join(dir, "alias.yaml"))].slice(3), [{ a: 1, b: 1 }, { c: 2 }]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

Y.run();
