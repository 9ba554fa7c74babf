// npm run bench [-- --quick] [--json FILE]
//
// Starts five servers on loopback, each in its own process: xfn running a
// realistic function (compose N resources from the XR, checking each against
// what is observed, keep external names, mark readiness) in its own thread,
// xfn running it on worker threads (xfn-pool, what `xfn serve` does by
// default), the same function on @crossplane-org/function-sdk-typescript
// (the peer), the same function in Go as function-sdk-go builds one (go:
// grpc-go, generated types, structpb to and from maps; bench/go/main.go, built
// from Debian's packages by bench/go.ts), the same function written with
// function-sdk-go itself (go-sdk: bench/gosdk/main.go, built against the SDK at
// its pinned version by scripts/anchors.mjs), a floor (bare grpc-js that moves the
// bytes and echoes the tag),
// and send-floor (bare grpc-js answering with xfn's response bytes, made ahead
// of time: what moving the response alone costs). A seeded load generator
// sends the same request bytes to each, at N = 1, 10, 100, 1000 composed
// resources and concurrency 1, 16 and 64, in alternating batches, and records
// p50/p99 latency, req/s, server CPU ms per request and peak RSS. Every
// server's responses are verified, so a fast wrong answer cannot win. Results
// go to stdout, bench/RESULTS.md and --json FILE (xfn, peer and floor only).
//
// Without Go (and Debian's grpc-go and protobuf sources) the go row is skipped,
// saying which packages bring it. --servers a,b,... runs only those, and --ns
// 1,10 only those N, --cs 1,64 only those concurrencies (a short run, for the bench's own test). Every server
// started is stopped on every way out: done, a failure, or a signal.
import { fork, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { join } from "node:path";
import { fromBinary } from "@bufbuild/protobuf";
import { Client, credentials, type ServiceError } from "@grpc/grpc-js";
import { Ready, RunFunctionResponseSchema } from "../src/gen/fn/v1/run_function_pb.js";
import { installHint, whyMissing } from "../test/support/needs.js";
import { freePort } from "../test/support/spawn.js";
import { buildGoFunction, procUsage } from "./go.js";
// @ts-expect-error -- a plain .mjs script without types
import { build } from "../scripts/anchors.mjs";
import { request } from "./workload.js";

type Kind = "xfn" | "xfn-pool" | "peer" | "go" | "go-sdk" | "floor" | "send-floor";
const ALL: Kind[] = ["xfn", "xfn-pool", "peer", "go", "go-sdk", "floor", "send-floor"];
const args = process.argv.slice(2);
const quick = args.includes("--quick");
const option = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const jsonOut = option("--json");
const asked = option("--servers")?.split(",") as Kind[] | undefined;
for (const k of asked ?? [])
  if (!ALL.includes(k)) throw new Error(`--servers: no server ${JSON.stringify(k)}; the servers are ${ALL.join(", ")}`);
// Go's row needs Go and Debian's grpc-go and protobuf sources; unless asked for by name, it is skipped without them.
const goMissing = whyMissing("go");
const goSkipped = goMissing && !asked?.includes("go") ? `skipped: needs go, ${goMissing} (${installHint(["go"])})` : undefined;
// The SDK's row needs Go 1.26 (the SDK's module is built with it, scripts/anchors.mjs).
const sdkMissing = whyMissing("go1.26");
const sdkSkipped =
  sdkMissing && !asked?.includes("go-sdk") ? `skipped: needs go1.26, ${sdkMissing} (${installHint(["go1.26"])})` : undefined;
const KINDS: Kind[] = (asked ?? ALL).filter((k) => (k !== "go" || !goSkipped) && (k !== "go-sdk" || !sdkSkipped));
const NS = option("--ns")?.split(",").map(Number) ?? [1, 10, 100, 1000];
// Concurrency 64 is Crossplane's many XRs reconciled at once against one function (issue 60: small calls at 1 and 64 clients).
const CS = option("--cs")?.split(",").map(Number) ?? [1, 16, 64];
// At least 100 calls per cell even in quick mode: a p99 of fewer samples is just their maximum.
const COUNT: Record<number, number> = quick ? { 1: 300, 10: 200, 100: 100, 1000: 100 } : { 1: 3000, 10: 2000, 100: 600, 1000: 200 };
const ROUNDS = quick ? 2 : 4; // batches per server per cell, alternating

interface Running {
  kind: Kind;
  child: ChildProcess;
  client: Client;
  port: number;
}

interface Row {
  server: Kind;
  n: number;
  c: number;
  p50Ms: number;
  p99Ms: number;
  rps: number;
  cpuMsPerReq: number;
  peakRssMiB: number;
  verified: boolean;
}

function ask(r: Running): Promise<{ cpuMicros: number; maxRssKiB: number }> {
  // The Go server is not a Node process: its usage is read from /proc, as the kernel counts it.
  if (r.kind === "go" || r.kind === "go-sdk") return Promise.resolve(procUsage(r.child.pid!));
  const child = r.child;
  return new Promise((resolve) => {
    const on = (m: { cpuMicros?: number; maxRssKiB: number }) => {
      if (m.cpuMicros === undefined) return;
      child.off("message", on);
      resolve(m as { cpuMicros: number; maxRssKiB: number });
    };
    child.on("message", on);
    child.send({ cmd: "usage" });
  });
}

async function start(kind: Kind): Promise<Running> {
  const port = await freePort();
  if (kind === "go") return startGo(port);
  if (kind === "go-sdk") return startGo(port, "go-sdk");
  const child = fork(join(import.meta.dirname, "server.ts"), [kind, String(port)], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  await new Promise<void>((resolve, reject) => {
    child.once("message", () => resolve());
    child.once("exit", (code) => reject(new Error(`${kind} server exited with ${code}`)));
  });
  return { kind, child, client: clientFor(port), port };
}

const clientFor = (port: number) =>
  new Client(`127.0.0.1:${port}`, credentials.createInsecure(), {
    "grpc.max_receive_message_length": 16 * 1024 * 1024,
    "grpc.max_send_message_length": 16 * 1024 * 1024,
  });

async function startGo(port: number, kind: "go" | "go-sdk" = "go"): Promise<Running> {
  const bin = kind === "go" ? buildGoFunction() : (build("gosdkbench") as { gosdkbench: string }).gosdkbench;
  const child = spawn(bin, ["-address", `127.0.0.1:${port}`], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => {
      if (d.toString().includes("listening")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`${kind} server exited with ${code}`)));
  });
  return { kind, child, client: clientFor(port), port };
}

function call(r: Running, bytes: Uint8Array): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    r.client.makeUnaryRequest(
      "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction",
      (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength),
      (b: Buffer) => b,
      bytes,
      { deadline: Date.now() + 120_000 },
      (err: ServiceError | null, v?: Buffer) => (err ? reject(err) : resolve(v!)),
    );
  });
}

/** verify checks a response is a correct answer for n, for the server's job. */
function verify(kind: Kind, n: number, out: Buffer): boolean {
  const rsp = fromBinary(RunFunctionResponseSchema, out);
  if (rsp.meta?.tag !== `bench-${n}`) return false;
  if (kind === "floor") return true;
  const names = Object.keys(rsp.desired?.resources ?? {});
  if (names.length !== n) return false;
  for (let i = 0; i < n; i++) {
    const r = rsp.desired!.resources[`instance-${i}`];
    if (!r || r.ready === Ready.UNSPECIFIED) return false;
    const ann = ((r.resource?.["metadata"] as Record<string, unknown> | undefined)?.["annotations"] ?? {}) as Record<string, string>;
    if (!ann["crossplane.io/external-name"]) return false;
  }
  const ext = ((rsp.desired?.composite?.resource?.["status"] as Record<string, unknown> | undefined)?.["externalNames"] ?? {}) as Record<
    string,
    string
  >;
  const drifted = (rsp.desired?.composite?.resource?.["status"] as Record<string, unknown> | undefined)?.["drifted"];
  return Object.keys(ext).length === n && drifted === 0;
}

async function batch(r: Running, bytes: Uint8Array, count: number, c: number, lat: number[]): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next++;
      const t = performance.now();
      await call(r, bytes);
      lat.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: c }, worker));
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const r2 = (x: number) => Math.round(x * 100) / 100;

async function main(): Promise<void> {
  const started = Date.now();
  const servers: Running[] = [];
  const stopAll = () => {
    for (const s of servers.splice(0)) {
      s.client.close();
      s.child.kill();
    }
  };
  // A signal (Ctrl-C) ends the servers with the bench.
  for (const sig of ["SIGINT", "SIGTERM"] as const) process.once(sig, () => (stopAll(), process.exit(130)));
  const rows: Row[] = [];
  let large = "";
  try {
    for (const k of KINDS) servers.push(await start(k));
    for (const n of NS) {
      const bytes = request(n);
      for (const c of CS) {
        const lat = new Map<Kind, number[]>(KINDS.map((k) => [k, []]));
        const cpu = new Map<Kind, number>(KINDS.map((k) => [k, 0]));
        const wall = new Map<Kind, number>(KINDS.map((k) => [k, 0]));
        const ok = new Map<Kind, boolean>();
        for (const s of servers) {
          ok.set(s.kind, verify(s.kind, n, await call(s, bytes)));
          await batch(s, bytes, Math.max(2, Math.floor(COUNT[n]! / 10)), c, []); // warm up
        }
        const per = Math.ceil(COUNT[n]! / ROUNDS);
        for (let round = 0; round < ROUNDS; round++) {
          // Alternate the order each round so no server always runs first.
          const order = round % 2 === 0 ? servers : [...servers].reverse();
          for (const s of order) {
            const before = await ask(s);
            const t = performance.now();
            await batch(s, bytes, per, c, lat.get(s.kind)!);
            wall.set(s.kind, wall.get(s.kind)! + (performance.now() - t));
            const after = await ask(s);
            cpu.set(s.kind, cpu.get(s.kind)! + (after.cpuMicros - before.cpuMicros));
          }
        }
        for (const s of servers) {
          const l = lat.get(s.kind)!;
          const usage = await ask(s);
          rows.push({
            server: s.kind,
            n,
            c,
            p50Ms: r2(pct(l, 50)),
            p99Ms: r2(pct(l, 99)),
            rps: r2(l.length / (wall.get(s.kind)! / 1000)),
            cpuMsPerReq: r2(cpu.get(s.kind)! / l.length / 1000),
            peakRssMiB: r2(usage.maxRssKiB / 1024),
            verified: ok.get(s.kind)!,
          });
        }
        process.stderr.write(`done N=${n} c=${c}\n`);
      }
    }
    // A large request: 3.9 MiB, just under xfn's default 4 MiB limit. Last, so that the
    // garbage it leaves in xfn's heap (the other servers get no such request)
    // is not collected during a measured cell, and peak RSS is the cells' own.
    const xfn = servers.find((s) => s.kind === "xfn");
    try {
      const big = request(1120);
      const out = xfn ? await call(xfn, big) : undefined;
      large = out
        ? `a ${(big.length / 1048576).toFixed(2)} MiB request (N=1120): answered, response ${(out.length / 1048576).toFixed(2)} MiB, verified=${verify("xfn", 1120, out)}`
        : "not sent (xfn not run)";
    } catch (err) {
      large = `a large request failed: ${(err as Error).message}`;
    }
  } finally {
    stopAll();
  }

  const get = (k: Kind, n: number, c: number): Row | undefined => rows.find((r) => r.server === k && r.n === n && r.c === c);
  const lines: string[] = [];
  lines.push(
    "| N | c | server | p50 ms | p99 ms | req/s | CPU ms/req | peak RSS MiB | verified |",
    "|---:|---:|---|---:|---:|---:|---:|---:|---|",
  );
  for (const r of rows)
    lines.push(
      `| ${r.n} | ${r.c} | ${r.server} | ${r.p50Ms} | ${r.p99Ms} | ${r.rps} | ${r.cpuMsPerReq} | ${r.peakRssMiB} | ${r.verified} |`,
    );
  const ratios: string[] = [
    "| N | c | xfn/floor CPU | peer/xfn CPU | xfn p99 / peer p99 | xfn/send-floor CPU | xfn-pool/send-floor CPU | peer/xfn-pool CPU | go/xfn CPU | go/xfn-pool CPU | xfn p99 / go p99 | go-sdk/xfn CPU | go-sdk/xfn-pool CPU | xfn p99 / go-sdk p99 |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const n of NS) {
    for (const c of CS) {
      const x = get("xfn", n, c);
      const p = get("peer", n, c);
      const f = get("floor", n, c);
      const sf = get("send-floor", n, c);
      const xp = get("xfn-pool", n, c);
      const g = get("go", n, c);
      const gs = get("go-sdk", n, c);
      // A server not run (skipped, or left out with --servers) leaves its ratios blank.
      const ratio = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? "-" : String(r2(a / b)));
      ratios.push(
        `| ${n} | ${c} | ${ratio(x?.cpuMsPerReq, f?.cpuMsPerReq)} | ${ratio(p?.cpuMsPerReq, x?.cpuMsPerReq)} | ${ratio(x?.p99Ms, p?.p99Ms)} | ${ratio(x?.cpuMsPerReq, sf?.cpuMsPerReq)} | ${ratio(xp?.cpuMsPerReq, sf?.cpuMsPerReq)} | ${ratio(p?.cpuMsPerReq, xp?.cpuMsPerReq)} | ${ratio(g?.cpuMsPerReq, x?.cpuMsPerReq)} | ${ratio(g?.cpuMsPerReq, xp?.cpuMsPerReq)} | ${ratio(x?.p99Ms, g?.p99Ms)} | ${ratio(gs?.cpuMsPerReq, x?.cpuMsPerReq)} | ${ratio(gs?.cpuMsPerReq, xp?.cpuMsPerReq)} | ${ratio(x?.p99Ms, gs?.p99Ms)} |`,
      );
    }
  }
  const secs = Math.round((Date.now() - started) / 1000);
  const skipped = `${goSkipped ? `\ngo: ${goSkipped}\n` : ""}${sdkSkipped ? `\ngo-sdk: ${sdkSkipped}\n` : ""}`;
  const table = `${lines.join("\n")}\n${skipped}\nRatios (same run):\n\n${ratios.join("\n")}\n`;
  process.stdout.write(`\n${table}\nLarge request: ${large}\nTook ${secs} s (${quick ? "quick" : "full"}).\n`);
  // The JSON holds xfn, the two peers and the floor; send-floor and xfn-pool are explanation, in the tables only.
  if (jsonOut)
    writeFileSync(jsonOut, JSON.stringify({ results: rows.filter((r) => r.server !== "send-floor" && r.server !== "xfn-pool") }, null, 2));
  const caveats = [
    `Machine: ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}; shared and noisy, so compare ratios from one run, not absolute numbers across runs.`,
    "Each server runs in its own process; the load generator runs in another and shares the 2 cores with them, so at c=16 and c=64 latency includes queueing behind the generator.",
    "xfn runs the function in the server's own thread (`--workers 1`); xfn-pool as `xfn serve` does by default, on a pool of worker threads (one per core plus one), its CPU counted over all its threads.",
    "go is the bench function in Go as function-sdk-go builds one: grpc-go, types generated by protoc-gen-go and protoc-gen-go-grpc, resources to and from maps with structpb's AsMap and NewStruct (function-sdk-go's own helpers go through JSON, which costs more: this is the cheaper Go). Its CPU is read from /proc in clock ticks (1/100 s), summed over each cell's batches; its GC runs on every core, as Go's does by default.",
    "go-sdk is the same function written with github.com/crossplane/function-sdk-go itself (bench/gosdk/main.go, the SDK at the version test/anchors/versions.json pins, built by scripts/anchors.mjs): request.GetObservedCompositeResource and GetObservedComposedResources, composed.New, response.SetDesiredComposedResources and SetDesiredCompositeResource, served by function.Serve (which also registers v1beta1 and a logging interceptor): what a Go function author writes. Its CPU is read as go's.",
    "send-floor is a bare grpc-js server that answers with the bytes of xfn's response to the same request (worked out once per N, before measuring): what moving this request in and this response out costs any server, before any work.",
    "CPU is the server process's user+system time over the measured batches divided by requests (warm-up excluded); peak RSS is the process's maximum resident set so far (the large request is sent after all cells, so it is not in these figures).",
    `Counts per cell: ${JSON.stringify(COUNT)}, in ${ROUNDS} alternating batches per server.`,
  ];
  // A part of the bench (--servers, --ns, --cs) is printed, not written over the results of a whole one.
  if (asked || option("--ns") || option("--cs")) return;
  const md = `# Benchmark results\n\nRun: \`npm run bench${quick ? " -- --quick" : ""}\` on ${new Date().toISOString().slice(0, 10)}.\n\n${table}\nLarge request: ${large}\n\n## Caveats\n\n${caveats.map((c) => `- ${c}`).join("\n")}\n`;
  // Keep the start-up figures bench/startup.ts wrote (npm run bench runs it next).
  const file = join(import.meta.dirname, quick ? "RESULTS.quick.md" : "RESULTS.md");
  const previous = existsSync(file) ? readFileSync(file, "utf8") : "";
  const startup = previous.indexOf("## Start-up");
  writeFileSync(file, startup >= 0 ? `${md}\n${previous.slice(startup)}` : md);
}

await main();
process.exit(0);
