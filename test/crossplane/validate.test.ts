// xfn validate beside the real `crossplane resource validate` (issue 59, item
// 4): crossplane/cli built from its module at the pinned version
// (scripts/anchors.mjs), run with --crossplane-image= and local schemas, on
// the docs' examples, the fixtures of test/validate, and generated CRDs with
// objects (schemagen.ts, seed printed). The expected answer is what the real
// command says in the same run: the exit status and every resource's verdict
// must be the same; each line must be the same, or differ only in one of the
// kinds listed in LINE_KINDS (docs/validate.md says why each is kept).
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse as parseYaml, stringify } from "yaml";
// @ts-expect-error -- a plain .mjs script without types
import { build } from "../../scripts/anchors.mjs";
import { runValidate, type ValidateFlags } from "../../src/cli/validate.js";
import { needs } from "../support/needs.js";
import { ROOT } from "../support/spawn.js";
import { crdArb, objectArb } from "./schemagen.js";

const V = suite("xfn validate beside crossplane resource validate: the same verdicts, the same lines");
const G = needs(V, "go1.26");
let cli: string;
let work: string;

G.before(() => {
  cli = (build("crossplane-cli") as Record<string, string>)["crossplane-cli"]!;
  work = mkdtempSync(join(tmpdir(), "xfn-validate-differential-"));
  mkdirSync(join(work, "cache"));
});
G.after(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

interface Answer {
  code: number;
  out: string;
  err: string;
}

/** theirs runs crossplane's validate: no Crossplane image (no registry here), its cache in the work folder. */
function theirs(args: string[], stdin = ""): Answer {
  const r = spawnSync(cli, ["resource", "validate", ...args, "--crossplane-image=", "--cache-dir", join(work, "cache")], {
    cwd: ROOT,
    input: stdin,
    encoding: "utf8",
    timeout: 120_000,
  });
  if (r.error) throw r.error;
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

/** ours runs xfn validate as its command does, on the same arguments (the flags the cases use). */
function ours(args: string[], stdin = ""): Answer {
  const pos: string[] = [];
  const flags: ValidateFlags = { cacheDir: join(work, "cache"), errorOnMissingSchemas: false, output: "text", skipSuccessResults: false };
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "-o" || a === "--output") flags.output = args[++i] as ValidateFlags["output"];
    else if (a === "--skip-success-results") flags.skipSuccessResults = true;
    else if (a === "--error-on-missing-schemas") flags.errorOnMissingSchemas = true;
    else pos.push(a);
  }
  let out = "";
  let err = "";
  const cwd = process.cwd();
  process.chdir(ROOT);
  try {
    const code = runValidate(
      pos[0]!,
      pos[1]!,
      flags,
      { write: (s: string) => ((out += s), true) } as never,
      { write: (s: string) => ((err += s), true) } as never,
      () => stdin,
    );
    return { code, out, err };
  } finally {
    process.chdir(cwd);
  }
}

/**
 * The kinds of line difference kept, each a transformation that makes a line
 * of either side the same when the difference is only of that kind.
 */
const LINE_KINDS: { kind: string; norm: (l: string) => string }[] = [
  {
    // A manifest that does not parse: xfn names the file, the line and the column, in the yaml library's
    // words; crossplane gives its YAML decoder's.
    kind: "YAML parse errors",
    norm: (l) => l.replace(/^(xfn validate: cannot load (resources|extensions) from "[^"]*": ).*$/, "$1<parse error>"),
  },
  {
    // crossplane reads every number of a manifest as a float64: its messages call a whole number
    // "number" (a cluster says "integer"), name float64 in a format's check, and show a bound as a float.
    kind: "numbers read as float64",
    norm: (l) =>
      l
        .replace(/"(number|integer|float64|int64)"/g, '"N"')
        .replace(/(less|greater) than (or equal to )?-?\d+(\.\d+)?$/, "$1 than $2B")
        .replace(/multiple of -?\d+(\.\d+)?$/, "multiple of B"),
  },
  {
    // crossplane/cli v2.5.0 is built on apiextensions-apiserver v0.35, which drops int32, int64, float
    // and double from a schema; kube-apiserver v1.36 (whose rules xfn follows) keeps them.
    kind: "numeric formats (Kubernetes 1.35 libraries)",
    norm: (l) =>
      l
        .replace(/Invalid value: "[^"]*": (\S+) in body must be of type [\w,-]+: "[^"]*"/, "Invalid value: T: $1 in body must be of type T")
        .replace(/must be of type (integer|number) (\(default format\)|with format \w+)/, "must be of type $1 F"),
  },
];

/** Lines only xfn prints: what a cluster refuses that crossplane's validate does not check. */
const OURS_ONLY: { kind: string; test: (l: string) => boolean }[] = [
  {
    kind: "list types checked (a cluster does)",
    test: (l) => /must be an object for an array of list-type map|: Duplicate value: /.test(l),
  },
  {
    kind: "numeric formats (Kubernetes 1.35 libraries)",
    test: (l) => /Checked value must be of type (integer|number) with format \w+ in /.test(l),
  },
];

/** Lines only crossplane prints, for the same reason. */
const THEIRS_ONLY: { kind: string; test: (l: string) => boolean }[] = [
  {
    kind: "numeric formats (Kubernetes 1.35 libraries)",
    test: (l) => /Checked value must be of type (integer|number) \(default format\) in /.test(l),
  },
];

const counts = new Map<string, number>();
const count = (k: string) => counts.set(k, (counts.get(k) ?? 0) + 1);

/** resourceOf is the resource a text line is about ("" for the summary and the error line). */
const resourceOf = (l: string) => /^\[[✓x!]\] .*?, Kind=\S+, (\S*)/.exec(l)?.[1] ?? "";

/** sameText compares two text reports: the same lines per resource, but for the kinds listed. */
function sameText(t: string, o: string, label: string): string[] {
  const program = (s: string) => s.replace(/^crossplane: error: /m, "xfn validate: ");
  const byResource = (s: string) => {
    const m = new Map<string, string[]>();
    for (const l of program(s).split("\n").filter(Boolean)) m.set(resourceOf(l), [...(m.get(resourceOf(l)) ?? []), l]);
    return m;
  };
  const T = byResource(t);
  const O = byResource(o);
  const problems: string[] = [];
  for (const r of new Set([...T.keys(), ...O.keys()])) {
    const a = [...(T.get(r) ?? [])];
    const b = [...(O.get(r) ?? [])];
    // Exact first (Go's map order makes crossplane's order of a resource's errors vary).
    for (const l of [...a]) {
      const i = b.indexOf(l);
      if (i >= 0) {
        a.splice(a.indexOf(l), 1);
        b.splice(i, 1);
      }
    }
    for (const k of LINE_KINDS)
      for (const l of [...a]) {
        const i = b.findIndex((x) => k.norm(x) === k.norm(l));
        if (i >= 0) {
          a.splice(a.indexOf(l), 1);
          b.splice(i, 1);
          count(k.kind);
        }
      }
    for (const l of [...b]) {
      const k = OURS_ONLY.find((x) => x.test(l));
      if (!k) continue;
      b.splice(b.indexOf(l), 1);
      count(k.kind);
    }
    for (const l of [...a]) {
      const k = THEIRS_ONLY.find((x) => x.test(l));
      if (!k) continue;
      a.splice(a.indexOf(l), 1);
      count(k.kind);
    }
    for (const l of a) problems.push(`${label}: only crossplane: ${l}`);
    for (const l of b) problems.push(`${label}: only xfn: ${l}`);
  }
  return problems;
}

interface Structured {
  summary: Record<string, number>;
  resources: { name: string; status: string }[];
}

/** check runs both on one case and asserts the same exit status, verdicts and (but for the kinds listed) lines. */
function check(label: string, args: string[], stdin = ""): void {
  const t = theirs(args, stdin);
  const o = ours(args, stdin);
  assert.is(o.code, t.code, `${label}: exit status\n  crossplane: ${t.err}\n  xfn: ${o.err}`);
  const json = args.includes("json") || args.includes("yaml");
  if (!json) {
    assert.equal(sameText(t.out + t.err, o.out + o.err, label), [], `${label}: lines`);
    return;
  }
  const parse = (s: string) => (args.includes("yaml") ? parseYaml(s) : JSON.parse(s)) as Structured;
  const tt = parse(t.out);
  const oo = parse(o.out);
  assert.equal(oo.summary, tt.summary, `${label}: summary`);
  assert.equal(
    oo.resources.map((r) => `${r.name} ${r.status}`),
    tt.resources.map((r) => `${r.name} ${r.status}`),
    `${label}: verdicts`,
  );
}

G("the docs' examples (docs/validate.md): every `xfn validate` shown, and render's output piped in", () => {
  const doc = readFileSync(join(ROOT, "docs/validate.md"), "utf8");
  const commands = [...doc.matchAll(/^npx xfn validate (.+)$/gm)].map((m) => m[1]!.split(/\s+/));
  assert.ok(commands.length >= 3, `${commands.length} commands found`);
  for (const args of commands) check(`docs: xfn validate ${args.join(" ")}`, args);
  // render | validate: the rendered YAML given to both on stdin.
  const rendered = spawnSync(
    process.execPath,
    [
      "--import",
      "tsx",
      "src/cli/main.ts",
      "render",
      "examples/xr.yaml",
      "examples/composition.yaml",
      "examples/functions.yaml",
      "--include-full-xr",
    ],
    { cwd: ROOT, encoding: "utf8", timeout: 120_000 },
  );
  assert.is(rendered.status, 0, rendered.stderr);
  check("docs: render | validate examples/host -", ["examples/host", "-"], rendered.stdout);
});

G("test/validate's fixtures, in text, JSON and YAML, with each flag", () => {
  const F = "test/fixtures/validate";
  for (const r of ["valid", "invalid", "missing"])
    for (const o of ["text", "json", "yaml"]) check(`${r} -o ${o}`, [`${F}/schemas`, `${F}/${r}.yaml`, "-o", o]);
  check("missing --error-on-missing-schemas", [`${F}/schemas`, `${F}/missing.yaml`, "--error-on-missing-schemas"]);
  check("invalid --skip-success-results", [`${F}/schemas`, `${F}/invalid.yaml`, "--skip-success-results"]);
  check("stdin for both", ["-", "-"]);
  check("a missing file", [`${F}/schemas`, `${F}/no-such-file.yaml`]);
  check("a missing schemas folder", [`${F}/no-such-folder`, `${F}/valid.yaml`]);
  const bad = join(work, "bad.yaml");
  writeFileSync(bad, "apiVersion: v1\nkind: [unclosed\n");
  check("YAML that does not parse", [`${F}/schemas`, bad]);
});

const SEED = Number(process.env["XFN_SCHEMAGEN_SEED"] || 20261129);
const CRDS = Number(process.env["XFN_VALIDATE_CRDS"] || 30);
const PER = 8;

G("generated CRDs and objects (schemagen.ts): the same verdicts, the same lines but for the kinds listed", () => {
  const dir = join(work, "generated");
  mkdirSync(join(dir, "crds"), { recursive: true });
  const crds = Array.from({ length: CRDS }, (_, i) => fc.sample(crdArb(`G${i}`), { seed: SEED + i, numRuns: 1 })[0]!);
  const objects = crds.flatMap((crd, i) =>
    Array.from({ length: PER }, (_, j) => fc.sample(objectArb(crd, `o-${i}-${j}`), { seed: SEED + i * 100 + j, numRuns: 1 })[0]!),
  );
  writeFileSync(join(dir, "crds", "crds.yaml"), crds.map((c) => stringify(c)).join("---\n"));
  writeFileSync(join(dir, "objects.yaml"), objects.map((o) => stringify(o)).join("---\n"));
  const replay = `(seed ${SEED}: XFN_SCHEMAGEN_SEED replays it)`;
  check(`generated text ${replay}`, [join(dir, "crds"), join(dir, "objects.yaml")]);
  check(`generated json ${replay}`, [join(dir, "crds"), join(dir, "objects.yaml"), "-o", "json"]);
  const invalid = (JSON.parse(ours([join(dir, "crds"), join(dir, "objects.yaml"), "-o", "json"]).out) as Structured).summary["invalid"];
  assert.ok((invalid ?? 0) > CRDS, `${invalid} of ${objects.length} refused: the generator's faults reach the validator`);
  process.stderr.write(
    `validate differential: ${CRDS} CRDs, ${objects.length} objects, seed ${SEED}; lines kept different: ${
      [...counts].map(([k, n]) => `${n} × ${k}`).join(", ") || "none"
    }\n`,
  );
});

V.run();
