// Issue 59, item 3: which CEL engine the CRD rules should run on, measured.
// Three candidates, side by side in one run:
//   - cel-js (@marcbachmann/cel-js), bare and as xfn runs it (with our Kubernetes
//     libraries, src/schema/cel.ts);
//   - @bufbuild/cel, Buf's conformance-tested CEL on protobuf-es, with its strings extension;
//   - cel-go with Kubernetes' own libraries compiled to WebAssembly (bench/celwasm,
//     built by scripts/anchors.mjs; skipped, saying so, without Go 1.26).
// Each is measured on CEL's conformance cases (test/support/celspec.ts), on the
// speed of compiling and running rules, on a CRD's validation as the server
// does it, and on size and start-up. Results: bench/RESULTS.md, "CEL engines".
//
//   node --import tsx bench/cel-engines.ts [--n 20000]
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { Environment, evaluate } from "@marcbachmann/cel-js";
import * as buf from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";
import type { JsonObject } from "@bufbuild/protobuf";
import { Schema } from "../src/schema/schema.js";
import { specCRD } from "../test/support/cluster.js";
import { loadKubeCel, type KubeCel } from "../test/crossplane/kubecel.js";
import { canonicalCelJs, canonicalScalar, celCases, celInput, celLiteral, ourAnswer, readRecording } from "../test/support/celspec.js";
import { flag, writeSection } from "./results.js";

const N = flag("--n", 20000);
const ROOT = join(import.meta.dirname, "..");
const UnsignedInt = (evaluate("0u") as object).constructor as new (n: bigint) => unknown;

/** canonicalBuf is a value @bufbuild/cel answered, in test/support/celspec.ts's canonical form. */
function canonicalBuf(x: unknown): string {
  const scalar = canonicalScalar(x);
  if (scalar !== undefined) return scalar;
  if (buf.isCelUint(x)) return `uint(${x.value})`;
  if (buf.isCelList(x)) return `[${[...x].map(canonicalBuf).join(",")}]`;
  if (buf.isCelMap(x))
    return `{${[...x]
      .map(([k, v]) => `${canonicalBuf(k)}:${canonicalBuf(v)}`)
      .sort()
      .join(",")}}`;
  if (buf.isCelType(x)) return `type(${x.name})`;
  const m = ((x as { message?: unknown }).message ?? x) as { $typeName?: string; seconds?: bigint; nanos?: number };
  if (m.$typeName === "google.protobuf.Timestamp")
    return `timestamp(${new Date(Number(m.seconds) * 1000 + (m.nanos ?? 0) / 1e6).toISOString()})`;
  if (m.$typeName === "google.protobuf.Duration") return `duration(${Number(m.seconds) + (m.nanos ?? 0) / 1e9})`;
  return `unknown(${String(x)})`;
}

const bare = new Environment({ unlistedVariablesAreDyn: true, homogeneousAggregateLiterals: false, enableOptionalTypes: true });
const ENGINES: Record<string, (expr: string, vars: Record<string, Record<string, unknown>>) => string> = {
  "cel-js, bare": (expr, vars) =>
    canonicalCelJs(
      bare.evaluate(
        expr,
        bind(vars, (n) => new UnsignedInt(n)),
      ),
    ),
  "cel-js + xfn's Kubernetes libraries": (expr, vars) => {
    const a = ourAnswer(expr, Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, celLiteral(v)])));
    if (a === "error" || a === "refused") throw new Error(a);
    return a;
  },
  "@bufbuild/cel + strings": (expr, vars) => {
    const r = buf.run(expr, bind(vars, (n) => buf.celUint(n)) as Record<string, buf.CelInput>, { funcs: strings });
    if (buf.isCelError(r)) throw r;
    return canonicalBuf(r);
  },
};
const bind = (vars: Record<string, Record<string, unknown>>, uint: (n: bigint) => unknown) =>
  Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, celInput(v, uint)]));

/** loose is an answer with "refused" and "error" taken as one: only kube's engine tells them apart. */
const loose = (a: string) => (a === "refused" ? "error" : a);

/**
 * conformance is, per engine, how many of cel-spec's cases it answers as
 * cel-spec says (cel-go's answers, its newest environment), and how many
 * cases of the recording (those, and kube's library tests' expressions) it
 * answers as kube's own CEL did; kube's row is its recorded answers.
 */
function conformance(kube: boolean): string[] {
  const cases = celCases();
  const recording = readRecording();
  const spec = new Map(cases.map((c) => [`spec/${c.key}`, c]));
  const rows: string[] = [];
  const row = (name: string, answer: (key: string, expr: string, vars: Record<string, Record<string, unknown>>) => string) => {
    const bySuite = new Map<string, [number, number]>();
    for (const c of cases) {
      const s = bySuite.get(c.suite) ?? [0, 0];
      s[1]++;
      if (loose(answer(`spec/${c.key}`, c.expr, c.bindings)) === loose(c.want)) s[0]++;
      bySuite.set(c.suite, s);
    }
    let asKube = 0;
    for (const [key, r] of Object.entries(recording.cases)) {
      const vars = spec.get(key)?.bindings ?? {};
      if (loose(answer(key, r.expr, vars)) === loose(r.kube)) asKube++;
    }
    const pass = [...bySuite.values()].reduce((a, [p]) => a + p, 0);
    const weak = [...bySuite].filter(([, [p, t]]) => p < t).map(([s, [p, t]]) => `${s} ${p}/${t}`);
    rows.push(`| ${name} | ${pass} / ${cases.length} | ${asKube} / ${Object.keys(recording.cases).length} | ${weak.join(", ")} |`);
  };
  for (const [name, run] of Object.entries(ENGINES))
    row(name, (_key, expr, vars) => {
      try {
        return run(expr, vars);
      } catch {
        return "error";
      }
    });
  if (kube) row(`Kubernetes ${recording.kubernetes} (cel-go, recorded)`, (key) => recording.cases[key]!.kube);
  return rows;
}

/** Rules every engine can run (no Kubernetes library), over one object each engine reads as its own values. */
const RULES = [
  "self.n < 10",
  "self.items.all(x, x.size() < 64)",
  "self.name.startsWith('a') && self.name.matches('^[a-z]+$')",
  "has(self.spec.x) ? self.spec.x > 0 : true",
  "self.labels.exists(k, k == 'app') && size(self.labels) <= 10",
  "self.ports.map(p, p.port).all(p, p > 0 && p < 65536)",
];
const selfOf = (i: number) => ({
  n: BigInt(i % 20),
  items: ["a", "bb", "ccc"],
  name: "abc",
  spec: { x: 3n },
  labels: new Map([
    ["app", "x"],
    ["tier", "y"],
  ]),
  ports: [{ port: 80n }, { port: 443n }],
});

/** perRule is µs per rule of f run over every rule, N times (after one warm-up round). */
function perRule(f: (i: number) => void): number {
  f(0);
  const t = performance.now();
  for (let i = 0; i < N; i++) f(i);
  return ((performance.now() - t) * 1000) / N / RULES.length;
}

/** compileUs is µs to compile each rule, warm (200 rounds after one). */
function compileUs(f: (r: string) => unknown): number {
  RULES.forEach(f);
  const t = performance.now();
  for (let k = 0; k < 200; k++) RULES.forEach(f);
  return ((performance.now() - t) * 1000) / 200 / RULES.length;
}

/** A CRD whose spec has two rules (one a Kubernetes library call), validated as the server validates a write. */
const CRD = specCRD(
  "bench.example.org",
  {
    type: "object",
    "x-kubernetes-validations": [{ rule: "quantity(self.a) == quantity('1Gi')" }, { rule: "self.n < 10" }],
    properties: { a: { type: "string", maxLength: 10 }, n: { type: "integer" } },
  },
  "Widget",
  "widgets",
);
const objectOf = (i: number) => ({ spec: { a: "1Gi", n: i % 20 } });
const VALIDATIONS = 2000;

/** validateUs is µs per CRD validation of objectOf(i) through xfn's Schema (JSON text in, as a write's body is). */
function xfnValidateUs(): number {
  const s = new Schema((CRD.spec.versions[0]!["schema"] as JsonObject)["openAPIV3Schema"] as JsonObject);
  const t = performance.now();
  for (let i = 0; i < VALIDATIONS; i++) s.validate(JSON.parse(JSON.stringify(objectOf(i))), undefined, false, []);
  return ((performance.now() - t) * 1000) / VALIDATIONS;
}

/** wasm measures kube's cel-go in WebAssembly (test/crossplane/kubecel): start-up, memory, first CRD compile, validation µs; or why it could not. */
async function wasm(): Promise<{ row?: string; size?: number; kube?: KubeCel; note?: string }> {
  let kube: KubeCel;
  try {
    kube = await loadKubeCel();
  } catch (err) {
    return { note: `not measured: ${(err as Error).message.split("\n")[0]}` };
  }
  const crd = JSON.stringify(CRD);
  let t = performance.now();
  const refused = kube.compileCRD(crd);
  const firstCompile = performance.now() - t;
  if (refused !== "[]") throw new Error(`kube refused the bench CRD: ${refused}`);
  kube.validate("bench", crd, "v1", JSON.stringify(objectOf(0)));
  t = performance.now();
  for (let i = 0; i < VALIDATIONS; i++) kube.validate("bench", crd, "v1", JSON.stringify(objectOf(i)));
  const per = ((performance.now() - t) * 1000) / VALIDATIONS;
  return {
    kube,
    size: kube.bytes,
    row: `| cel-go + Kubernetes' libraries, WebAssembly | ${kube.startMs.toFixed(0)} ms, +${kube.rssMiB.toFixed(0)} MiB RSS | ${firstCompile.toFixed(0)} ms | ${per.toFixed(1)} µs |`,
  };
}

/** pkgSize is the size of a package's ESM build on disk, KiB. */
function pkgSize(name: string, sub = "dist/esm"): number {
  const root = join(ROOT, "node_modules", name);
  const dir = existsSync(join(root, sub)) ? join(root, sub) : join(root, "lib");
  let total = 0;
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else if (e.name.endsWith(".js")) total += statSync(join(d, e.name)).size;
    }
  };
  walk(dir);
  return Math.round(total / 1024);
}

const w = await wasm();
const conf = conformance(w.kube !== undefined);
const celjsCompile = compileUs((r) => bare.parse(r));
const celjsParsed = RULES.map((r) => bare.parse(r));
const celjsEval = perRule((i) => {
  const self = selfOf(i);
  for (const p of celjsParsed) p({ self });
});
const benv = buf.celEnv({ funcs: strings });
const bufCompile = compileUs((r) => buf.plan(benv, buf.parse(r)));
const bufPlans = RULES.map((r) => buf.plan(benv, buf.parse(r)));
const bufEval = perRule((i) => {
  const self = selfOf(i);
  for (const p of bufPlans) if (buf.isCelError(p({ self }))) throw new Error("a bench rule failed on @bufbuild/cel");
});
const xfnValidate = xfnValidateUs();

const section = [
  "## CEL engines",
  "",
  `\`node --import tsx bench/cel-engines.ts\` (issue 59, item 3), ${new Date().toISOString().slice(0, 10)}. CEL's conformance cases`,
  "(google/cel-spec via @bufbuild/cel-spec, cel-go's answers) in the suites Kubernetes' CEL environment has, without",
  "protobuf message types (test/support/celspec.ts); cel-go passes them by construction.",
  "",
  "| engine | cel-spec's answers | kube's answers (recorded) | suites short of cel-spec |",
  "|---|---|---|---|",
  ...conf,
  "",
  `Six rules of plain CEL (no Kubernetes library), µs per rule, ${N} rounds:`,
  "",
  "| engine | compile (parse + check/plan) | evaluate | code (ESM .js) |",
  "|---|---|---|---|",
  `| cel-js | ${celjsCompile.toFixed(1)} | ${celjsEval.toFixed(2)} | ${pkgSize("@marcbachmann/cel-js")} KiB |`,
  `| @bufbuild/cel | ${bufCompile.toFixed(1)} | ${bufEval.toFixed(2)} | ${pkgSize("@bufbuild/cel")} KiB |`,
  "",
  `One CRD's validation of a write (two rules, one \`quantity()\`), JSON text in, ${VALIDATIONS} writes:`,
  "",
  "| engine | start-up | first CRD compile | per write |",
  "|---|---|---|---|",
  `| xfn (cel-js + our libraries, src/schema/schema.ts) | 0 (in the server's bundle) | - | ${xfnValidate.toFixed(1)} µs |`,
  w.row ?? `| cel-go, WebAssembly | ${w.note} | | |`,
  w.size ? `\nThe WebAssembly module is ${(w.size / 1048576).toFixed(0)} MiB (built with \`-s -w\`); it needs Go 1.26 to build.` : "",
  "",
].join("\n");
process.stdout.write(`${section}\n`);
writeSection("CEL engines", section);
process.exit(0);
