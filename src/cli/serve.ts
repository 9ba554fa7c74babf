// `xfn serve <module>`: serve a function module over gRPC until SIGTERM/SIGINT (shutdown.ts).
// The same flags and start-up serve a bundled function package (see bundled.ts).
import { writeSync } from "node:fs";
import { extname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, InvalidArgumentError, Option } from "commander";
import type { Logger } from "pino";
import type { RunFunction } from "../function.js";
import { messageOf } from "../sdk/errors.js";
import { DEFAULT_MAX_RESPONSE_BYTES } from "../server/call.js";
import { routeOutput } from "../server/console.js";
import { tuneHeap } from "../server/heap.js";
import { createLogger } from "../server/log.js";
import { GUARD_SHARE, memoryMB, workerHeapMB } from "../server/memory.js";
import { DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_QUEUE, DEFAULT_MAX_RECV_MB, DEFAULT_WORKERS } from "../server/limits.js";
import { DEFAULT_TIMEOUT_SECONDS } from "../server/pool.js";
import type { EarlyWorker } from "../server/early.js";
import type { ServeMetrics } from "../metrics.js";
import type { HttpServer } from "../http.js";
import { servedByHeaders } from "../server/served-by.js";
import { DEFAULT_ADDRESS, serve, type RunningServer, type ServeOptions } from "../server/server.js";
import type { WorkerData } from "../server/protocol.js";
import type { Recorder } from "../testing/record.js";
import { refuseExit } from "../module/exit.js";
import { isTypeScript, loadFunction, resolveModule } from "../module/load.js";
import { onShutdown } from "./shutdown.js";

function positive(name: string) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive number, got ${JSON.stringify(v)}`);
    return n;
  };
}

function positiveInt(name: string) {
  return (v: string): number => {
    const n = positive(name)(v);
    if (!Number.isInteger(n)) throw new InvalidArgumentError(`${name} must be a whole number, got ${JSON.stringify(v)}`);
    return n;
  };
}

function wholeOrZero(name: string) {
  return (v: string): number => (v.trim() === "0" ? 0 : positiveInt(name)(v));
}

/** SLOW_LOAD_MS is how long loading the function module may take before xfn serve says it is still loading. */
export const SLOW_LOAD_MS = 5_000;

/** LOOPBACK_ADDRESS is where `xfn serve --insecure` listens unless --address says otherwise. */
export const LOOPBACK_ADDRESS = "127.0.0.1:9443";

/** ServeFlags are the parsed serve flags. */
export interface ServeFlags {
  address?: string;
  tlsCertsDir?: string;
  insecure: boolean;
  debug: boolean;
  maxRecvMessageSize: number;
  maxConcurrency: number;
  maxQueue: number;
  gracePeriod: number;
  recordDir?: string;
  workers: number;
  warmWorkers: number;
  maxWorkerHeap?: number;
  memoryGuard?: number;
  timeout: number;
  metricsAddress?: string;
  healthAddress?: string;
}

/**
 * addServeFlags adds the function server's flags to cmd. With loopbackWhenInsecure,
 * --insecure without --address listens on 127.0.0.1 only: plaintext is for
 * local development, never for the network. A bundled package's image keeps
 * 0.0.0.0 instead: `crossplane render`'s Docker runtime starts it with
 * --insecure and reaches it through a published port, from outside the
 * container's own loopback.
 */
export function addServeFlags(cmd: Command, opts: { loopbackWhenInsecure?: boolean } = {}): Command {
  const help = opts.loopbackWhenInsecure
    ? `address to listen on (default: ${DEFAULT_ADDRESS}; ${LOOPBACK_ADDRESS} with --insecure)`
    : `address to listen on (default: ${DEFAULT_ADDRESS})`;
  return cmd
    .addOption(new Option("--address <host:port>", help))
    .addOption(
      new Option(
        "--tls-certs-dir <dir>",
        "directory with tls.crt, tls.key and ca.crt; clients must present a certificate signed by ca.crt",
      ).env("TLS_SERVER_CERTS_DIR"),
    )
    .addOption(
      new Option("--insecure", "serve plaintext gRPC (local development, crossplane render); wins over --tls-certs-dir").default(false),
    )
    .addOption(new Option("-d, --debug", "log every request").default(false))
    .addOption(
      new Option("--max-recv-message-size <MB>", "largest request accepted, in MB")
        .default(DEFAULT_MAX_RECV_MB)
        .argParser(positive("--max-recv-message-size")),
    )
    .addOption(
      new Option("--max-concurrency <n>", "requests running at once")
        .default(DEFAULT_MAX_CONCURRENCY)
        .argParser(positiveInt("--max-concurrency")),
    )
    .addOption(
      new Option("--max-queue <n>", "requests waiting for a slot; beyond that the server answers RESOURCE_EXHAUSTED")
        .default(DEFAULT_MAX_QUEUE)
        .argParser(positiveInt("--max-queue")),
    )
    .addOption(
      new Option("--workers <n>", "worker threads running the function; 1 runs it in the server's own thread")
        .default(DEFAULT_WORKERS)
        .argParser(positiveInt("--workers")),
    )
    .addOption(
      new Option(
        "--warm-workers <n>",
        "workers started with the server (at most --workers); the others start when calls first overlap, " +
          "so an idle function holds one worker's memory",
      )
        .default(1)
        .argParser(positiveInt("--warm-workers")),
    )
    .addOption(
      new Option(
        "--max-worker-heap <MB>",
        "JavaScript heap of each worker; a worker that runs out is replaced, failing only its calls " +
          "(default: the container's or machine's memory, less the server's share, split among the workers)",
      ).argParser(positiveInt("--max-worker-heap")),
    )
    .addOption(
      new Option(
        "--memory-guard <MB>",
        "server memory (resident) at which the worker holding the most of it is ended, before the kernel ends the server; " +
          `0 turns it off (default: ${GUARD_SHARE * 100}% of the container's or machine's memory)`,
      ).argParser(wholeOrZero("--memory-guard")),
    )
    .addOption(
      new Option("--timeout <seconds>", "longest one call may run; a caller's earlier deadline wins")
        .default(DEFAULT_TIMEOUT_SECONDS)
        .argParser(positive("--timeout")),
    )
    .addOption(
      new Option(
        "--metrics-address <host:port>",
        "serve Prometheus metrics (calls by status code, durations, calls in flight, worker restarts) at http://<host:port>/metrics; off unless given",
      ),
    )
    .addOption(
      new Option(
        "--health-address <host:port>",
        "serve Kubernetes probes at http://<host:port>/healthz (the server answers) and /readyz (it takes calls); " +
          "may be the --metrics-address; off unless given",
      ),
    )
    .addOption(
      new Option("--record-dir <dir>", "write every request and its response as a test case xfn test can replay (secrets redacted)"),
    )
    .addOption(
      new Option("--grace-period <seconds>", "on SIGTERM/SIGINT, how long in-flight requests may finish")
        .default(10)
        .argParser(positive("--grace-period")),
    );
}

/**
 * FunctionSource is where the function comes from: load() imports it in this
 * thread; worker says which script a pool worker runs to get it (and which
 * module that script loads), and early is a worker already started on that
 * script (a bundle's, server/early.ts).
 */
export interface FunctionSource {
  load(): Promise<RunFunction>;
  worker: { script: URL; module?: string; early?: EarlyWorker };
}

// Run from src/ (this repository's tests) the worker script is TypeScript.
const WORKER_ENTRY = new URL(`../server/worker-entry${extname(fileURLToPath(import.meta.url))}`, import.meta.url).href;

/**
 * startServing serves fn with flags until SIGTERM/SIGINT (or, started by npx,
 * until npx ends), then stops gracefully and exits 0. On a start-up failure
 * it sets exit code 1. moduleFile names the function's source, for logs and
 * recorded cases.
 */
export async function startServing(source: FunctionSource, flags: ServeFlags, label: string, moduleFile?: string): Promise<void> {
  const log = createLogger({ debug: flags.debug });
  // What the function prints in the server's own thread (--workers 1), and
  // Node's own warnings, are logged, as on workers (console.ts).
  routeOutput(log.child({ module: label }));
  // Before any worker starts: they read V8's flags when they do.
  const heapFlag = tuneHeap();
  if (heapFlag) log.debug({ v8: heapFlag }, "heap growing factor set (start node with --heap-growing-percent to choose your own)");
  // With workers, each worker loads the function; a module path that does
  // not resolve is still loaded here, for its error.
  const pooled = flags.workers > 1 && (source.worker.module === undefined || moduleFile !== undefined);
  if (!pooled) source.worker.early?.discard();
  // In the server's own thread, a function's process.exit would end the server.
  const exit = pooled ? process.exit.bind(process) : refuseExit();
  // SIGTERM and SIGINT are ours from before the port is bound: a signal sent
  // as soon as the server said it listens came, now and then, before handlers
  // set up after serve() were in place, and Node's default ended the process
  // (killed by SIGTERM, the calls and recordings not finished). Before the
  // server listens there is nothing to finish: the process exits at once.
  const shutdown = onShutdown(log, { exit });
  const slowLoad = warnSlowLoad(log, label);
  const endpoints = new Endpoints();
  const fail = async (err: unknown) => {
    clearTimeout(slowLoad);
    source.worker.early?.discard();
    await endpoints.stop();
    log.error(messageOf(err));
    // Straight to the terminal, not through the log as process.stderr now is.
    writeSync(2, `xfn serve: ${messageOf(err)}\n`);
    // With --debug, the stack of what the module threw (source-mapped), not just where.
    const cause = (err as Error).cause;
    if (flags.debug && cause instanceof Error && cause.stack) writeSync(2, `${cause.stack}\n`);
    process.exitCode = 1;
  };
  let started: { srv: RunningServer; recorder?: Recorder };
  try {
    started = await startServer({ source, flags, label, moduleFile, pooled, log, endpoints });
  } catch (err) {
    await fail(err);
    return;
  }
  const { srv, recorder } = started;
  keepServingThroughStrayErrors(log);
  shutdown.ready(async () => {
    clearTimeout(slowLoad);
    await srv.stop(flags.gracePeriod * 1000);
    await recorder?.flush();
    await endpoints.stop();
  });
  // With workers the server listens while the first loads the function; it may not.
  try {
    await srv.loaded;
    clearTimeout(slowLoad);
  } catch (err) {
    if (!shutdown.stopping) await fail(err);
  }
}

/**
 * warnSlowLoad says when the function module's top-level code takes long (a
 * fetch at import, say): calls wait (with workers) or the server does not
 * listen (in its own thread) until it has finished; better said than an
 * empty log.
 */
function warnSlowLoad(log: Logger, label: string): NodeJS.Timeout {
  return setTimeout(
    () =>
      log.warn(
        { module: label, seconds: SLOW_LOAD_MS / 1000 },
        "still loading the function module: its top-level code has not finished; no call is answered until it has",
      ),
    SLOW_LOAD_MS,
  ).unref();
}

/** Endpoints are the metrics and probe HTTP servers (one server when they share an address). */
class Endpoints {
  readonly servers: HttpServer[] = [];
  metrics: ServeMetrics | undefined;
  /** running is the gRPC server once it is bound: readiness asks it. */
  running: RunningServer | undefined;
  stop = async () => void (await Promise.all(this.servers.splice(0).map((h) => h.stop())));

  /** start serves what the flags ask for. */
  async start(flags: ServeFlags, log: Logger): Promise<void> {
    const running = () => this.running;
    // Before the module loads: a liveness probe passes from the start, and
    // readiness says what start-up is waiting for.
    // Like prom-client below, the HTTP server is loaded only when asked for.
    const http = flags.healthAddress ? await import("../http.js") : undefined;
    const probes = http?.probeRoutes(
      () => {
        const r = running();
        return r ? r.notReady() : "starting: loading the function and binding the gRPC port";
      },
      () => running()?.certificateNote(),
    );
    const shared = probes && flags.healthAddress === flags.metricsAddress;
    if (flags.metricsAddress) {
      // Loaded only when asked for: prom-client adds to every start-up otherwise.
      const { serveMetrics, startMetricsServer } = await import("../metrics.js");
      this.metrics = serveMetrics(() => running()?.inFlight() ?? 0);
      // Asked for explicitly: a port that cannot be bound stops start-up, as --address does.
      this.servers.push(await startMetricsServer(flags.metricsAddress, this.metrics.registry, log, shared ? probes : {}));
    }
    if (http && probes && !shared) this.servers.push(await http.startHttpServer(flags.healthAddress!, probes, log, "probes"));
  }
}

interface Starting {
  source: FunctionSource;
  flags: ServeFlags;
  label: string;
  moduleFile: string | undefined;
  pooled: boolean;
  log: Logger;
  endpoints: Endpoints;
}

/** startServer checks the flags, starts the HTTP endpoints, loads or compiles the function and binds the gRPC server. */
async function startServer(at: Starting): Promise<{ srv: RunningServer; recorder?: Recorder }> {
  const { source, flags, label, moduleFile, pooled, log, endpoints } = at;
  if (flags.maxWorkerHeap !== undefined && flags.workers === 1)
    throw new Error(
      "--max-worker-heap limits worker threads, and --workers 1 runs the function in the server's own thread " +
        "(start node with --max-old-space-size to limit that)",
    );
  if (flags.memoryGuard !== undefined && flags.workers === 1)
    throw new Error("--memory-guard ends worker threads, and --workers 1 runs the function in the server's own thread");
  if (flags.warmWorkers > flags.workers)
    throw new Error(`--warm-workers ${flags.warmWorkers} starts more workers than --workers ${flags.workers} allows`);
  await endpoints.start(flags, log);
  const fn = pooled ? null : await source.load();
  const started = new Date();
  // Loaded only when asked for: it brings a YAML writer a server has no other use for.
  const recorder = flags.recordDir
    ? (await import("../testing/record.js")).createRecorder(resolve(flags.recordDir), moduleFile ?? label, log)
    : undefined;
  const m = endpoints.metrics;
  const running = await serve(
    fn,
    {
      ...(pooled ? { workers: await poolOptions(at) } : {}),
      timeoutMs: flags.timeout * 1000,
      // Which function answered, for `xfn call --debug`: a stale server shows its module and age.
      headers: servedByHeaders(moduleFile ?? label, started),
      // Traces name the function (OTEL_SERVICE_NAME wins), when the OTEL_ variables ask for them.
      serviceName: label,
      address: flags.address ?? DEFAULT_ADDRESS,
      insecure: flags.insecure,
      ...(flags.tlsCertsDir ? { tlsCertsDir: flags.tlsCertsDir } : {}),
      maxRecvMessageSizeMB: flags.maxRecvMessageSize,
      maxConcurrency: flags.maxConcurrency,
      maxQueue: flags.maxQueue,
      ...(recorder ? { onResponse: recorder.record } : {}),
      ...(m
        ? {
            onCall: (code: string, seconds: number) => {
              m.requests.inc({ code });
              m.requestSeconds.observe(seconds);
            },
            onWorkerRestart: () => m.workerRestarts.inc(),
          }
        : {}),
    },
    log.child({ module: label }),
  );
  endpoints.running = running;
  return { srv: running, ...(recorder ? { recorder } : {}) };
}

/** poolOptions are the worker pool's: what each worker runs and loads, its heap and the memory guard. */
async function poolOptions(at: Starting): Promise<NonNullable<ServeOptions["workers"]>> {
  const { source, flags, label, moduleFile, log } = at;
  const memory = memoryMB();
  // A TypeScript module is compiled here, once, rather than by every worker (module/compile.ts).
  const compiled = moduleFile && isTypeScript(moduleFile) ? await compileOnce(moduleFile, label, log) : undefined;
  const workerData: WorkerData = {
    xfnWorker: true,
    label,
    debug: flags.debug,
    maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
    ...(moduleFile ? { module: moduleFile } : {}),
    ...(compiled && !compiled.script ? { compiled: compiled.url, compiledNeedsTypeScript: compiled.needsTypeScript } : {}),
  };
  return {
    workers: flags.workers,
    warmWorkers: flags.warmWorkers,
    // Compiled against the worker runtime, the workers start from it (compile.ts) instead of worker-entry.
    script: compiled?.script ? new URL(compiled.script) : source.worker.script,
    workerData,
    maxHeapMB: workerHeap(flags, memory, log),
    memoryGuardMB: flags.memoryGuard ?? Math.floor(GUARD_SHARE * memory.mb),
    ...(source.worker.early ? { early: source.worker.early } : {}),
  };
}

/**
 * keepServingThroughStrayErrors: a function's stray async error (a rejected
 * promise nobody awaits, a throw in a timer) belongs to no request. Node
 * would end the process, dropping every other caller's call; it is logged
 * and the server keeps serving instead. The request that started it has
 * already been answered, or will be by its deadline.
 */
function keepServingThroughStrayErrors(log: Logger): void {
  const stray = (kind: string) => (err: unknown) => {
    log.error({ err: messageOf(err), kind }, "a function left an error no request was waiting for; still serving");
  };
  process.on("unhandledRejection", stray("unhandledRejection"));
  process.on("uncaughtException", stray("uncaughtException"));
}

/** compileOnce compiles a TypeScript module for the workers, its errors named as loading it would name them. */
async function compileOnce(file: string, label: string, log: Logger) {
  const started = performance.now();
  const { compileModule, workerScript } = await import("../module/compile.js");
  try {
    // Against the worker runtime bundle when it is built (lib/worker-runtime.mjs): the workers' whole script.
    const worker = workerScript(label);
    let compiled = await compileModule(file, undefined, worker ? { worker } : {});
    // A package that resolves to TypeScript (under a condition such as xfn-source) needs tsx in the worker,
    // which only the plain worker script registers: the module alone, then, as worker-entry imports it.
    if (compiled.script && compiled.needsTypeScript) {
      compiled.dispose();
      compiled = await compileModule(file);
    }
    process.once("exit", compiled.dispose);
    log.debug(
      { ms: Math.round(performance.now() - started), file: fileURLToPath(compiled.url) },
      "compiled the function module once for every worker",
    );
    return compiled;
  } catch (err) {
    throw new Error(`cannot load function module ${label}: ${messageOf(err)}`, { cause: err });
  }
}

/** workerHeap is --max-worker-heap, or each worker's share of memory (memory.ts), logged with what it came from. */
function workerHeap(flags: ServeFlags, memory: ReturnType<typeof memoryMB>, log: Logger): number {
  if (flags.maxWorkerHeap !== undefined) return flags.maxWorkerHeap;
  const { mb, tooSmall } = workerHeapMB({
    workers: flags.workers,
    maxConcurrency: flags.maxConcurrency,
    maxQueue: flags.maxQueue,
    maxRecvMB: flags.maxRecvMessageSize,
    memoryMB: memory.mb,
  });
  const from = { memoryMB: memory.mb, memoryFrom: memory.container ? "container limit" : "machine" };
  if (tooSmall)
    log.warn(
      { ...from, workers: flags.workers, maxWorkerHeapMB: mb },
      "little memory for this many workers and request bodies; each worker gets the minimum heap " +
        "(give the container more memory, or lower --workers, --max-concurrency or --max-recv-message-size)",
    );
  else log.debug({ ...from, maxWorkerHeapMB: mb }, "worker heap limit set from the memory");
  return mb;
}

/** serveCommand builds the `serve` subcommand. */
export function serveCommand(): Command {
  return addServeFlags(
    new Command("serve")
      .description("serve a function module over gRPC, as Crossplane calls it (RunFunction v1 and v1beta1)")
      .argument("<module>", "function module: a file, or a directory with package.json main or index.ts/index.js"),
    { loopbackWhenInsecure: true },
  ).action(async (module: string, flags: ServeFlags) => {
    if (flags.address === undefined && flags.insecure) flags.address = LOOPBACK_ADDRESS;
    let file: string | undefined;
    try {
      file = resolveModule(module);
    } catch {
      // loadFunction reports the problem with the same words.
    }
    await startServing(
      { load: () => loadFunction(module), worker: { script: new URL(WORKER_ENTRY), module: file ?? module } },
      flags,
      module,
      file,
    );
  });
}
