// Memory under a flood: N concurrent requests of S MiB each against `xfn
// serve functions/hello` in its own process, then the server's peak RSS (the
// kernel's VmHWM) and how the calls ended. Writes the "Memory" section of
// bench/RESULTS.md.
//
//   node --import tsx bench/memory.ts [--calls 800] [--mib 3] [--workers N]
import { readFileSync } from "node:fs";
import { toBinary } from "@bufbuild/protobuf";
import { Client, credentials, type ServiceError } from "@grpc/grpc-js";
import { RunFunctionRequestSchema } from "../src/gen/fn/v1/run_function_pb.js";
import { requestFromJson } from "../src/testing/unit.js";
import { flag, startServe, writeSection } from "./results.js";

const CALLS = flag("--calls", 800);
const MIB = flag("--mib", 3);
const WORKERS = flag("--workers", 2);

const { child, port } = await startServe(["functions/hello", "--workers", String(WORKERS)]);
const peak = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? NaN) / 1024;
const idle = peak();

const req = requestFromJson({
  meta: { tag: "flood" },
  observed: {
    composite: {
      resource: { apiVersion: "example.xfn.dev/v1alpha1", kind: "XBuckets", metadata: { name: "x" }, spec: { buckets: [{ name: "a" }] } },
    },
  },
  input: { blob: "x".repeat(MIB * 1024 * 1024 - 200) },
});
const bytes = Buffer.from(toBinary(RunFunctionRequestSchema, req));
const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure(), { "grpc.max_send_message_length": -1 });
const started = Date.now();
const codes = new Map<string, number>();
await Promise.all(
  Array.from(
    { length: CALLS },
    () =>
      new Promise<void>((resolve) => {
        client.makeUnaryRequest(
          "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction",
          (b: Buffer) => b,
          (b: Buffer) => b,
          bytes,
          { deadline: Date.now() + 120_000 },
          (err: ServiceError | null) => {
            const k = err ? `${err.code} ${err.details.replace(/\d+/g, "N")}` : "OK";
            codes.set(k, (codes.get(k) ?? 0) + 1);
            resolve();
          },
        );
      }),
  ),
);
const secs = (Date.now() - started) / 1000;
const high = peak();
client.close();
child.kill("SIGTERM");

const r0 = (x: number) => Math.round(x);
const rows = [...codes].map(([k, n]) => `| ${k} | ${n} |`);
const section = [
  "## Memory",
  "",
  `Run: \`node --import tsx bench/memory.ts --calls ${CALLS} --mib ${MIB} --workers ${WORKERS}\` on ${new Date().toISOString().slice(0, 10)}: ${CALLS} concurrent requests of ${(bytes.length / 2 ** 20).toFixed(2)} MiB from one connection to \`xfn serve functions/hello\` (defaults: --max-concurrency 16, --max-queue 128, --max-recv-message-size 4), in ${secs.toFixed(1)} s.`,
  "",
  `Server peak RSS (VmHWM): ${r0(high)} MiB (${r0(idle)} MiB once started). Bound documented in docs/serving.md: (16 + 128) requests × 4 MiB = 576 MiB of request bytes, plus the process.`,
  "",
  "| how a call ended | calls |",
  "|---|---:|",
  ...rows,
  "",
].join("\n");
process.stdout.write(section);
writeSection("Memory", section);
process.exit(0);
