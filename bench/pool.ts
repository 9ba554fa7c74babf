// The worker pool under load, `xfn serve bench/fn.ts` in its own process with
// --workers 1 (in-process) and 2, alternating, in one run:
//   - isolation: p99 of small (N=1) calls alone, and beside N=1000 traffic at
//     concurrency 2 (target: beside / alone <= 3 with workers);
//   - throughput at N=100 and N=1000, concurrency 16 (target: 2 workers >= 1.5x
//     1 worker where two cores are free; the load generator shares them here).
// Writes the "Worker pool" section of bench/RESULTS.md.
//
//   node --import tsx bench/pool.ts [--rounds 2] [--small 400]
import { cpus } from "node:os";
import { performance } from "node:perf_hooks";
import { Client, credentials, type ServiceError } from "@grpc/grpc-js";
import { request } from "./workload.js";
import { flag, startServe, writeSection } from "./results.js";

const ROUNDS = flag("--rounds", 2);
const SMALL = flag("--small", 400);
const WORKERS = flag("--workers", "1,2,3").split(",").map(Number);
const PATH = "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction";

function startServer(workers: number) {
  return startServe(["bench/fn.ts", "--workers", String(workers), "--max-recv-message-size", "8"]);
}

function caller(port: number) {
  const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure(), {
    "grpc.max_receive_message_length": -1,
    "grpc.max_send_message_length": -1,
  });
  const call = (bytes: Uint8Array) =>
    new Promise<number>((resolve, reject) => {
      const t = performance.now();
      client.makeUnaryRequest(
        PATH,
        (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength),
        (b: Buffer) => b,
        bytes,
        { deadline: Date.now() + 60_000 },
        (err: ServiceError | null) => (err ? reject(err) : resolve(performance.now() - t)),
      );
    });
  return { call, close: () => client.close() };
}

const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)]!;
const r1 = (x: number) => Math.round(x * 10) / 10;
const r2 = (x: number) => Math.round(x * 100) / 100;

const small = request(1);
const big = request(1000);
const mid = request(100);

async function isolation(port: number): Promise<{ alone: number; beside: number }> {
  const c = caller(port);
  try {
    for (let i = 0; i < 30; i++) await c.call(small);
    const alone: number[] = [];
    for (let i = 0; i < SMALL; i++) alone.push(await c.call(small));
    let stop = false;
    const background = Array.from({ length: 2 }, async () => {
      while (!stop) await c.call(big);
    });
    await new Promise((r) => setTimeout(r, 300));
    const beside: number[] = [];
    for (let i = 0; i < SMALL; i++) beside.push(await c.call(small));
    stop = true;
    await Promise.all(background);
    return { alone: p99(alone), beside: p99(beside) };
  } finally {
    c.close();
  }
}

async function throughput(port: number, bytes: Uint8Array, count: number): Promise<number> {
  const c = caller(port);
  try {
    for (let i = 0; i < 8; i++) await c.call(bytes);
    let left = count;
    const t = performance.now();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (left-- > 0) await c.call(bytes);
      }),
    );
    return count / ((performance.now() - t) / 1000);
  } finally {
    c.close();
  }
}

type Row = { workers: number; aloneP99: number[]; besideP99: number[]; rps100: number[]; rps1000: number[] };
const rows = new Map<number, Row>(WORKERS.map((w) => [w, { workers: w, aloneP99: [], besideP99: [], rps100: [], rps1000: [] }]));
for (let round = 0; round < ROUNDS; round++) {
  for (const w of WORKERS) {
    const { child, port } = await startServer(w);
    try {
      const row = rows.get(w)!;
      const iso = await isolation(port);
      row.aloneP99.push(iso.alone);
      row.besideP99.push(iso.beside);
      row.rps100.push(await throughput(port, mid, 400));
      row.rps1000.push(await throughput(port, big, 60));
      process.stdout.write(
        `round ${round + 1}, workers ${w}: p99 alone ${r1(iso.alone)} ms, beside ${r1(iso.beside)} ms; ${r1(row.rps100.at(-1)!)} / ${r1(row.rps1000.at(-1)!)} req/s\n`,
      );
    } finally {
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
    }
  }
}

const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
// The summary compares the first worker count given with the last.
const one = rows.get(WORKERS[0]!)!;
const two = rows.get(WORKERS.at(-1)!)!;
const table = [
  "| workers | small p99 alone ms | small p99 beside N=1000 c=2 ms | beside / alone | req/s N=100 c=16 | req/s N=1000 c=16 |",
  "|---:|---:|---:|---:|---:|---:|",
  ...[...rows.values()].map(
    (r) =>
      `| ${r.workers} | ${r.aloneP99.map(r1).join(", ")} | ${r.besideP99.map(r1).join(", ")} | ${r.aloneP99.map((a, i) => r2(r.besideP99[i]! / a)).join(", ")} | ${r.rps100.map(r1).join(", ")} | ${r.rps1000.map(r1).join(", ")} |`,
  ),
];
const section = [
  "## Worker pool",
  "",
  `Run: \`node --import tsx bench/pool.ts --rounds ${ROUNDS} --small ${SMALL} --workers ${WORKERS.join(",")}\` on ${new Date().toISOString().slice(0, 10)}; \`xfn serve bench/fn.ts\` in its own process, the worker counts alternating, one figure per round. Machine: ${cpus().length} cores, shared with the load generator (this process).`,
  "",
  ...table,
  "",
  `Medians: beside/alone p99 ${r2(med(one.besideP99) / med(one.aloneP99))} with ${one.workers} workers, ${r2(med(two.besideP99) / med(two.aloneP99))} with ${two.workers} (target <= 3). Throughput ${two.workers} workers / ${one.workers}: ${r2(med(two.rps100) / med(one.rps100))} at N=100, ${r2(med(two.rps1000) / med(one.rps1000))} at N=1000 (target >= 1.5 where two cores are free for the server).`,
  "",
].join("\n");
process.stdout.write(`\n${section}`);
writeSection("Worker pool", section);
process.exit(0);
