// Start-up of the xfn command, timed as a user feels it: wall-clock time of
// whole processes (--help, render, test; serve until it listens), over several
// runs that alternate between variants, with the median quoted and ratios
// taken from the same run. Writes the "Start-up" section of bench/RESULTS.md.
//
//   node --import tsx bench/startup.ts [--base REV] [--runs N]
//
// --base REV adds a variant: the xfn of that git revision (checked out into
// .tmp/, sharing this node_modules), to measure a change side by side.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, symlinkSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { flag, writeSection } from "./results.js";

const ROOT = join(import.meta.dirname, "..");
const RUNS = flag("--runs", 7);
const base = flag("--base", "") || undefined;

interface Variant {
  name: string;
  bin: string;
  cwd: string;
}

const variants: Variant[] = [{ name: "xfn (this build)", bin: join(ROOT, "bin/xfn.js"), cwd: ROOT }];
if (base) {
  const dir = join(ROOT, ".tmp", `startup-base-${base.replace(/[^\w.-]/g, "_")}`);
  if (!existsSync(dir)) {
    const r = spawnSync("git", ["worktree", "add", "--detach", dir, base], { cwd: ROOT, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`cannot check out ${base}: ${r.stderr}`);
    symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  }
  if (existsSync(join(dir, "tsconfig.build.json")) && !existsSync(join(dir, "lib"))) {
    spawnSync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"], {
      cwd: dir,
      stdio: "inherit",
    });
  }
  variants.push({ name: `xfn at ${base}`, bin: join(dir, "bin/xfn.js"), cwd: dir });
}

interface Task {
  name: string;
  args: string[];
  /** until: the process is timed until its output matches (then stopped), not until it exits. */
  until?: RegExp;
}

const tasks: Task[] = [
  { name: "node, doing nothing (the floor)", args: [] },
  { name: "xfn --help", args: ["--help"] },
  {
    name: "xfn render (the README example)",
    args: ["render", "examples/xr.yaml", "examples/composition.yaml", "examples/functions.yaml", "-o", "examples/observed.yaml"],
  },
  { name: "xfn test examples", args: ["test", "examples"] },
  {
    name: "xfn serve functions/hello, until listening",
    args: ["serve", "functions/hello", "--insecure", "--address", "127.0.0.1:0"],
    until: /"port":\d+/,
  },
  { name: "xfn host --help (loads no client-node)", args: ["host", "--help"] },
];

function timeOnce(v: Variant, t: Task): Promise<number> {
  const argv = t.args.length === 0 ? ["-e", ""] : [v.bin, ...t.args];
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, argv, { cwd: v.cwd, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let done = false;
    const finish = (ok: boolean) => {
      if (done) return;
      done = true;
      const ms = performance.now() - started;
      if (ok) resolve(ms);
      else reject(new Error(`${v.name}: ${t.args.join(" ")} failed:\n${out}`));
    };
    const onData = (d: Buffer) => {
      out += d;
      if (t.until?.test(out)) {
        finish(true);
        child.kill("SIGKILL");
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => finish(!t.until && code === 0));
  });
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
const r0 = (x: number) => Math.round(x);
const r2 = (x: number) => Math.round(x * 100) / 100;

const rows: string[] = [];
for (const t of tasks) {
  const times = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const runVariants = t.args.length === 0 ? variants.slice(0, 1) : variants;
  for (const v of runVariants) await timeOnce(v, t); // warm-up: disk cache, tsx cache
  for (let i = 0; i < RUNS; i++) for (const v of runVariants) times.get(v.name)!.push(await timeOnce(v, t));
  const mine = median(times.get(variants[0]!.name)!);
  for (const v of runVariants) {
    const ts = times.get(v.name)!;
    const m = median(ts);
    const ratio = v === variants[0] ? "" : `${r2(m / mine)}`;
    rows.push(
      `| ${t.name} | ${t.args.length === 0 ? "node -e ''" : v.name} | ${r0(m)} | ${r0(Math.min(...ts))} | ${r0(Math.max(...ts))} | ${ratio} |`,
    );
  }
  process.stdout.write(`${t.name}: ${r0(mine)} ms\n`);
}

const section = [
  "## Start-up",
  "",
  `Run: \`node --import tsx bench/startup.ts${base ? ` --base ${base}` : ""}\` on ${new Date().toISOString().slice(0, 10)}; ${RUNS} runs per cell after one warm-up, variants alternating. Wall-clock ms of the whole process (serve: until it logs its port).`,
  "",
  "| command | variant | median ms | min | max | variant / this build |",
  "|---|---|---:|---:|---:|---:|",
  ...rows,
  "",
  `Machine: ${cpus().length} cores, Node ${process.version}; shared and noisy: compare within the table, not across runs.`,
  "",
].join("\n");
process.stdout.write(`\n${section}`);

writeSection("Start-up", section);
