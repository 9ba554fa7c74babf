// Memory under a flood: concurrent requests of S MiB each against `xfn serve
// functions/hello` in its own process, then the server's peak RSS (the
// kernel's VmHWM) and how the calls ended. Two floods, each on a fresh server:
// the issue's (800 calls on one connection) and ten times it (8,000 calls on
// 16 connections). Writes the "Memory" section of bench/RESULTS.md.
//
//   node --import tsx bench/memory.ts [--calls 800] [--connections 1] [--mib 3] [--workers N]
//
// With --calls or --connections, only that flood runs. The requests are sent
// over raw HTTP/2, every stream writing the same framed buffer: a gRPC client
// would frame (copy) each message, and 8,000 copies of 3 MiB would not fit in
// the load generator.
import { readFileSync } from "node:fs";
import { connect, constants, type ClientHttp2Session } from "node:http2";
import { toBinary } from "@bufbuild/protobuf";
import { status as Code } from "@grpc/grpc-js";
import { RunFunctionRequestSchema } from "../src/gen/fn/v1/run_function_pb.js";
import { requestFromJson } from "../src/testing/unit.js";
import { flag, startServe, writeSection } from "./results.js";

const MIB = flag("--mib", 3);
const WORKERS = flag("--workers", 2);
const chosen = process.argv.includes("--calls") || process.argv.includes("--connections");
const FLOODS: Array<{ calls: number; connections: number }> = chosen
  ? [{ calls: flag("--calls", 800), connections: flag("--connections", 1) }]
  : [
      { calls: 800, connections: 1 },
      { calls: 8000, connections: 16 },
    ];

const req = requestFromJson({
  meta: { tag: "flood" },
  observed: {
    composite: {
      resource: { apiVersion: "example.xfn.dev/v1alpha1", kind: "XBuckets", metadata: { name: "x" }, spec: { buckets: [{ name: "a" }] } },
    },
  },
  input: { blob: "x".repeat(MIB * 1024 * 1024 - 200) },
});
const message = Buffer.from(toBinary(RunFunctionRequestSchema, req));
// The gRPC frame: no compression, the length, the message.
const framed = Buffer.alloc(5 + message.length);
framed.writeUInt32BE(message.length, 1);
message.copy(framed, 5);

interface Flood {
  calls: number;
  connections: number;
  seconds: number;
  idle: number;
  peak: number;
  codes: Map<string, number>;
}

/** call sends one request on session and resolves with how it ended: a gRPC status and its message, or a stream error. */
function call(session: ClientHttp2Session): Promise<string> {
  return new Promise((resolve) => {
    let status = "no status";
    let details = "";
    const stream = session.request({
      [constants.HTTP2_HEADER_METHOD]: "POST",
      [constants.HTTP2_HEADER_PATH]: "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction",
      "content-type": "application/grpc",
      te: "trailers",
      "grpc-timeout": "120S",
    });
    const statusFrom = (h: Record<string, unknown>) => {
      if (h["grpc-status"] === undefined) return;
      status = String(h["grpc-status"]);
      details = decodeURIComponent(String(h["grpc-message"] ?? ""));
    };
    stream.on("response", statusFrom); // a refusal is a trailers-only response
    stream.on("trailers", statusFrom);
    stream.on("data", () => {});
    stream.on("error", (err: Error) => (status = `stream error: ${err.message}`));
    stream.on("close", () => resolve(status === "0" ? "OK" : `${Code[Number(status)] ?? status} ${details.replace(/\d+/g, "N")}`.trim()));
    stream.end(framed);
  });
}

async function flood(calls: number, connections: number): Promise<Flood> {
  const { child, port } = await startServe(["functions/hello", "--workers", String(WORKERS)]);
  const peak = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? NaN) / 1024;
  const idle = peak();
  // A client session holds what it has yet to send; Node's default of 10 MB would refuse the flood's streams itself.
  const sessions = Array.from({ length: connections }, () =>
    connect(`http://127.0.0.1:${port}`, { maxSessionMemory: 1 << 20 }).on("error", () => {}),
  );
  await Promise.all(sessions.map((s) => new Promise((r) => s.once("remoteSettings", r))));
  const started = Date.now();
  const codes = new Map<string, number>();
  await Promise.all(
    Array.from({ length: calls }, async (_, i) => {
      const k = await call(sessions[i % connections]!);
      codes.set(k, (codes.get(k) ?? 0) + 1);
    }),
  );
  const seconds = (Date.now() - started) / 1000;
  const high = peak();
  for (const s of sessions) s.close();
  child.kill("SIGTERM");
  await new Promise((r) => child.once("exit", r));
  return { calls, connections, seconds, idle, peak: high, codes };
}

const results: Flood[] = [];
for (const f of FLOODS) {
  const r = await flood(f.calls, f.connections);
  process.stdout.write(
    `${r.calls} x ${MIB} MiB on ${r.connections} connection(s): peak ${Math.round(r.peak)} MiB in ${r.seconds.toFixed(1)} s\n`,
  );
  results.push(r);
}

const r0 = (x: number) => Math.round(x);
const ended = (r: Flood) =>
  [...r.codes]
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `${n} × ${k.length > 90 ? `${k.slice(0, 90)}...` : k}`)
    .join("; ");
const section = [
  "## Memory",
  "",
  `Run: \`node --import tsx bench/memory.ts${
    chosen
      ? process.argv
          .slice(2)
          .map((a) => ` ${a}`)
          .join("")
      : ""
  }\` on ${new Date().toISOString().slice(0, 10)}: concurrent requests of ${(message.length / 2 ** 20).toFixed(2)} MiB sent at once to \`xfn serve functions/hello --workers ${WORKERS}\` (defaults: --max-concurrency 16, --max-queue 128, --max-recv-message-size 4), a fresh server for each flood. Bound documented in docs/serving.md: (16 + 128) requests × 4 MiB = 576 MiB of request bytes, plus the process.`,
  "",
  "| calls | connections | seconds | server peak RSS MiB (once started) | how the calls ended |",
  "|---:|---:|---:|---:|---|",
  ...results.map((r) => `| ${r.calls} | ${r.connections} | ${r.seconds.toFixed(1)} | ${r0(r.peak)} (${r0(r.idle)}) | ${ended(r)} |`),
  "",
].join("\n");
process.stdout.write(`\n${section}`);
writeSection("Memory", section);
process.exit(0);
