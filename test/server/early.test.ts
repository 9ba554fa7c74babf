// Start-up with workers: the server listens while the first worker loads the
// function (calls wait for it, health says NOT_SERVING), and a bundle's first
// worker may be started before the server's code has loaded (early.ts) and
// taken by the pool. Real worker threads, real gRPC over loopback.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { status as Code } from "@grpc/grpc-js";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startEarlyWorker, type EarlyWorker } from "../../src/server/early.js";
import { serve, type RunningServer } from "../../src/server/server.js";
import type { WorkerData } from "../../src/server/worker.js";
import { codeOf, rawClient } from "../support/client.js";
import { until } from "../support/cluster.js";
import { memoryLog } from "../support/log.js";
import { request } from "../support/requests.js";

const E = suite("server: start-up with workers");
const LIB = join(import.meta.dirname, "../../lib");
// HealthCheckResponse{status: SERVING} is 0x08 0x01; NOT_SERVING is 0x08 0x02.
const SERVING = Buffer.from([0x08, 0x01]);
const NOT_SERVING = Buffer.from([0x08, 0x02]);

let dir: string;
E.before(() => {
  dir = mkdtempSync(join(tmpdir(), "xfn-early-"));
});
E.after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * script writes a worker script with its function built in, as a bundle's is:
 * it waits loadMs (its top-level code), or throws, then serves the pool. The
 * function answers with its thread and whether it was started early.
 */
function script(name: string, opts: { loadMs?: number; fail?: string } = {}): URL {
  const file = join(dir, `${name}.mjs`);
  writeFileSync(
    file,
    [
      `import { threadId, workerData } from "node:worker_threads";`,
      `import { workerMain } from ${JSON.stringify(join(LIB, "server/worker.js"))};`,
      `import { response } from ${JSON.stringify(join(LIB, "index.js"))};`,
      opts.loadMs ? `await new Promise((r) => setTimeout(r, ${opts.loadMs}));` : "",
      opts.fail ? `throw new Error(${JSON.stringify(opts.fail)});` : "",
      `const early = workerData.early === true;`,
      `workerMain(async (req) => {`,
      `  const rsp = response.to(req);`,
      `  response.normal(rsp, "thread " + threadId + (early ? " early" : ""));`,
      `  return rsp;`,
      `});`,
    ].join("\n"),
  );
  return pathToFileURL(file);
}

const workerData: WorkerData = { xfnWorker: true, label: "early", debug: true, maxResponseBytes: 4 << 20 };

function start(s: URL, early?: EarlyWorker, maxHeapMB = early?.maxHeapMB, timeoutMs?: number) {
  const mem = memoryLog();
  const srv = serve(
    null,
    {
      address: "127.0.0.1:0",
      insecure: true,
      ...(timeoutMs ? { timeoutMs } : {}),
      workers: { workers: 2, warmWorkers: 2, script: s, workerData, ...(maxHeapMB ? { maxHeapMB } : {}), ...(early ? { early } : {}) },
    },
    mem.log,
  );
  return { srv, mem };
}

/** answeredBy makes n calls at once, and says which workers answered them. */
const answeredBy = async (srv: RunningServer, n = 1) => {
  const c = rawClient(srv.port);
  try {
    const all = await Promise.all(Array.from({ length: n }, () => c.run(request({ meta: { tag: "t" } }))));
    return new Set(all.map((r) => r.results[0]!.message));
  } finally {
    c.close();
  }
};

E("the server listens while the first worker loads: health NOT_SERVING, a call waits and is answered, then SERVING", async () => {
  const { srv: starting, mem } = start(script("slow", { loadMs: 1500 }));
  const srv = await starting;
  const c = rawClient(srv.port);
  try {
    assert.equal(await c.call(new Uint8Array(), { path: "/grpc.health.v1.Health/Check" }), NOT_SERVING);
    assert.is(srv.notReady(), "starting: a worker is loading the function");
    const t = Date.now();
    const rsp = await c.run(request({ meta: { tag: "t" } }));
    assert.match(rsp.results[0]!.message, /^thread \d+$/);
    assert.ok(Date.now() - t > 500, `answered in ${Date.now() - t} ms, before the worker could have loaded`);
    await srv.loaded;
    assert.equal(await c.call(new Uint8Array(), { path: "/grpc.health.v1.Health/Check" }), SERVING);
    assert.is(srv.notReady(), undefined);
    assert.ok(mem.lines().some((l) => l.msg === "serving insecure gRPC (local development only)"));
  } finally {
    c.close();
    await srv.stop(1000);
  }
});

E("a call whose time runs out while the first worker loads is answered UNAVAILABLE saying so; the next is answered", async () => {
  // The server's --timeout of 300 ms ends the call, well before the client's own deadline.
  const { srv: starting } = start(script("slower", { loadMs: 1500 }), undefined, undefined, 300);
  const srv = await starting;
  const c = rawClient(srv.port);
  try {
    const got = await codeOf(c.run(request({ meta: { tag: "t" } }), { timeoutMs: 10_000 }));
    assert.is(got.code, Code.UNAVAILABLE);
    assert.is(got.details, "the function was still loading at the call's deadline (no worker had loaded it yet); retry later");
    await srv.loaded;
    assert.match((await c.run(request({ meta: { tag: "t" } }))).results[0]!.message, /^thread \d+$/);
  } finally {
    c.close();
    await srv.stop(1000);
  }
});

E("a first worker that cannot load the function: calls that waited are answered UNAVAILABLE with why, and the server stops", async () => {
  const { srv: starting } = start(script("broken", { loadMs: 500, fail: "no credentials in the environment" }));
  const srv = await starting;
  const c = rawClient(srv.port);
  try {
    const got = await codeOf(c.run(request({ meta: { tag: "t" } })));
    assert.is(got.code, Code.UNAVAILABLE);
    assert.match(got.details, /the function could not be loaded, and the server is stopping: .*no credentials in the environment/);
    const err = await srv.loaded.then(
      () => undefined,
      (e: Error) => e,
    );
    assert.match(err?.message ?? "", /no credentials in the environment/);
    // No longer listening.
    const after = await codeOf(c.run(request({}), { timeoutMs: 2000 }));
    assert.is(after.code, Code.UNAVAILABLE);
    assert.not.match(after.details, /could not be loaded/);
  } finally {
    c.close();
    await srv.stop(100);
  }
});

E("a worker started before the server is taken as the first: it answers, and is sent the pool's data", async () => {
  const s = script("bundle");
  const early = startEarlyWorker(s, ["--insecure", "--debug"]);
  assert.ok(early, "no early worker for these flags");
  const { srv: starting, mem } = start(s, early);
  const srv = await starting;
  try {
    await srv.loaded;
    await until("both workers", () => mem.lines().some((l) => l.msg === "function workers ready"));
    const by = await answeredBy(srv, 8);
    assert.ok(
      [...by].some((m) => m.endsWith(" early")),
      [...by].join(", "),
    );
    assert.ok(
      [...by].some((m) => !m.endsWith(" early")),
      [...by].join(", "),
    );
    assert.ok(mem.lines().some((l) => l.msg === "the first worker was started before the server loaded"));
    assert.is(early.ended(), undefined);
    // Its log lines come through the pool, as a worker started by the pool does (the config's logBacklog and debug).
    assert.ok(
      mem.lines().some((l) => l.worker === 1 && l.level === "debug"),
      "no debug line from the early worker",
    );
  } finally {
    await srv.stop(1000);
  }
});

E("a worker started before the server with another heap limit is ended; the pool starts its own", async () => {
  const s = script("bundle-heap");
  const early = startEarlyWorker(s, [])!;
  const { srv: starting, mem } = start(s, early, early.maxHeapMB - 1);
  const srv = await starting;
  try {
    await srv.loaded;
    assert.is(early.ended(), "discarded");
    assert.match([...(await answeredBy(srv))][0]!, /^thread \d+$/);
    assert.ok(mem.lines().some((l) => l.msg === "not using the worker started before the server loaded; starting the first worker now"));
  } finally {
    await srv.stop(1000);
  }
});

E("a worker started before the server that failed to load: the pool starts its own, whose error stops start-up", async () => {
  const s = script("bundle-broken", { fail: "module top-level threw" });
  const early = startEarlyWorker(s, [])!;
  await until("the early worker ends", () => early.ended() !== undefined);
  assert.match(early.ended()!, /module top-level threw/);
  const { srv: starting } = start(s, early);
  const srv = await starting;
  const err = await srv.loaded.then(
    () => undefined,
    (e: Error) => e,
  );
  assert.match(err?.message ?? "", /module top-level threw/);
  await srv.stop(100);
});

E("no worker is started early for help, version or a --workers flag", () => {
  const s = script("unused");
  for (const argv of [["--help"], ["-h"], ["-V"], ["--version"], ["--workers", "1"], ["--workers=4"]]) {
    assert.is(startEarlyWorker(s, argv), undefined, argv.join(" "));
  }
});

E.run();
