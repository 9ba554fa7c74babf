// `xfn validate` beside a fast YAML parser reading the same file (issue 60,
// point 5): N resources of bench/host's Thing kind in one file, checked by
// `node bin/xfn.js validate` (lib/, built), and the same file read whole by
// js-yaml's loadAll in a process of its own. Each process reports its CPU
// (user + system) and peak resident set at exit (process.resourceUsage);
// both run alternately, best of three, so the machine's drift hits both.
//
//   node --import tsx bench/validate.ts [--sizes 5000,50000] [--runs 3]
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { loadDocs } from "../src/engine/docs.js";

const ROOT = join(import.meta.dirname, "..");
const flag = (name: string, def: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : def;
};
const SIZES = flag("--sizes", "5000,50000").split(",").map(Number);
const RUNS = Number(flag("--runs", "3"));

const work = mkdtempSync(join(tmpdir(), "xfn-bench-validate-"));
/** Printed by each measured process at exit: its CPU ms and peak RSS in KiB. */
const REPORT = join(work, "report.mjs");
writeFileSync(
  REPORT,
  `process.on("exit", () => { const u = process.resourceUsage(); process.stderr.write("\\nBENCH " + JSON.stringify({ cpu: (u.userCPUTime + u.systemCPUTime) / 1000, rss: u.maxRSS }) + "\\n"); });\n`,
);
const JSYAML = join(work, "js-yaml.mjs");
writeFileSync(
  JSYAML,
  `import { readFileSync } from "node:fs";\nimport yaml from ${JSON.stringify(join(ROOT, "node_modules/js-yaml/dist/js-yaml.mjs"))};\n` +
    `let n = 0;\nyaml.loadAll(readFileSync(process.argv[2], "utf8"), () => n++, { schema: yaml.CORE_SCHEMA });\nif (n === 0) process.exit(2);\n`,
);

const crd = loadDocs(join(ROOT, "bench/host/manifests.yaml")).find((d) => d.obj["kind"] === "CustomResourceDefinition")!.obj;
writeFileSync(join(work, "crd.yaml"), stringify(crd));

function resources(n: number): string {
  const file = join(work, `things-${n}.yaml`);
  const parts: string[] = [];
  for (let i = 0; i < n; i++)
    parts.push(
      `apiVersion: bench.example.org/v1\nkind: Thing\nmetadata:\n  name: thing-${i}\n  namespace: default\n  labels:\n    app: bench\n    index: "${i}"\nspec:\n  size: ${i % 7}\n  region: eu-west-${i % 3}\n  tags:\n    team: platform\n`,
    );
  writeFileSync(file, parts.join("---\n"));
  return file;
}

function measure(args: string[]): { cpu: number; rss: number; ms: number } {
  const started = performance.now();
  const r = spawnSync(process.execPath, ["--import", REPORT, ...args], { cwd: ROOT, encoding: "utf8", maxBuffer: 1 << 30 });
  const ms = performance.now() - started;
  const line = /BENCH (\{.*\})/.exec(r.stderr)?.[1];
  if (r.status !== 0 || !line) throw new Error(`${args.join(" ")} failed (exit ${r.status}): ${r.stderr.slice(-500)}`);
  return { ...(JSON.parse(line) as { cpu: number; rss: number }), ms };
}

const rows: string[] = [];
try {
  for (const n of SIZES) {
    const file = resources(n);
    const best = { xfn: { cpu: Infinity, rss: 0, ms: Infinity }, yaml: { cpu: Infinity, rss: 0, ms: Infinity } };
    for (let i = 0; i < RUNS; i++) {
      const x = measure(["bin/xfn.js", "validate", join(work, "crd.yaml"), file, "--skip-success-results"]);
      const y = measure([JSYAML, file]);
      if (x.cpu < best.xfn.cpu) best.xfn = x;
      if (y.cpu < best.yaml.cpu) best.yaml = y;
    }
    const mib = (kib: number) => (kib / 1024).toFixed(0);
    rows.push(
      `| ${n} | ${best.xfn.cpu.toFixed(0)} | ${best.yaml.cpu.toFixed(0)} | ${(best.xfn.cpu / best.yaml.cpu).toFixed(2)} | ${best.xfn.ms.toFixed(0)} | ${best.yaml.ms.toFixed(0)} | ${mib(best.xfn.rss)} | ${mib(best.yaml.rss)} |`,
    );
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
process.stdout.write(
  "\n| resources | xfn validate CPU ms | js-yaml loadAll CPU ms | ratio | xfn ms | js-yaml ms | xfn peak MiB | js-yaml peak MiB |\n" +
    "|---:|---:|---:|---:|---:|---:|---:|---:|\n" +
    `${rows.join("\n")}\n`,
);
