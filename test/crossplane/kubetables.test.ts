// kube's own pruning and defaulting tables (k8s.io/apiextensions-apiserver
// at the pinned staging tag: schema/pruning/algorithm_test.go TestPrune and
// schema/defaulting/algorithm_test.go TestDefault), read by running those
// tests with an overlay (kubetables.ts) that also hands each case to kube's
// own algorithm: the expected object and pruned paths are what kube's code
// made of the case in this run. Their schemas are structural schemas without
// types, which no CRD can hold, so they are put to our pruner and defaulter
// directly (the same code the embedded API server, xfn render and the host run),
// without the ObjectMeta coercion of an embedded resource's metadata that the
// API server's decoding adds after kube's pruning algorithm (ours does both).
import { suite } from "uvu";
import * as assert from "uvu/assert";
import type { JsonValue } from "@bufbuild/protobuf";
import { applyDefaults, compileNode, pruneValue } from "../../src/schema/schema.js";
import { needs } from "../support/needs.js";
import { kubeTables, SOURCE } from "./kubetables.js";

const T = suite(`kube's pruning and defaulting tables (${SOURCE}): our algorithms answer as kube's`);
const G = needs(T, "go1.26");

interface PruneCase {
  name: string;
  input: string;
  root: boolean;
  schema: JsonValue | null;
  output: JsonValue;
  pruned: string[] | null;
}
interface DefaultCase {
  name: string;
  input: string;
  schema: JsonValue | null;
  output: JsonValue;
}

/** canonical is v as JSON with every object's keys sorted (Go writes a map's keys sorted). */
const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    x !== null && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );

let tables: ReturnType<typeof kubeTables>;
G.before(() => {
  tables = kubeTables();
});

/** node is our compiled schema of a case's (null: no schema). */
const node = (s: JsonValue | null) => (s === null ? undefined : compileNode(s, "openAPIV3Schema", { rules: false }));

G("TestPrune: every case pruned to kube's object, reporting kube's pruned paths", () => {
  const cases = tables.prune as PruneCase[];
  assert.ok(cases.length >= 10, `only ${cases.length} cases read`);
  const wrong: string[] = [];
  for (const c of cases) {
    const x = JSON.parse(c.input) as JsonValue;
    const pruned = pruneValue(x, node(c.schema), c.root, { objectMeta: false });
    if (canonical(x) !== canonical(c.output))
      wrong.push(`${c.name}: object\n  kube: ${JSON.stringify(c.output)}\n  ours: ${JSON.stringify(x)}`);
    if (JSON.stringify(pruned) !== JSON.stringify(c.pruned ?? []))
      wrong.push(`${c.name}: pruned\n  kube: ${JSON.stringify(c.pruned ?? [])}\n  ours: ${JSON.stringify(pruned)}`);
  }
  process.stderr.write(`kubetables prune: ${cases.length} cases, ${wrong.length} differences\n`);
  assert.equal(wrong, []);
});

G("TestDefault: every case defaulted to kube's object", () => {
  const cases = tables.default as DefaultCase[];
  assert.ok(cases.length >= 10, `only ${cases.length} cases read`);
  const wrong: string[] = [];
  for (const c of cases) {
    const x = JSON.parse(c.input) as JsonValue;
    applyDefaults(x, node(c.schema));
    if (canonical(x) !== canonical(c.output)) wrong.push(`${c.name}\n  kube: ${JSON.stringify(c.output)}\n  ours: ${JSON.stringify(x)}`);
  }
  process.stderr.write(`kubetables default: ${cases.length} cases, ${wrong.length} differences\n`);
  assert.equal(wrong, []);
});

T.run();
