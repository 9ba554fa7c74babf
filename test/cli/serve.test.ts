// `xfn serve` as a user runs it: spawned, with real flags, env and signals.
import { existsSync, mkdirSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { makePki, type TestPki } from "../support/certs.js";
import { mtlsCredentials, rawClient } from "../support/client.js";
import { status as Code } from "@grpc/grpc-js";
import { dial } from "../../src/client/client.js";
import { GUARD_SHARE, memoryMB, workerHeapMB } from "../../src/server/memory.js";
import { codeOf } from "../support/client.js";
import { until } from "../support/cluster.js";
import { request } from "../support/requests.js";
import { DEFAULT_PORT_LOCK, withLock } from "../support/lock.js";
import { freePort, run, startServe } from "../support/spawn.js";

const Cli = suite("cli: xfn serve");

let pki: TestPki;
let scratch: string;
Cli.before(async () => {
  pki = await makePki();
  scratch = mkdtempSync(join(tmpdir(), "xfn-cli-"));
});
Cli.after(() => {
  pki.cleanup();
  rmSync(scratch, { recursive: true, force: true });
});

Cli("--help lists every command and every serve flag", async () => {
  const root = await run(["--help"]);
  assert.is(root.code, 0);
  assert.match(root.stdout, /serve \[options\] <module>/);
  const serve = await run(["serve", "--help"]);
  assert.is(serve.code, 0);
  for (const flag of [
    "--address",
    "--tls-certs-dir",
    "--insecure",
    "--debug",
    "--max-recv-message-size",
    "--max-concurrency",
    "--max-queue",
    "--grace-period",
  ]) {
    assert.ok(serve.stdout.includes(flag), `serve --help lacks ${flag}`);
  }
  assert.match(serve.stdout, /TLS_SERVER_CERTS_DIR/);
  assert.match(serve.stdout.replace(/\s+/g, " "), /default: 0\.0\.0\.0:9443; 127\.0\.0\.1:9443 with --insecure/);
  for (const cmd of ["call", "render", "test", "package", "generate", "dev-cluster", "host"]) {
    assert.match(root.stdout, new RegExp(`^  ${cmd} `, "m"), `xfn --help lacks ${cmd}`);
  }
});

const refusals: Record<string, { args: string[]; env?: NodeJS.ProcessEnv; want: RegExp }> = {
  NeitherTlsNorInsecure: {
    args: ["functions/hello"],
    env: { TLS_SERVER_CERTS_DIR: "" },
    want: /refusing to serve without TLS: give --tls-certs-dir/,
  },
  CertsDirWithoutFiles: {
    args: ["functions/hello", "--tls-certs-dir", "/nonexistent-xfn"],
    want: /cannot load TLS certificates from \/nonexistent-xfn: tls\.crt/,
  },
  MissingModule: { args: ["functions/nope", "--insecure"], want: /cannot load function module functions\/nope: no such file or directory/ },
  BadFlagValue: {
    args: ["functions/hello", "--insecure", "--max-recv-message-size", "lots"],
    want: /--max-recv-message-size must be a positive number, got "lots"/,
  },
  NoWorkers: { args: ["functions/hello", "--insecure", "--workers", "0"], want: /--workers must be a positive number, got "0"/ },
  FractionalWorkers: { args: ["functions/hello", "--insecure", "--workers", "1.5"], want: /--workers must be a whole number, got "1.5"/ },
  BadTimeout: { args: ["functions/hello", "--insecure", "--timeout", "soon"], want: /--timeout must be a positive number, got "soon"/ },
  WorkerHeapZero: {
    args: ["functions/hello", "--insecure", "--max-worker-heap", "0"],
    want: /--max-worker-heap must be a positive number, got "0"/,
  },
  WorkerHeapWithoutWorkers: {
    args: ["functions/hello", "--insecure", "--workers", "1", "--max-worker-heap", "256"],
    want: /--max-worker-heap limits worker threads, and --workers 1 runs the function in the server's own thread/,
  },
  MemoryGuardNotANumber: {
    args: ["functions/hello", "--insecure", "--memory-guard", "lots"],
    want: /--memory-guard must be a positive number, got "lots"/,
  },
  MemoryGuardWithoutWorkers: {
    args: ["functions/hello", "--insecure", "--workers", "1", "--memory-guard", "900"],
    want: /--memory-guard ends worker threads, and --workers 1 runs the function in the server's own thread/,
  },
  MoreWarmWorkersThanWorkers: {
    args: ["functions/hello", "--insecure", "--workers", "2", "--warm-workers", "3"],
    want: /--warm-workers 3 starts more workers than --workers 2 allows/,
  },
  NoWarmWorkers: {
    args: ["functions/hello", "--insecure", "--warm-workers", "0"],
    want: /--warm-workers must be a positive number, got "0"/,
  },
  UnknownFlag: { args: ["functions/hello", "--insecur"], want: /unknown option '--insecur'/ },
  PortInUse: { args: ["functions/hello", "--insecure", "--address", "256.0.0.1:1"], want: /cannot listen on 256\.0\.0\.1:1/ },
};
for (const [name, tc] of Object.entries(refusals)) {
  Cli(`refuses to start, exit code 1: ${name}`, async () => {
    const r = await run(["serve", ...tc.args], tc.env ? { env: tc.env } : {});
    assert.is(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, tc.want);
  });
}

Cli("a module that exports no function is refused", async () => {
  const f = join(scratch, "nofn.ts");
  writeFileSync(f, "export const answer = 42;\n");
  for (const mode of [[], ["--workers", "1"]]) {
    const r = await run(["serve", "nofn.ts", "--insecure", ...mode], { cwd: scratch });
    assert.is(r.code, 1);
    assert.match(r.stderr, /cannot load function module nofn\.ts: it exports no function \(export one as default or as runFunction\)/);
  }
});

for (const mode of [[], ["--workers", "1"]]) {
  const where = mode.length ? "in the server's thread" : "on workers";
  Cli(`a module whose top-level await never settles is refused naming why (${where}); Node said nothing`, async () => {
    const f = join(scratch, "unsettled.mjs");
    writeFileSync(f, "await new Promise(() => {});\nexport default () => {};\n");
    // Named as typed, in the server's thread and on workers (which are given the resolved path).
    const r = await run(["serve", "./unsettled.mjs", "--insecure", ...mode], { cwd: scratch });
    // In the server's thread Node itself ends the process, with its code for this.
    assert.is(r.code, mode.length ? 13 : 1, r.stdout + r.stderr);
    assert.match(r.stderr, /cannot load function module \.\/unsettled\.mjs: its top-level code awaits something that can never settle/);
  });
}

Cli("a worker that exits while loading the module is refused naming the module and the exit code", async () => {
  const f = join(scratch, "exits.mjs");
  writeFileSync(f, "process.exit(0);\nexport default () => {};\n");
  const r = await run(["serve", "exits.mjs", "--insecure", "--workers", "2"], { cwd: scratch });
  assert.is(r.code, 1);
  assert.match(r.stderr, /cannot load function module exits\.mjs: a worker exited with code 0 while loading it/);
});

Cli("a TypeScript module is compiled once for every worker: its imports, its own folder, its lines in stack traces", async () => {
  const dir = join(scratch, "compiled");
  mkdirSync(join(dir, "lib"), { recursive: true });
  writeFileSync(join(dir, "greeting.txt"), "read beside the module");
  writeFileSync(
    join(dir, "lib/read.ts"),
    `import { readFileSync } from "node:fs";\n` +
      `export const greeting = (): string => readFileSync(new URL("../greeting.txt", import.meta.url), "utf8");\n` +
      `export function stack(why: string): string {\n  const e: Error = new Error(why);\n  return e.stack ?? "";\n}\n`,
  );
  writeFileSync(
    join(dir, "index.ts"),
    `import { response } from ${JSON.stringify(join(import.meta.dirname, "../../lib/index.js"))};\n` +
      `import { greeting, stack } from "./lib/read.js";\n` +
      `export default (req: any) => (req.meta?.tag === "stack" ? ((r) => (response.normal(r, stack("here")), r))(response.to(req)) : ((r) => (response.normal(r, greeting()), r))(response.to(req)));\n`,
  );
  const s = await startServe([join(dir, "index.ts"), "--insecure", "--workers", "2", "--debug"]);
  const c = rawClient(s.port);
  try {
    const rsp = await c.run(request({ meta: { tag: "t" } }));
    assert.is(rsp.results[0]?.message, "read beside the module", "import.meta.url names lib/read.ts");
    const traced = await c.run(request({ meta: { tag: "stack" } }));
    assert.ok(
      traced.results[0]?.message.includes(`${join(dir, "lib/read.ts")}:4:`),
      `the stack names lib/read.ts, line 4: ${traced.results[0]?.message}`,
    );
  } finally {
    c.close();
    await s.stop();
  }
  const compiled = /"file":"([^"]+)","msg":"compiled the function module once for every worker"/.exec(s.output())?.[1];
  assert.ok(compiled && !compiled.startsWith(dir), "compiled elsewhere than beside the module");
  assert.not.ok(existsSync(compiled), "the compiled file is removed at exit");
});

Cli("a TypeScript module that does not compile is refused naming the file, line and column", async () => {
  writeFileSync(join(scratch, "broken.ts"), "export default () => {\n  const x = ;\n};\n");
  const r = await run(["serve", "broken.ts", "--insecure"], { cwd: scratch });
  assert.is(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, `cannot load function module broken.ts: ${join(scratch, "broken.ts")}:2:13: Unexpected ";"`);
});

Cli("a module whose top-level code throws on the workers: the server, listening meanwhile, stops; exit code 1 with the error", async () => {
  writeFileSync(join(scratch, "throws.mjs"), 'throw new Error("boom at top level");\nexport default () => ({});\n');
  const r = await run(["serve", "throws.mjs", "--insecure", "--address", "127.0.0.1:0"], { cwd: scratch });
  assert.is(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, `xfn serve: cannot load function module throws.mjs: boom at top level`);
  assert.match(r.stdout, /"msg":"serving insecure gRPC \(local development only\)"/);
});

Cli(
  "a TypeScript module that throws at import: the file, line and column of the throw (source-mapped), the stack with --debug",
  async () => {
    const lib = JSON.stringify(join(import.meta.dirname, "../../lib/index.js"));
    // Types and comments before the throw: the line is the source's, not the compiled JavaScript's.
    writeFileSync(
      join(scratch, "typo.ts"),
      `import { steps } from ${lib};\n\ninterface Unused {\n  a: number;\n}\n// a typo: readines\nexport default (steps as any).readines({});\n`,
    );
    // A throw inside xfn, from options the module gave a step: the module's line that gave them.
    writeFileSync(
      join(scratch, "bad-options.ts"),
      `import { steps } from ${lib};\n\nconst field: string = "spec.names";\nexport default steps.externalName({ statusField: field });\n`,
    );
    for (const workers of ["2", "1"]) {
      const r = await run(["serve", "typo.ts", "--insecure", "--address", "127.0.0.1:0", "--workers", workers], { cwd: scratch });
      assert.is(r.code, 1, r.stdout + r.stderr);
      assert.match(
        r.stderr,
        /^xfn serve: cannot load function module typo\.ts: \S*\.readines is not a function \(at typo\.ts:7:\d+\)$/m,
        r.stderr,
      );
      assert.not.match(r.stderr, /^\s+at /m, "no stack without --debug");
      const options = await run(["serve", "bad-options.ts", "--insecure", "--address", "127.0.0.1:0", "--workers", workers], {
        cwd: scratch,
      });
      assert.is(options.code, 1, options.stdout + options.stderr);
      assert.match(
        options.stderr,
        /cannot load function module bad-options\.ts: externalName statusField must be under status, got "spec\.names" \(at bad-options\.ts:4:\d+\)/,
      );
      const debug = await run(["serve", "typo.ts", "--insecure", "--address", "127.0.0.1:0", "--workers", workers, "--debug"], {
        cwd: scratch,
      });
      assert.is(debug.code, 1);
      assert.match(
        debug.stderr,
        new RegExp(`^TypeError: \\S*\\.readines is not a function\\n\\s+at .*${join(scratch, "typo.ts")}:7:\\d+`, "m"),
      );
    }
  },
);

/** slowModule writes a function module whose top-level code takes ms, and returns its path. */
function slowModule(name: string, ms: number): string {
  const f = join(scratch, name);
  writeFileSync(
    f,
    `import { response } from ${JSON.stringify(join(import.meta.dirname, "../../lib/index.js"))};\n` +
      `await new Promise((r) => setTimeout(r, ${ms}));\n` +
      "export default (req) => response.to(req);\n",
  );
  return f;
}

Cli("a module slow to load is logged as still loading, then served", async () => {
  const f = slowModule("slow.mjs", 5_500);
  const s = await startServe([f, "--insecure", "--workers", "1"]);
  const c = rawClient(s.port);
  try {
    assert.match(
      s.output(),
      /"seconds":5,"msg":"still loading the function module: its top-level code has not finished; no call is answered until it has"/,
    );
    assert.is((await c.run(request({ meta: { tag: "t" } }))).meta?.tag, "t");
  } finally {
    c.close();
    await s.stop();
  }
});

Cli("SIGTERM as soon as the server listens, the first worker still loading the function: a clean stop, exit code 0", async () => {
  const f = slowModule("slow-stop.mjs", 3_000);
  // Listening at once; the worker takes 3 s to load the module. The signal is sent the moment the
  // port is logged: before the handlers were set up ahead of listening, 4 of 12 such stops here
  // ended the process by the signal itself (exit code null).
  for (let i = 0; i < 10; i++) {
    const s = await startServe([f, "--insecure", "--workers", "2"]);
    const { code } = await s.stop();
    assert.is(code, 0, s.output());
    assert.not.match(s.output(), /xfn serve: /);
    assert.match(s.output(), /"msg":"stopped"/);
  }
});

Cli("a function's stray async errors are logged; the server keeps serving every caller", async () => {
  const f = join(scratch, "stray.mjs");
  writeFileSync(
    f,
    `import { response } from ${JSON.stringify(join(import.meta.dirname, "../../lib/index.js"))};\n` +
      `export default (req) => {\n` +
      `  setTimeout(() => { throw new Error("thrown in a timer"); }, 0);\n` +
      `  Promise.reject(new Error("rejected, never awaited"));\n` +
      `  return response.to(req);\n` +
      `};\n`,
  );
  // In process; with workers, such an error ends its worker instead (test/server/pool.test.ts).
  const s = await startServe([f, "--insecure", "--workers", "1"]);
  const c = rawClient(s.port);
  try {
    for (let i = 0; i < 3; i++) assert.is((await c.run(request())).meta?.tag, "tag-1");
    await until(
      "both stray errors logged",
      () => /thrown in a timer/.test(s.output()) && /rejected, never awaited/.test(s.output()),
      5_000,
    );
    assert.match(s.output(), /"kind":"uncaughtException".*"msg":"a function left an error no request was waiting for; still serving"/);
    assert.is((await c.run(request())).meta?.tag, "tag-1");
  } finally {
    c.close();
  }
  const { code } = await s.stop();
  assert.is(code, 0);
});

Cli(
  "--workers 1: what the function prints (console, process.stdout) and Node's warnings are logged as JSON lines, as on workers",
  async () => {
    const f = join(scratch, "printing.mjs");
    writeFileSync(
      f,
      `import { response } from ${JSON.stringify(join(import.meta.dirname, "../../lib/index.js"))};\n` +
        `console.log("loading");\n` +
        `process.emitWarning("careful");\n` +
        `export default (req) => {\n` +
        `  console.log("printed %s", "here", { credentials: { k: "s3cret" } });\n` +
        `  process.stdout.write("raw\\n");\n` +
        `  console.error("oops");\n` +
        `  return response.to(req);\n` +
        `};\n`,
    );
    const s = await startServe([f, "--insecure", "--workers", "1"]);
    const c = rawClient(s.port);
    try {
      assert.is((await c.run(request())).meta?.tag, "tag-1");
      await until("the printed lines logged", () => s.output().includes('"msg":"oops"'), 5_000);
    } finally {
      c.close();
    }
    const { code } = await s.stop();
    assert.is(code, 0);
    const lines = s
      .output()
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const printed = lines
      .filter((l) => typeof l["source"] === "string")
      .map((l) => [l["level"], l["source"], l["module"], l["tag"], l["msg"]]);
    // Node prints its warning with console.error, on a later tick: it is found by its text, wherever it falls.
    const warning = printed.findIndex((p) => /^\(node:\d+\) Warning: careful/.test(String(p[4])));
    assert.ok(warning >= 0, "Node's warning logged");
    assert.equal(printed[warning]!.slice(0, 3), ["error", "console.error", f]);
    printed.splice(warning, 1);
    assert.equal(printed, [
      ["info", "console.log", f, undefined, "loading"],
      ["info", "console.log", f, "tag-1", "printed here { credentials: '[REDACTED]' }"],
      ["info", "process.stdout", f, "tag-1", "raw"],
      ["error", "console.error", f, "tag-1", "oops"],
    ]);
    assert.not.ok(s.output().includes("s3cret"));
  },
);

Cli(
  "--workers 1: a function calling process.exit, or process.kill of its own process, fails its own call, naming it, and the server serves on",
  async () => {
    const f = join(scratch, "exits-in-process.mjs");
    writeFileSync(
      f,
      `import { response } from ${JSON.stringify(join(import.meta.dirname, "../../lib/index.js"))};\n` +
        `export default (req) => {\n` +
        `  if (req.meta.tag === "exit") process.exit(3);\n` +
        `  if (req.meta.tag === "later") setTimeout(() => process.exit(0), 0);\n` +
        `  if (req.meta.tag === "kill") process.kill(process.pid, "SIGTERM");\n` +
        `  if (req.meta.tag === "alive") return { ...response.to(req), context: { alive: process.kill(process.pid, 0) } };\n` +
        `  return response.to(req);\n` +
        `};\n`,
    );
    const s = await startServe([f, "--insecure", "--workers", "1"]);
    const c = rawClient(s.port);
    try {
      // Before: the server ended with exit code 3 (or 0), dropping every call, with nothing logged.
      const exited = await c.run(request({ meta: { tag: "exit" } }));
      assert.equal(
        exited.results.map((r) => r.message),
        [
          "function failed: process.exit(3) was called by the function: it would end the process the function runs in, and every call there, so it is refused",
        ],
      );
      // Before: the server shut itself down, as if told to stop.
      const killed = await c.run(request({ meta: { tag: "kill" } }));
      assert.match(
        killed.results[0]!.message,
        /^function failed: process\.kill\(process\.pid, "SIGTERM"\) was called by the function: it would end the process/,
      );
      // Signal 0 only asks whether the process is alive, and is let through.
      assert.equal((await c.run(request({ meta: { tag: "alive" } }))).context, { alive: true });
      assert.is((await c.run(request({ meta: { tag: "later" } }))).meta?.tag, "later");
      await until(
        "the stray exit logged",
        () => /"msg":"a function left an error no request was waiting for; still serving"/.test(s.output()),
        5_000,
      );
      assert.is((await c.run(request())).meta?.tag, "tag-1");
    } finally {
      c.close();
    }
    const { code } = await s.stop();
    assert.is(code, 0, "xfn's own exit still works");
  },
);

Cli("serves a TypeScript module with a named runFunction export", async () => {
  const f = join(scratch, "named.ts");
  writeFileSync(
    f,
    `import { response, type RunFunctionRequest } from "${join(import.meta.dirname, "../../src/index.ts")}";\n` +
      `export function runFunction(req: RunFunctionRequest) { const rsp = response.to(req); response.normal(rsp, "named"); return rsp; }\n`,
  );
  const s = await startServe([f, "--insecure"]);
  const c = rawClient(s.port);
  try {
    assert.equal(
      (await c.run(request())).results.map((r) => r.message),
      ["named"],
    );
  } finally {
    c.close();
    await s.stop();
  }
});

Cli("mTLS from TLS_SERVER_CERTS_DIR; SIGTERM shuts down cleanly with exit code 0", async () => {
  const s = await startServe(["functions/hello", "--debug"], { TLS_SERVER_CERTS_DIR: pki.serverDir });
  const c = rawClient(s.port, mtlsCredentials(pki));
  try {
    assert.match(s.output(), /"mtls":true/);
    // Started without V8 flags, it sets the heap growing factor (src/server/heap.ts).
    assert.match(s.output(), /"v8":"--heap-growing-percent=200"/);
    const rsp = await c.run(
      request({ observed: { composite: { resource: { kind: "XBuckets", metadata: { name: "x" }, spec: { buckets: [{ name: "a" }] } } } } }),
    );
    assert.equal(Object.keys(rsp.desired?.resources ?? {}), ["bucket-a"]);
    // The line is written before the response is sent, but its pipe and the socket race here.
    await until("the debug line", () => /"msg":"ran function"/.test(s.output()), 5_000);
  } finally {
    c.close();
  }
  const { code } = await s.stop("SIGTERM");
  assert.is(code, 0);
  assert.match(s.output(), /"msg":"stopped"/);
});

Cli("--insecure wins over --tls-certs-dir, as the function spec requires", async () => {
  const s = await startServe(["functions/hello", "--insecure", "--tls-certs-dir", pki.serverDir]);
  const c = rawClient(s.port);
  try {
    assert.match(s.output(), /"mtls":false/);
    assert.is((await c.run(request())).meta?.tag, "tag-1");
  } finally {
    c.close();
    await s.stop("SIGINT");
  }
});

Cli("--max-recv-message-size 8 accepts a 5 MB request that the default refuses", async () => {
  const big = request({ observed: { composite: { resource: { kind: "X", blob: "x".repeat(5 * 1024 * 1024) } } } });
  const dflt = await startServe(["functions/hello", "--insecure"]);
  const c1 = rawClient(dflt.port);
  try {
    assert.is((await codeOf(c1.run(big))).code, Code.RESOURCE_EXHAUSTED);
  } finally {
    c1.close();
    await dflt.stop();
  }
  const eight = await startServe(["functions/hello", "--insecure", "--max-recv-message-size", "8"]);
  const c2 = rawClient(eight.port);
  try {
    assert.is((await c2.run(big)).meta?.tag, "tag-1");
  } finally {
    c2.close();
    await eight.stop();
  }
});

Cli("serves --insecure on loopback port 9443 by default, dialled as localhost:9443 like crossplane render", () =>
  // The default port is one for the whole machine: test runs side by side take turns for it.
  withLock(DEFAULT_PORT_LOCK, async () => {
    const r = await startServe(["functions/hello", "--insecure"], {}, { defaultAddress: true });
    assert.is(r.port, 9443);
    // Plaintext never listens on every interface unless --address asks for it.
    assert.match(r.output(), /"address":"127\.0\.0\.1:9443"/);
    const client = dial("localhost:9443", { insecure: true });
    try {
      const rsp = await client.run(
        request({ observed: { composite: { resource: { kind: "XBuckets", spec: { buckets: [{ name: "a" }] } } } } }),
      );
      assert.equal(Object.keys(rsp.desired?.resources ?? {}), ["bucket-a"]);
    } finally {
      client.close();
      await r.stop();
    }
  }),
);

Cli(
  "--max-worker-heap: each worker's heap is limited (by default a share of the memory); a leaking function ends only its worker",
  async () => {
    const mod = join(import.meta.dirname, "../fixtures/misbehave/index.ts");
    const xr = (mode: string) =>
      request({ observed: { composite: { resource: { apiVersion: "x.io/v1", kind: "X", metadata: { name: "x" }, spec: { mode } } } } });
    // Without the flag: the share of this machine's (or container's) memory, as the docs say.
    const byDefault = await startServe([mod, "--insecure", "--workers", "2", "--warm-workers", "2"]);
    try {
      const share = workerHeapMB({ workers: 2, maxConcurrency: 16, maxQueue: 128, maxRecvMB: 4, memoryMB: memoryMB().mb }).mb;
      const guard = Math.floor(GUARD_SHARE * memoryMB().mb);
      // Logged once the last worker is up, after the server listens.
      await until("every worker up", () => byDefault.output().includes("function workers ready"));
      assert.match(byDefault.output(), new RegExp(`"workers":2,"maxWorkerHeapMB":${share},"memoryGuardMB":${guard},`));
    } finally {
      await byDefault.stop();
    }
    for (const [guard, shown] of [
      ["1234", '"memoryGuardMB":1234,'],
      ["0", '"maxWorkerHeapMB":\\d+,"timeoutSeconds"'],
    ]) {
      const g = await startServe([mod, "--insecure", "--workers", "2", "--warm-workers", "2", "--memory-guard", guard!]);
      try {
        await until("every worker up", () => g.output().includes("function workers ready"));
        assert.match(g.output(), new RegExp(shown!), `--memory-guard ${guard}`);
      } finally {
        await g.stop();
      }
    }
    const s = await startServe([mod, "--insecure", "--workers", "2", "--max-worker-heap", "48"]);
    const c = rawClient(s.port);
    try {
      const leaked = await codeOf(c.run(xr("leak")));
      assert.is(leaked.code, Code.INTERNAL);
      assert.match(leaked.details, /it ran out of memory \(its heap is limited to 48 MB, --max-worker-heap\)/);
      assert.match((await c.run(xr("ok"))).results[0]!.message, /^ran ok/);
      assert.match(s.output(), /"msg":"a worker ran out of memory"/);
    } finally {
      c.close();
      await s.stop();
    }
  },
);

Cli("a function that keeps large heap allocations past --max-worker-heap ends its worker, never the server", async () => {
  // 40 MB in one piece a call, kept: V8 grants a worker 16 MB past its limit to end it, and a larger
  // allocation there aborted the whole process ("FATAL ERROR: Reached heap limit").
  const mod = join(import.meta.dirname, "../fixtures/misbehave/index.ts");
  const big = request({ observed: { composite: { resource: { kind: "X", spec: { mode: "big", mb: 100 } } } } });
  const s = await startServe([mod, "--insecure", "--workers", "2", "--max-worker-heap", "128"]);
  const c = rawClient(s.port);
  try {
    let ended = 0;
    for (let i = 0; i < 12; i++) {
      const r = await c.run(big, { timeoutMs: 30_000 }).then(
        () => ({ code: Code.OK, details: "" }),
        (err: { code: number; details: string }) => err,
      );
      if (r.code === Code.OK) continue;
      assert.is(r.code, Code.INTERNAL, r.details);
      assert.match(r.details, /it ran out of memory \(its heap is limited to 128 MB, --max-worker-heap\)/);
      ended++;
    }
    assert.ok(ended >= 2, `the workers were ended as their heaps filled (${ended})`);
    assert.is(s.child.exitCode, null, s.output().slice(-2000));
    assert.match(
      (await c.run(request({ observed: { composite: { resource: { kind: "X", spec: { mode: "ok" } } } } }))).results[0]!.message,
      /^ran ok/,
    );
    assert.not.match(s.output(), /FATAL ERROR/);
  } finally {
    c.close();
    await s.stop();
  }
});

Cli("log output that stdout does not take fast enough is dropped past a bound and counted; the server answers and serves on", async () => {
  // In the server's own thread (--workers 1), with nothing reading the output
  // for a while: the buffer grew until V8 ran out of heap and the process aborted.
  const mod = join(import.meta.dirname, "../fixtures/misbehave/index.ts");
  const s = await startServe([mod, "--insecure", "--workers", "1"]);
  const c = rawClient(s.port);
  const lines = 50_000; // 50 MB of log lines, against 8 MiB of buffer
  try {
    s.child.stdout!.pause();
    const chatty = request({ observed: { composite: { resource: { kind: "X", spec: { mode: "chatty", lines } } } } });
    assert.match((await c.run(chatty)).results[0]!.message, /^ran chatty/);
    s.child.stdout!.resume();
    const report = /"droppedLines":(\d+),"msg":"dropped \d+ log lines: they came faster than standard output took them"/;
    await until("the dropped lines reported", () => report.test(s.output()), 10_000);
    const dropped = [...s.output().matchAll(new RegExp(report, "g"))].reduce((n, m) => n + Number(m[1]), 0);
    const written = s.output().match(/"msg":"chatty line"/g)?.length ?? 0;
    assert.ok(dropped > 0 && written > 0, `dropped ${dropped}, written ${written}`);
    assert.is(written + dropped, lines, "every line is written or counted");
    assert.match(
      (await c.run(request({ observed: { composite: { resource: { kind: "X", spec: { mode: "ok" } } } } }))).results[0]!.message,
      /^ran ok/,
    );
  } finally {
    c.close();
    await s.stop();
  }
});

Cli("--metrics-address serves call counts by code, durations and worker restarts; off without the flag", async () => {
  const mod = join(import.meta.dirname, "../fixtures/misbehave/index.ts");
  const s = await startServe([mod, "--insecure", "--workers", "2", "--metrics-address", "127.0.0.1:0"]);
  const c = rawClient(s.port);
  const xr = (mode: string) =>
    request({ observed: { composite: { resource: { apiVersion: "x.io/v1", kind: "X", metadata: { name: "x" }, spec: { mode } } } } });
  try {
    const metrics = /"address":"(127\.0\.0\.1:\d+)","msg":"serving metrics/.exec(s.output())?.[1];
    assert.ok(metrics, s.output());
    for (let i = 0; i < 3; i++) await c.run(xr("ok"));
    assert.is((await codeOf(c.call(new Uint8Array([0xff, 0xff, 0xff])))).code, Code.INVALID_ARGUMENT);
    assert.is((await codeOf(c.run(xr("crash-pending")))).code, Code.INTERNAL);
    await until("the worker replaced", () => /starting a replacement worker/.test(s.output()), 5_000);
    const text = await (await fetch(`http://${metrics}/metrics`)).text();
    assert.match(text, /^xfn_function_requests_total\{code="OK"\} 3$/m);
    assert.match(text, /^xfn_function_requests_total\{code="INVALID_ARGUMENT"\} 1$/m);
    assert.match(text, /^xfn_function_requests_total\{code="INTERNAL"\} 1$/m);
    assert.match(text, /^xfn_function_request_duration_seconds_count 5$/m);
    assert.match(text, /^xfn_function_worker_restarts_total 1$/m);
    assert.match(text, /^xfn_function_requests_in_flight 0$/m);
  } finally {
    c.close();
    assert.is((await s.stop()).code, 0);
  }
  const plain = await startServe(["functions/hello", "--insecure"]);
  await plain.stop();
  assert.not.match(plain.output(), /metrics/);
});

/** probe GETs (or sends method to) a probe path: its status and body, or undefined while nothing listens. */
async function probe(address: string, path: string, method = "GET"): Promise<[number, string] | undefined> {
  try {
    const r = await fetch(`http://${address}${path}`, { method });
    return [r.status, await r.text()];
  } catch {
    return undefined;
  }
}

Cli("--health-address: /healthz from the start; /readyz while loading, serving, out of workers, shutting down", async () => {
  const marker = join(scratch, "probed-once");
  const f = join(scratch, "probed.mjs");
  // The first load is slow (the server starting); so is every load after the first
  // (a replaced worker), and a "slow" call takes a second; "exit" ends its worker.
  writeFileSync(
    f,
    `import { existsSync, writeFileSync } from "node:fs";\n` +
      `import { response, request } from ${JSON.stringify(join(import.meta.dirname, "../../lib/index.js"))};\n` +
      `const marker = ${JSON.stringify(marker)};\n` +
      `if (existsSync(marker)) await new Promise((r) => setTimeout(r, 1500)); else { writeFileSync(marker, ""); await new Promise((r) => setTimeout(r, 1500)); }\n` +
      `export default async (req) => {\n` +
      `  const mode = request.getObservedCompositeResource(req)?.spec?.mode;\n` +
      `  if (mode === "exit") process.exit(0);\n` +
      `  if (mode === "slow") await new Promise((r) => setTimeout(r, 1000));\n` +
      `  return response.to(req);\n` +
      `};\n`,
  );
  const hp = `127.0.0.1:${await freePort()}`;
  const starting = startServe([f, "--insecure", "--workers", "2", "--warm-workers", "2", "--health-address", hp, "--grace-period", "10"]);
  starting.catch(() => {}); // awaited below
  const xr = (mode: string) => request({ observed: { composite: { resource: { kind: "X", spec: { mode } } } } });
  await until("the probes listen", async () => (await probe(hp, "/healthz")) !== undefined, 10_000);
  assert.equal(await probe(hp, "/healthz"), [200, "ok\n"], "alive while the module loads");
  // Before the gRPC port is bound, then while the first worker loads the function.
  const early = await probe(hp, "/readyz");
  assert.is(early?.[0], 503);
  assert.match(early![1], /^not ready: starting: (loading the function and binding the gRPC port|a worker is loading the function)\n$/);
  // Listening while the first worker still loads the function (1.5 s): not ready, and a call waits for it.
  const s = await starting;
  const c = rawClient(s.port);
  try {
    assert.equal(await probe(hp, "/readyz"), [503, "not ready: starting: a worker is loading the function\n"]);
    assert.ok((await c.run(xr("fast"))).meta !== undefined, "a call made while the function loaded was answered once it had");
    await until("ready", async () => (await probe(hp, "/readyz"))?.[0] === 200, 5_000);
    assert.equal(await probe(hp, "/readyz"), [200, "ok\n"]);
    assert.equal(await probe(hp, "/readyz", "HEAD"), [200, ""]);
    assert.equal(await probe(hp, "/readyz", "POST"), [405, "POST not allowed: use GET\n"]);
    assert.equal(await probe(hp, "/metrics"), [404, "not found: try /healthz, /readyz\n"]);
    // Both workers end, one after the other; their replacements take 1.5 s to load. The second
    // worker starts once the first is up and loads as long: with it still loading, the second
    // call waited for it while the first's replacement loaded too, and readiness raced.
    await until("both workers up", () => s.output().includes('"msg":"function workers ready"'), 10_000);
    for (let i = 0; i < 2; i++) assert.is((await codeOf(c.run(xr("exit")))).code, Code.INTERNAL);
    assert.equal(await probe(hp, "/readyz"), [
      503,
      "not ready: no worker can run the function: every one has ended and is being replaced (see the log)\n",
    ]);
    assert.equal(await probe(hp, "/healthz"), [200, "ok\n"]);
    await until("a replacement is ready", async () => (await probe(hp, "/readyz"))?.[0] === 200, 10_000);
    // A call in flight when SIGTERM comes: not ready, still alive, until it is answered.
    const slow = c.run(xr("slow"));
    await new Promise((r) => setTimeout(r, 300));
    const exited = s.stop();
    await until("shutting down", async () => (await probe(hp, "/readyz"))?.[0] === 503, 5_000);
    assert.equal(await probe(hp, "/readyz"), [503, "not ready: shutting down: finishing the calls in flight\n"]);
    assert.equal(await probe(hp, "/healthz"), [200, "ok\n"]);
    assert.ok((await slow).meta !== undefined, "the call in flight was answered");
    assert.is((await exited).code, 0);
    assert.is(await probe(hp, "/healthz"), undefined, "the probes stop with the server");
  } finally {
    c.close();
    s.child.kill("SIGKILL");
  }
  assert.match(s.output(), /"msg":"serving probes at \/healthz, \/readyz"/);
});

Cli("--health-address may be the --metrics-address: one server answers both", async () => {
  const s = await startServe(["functions/hello", "--insecure", "--metrics-address", "127.0.0.1:0", "--health-address", "127.0.0.1:0"]);
  try {
    const address = /"address":"(127\.0\.0\.1:\d+)","msg":"serving metrics at \/metrics, \/healthz, \/readyz"/.exec(s.output())?.[1];
    assert.ok(address, s.output());
    assert.not.match(s.output(), /serving probes/);
    await until("ready", async () => (await probe(address, "/readyz"))?.[0] === 200, 10_000);
    assert.equal(await probe(address, "/readyz"), [200, "ok\n"]);
    assert.match((await probe(address, "/metrics"))![1], /^xfn_function_requests_in_flight 0$/m);
  } finally {
    assert.is((await s.stop()).code, 0);
  }
});

Cli("--health-address that is not host:port stops start-up naming it", async () => {
  const r = await run(["serve", "functions/hello", "--insecure", "--address", "127.0.0.1:0", "--health-address", "localhost"]);
  assert.is(r.code, 1);
  assert.match(r.stderr, /xfn serve: the probes address must be host:port, got "localhost"/);
});

Cli("--metrics-address that cannot be bound stops start-up naming it", async () => {
  const r = await run(["serve", "functions/hello", "--insecure", "--address", "127.0.0.1:0", "--metrics-address", "127.0.0.1:99999"]);
  assert.is(r.code, 1);
  assert.match(r.stderr, /metrics address must be host:port, got "127\.0\.0\.1:99999"/);
});

Cli.run();
