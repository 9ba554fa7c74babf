// The server in a container's memory limit: `xfn serve` runs in a memory
// cgroup (as a pod with resources.limits.memory does), a function leaks in
// several workers at once while a flood of requests arrives, or logs in a
// tight loop, and the script reports whether the server survived, how each
// call ended and the cgroup's peak memory. The leaks also run the way xfn ran
// before (each worker free to grow to V8's own limit, no memory guard), for
// comparison. Writes the "Container memory" section of bench/RESULTS.md.
//
//   node --import tsx bench/container.ts [--mib 1024] [--calls 800] [--rounds 3] [--only <text>]
//
// --only runs the scenarios whose name holds text, and prints their table
// without writing RESULTS.md.
//
// Needs root and a writable memory cgroup (v1 or v2); it says so and exits 2
// otherwise. Not part of `npm run bench`: `npm run bench:container`.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { toBinary } from "@bufbuild/protobuf";
import { Client, credentials, status as Code, type ServiceError } from "@grpc/grpc-js";
import { RunFunctionRequestSchema } from "../src/gen/fn/v1/run_function_pb.js";
import { requestFromJson } from "../src/testing/unit.js";
import { flag, writeSection } from "./results.js";

const MIB = flag("--mib", 1024);
const CALLS = flag("--calls", 800);
const ROUNDS = flag("--rounds", 3);
const ONLY = flag("--only", "");
const ROOT = join(import.meta.dirname, "..");

/** A memory cgroup of MIB, v1 or v2, or why there is none. */
function makeCgroup(): { dir: string; peak(): number; reset(): void } | string {
  const name = `xfn-bench-${process.pid}`;
  const v1 = "/sys/fs/cgroup/memory";
  const v2 = "/sys/fs/cgroup";
  try {
    if (existsSync(join(v1, "memory.limit_in_bytes"))) {
      const dir = join(v1, name);
      mkdirSync(dir);
      writeFileSync(join(dir, "memory.limit_in_bytes"), String(MIB * 2 ** 20));
      return {
        dir,
        peak: () => Number(readFileSync(join(dir, "memory.max_usage_in_bytes"), "utf8")) / 2 ** 20,
        reset: () => writeFileSync(join(dir, "memory.max_usage_in_bytes"), "0"),
      };
    }
    if (existsSync(join(v2, "cgroup.controllers")) && readFileSync(join(v2, "cgroup.controllers"), "utf8").includes("memory")) {
      const dir = join(v2, name);
      mkdirSync(dir);
      writeFileSync(join(dir, "memory.max"), String(MIB * 2 ** 20));
      return {
        dir,
        peak: () => Number(readFileSync(join(dir, "memory.peak"), "utf8")) / 2 ** 20,
        reset: () => {}, // memory.peak cannot be reset before Linux 6.12: each scenario gets its own group below
      };
    }
    return "no memory cgroup controller under /sys/fs/cgroup";
  } catch (err) {
    return `cannot make a memory cgroup: ${(err as Error).message}`;
  }
}

// The function: leaks on tag "leak" (in the heap) or "offheap", keeps 16 MB outside the heap on tag "cache" (a cache
// growing across calls), waits 10 s on tag "slow", logs 2 million lines of 1 KB on tag "chatty" (through ctx.log) or
// "printing" (console.log), else answers.
const work = mkdtempSync(join(tmpdir(), "xfn-container-"));
const MODULE = join(work, "fn.mjs");
writeFileSync(
  MODULE,
  `import { response } from ${JSON.stringify(join(ROOT, "lib/index.js"))};
const kept = [];
export default async function (req, ctx) {
  if (req.meta?.tag === "leak") for (;;) kept.push(new Array(1e6).fill(Math.random()));
  // Outside V8's heap: Node keeps a string of a megabyte or more as external memory.
  if (req.meta?.tag === "offheap") for (;;) kept.push(Buffer.alloc(1 << 20).toString("latin1") + Math.random());
  if (req.meta?.tag === "cache") kept.push(Buffer.alloc(16 << 20, 1));
  if (req.meta?.tag === "slow") await new Promise((r) => setTimeout(r, 10_000));
  if (req.meta?.tag === "chatty") { const pad = "y".repeat(1000); for (let i = 0; i < 2e6; i++) ctx.log.info({ i, pad }, "chatty"); }
  if (req.meta?.tag === "printing") { const pad = "y".repeat(1000); for (let i = 0; i < 2e6; i++) console.log(i, pad); }
  return response.to(req);
}
`,
);

interface Outcome {
  scenario: string;
  survived: boolean;
  peak: number;
  codes: Map<string, number>;
}

/** scenario sends tags and floodCalls flood requests at once, and serial one after another beside them. */
async function scenario(name: string, serveArgs: string[], tags: string[], floodCalls: number, serial: string[] = []): Promise<Outcome> {
  const cg = makeCgroup();
  if (typeof cg === "string") {
    process.stderr.write(`bench/container.ts needs root and a writable memory cgroup: ${cg}\n`);
    process.exit(2);
  }
  const child: ChildProcess = spawn(
    "sh",
    [
      "-c",
      `echo $$ > ${join(cg.dir, "cgroup.procs")} && exec "$0" "$@"`,
      process.execPath,
      join(ROOT, "bin/xfn.js"),
      "serve",
      MODULE,
      "--insecure",
      "--address",
      "127.0.0.1:0",
      ...serveArgs,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let died = false;
  child.on("exit", () => (died = true));
  // The log is read as fast as it comes (a container runtime's reader), kept only until the port shows.
  let head: string | undefined = "";
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => {
      if (head === undefined) return;
      head += d;
      const m = /"port":(\d+)/.exec(head);
      if (m) {
        head = undefined;
        resolve(Number(m[1]));
      }
    });
    child.stderr!.on("data", () => {});
    child.once("exit", () => reject(new Error(`${name}: xfn serve exited before listening`)));
  });
  cg.reset();
  const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure(), { "grpc.max_send_message_length": -1 });
  const codes = new Map<string, number>();
  const send = (bytes: Uint8Array) =>
    new Promise<void>((resolve) =>
      client.makeUnaryRequest(
        "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction",
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from(bytes),
        { deadline: Date.now() + 120_000 },
        (err: ServiceError | null) => {
          const k = err ? `${Code[err.code]} "${err.details.replace(/\d+/g, "N").split(" ").slice(0, 8).join(" ")} ..."` : "OK";
          codes.set(k, (codes.get(k) ?? 0) + 1);
          resolve();
        },
      ),
    );
  const tagged = (tag: string, extra: object = {}) => toBinary(RunFunctionRequestSchema, requestFromJson({ meta: { tag }, ...extra }));
  const flood = tagged("flood", { input: { blob: "x".repeat(3 * 2 ** 20 - 200) } });
  const oneByOne = async () => {
    for (const t of serial) if (!died) await send(tagged(t));
  };
  await Promise.all([...tags.map((t) => send(tagged(t))), ...Array.from({ length: floodCalls }, () => send(flood)), oneByOne()]);
  await new Promise((r) => setTimeout(r, 1000));
  const peak = cg.peak();
  // Survived: still running, and answers a call after all that.
  const before = codes.get("OK") ?? 0;
  if (!died) await send(tagged("after"));
  const survived = !died && (codes.get("OK") ?? 0) === before + 1;
  if (survived) codes.set("OK", before);
  client.close();
  child.kill("SIGKILL");
  await new Promise((r) => (died ? r(undefined) : child.once("exit", r)));
  for (let i = 0; i < 20; i++) {
    try {
      rmdirSync(cg.dir);
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { scenario: name, survived, peak, codes };
}

const half = String(Math.floor(MIB / 2)); // V8's own limit for each thread in a container: about half its memory
const runs: Outcome[][] = [];
const CACHE_CALLS = Array.from({ length: 100 }, () => "cache");
const SLOW_CALLS = Array.from({ length: 6 }, () => "slow");
for (const [name, args, tags, flood, serial] of [
  ["three leaking calls and a flood, xfn's share per worker", [], ["leak", "leak", "leak"], CALLS],
  [
    "the same as xfn ran before: V8's own heap limit, no memory guard",
    ["--max-worker-heap", half, "--memory-guard", "0"],
    ["leak", "leak", "leak"],
    CALLS,
  ],
  ["three calls leaking outside the heap (1 MB strings) and a flood", [], ["offheap", "offheap", "offheap"], CALLS],
  ["the same without the memory guard", ["--memory-guard", "0"], ["offheap", "offheap", "offheap"], CALLS],
  [
    "a cache outside the heap growing across calls (16 MB each, 100 calls one after another) beside 6 slow calls",
    [],
    SLOW_CALLS,
    0,
    CACHE_CALLS,
  ],
  ["the same without the memory guard", ["--memory-guard", "0"], SLOW_CALLS, 0, CACHE_CALLS],
  ["a call logging 2 million lines of 1 KB, on workers", [], ["chatty"], 0],
  ["a call printing 2 million lines of 1 KB with console.log, on workers", [], ["printing"], 0],
] as Array<[string, string[], string[], number, string[]?]>) {
  if (!name.includes(ONLY)) continue;
  const rounds: Outcome[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    process.stdout.write(`${name}, round ${i + 1} ...\n`);
    rounds.push(await scenario(name, args, tags, flood, serial));
  }
  runs.push(rounds);
}
rmSync(work, { recursive: true, force: true });

const section = [
  "## Container memory",
  "",
  `Run: \`node --import tsx bench/container.ts --mib ${MIB} --calls ${CALLS}\` on ${new Date().toISOString().slice(0, 10)}: \`xfn serve\` (three workers, the defaults) in a memory cgroup of ${MIB} MiB. Flood: ${CALLS} concurrent requests of 3 MiB from one connection, sent with the leaking calls.`,
  "",
  "| scenario | rounds the server survived (and answered the next call) | peak MiB by round | how calls ended, all rounds |",
  "|---|---|---|---|",
  ...runs.map((rounds) => {
    const codes = new Map<string, number>();
    for (const r of rounds) for (const [k, n] of r.codes) codes.set(k, (codes.get(k) ?? 0) + n);
    const survived = rounds.filter((r) => r.survived).length;
    return `| ${rounds[0]!.scenario} | ${survived === rounds.length ? "" : "**"}${survived} of ${rounds.length}${survived === rounds.length ? "" : "**"} | ${rounds
      .map((r) => Math.round(r.peak))
      .join(", ")} | ${[...codes].map(([k, n]) => `${n} × ${k}`).join("; ")} |`;
  }),
  "",
].join("\n");
process.stdout.write(section);
if (!ONLY) writeSection("Container memory", section);
process.exit(0);
