// The worker pool under load: `xfn serve bench/fn.ts` in its own process with
// each --workers count given (1 runs the function in the server's own thread),
// alternating, in one run:
//   - isolation: p99 of small (N=1) calls alone, and beside N=1000 traffic at
//     concurrency 2 sent by another process (target: beside / alone <= 3);
//   - throughput at N=100 and N=1000, concurrency 16 (target: 2 workers >=
//     1.5x 1 worker where two cores are free for the server).
// Calls go over node:http2 with the request framed ahead of time (bench/h2.ts):
// a grpc-js client would take a third of the machine from the server. The
// server's and the generator's CPU are read from /proc, so the table shows how
// much of the two cores the server actually had.
// Writes the "Worker pool" section of bench/RESULTS.md.
//
//   node --import tsx bench/pool.ts [--rounds 3] [--small 400] [--workers 1,2,3]
import { fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { frame, h2Caller } from "./h2.js";
import { flag, startServe, writeSection } from "./results.js";
import { request } from "./workload.js";

const ROUNDS = flag("--rounds", 3);
const SMALL = flag("--small", 400);
const WORKERS = flag("--workers", "1,2,3").split(",").map(Number);

function startServer(workers: number) {
  return startServe(["bench/fn.ts", "--workers", String(workers), "--max-recv-message-size", "8"]);
}

/** cpuMs is a process's user + system CPU so far, all threads, in ms (Linux /proc; clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}
const ownCpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)]!;
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const r1 = (x: number) => Math.round(x * 10) / 10;
const r2 = (x: number) => Math.round(x * 100) / 100;

const small = frame(request(1));
const mid = frame(request(100));
const big = frame(request(1000));

/**
 * background starts N=1000 traffic at concurrency 2 from another process; the
 * function it returns ends it and resolves with the calls that succeeded (it
 * rejects with the failures, or if the process died first).
 */
async function background(port: number): Promise<() => Promise<number>> {
  const child = fork(join(import.meta.dirname, "background.ts"), [String(port), "1000", "2"], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  await new Promise<void>((resolve, reject) => {
    child.once("message", () => resolve());
    child.once("exit", (code) => reject(new Error(`background traffic exited with ${code}`)));
  });
  return () =>
    new Promise<number>((resolve, reject) => {
      child.on("message", (m: { sent?: number; errors?: string[] }) => {
        if (m.sent === undefined) return;
        if (m.errors?.length) reject(new Error(`${m.errors.length} background calls failed: ${[...new Set(m.errors)].join("; ")}`));
        else resolve(m.sent);
      });
      child.once("exit", (code) => reject(new Error(`background traffic exited with ${code} before reporting`)));
      child.send({ stop: true });
    });
}

async function isolation(port: number): Promise<{ alone: number; beside: number; bigCalls: number }> {
  const c = await h2Caller(port);
  try {
    for (let i = 0; i < 30; i++) await c.call(small);
    const alone: number[] = [];
    for (let i = 0; i < SMALL; i++) alone.push((await c.call(small)).ms);
    const stop = await background(port);
    await new Promise((r) => setTimeout(r, 500));
    const beside: number[] = [];
    for (let i = 0; i < SMALL; i++) beside.push((await c.call(small)).ms);
    const bigCalls = await stop();
    return { alone: p99(alone), beside: p99(beside), bigCalls };
  } finally {
    c.close();
  }
}

interface Throughput {
  rps: number;
  /** Cores the server used (all its threads), and the generator (this process). */
  serverCores: number;
  generatorCores: number;
}

async function throughput(pid: number, port: number, bytes: Buffer, count: number): Promise<Throughput> {
  const c = await h2Caller(port);
  try {
    for (let i = 0; i < 8; i++) await c.call(bytes);
    let left = count;
    const s0 = cpuMs(pid);
    const g0 = ownCpuMs();
    const t = performance.now();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (left-- > 0) await c.call(bytes);
      }),
    );
    const wall = performance.now() - t;
    return { rps: count / (wall / 1000), serverCores: (cpuMs(pid) - s0) / wall, generatorCores: (ownCpuMs() - g0) / wall };
  } finally {
    c.close();
  }
}

type Row = { workers: number; aloneP99: number[]; besideP99: number[]; t100: Throughput[]; t1000: Throughput[] };
const rows = new Map<number, Row>(WORKERS.map((w) => [w, { workers: w, aloneP99: [], besideP99: [], t100: [], t1000: [] }]));
for (let round = 0; round < ROUNDS; round++) {
  for (const w of WORKERS) {
    const { child, port } = await startServer(w);
    try {
      const row = rows.get(w)!;
      const iso = await isolation(port);
      row.aloneP99.push(iso.alone);
      row.besideP99.push(iso.beside);
      row.t100.push(await throughput(child.pid!, port, mid, 600));
      row.t1000.push(await throughput(child.pid!, port, big, 80));
      process.stdout.write(
        `round ${round + 1}, workers ${w}: p99 alone ${r1(iso.alone)} ms, beside ${r1(iso.beside)} ms (${iso.bigCalls} N=1000 calls beside); ` +
          `${r1(row.t100.at(-1)!.rps)} / ${r1(row.t1000.at(-1)!.rps)} req/s\n`,
      );
    } finally {
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
    }
  }
}

const cores = (ts: Throughput[]) => `${r2(med(ts.map((t) => t.serverCores)))} + ${r2(med(ts.map((t) => t.generatorCores)))}`;
const table = [
  "| workers | small p99 alone ms | small p99 beside N=1000 c=2 ms | beside / alone | req/s N=100 c=16 | cores N=100 (server + generator) | req/s N=1000 c=16 | cores N=1000 |",
  "|---:|---:|---:|---:|---:|---:|---:|---:|",
  ...[...rows.values()].map(
    (r) =>
      `| ${r.workers} | ${r.aloneP99.map(r1).join(", ")} | ${r.besideP99.map(r1).join(", ")} | ${r.aloneP99.map((a, i) => r2(r.besideP99[i]! / a)).join(", ")} | ` +
      `${r.t100.map((t) => r1(t.rps)).join(", ")} | ${cores(r.t100)} | ${r.t1000.map((t) => r1(t.rps)).join(", ")} | ${cores(r.t1000)} |`,
  ),
];
const one = rows.get(WORKERS[0]!)!;
const ratio = (r: Row, w: Row, pick: (x: Row) => Throughput[]) => r2(med(pick(r).map((t) => t.rps)) / med(pick(w).map((t) => t.rps)));
const summary = [...rows.values()]
  .filter((r) => r !== one)
  .map(
    (r) =>
      `${r.workers} workers: beside/alone p99 ${r2(med(r.aloneP99.map((a, i) => r.besideP99[i]! / a)))}, ` +
      `throughput ${ratio(r, one, (x) => x.t100)}x at N=100 and ${ratio(r, one, (x) => x.t1000)}x at N=1000 of ${one.workers} worker`,
  );
const section = [
  "## Worker pool",
  "",
  `Run: \`node --import tsx bench/pool.ts --rounds ${ROUNDS} --small ${SMALL} --workers ${WORKERS.join(",")}\` on ${new Date().toISOString().slice(0, 10)}; \`xfn serve bench/fn.ts\` in its own process, the worker counts alternating, one figure per round (cores: medians). Machine: ${cpus().length} cores, shared by the server, this load generator and, for the isolation figures, a second generator process sending the N=1000 calls.`,
  "",
  ...table,
  "",
  `Medians over rounds: ${one.workers} worker: beside/alone p99 ${r2(med(one.aloneP99.map((a, i) => one.besideP99[i]! / a)))}. ${summary.join("; ")}. Targets: beside/alone <= 3; throughput >= 1.5x where two cores are free for the server.`,
  "",
].join("\n");
process.stdout.write(`\n${section}`);
writeSection("Worker pool", section);
process.exit(0);
