// Start-up of the xfn command, timed as a user feels it: wall-clock time of
// whole processes (--help, render, test; serve until it listens, and until it
// answers its first call), over several runs that alternate between
// variants, with the median quoted and ratios taken from the same run. Beside
// xfn's first answers (a .ts module under `xfn serve`, and the bundle `xfn
// package` makes, as the function image runs it, both with the default
// workers), the same for a Go function built as function-sdk-go builds one
// (bench/go/main.go) and for the TypeScript SDK (bench/sdk-function.mjs).
// Writes the "Start-up" section of bench/RESULTS.md.
//
//   node --import tsx bench/startup.ts [--base REV] [--runs N] [--only REGEX]
//
// --only REGEX times only the commands whose names match (and the peers' first
// answers when they match too), and prints without writing RESULTS.md.
//
// --base REV adds a variant: the xfn of that git revision (checked out into
// .tmp/, sharing this node_modules), to measure a change side by side.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync, symlinkSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { encodeRequest } from "../src/wire/codec.js";
import { parseRequest } from "../src/testing/unit.js";
import { freePort } from "../test/support/spawn.js";
import { accepting, firstAnswer } from "./answer.js";
import { buildGoFunction } from "./go.js";
import { flag, writeSection } from "./results.js";
import { request as benchRequest } from "./workload.js";

const ROOT = join(import.meta.dirname, "..");
const RUNS = flag("--runs", 7);
const base = flag("--base", "") || undefined;
const only = flag("--only", "") ? new RegExp(flag("--only", "")) : undefined;

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
  /** answer: the process (args with PORT replaced) is timed until it answers this RunFunctionRequest. */
  answer?: Uint8Array;
  /** cmd: run this program instead of `node <xfn>` (a peer: not run per variant). */
  cmd?: string;
  /** bundled: run `node <the variant's bundle of functions/hello>` instead of `node <xfn>`. */
  bundled?: boolean;
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

// First answers: each server started on a free port, called once it accepts connections.
const BUNDLE_TASK = "the bundle (xfn package functions/hello), first answer";
const SDK_TASK = "TypeScript SDK function, first answer";
const helloRequest = encodeRequest(parseRequest(readFileSync(join(ROOT, "functions/hello/example/request.yaml"), "utf8"), "request.yaml"));
tasks.push(
  {
    name: "xfn serve functions/hello (.ts), first answer",
    args: ["serve", "functions/hello", "--insecure", "--address", "127.0.0.1:PORT"],
    answer: helloRequest,
  },
  {
    name: BUNDLE_TASK,
    bundled: true,
    args: ["--insecure", "--address", "127.0.0.1:PORT"],
    answer: helloRequest,
  },
  {
    name: "Go function (grpc-go, generated types), first answer",
    cmd: buildGoFunction(),
    args: ["-address", "127.0.0.1:PORT"],
    answer: benchRequest(1),
  },
  {
    name: SDK_TASK,
    cmd: process.execPath,
    args: [join(ROOT, "bench/sdk-function.mjs"), "PORT"],
    answer: benchRequest(1),
  },
);

const bundles = new Map<Variant, string>();
/** bundleOf bundles functions/hello with a variant's xfn package, as the function image holds it (once per variant). */
function bundleOf(v: Variant): string {
  const known = bundles.get(v);
  if (known) return known;
  const out = join(ROOT, ".tmp", `startup-bundle-${variants.indexOf(v)}`);
  const r = spawnSync(process.execPath, [v.bin, "package", "functions/hello", "-o", out], { cwd: v.cwd, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${v.name}: cannot package functions/hello: ${r.stderr}`);
  bundles.set(v, join(out, "function.mjs"));
  return join(out, "function.mjs");
}

/** IDLE_MS: how long after its first answer a server's resident memory is read (every worker started by then). */
const IDLE_MS = 3000;
/** Resident memory (MiB) IDLE_MS after the first answer, by task and variant name. */
const idle = new Map<string, number[]>();

/** rssMiB is a process's resident set now (all its threads: xfn's workers are threads of it). */
function rssMiB(pid: number): number {
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN) / 1024;
}

async function timeAnswer(v: Variant, t: Task, warm = false): Promise<number> {
  const port = await freePort();
  const args = t.args.map((a) => a.replace("PORT", String(port)));
  const argv = t.cmd ? args : [t.bundled ? bundleOf(v) : v.bin, ...args];
  const started = performance.now();
  const child = spawn(t.cmd ?? process.execPath, argv, { cwd: v.cwd, stdio: ["ignore", "ignore", "pipe"] });
  let out = "";
  let ended = false;
  child.stderr.on("data", (d: Buffer) => (out += d));
  child.once("exit", () => (ended = true));
  try {
    await accepting(port, () => ended);
    await firstAnswer(port, t.answer!);
    const ms = performance.now() - started;
    if (!warm) {
      await new Promise((r) => setTimeout(r, IDLE_MS));
      const key = `${t.name}\n${t.cmd ? "peer" : v.name}`;
      idle.set(key, [...(idle.get(key) ?? []), rssMiB(child.pid!)]);
    }
    return ms;
  } catch (err) {
    throw new Error(`${t.name}: ${(err as Error).message}\n${out}`);
  } finally {
    child.kill("SIGKILL");
  }
}

function timeOnce(v: Variant, t: Task, warm = false): Promise<number> {
  if (t.answer) return timeAnswer(v, t, warm);
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
const medians = new Map<string, { ms: number; rss?: number }>();
for (const t of tasks) {
  if (only && !only.test(t.name)) continue;
  const times = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const runVariants = t.args.length === 0 || t.cmd ? variants.slice(0, 1) : variants;
  for (const v of runVariants) await timeOnce(v, t, true); // warm-up: disk cache, tsx cache
  for (let i = 0; i < RUNS; i++) for (const v of runVariants) times.get(v.name)!.push(await timeOnce(v, t));
  const mine = median(times.get(variants[0]!.name)!);
  for (const v of runVariants) {
    const ts = times.get(v.name)!;
    const m = median(ts);
    const ratio = v === variants[0] ? "" : `${r2(m / mine)}`;
    const rss = idle.get(`${t.name}\n${t.cmd ? "peer" : v.name}`);
    rows.push(
      `| ${t.name} | ${t.args.length === 0 ? "node -e ''" : t.cmd ? "peer" : v.name} | ${r0(m)} | ${r0(Math.min(...ts))} | ${r0(Math.max(...ts))} | ${ratio} | ${rss ? r0(median(rss)) : ""} |`,
    );
    medians.set(t.cmd ? t.name : `${t.name}\n${v.name}`, { ms: m, ...(rss ? { rss: median(rss) } : {}) });
  }
  process.stdout.write(`${t.name}: ${r0(mine)} ms\n`);
}

/** versusSdk compares this build's bundle with the TypeScript SDK function (issue 60: first answer within 1.2x, idle memory within 1.5x). */
function versusSdk(): string[] {
  const mine = medians.get(`${BUNDLE_TASK}\n${variants[0]!.name}`);
  const sdk = medians.get(SDK_TASK);
  if (!mine || !sdk) return [];
  return [
    `This build's bundle over the TypeScript SDK function: first answer ${r2(mine.ms / sdk.ms)}x, ` +
      `idle RSS ${mine.rss && sdk.rss ? `${r2(mine.rss / sdk.rss)}x` : "(not read)"} (idle RSS: the whole process ${IDLE_MS / 1000} s after its first answer).`,
    "",
  ];
}

const section = [
  "## Start-up",
  "",
  `Run: \`node --import tsx bench/startup.ts${base ? ` --base ${base}` : ""}\` on ${new Date().toISOString().slice(0, 10)}; ${RUNS} runs per cell after one warm-up, variants alternating. Wall-clock ms of the whole process (serve: until it logs its port; first answer: from spawning the server until its first RunFunction answer, polling its port every 2 ms, default workers for xfn; the Go function and the TypeScript SDK answer the bench request at N = 1, xfn functions/hello's example).`,
  "",
  "| command | variant | median ms | min | max | variant / this build | idle RSS MiB |",
  "|---|---|---:|---:|---:|---:|---:|",
  ...rows,
  "",
  ...versusSdk(),
  `Machine: ${cpus().length} cores, Node ${process.version}; shared and noisy: compare within the table, not across runs.`,
  "",
].join("\n");
process.stdout.write(`\n${section}`);

if (!only) writeSection("Start-up", section);
