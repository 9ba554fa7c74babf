// The CEL conformance cases (google/cel-spec's simple tests, as @bufbuild/cel-spec
// ships them with cel-go's answers) that a CRD rule can meet: the suites of the
// language Kubernetes' CEL environment has (k8s.io/apiserver v0.36.3
// pkg/cel/environment/base.go: the base language, optional types, strings v2,
// two-variable comprehensions), without the cases that need a protobuf message
// type or a container, which no rule can name. Each case's answer is
// canonicalised to one string ("int(3)", "[string(\"a\")]", "error") so any
// engine's result can be compared with it. Used by
// test/apiserver/celconformance.test.ts and bench/cel-engines.ts.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { tests } from "@bufbuild/cel-spec/testdata/conformance.js";
import type { SerializedIncrementalTestSuite } from "@bufbuild/cel-spec/testdata/tests.js";
import { compileRuleExpression } from "../../src/schema/celcheck.js";

/** The suites whose features Kubernetes' CEL environment has. */
const KUBE_SUITES = new Set([
  "basic",
  "comparisons",
  "conversions",
  "fields",
  "fp_math",
  "integer_math",
  "lists",
  "logic",
  "macros",
  "macros2",
  "optionals",
  "parse",
  "plumbing",
  "string",
  "string_ext",
  "timestamps",
]);

/** A case names a message type when one of these appears in it. */
const PROTO = /TestAllTypes|google\.protobuf|cel\.expr|proto[23]|NestedMessage|NestedEnum|GlobalEnum/;

type Json = Record<string, unknown>;

/** CelCase is one conformance case: its suite, its key (suite/section/name), its expression, its bindings (cel.expr.Value JSON) and its answer. */
export interface CelCase {
  suite: string;
  key: string;
  expr: string;
  bindings: Record<string, Json>;
  want: string;
}

/** canonicalWant is a cel.expr.Value (proto JSON) as the canonical string; undefined for a value no rule can hold. */
function canonicalWant(v: Json): string | undefined {
  const each = (xs: Json[]) => {
    const out = xs.map(canonicalWant);
    return out.includes(undefined) ? undefined : (out as string[]);
  };
  if ("nullValue" in v) return "null";
  if ("boolValue" in v) return `bool(${v["boolValue"]})`;
  if ("int64Value" in v) return `int(${v["int64Value"]})`;
  if ("uint64Value" in v) return `uint(${v["uint64Value"]})`;
  if ("doubleValue" in v) return `double(${doubleText(Number(v["doubleValue"]))})`;
  if ("stringValue" in v) return `string(${JSON.stringify(v["stringValue"])})`;
  if ("bytesValue" in v) return `bytes(${Buffer.from(v["bytesValue"] as string, "base64").toString("hex")})`;
  if ("typeValue" in v) return `type(${v["typeValue"]})`;
  if ("listValue" in v) {
    const xs = each(((v["listValue"] as Json)["values"] as Json[] | undefined) ?? []);
    return xs && `[${xs.join(",")}]`;
  }
  if ("mapValue" in v) {
    const entries = ((v["mapValue"] as Json)["entries"] as Json[] | undefined) ?? [];
    const keys = each(entries.map((e) => e["key"] as Json));
    const values = each(entries.map((e) => e["value"] as Json));
    return (
      keys &&
      values &&
      `{${keys
        .map((k, i) => `${k}:${values[i]}`)
        .sort()
        .join(",")}}`
    );
  }
  if ("objectValue" in v) {
    const o = v["objectValue"] as Json;
    const type = String(o["@type"]);
    if (type.endsWith("google.protobuf.Timestamp")) return `timestamp(${new Date(String(o["value"])).toISOString()})`;
    if (type.endsWith("google.protobuf.Duration")) return `duration(${parseFloat(String(o["value"]))})`;
  }
  return undefined;
}

/** doubleText is a double as the canonical form writes it (no negative zero). */
export const doubleText = (d: number) => (Object.is(d, -0) ? "0" : String(d));

/** celCases is every conformance case a CRD rule can meet, with its suite and answer. */
export function celCases(): CelCase[] {
  const out: CelCase[] = [];
  const walk = (suite: SerializedIncrementalTestSuite, path: string[]) => {
    const top = path[0]!;
    for (const t of suite.tests ?? []) {
      const o = t.original as Json;
      const text = JSON.stringify([o["expr"], o["bindings"] ?? {}, o["typeEnv"] ?? []]);
      // disableCheck: cel-go run without its type checker, which Kubernetes always runs.
      if (!KUBE_SUITES.has(top) || o["container"] || o["checkOnly"] || o["disableCheck"] || PROTO.test(text)) continue;
      const want = o["value"] ? canonicalWant(o["value"] as Json) : o["evalError"] ? "error" : undefined;
      if (want === undefined) continue;
      const bindings: Record<string, Json> = {};
      for (const [k, b] of Object.entries((o["bindings"] as Record<string, Json> | undefined) ?? {})) bindings[k] = b["value"] as Json;
      out.push({ suite: top, key: [...path, String(o["name"])].join("/"), expr: String(o["expr"]), bindings, want });
    }
    for (const s of suite.suites ?? []) walk(s, [...path, s.name]);
  };
  for (const s of tests.suites ?? []) walk(s, [s.name]);
  return out;
}

/** celInput is a binding (cel.expr.Value JSON) as an engine's input: ints as bigint, uints through uint, maps as Map. */
export function celInput(v: Json, uint: (n: bigint) => unknown): unknown {
  if ("nullValue" in v) return null;
  if ("boolValue" in v) return v["boolValue"];
  if ("int64Value" in v) return BigInt(v["int64Value"] as string);
  if ("uint64Value" in v) return uint(BigInt(v["uint64Value"] as string));
  if ("doubleValue" in v) return Number(v["doubleValue"]);
  if ("stringValue" in v) return v["stringValue"];
  if ("bytesValue" in v) return new Uint8Array(Buffer.from(v["bytesValue"] as string, "base64"));
  if ("listValue" in v) return (((v["listValue"] as Json)["values"] as Json[] | undefined) ?? []).map((x) => celInput(x, uint));
  if ("mapValue" in v) {
    const entries = ((v["mapValue"] as Json)["entries"] as Json[] | undefined) ?? [];
    return new Map(entries.map((e) => [celInput(e["key"] as Json, uint), celInput(e["value"] as Json, uint)]));
  }
  throw new Error(`a binding this reader does not take: ${JSON.stringify(v)}`);
}

/** canonicalScalar is a null, bool, int (bigint), double, string or bytes as the canonical string; undefined for others. */
export function canonicalScalar(x: unknown): string | undefined {
  if (x === null) return "null";
  if (typeof x === "boolean") return `bool(${x})`;
  if (typeof x === "bigint") return `int(${x})`;
  if (typeof x === "number") return `double(${doubleText(x)})`;
  if (typeof x === "string") return `string(${JSON.stringify(x)})`;
  if (x instanceof Uint8Array) return `bytes(${Buffer.from(x).toString("hex")})`;
  return undefined;
}

/**
 * canonicalCelJs is a value cel-js answered, as the canonical string; typeName
 * names an instance of a library's class (an IP, a quantity), which is
 * written unknown(<type>), as kubecel writes a value of a type it cannot show.
 */
export function canonicalCelJs(x: unknown, typeName?: (x: object) => string): string {
  const canonicalCelJs_ = (y: unknown) => canonicalCelJs(y, typeName);
  const scalar = canonicalScalar(x);
  if (scalar !== undefined) return scalar;
  if (Array.isArray(x)) return `[${x.map(canonicalCelJs_).join(",")}]`;
  if (x instanceof Map)
    return `{${[...x]
      .map(([k, v]) => `${canonicalCelJs_(k)}:${canonicalCelJs_(v)}`)
      .sort()
      .join(",")}}`;
  if (x instanceof Date) return `timestamp(${x.toISOString()})`;
  const o = x as { constructor?: { name?: string }; value?: unknown; seconds?: bigint; nanos?: number; name?: string };
  switch (o.constructor?.name) {
    case "UnsignedInt":
      return `uint(${String(o.value)})`;
    case "Duration":
      return `duration(${Number(o.seconds ?? 0n) + (o.nanos ?? 0) / 1e9})`;
    case "Type":
      return `type(${o.name})`;
    case "Optional":
      return "optional";
  }
  if (typeof x === "object" && x !== null && typeName && Object.getPrototypeOf(x) !== Object.prototype && Object.getPrototypeOf(x) !== null)
    return `unknown(${typeName(x)})`;
  if (typeof x === "object") {
    const entries = Object.entries(x as Record<string, unknown>);
    return `{${entries
      .map(([k, v]) => `string(${JSON.stringify(k)}):${canonicalCelJs_(v)}`)
      .sort()
      .join(",")}}`;
  }
  return `unknown(${String(x)})`;
}

/** celLiteral is a binding (cel.expr.Value JSON) written as a CEL literal, for an engine that takes bindings as text. */
export function celLiteral(v: Json): string {
  if ("nullValue" in v) return "null";
  if ("boolValue" in v) return String(v["boolValue"]);
  if ("int64Value" in v) return String(v["int64Value"]);
  if ("uint64Value" in v) return `${v["uint64Value"]}u`;
  if ("doubleValue" in v) {
    const d = Number(v["doubleValue"]);
    return Number.isFinite(d) ? (Number.isInteger(d) ? `${d}.0` : String(d)) : `double("${String(d)}")`;
  }
  if ("stringValue" in v) return JSON.stringify(v["stringValue"]);
  if ("bytesValue" in v)
    return `b"${[...Buffer.from(v["bytesValue"] as string, "base64")].map((b) => `\\x${b.toString(16).padStart(2, "0")}`).join("")}"`;
  if ("listValue" in v) return `[${(((v["listValue"] as Json)["values"] as Json[] | undefined) ?? []).map(celLiteral).join(", ")}]`;
  if ("mapValue" in v) {
    const entries = ((v["mapValue"] as Json)["entries"] as Json[] | undefined) ?? [];
    return `{${entries.map((e) => `${celLiteral(e["key"] as Json)}: ${celLiteral(e["value"] as Json)}`).join(", ")}}`;
  }
  throw new Error(`a binding this writer does not take: ${JSON.stringify(v)}`);
}

/** RECORDING is the file of Kubernetes' answers, and Recorded one of them. */
export const RECORDING = join(import.meta.dirname, "../apiserver/kubecel-answers.json");
export interface Recorded {
  expr: string;
  /** Variables, each a CEL literal. */
  bindings?: Record<string, string>;
  /** Kubernetes' answer: canonical, "error" (it fails when run) or "refused" (it does not compile). */
  kube: string;
}
export interface Recording {
  kubernetes: string;
  cases: Record<string, Recorded>;
}
export const readRecording = (): Recording => JSON.parse(readFileSync(RECORDING, "utf8")) as Recording;

/** answerClass is an engine's answer with its error's words dropped: "refused: ..." is "refused", "error: ..." "error". */
export const answerClass = (a: string) => a.replace(/^(refused|error): [\s\S]*$/, "$1");

const TYPE_OF = compileRuleExpression("type(x)", ["x"]);

/** ourAnswer is what the CRD rule engine (src/schema/cel.ts) answers to expr, canonical; bindings are CEL literals. */
export function ourAnswer(expr: string, bindings: Record<string, string> = {}): string {
  let run: (vars: Record<string, unknown>) => unknown;
  try {
    run = compileRuleExpression(expr, Object.keys(bindings));
  } catch {
    return "refused";
  }
  try {
    const vars: Record<string, unknown> = {};
    for (const [k, lit] of Object.entries(bindings)) vars[k] = compileRuleExpression(lit)({});
    return canonicalCelJs(run(vars), (x) => (TYPE_OF({ x }) as { name: string }).name);
  } catch {
    return "error";
  }
}
