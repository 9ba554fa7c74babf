// xfn render beside the real `crossplane composition render --crossplane-binary`
// (issue 59, item 5): crossplane/cli and the Crossplane core built from their
// modules at the pinned versions (scripts/anchors.mjs), the core's own render
// engine (`crossplane internal render`) run by the CLI, the functions served
// by `xfn serve --insecure` and named to crossplane with the Development
// runtime annotations. xfn renders the same files with the functions run
// in-process. The expected answer is crossplane's, in the same run: the exit
// status and the rendered documents (parsed: Go's YAML writer folds long
// strings at 80 columns, xfn's does not; docs/render-and-test.md) must be the
// same, for the examples and for generated Compositions of a scripted
// function (several steps, composed resources with readiness, required
// resources, conditions for the XR and its claim, results of each severity,
// the XR's status and readiness, context, TTL), seed printed.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parseAllDocuments, stringify } from "yaml";
// @ts-expect-error -- a plain .mjs script without types
import { build } from "../../scripts/anchors.mjs";
import { runRender } from "../../src/cli/render.js";
import { needs } from "../support/needs.js";
import { ROOT, startServe, type Serving } from "../support/spawn.js";

const R = suite("xfn render beside crossplane composition render (the real render engine): the same documents");
const G = needs(R, "go1.26");
let cli: string;
let core: string;
let work: string;
const served: Serving[] = [];
/** The Development target of each function, by name. */
const targets = new Map<string, string>();

const FUNCTIONS: Record<string, string> = {
  "function-hello": "functions/hello",
  "function-lifecycle": "functions/lifecycle",
  "function-scripted": "test/crossplane/fixtures/scripted",
};

G.before(async () => {
  cli = (build("crossplane-cli") as Record<string, string>)["crossplane-cli"]!;
  core = (build("crossplane") as Record<string, string>)["crossplane"]!;
  work = mkdtempSync(join(tmpdir(), "xfn-render-differential-"));
  await Promise.all(
    Object.entries(FUNCTIONS).map(async ([name, module]) => {
      // xfn serve on a port of its own choosing (127.0.0.1:0), as a user runs it for crossplane render.
      const s = await startServe([join(ROOT, module), "--insecure"]);
      served.push(s);
      targets.set(name, `127.0.0.1:${s.port}`);
    }),
  );
});
G.after(async () => {
  await Promise.all(served.map((s) => s.stop()));
  if (work) rmSync(work, { recursive: true, force: true });
});

/** functionsFor writes the Functions twice: for crossplane (Development, at xfn serve) and for xfn (in-process). */
function functionsFor(dir: string, names: string[]): { theirs: string; ours: string } {
  const doc = (name: string, annotations: Record<string, string>) =>
    stringify({
      apiVersion: "pkg.crossplane.io/v1",
      kind: "Function",
      metadata: { name, annotations },
      spec: { package: `xpkg.example.org/xfn/${name}:v0.1.0` },
    });
  const theirs = join(dir, "functions-crossplane.yaml");
  const ours = join(dir, "functions-xfn.yaml");
  writeFileSync(
    theirs,
    names
      .map((n) =>
        doc(n, { "render.crossplane.io/runtime": "Development", "render.crossplane.io/runtime-development-target": targets.get(n)! }),
      )
      .join("---\n"),
  );
  writeFileSync(ours, names.map((n) => doc(n, { "render.xfn.dev/module": join(ROOT, FUNCTIONS[n]!) })).join("---\n"));
  return { theirs, ours };
}

interface Answer {
  code: number;
  out: string;
  err: string;
}

/** The flags a case passes, as both commands take them. */
interface Flags {
  observed?: string;
  required?: string;
  results?: boolean;
  fullXr?: boolean;
  context?: boolean;
  contextValues?: string[];
}

function theirs(xr: string, comp: string, fns: string, f: Flags): Answer {
  const args = ["composition", "render", xr, comp, fns, "--crossplane-binary", core];
  if (f.observed) args.push("-o", f.observed);
  if (f.required) args.push("-e", f.required);
  if (f.results) args.push("-r");
  if (f.fullXr) args.push("-x");
  if (f.context) args.push("-c");
  for (const v of f.contextValues ?? []) args.push(`--context-values=${v}`);
  const r = spawnSync(cli, args, { cwd: ROOT, encoding: "utf8", timeout: 120_000 });
  if (r.error) throw r.error;
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

async function ours(xr: string, comp: string, fns: string, f: Flags): Promise<Answer> {
  let out = "";
  let err = "";
  const code = await runRender(
    xr,
    comp,
    fns,
    {
      ...(f.observed ? { observedResources: f.observed } : {}),
      requiredResources: f.required ? [f.required] : [],
      extraResources: [],
      contextValues: f.contextValues ?? [],
      contextFiles: [],
      timeout: 60_000,
      includeFunctionResults: f.results ?? false,
      includeFullXr: f.fullXr ?? false,
      includeContext: f.context ?? false,
      now: new Date("2024-01-01T00:00:00Z"),
      legacyOutput: false,
    },
    { write: (s: string) => ((out += s), true) } as never,
    { write: (s: string) => ((err += s), true) } as never,
  );
  return { code, out, err };
}

const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
/** docsOf is the rendered stream parsed, times replaced (a function served by xfn serve sees the real clock). */
function docsOf(text: string): unknown[] {
  const norm = (v: unknown): unknown =>
    typeof v === "string" && TIME.test(v)
      ? "<time>"
      : Array.isArray(v)
        ? v.map(norm)
        : v && typeof v === "object"
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, norm(x)]))
          : v;
  const docs = parseAllDocuments(text)
    .map((d) => d.toJS() as unknown)
    .filter((d) => d !== null)
    .map(norm);
  // Crossplane reports the composed resources not yet ready (or valid) in the order it ranges over the
  // pipeline's desired resources, a Go map (crossplane v2.4.0 composition_functions.go, reconciler.go):
  // it differs between runs. Each run of such results is compared as a set.
  const unready = (d: unknown) =>
    typeof d === "object" &&
    d !== null &&
    /^Composed resource ".*" is not yet (ready|valid)$/.test(String((d as { message?: unknown }).message));
  for (let i = 0; i < docs.length;) {
    let j = i;
    while (j < docs.length && unready(docs[j])) j++;
    if (j > i) docs.splice(i, j - i, ...docs.slice(i, j).sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y))));
    i = Math.max(j, i + 1);
  }
  return docs;
}

/** check renders one case with both and asserts the same exit status and documents. */
async function check(label: string, dir: string, xr: string, comp: string, names: string[], f: Flags): Promise<number> {
  const fns = functionsFor(dir, names);
  const t = theirs(xr, comp, fns.theirs, f);
  const o = await ours(xr, comp, fns.ours, f);
  // A Fatal result: xfn render exits 3, as Crossplane's render engine (`crossplane internal render`)
  // does; crossplane's CLI wraps the engine's error and exits 1 (docs/render-and-test.md).
  const fatal = t.code === 1 && t.err.includes("pipeline returned fatal");
  assert.is(o.code, fatal ? 3 : t.code, `${label}: exit status\n  crossplane: ${t.err}\n  xfn: ${o.err}`);
  if (t.code !== 0) {
    // Both failed: the same reason, crossplane's wrapped in its CLI's and engine's prefixes.
    const reason = (s: string) => /cannot compose resources: (.*)/.exec(s)?.[1]?.trim();
    assert.is(reason(o.err), reason(t.err), `${label}: the failure`);
    return t.code;
  }
  const diffs = leafDiffs(docsOf(t.out), docsOf(o.out), "");
  assert.equal(diffs, [], `${label}: the rendered documents differ (path: crossplane / xfn)`);
  return 0;
}

/** leafDiffs lists where two parsed streams differ: path, crossplane's value, xfn's. */
function leafDiffs(a: unknown, b: unknown, at: string): string[] {
  if (JSON.stringify(a) === JSON.stringify(b)) return [];
  const obj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;
  if (!obj(a) || !obj(b) || Array.isArray(a) !== Array.isArray(b)) return [`${at || "."}: ${JSON.stringify(a)} / ${JSON.stringify(b)}`];
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].flatMap((k) => leafDiffs(a[k], b[k], Array.isArray(a) ? `${at}[${k}]` : `${at}.${k}`));
}

G("the examples: hello and lifecycle, with each output flag and observed resources", async () => {
  const dir = join(work, "examples");
  mkdirSync(dir);
  const ex = (f: string) => join(ROOT, "examples", f);
  const names = ["function-hello", "function-lifecycle"];
  for (const f of [
    {},
    { results: true },
    { fullXr: true },
    { context: true, contextValues: ['apiextensions.crossplane.io/environment={"region":"eu-west-1"}'] },
    { observed: ex("observed.yaml"), results: true, fullXr: true },
  ] as Flags[])
    await check(`examples ${JSON.stringify(f)}`, dir, ex("xr.yaml"), ex("composition.yaml"), names, f);
});

const SEED = Number(process.env["XFN_SCHEMAGEN_SEED"] || 20261129);
const RUNS = Number(process.env["XFN_RENDER_RUNS"] || 16);
const NAMES = ["a", "b", "c", "d"];

/** A step's script (test/crossplane/fixtures/scripted): what the scripted function does in it. */
const scriptArb = fc.record(
  {
    compose: fc.uniqueArray(
      fc.record(
        {
          name: fc.constantFrom(...NAMES),
          ready: fc.boolean(),
          copy: fc.constantFrom("spec.size", "spec.tier", "metadata.name"),
        },
        { requiredKeys: ["name"] },
      ),
      { maxLength: 3, selector: (c) => c.name },
    ),
    require: fc.array(fc.record({ name: fc.constantFrom("cms", "others"), matchLabels: fc.constantFrom({ team: "a" }, { team: "b" }) }), {
      maxLength: 1,
    }),
    conditions: fc.uniqueArray(
      fc.record(
        {
          type: fc.constantFrom("Deployed", "Checked"),
          status: fc.constantFrom("True", "False", "Unknown"),
          reason: fc.constantFrom("Done", "Waiting"),
          message: fc.constantFrom("all good", "a longer message that goes on past eighty columns when it is written out as YAML"),
          claim: fc.boolean(),
        },
        { requiredKeys: ["type", "status", "reason"] },
      ),
      { maxLength: 2, selector: (c) => c.type },
    ),
    results: fc.array(
      fc.record({
        severity: fc.oneof({ weight: 6, arbitrary: fc.constantFrom("normal", "warning") }, { weight: 1, arbitrary: fc.constant("fatal") }),
        message: fc.constantFrom("fyi", "careful", "stop here"),
      }),
      { maxLength: 2 },
    ),
    status: fc.record({ phase: fc.constantFrom("one", "two"), count: fc.integer({ min: 0, max: 9 }) }, { requiredKeys: [] }),
    ready: fc.boolean(),
    context: fc.dictionary(fc.constantFrom("k", "xfn.dev/seen"), fc.constantFrom("v", "w"), { maxKeys: 1 }),
    ttl: fc.constantFrom(30, 60, 120),
  },
  { requiredKeys: ["compose"] },
);

/** A generated case: an XR, its Composition of 1-3 scripted steps, observed composed resources. */
const caseArb = fc.record({
  steps: fc.array(scriptArb, { minLength: 1, maxLength: 3 }),
  size: fc.integer({ min: 1, max: 5 }),
  tier: fc.option(fc.constantFrom("gold", "silver"), { nil: undefined }),
  observed: fc.subarray(NAMES),
  observedReady: fc.array(fc.constantFrom("True", "False", undefined), { minLength: 4, maxLength: 4 }),
});

G("generated Compositions of a scripted function: the same documents, or the same failure", async () => {
  const cases = fc.sample(caseArb, { seed: SEED, numRuns: RUNS });
  process.stderr.write(`render differential: ${RUNS} generated Compositions, seed ${SEED} (XFN_SCHEMAGEN_SEED, XFN_RENDER_RUNS)\n`);
  let failed = 0;
  for (const [i, c] of cases.entries()) {
    const dir = join(work, `generated-${i}`);
    mkdirSync(dir);
    const xr = join(dir, "xr.yaml");
    writeFileSync(
      xr,
      stringify({
        apiVersion: "example.org/v1",
        kind: "XThing",
        metadata: { name: `thing-${i}`, namespace: "default" },
        spec: { size: c.size, ...(c.tier ? { tier: c.tier } : {}) },
      }),
    );
    const comp = join(dir, "composition.yaml");
    writeFileSync(
      comp,
      stringify({
        apiVersion: "apiextensions.crossplane.io/v1",
        kind: "Composition",
        metadata: { name: "things" },
        spec: {
          compositeTypeRef: { apiVersion: "example.org/v1", kind: "XThing" },
          mode: "Pipeline",
          pipeline: c.steps.map((s, j) => ({
            step: `step-${j}`,
            functionRef: { name: "function-scripted" },
            input: { apiVersion: "scripted.xfn.dev/v1alpha1", kind: "Script", ...s },
          })),
        },
      }),
    );
    const observed = join(dir, "observed.yaml");
    writeFileSync(
      observed,
      c.observed
        .map((n) =>
          stringify({
            apiVersion: "example.org/v1",
            kind: "Widget",
            metadata: {
              name: `thing-${i}-${n}`,
              namespace: "default",
              annotations: { "crossplane.io/composition-resource-name": n },
              labels: { "crossplane.io/composite": `thing-${i}` },
            },
            spec: { required: 0 },
            ...(c.observedReady[NAMES.indexOf(n)]
              ? { status: { conditions: [{ type: "Ready", status: c.observedReady[NAMES.indexOf(n)], reason: "Checked" }] } }
              : {}),
          }),
        )
        .join("---\n"),
    );
    const required = join(dir, "required.yaml");
    writeFileSync(
      required,
      ["a", "a", "b"]
        .map((team, k) =>
          stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `cm-${k}`, namespace: "default", labels: { team } } }),
        )
        .join("---\n"),
    );
    // No -o when nothing is observed: crossplane takes an empty file's one empty document as a resource.
    const flags: Flags = { ...(c.observed.length ? { observed } : {}), required, results: true, fullXr: true, context: true };
    const label = `generated ${i} (seed ${SEED})`;
    if ((await check(label, dir, xr, comp, ["function-scripted"], flags)) !== 0) failed++;
  }
  process.stderr.write(`render differential: ${RUNS - failed} rendered, ${failed} failed alike (a fatal result)\n`);
  assert.ok(RUNS - failed > RUNS / 2, `${RUNS - failed} of ${RUNS} rendered: most generated pipelines must render`);
});

R.run();
