// How render reaches each Function named in the functions file.
//
// - Annotated `render.xfn.dev/module: <path>` (relative to the functions file):
//   the module is loaded and run in-process, through the same handler the gRPC
//   server uses, so a thrown error or an unencodable response behaves exactly
//   as it would when served. No container, no socket.
// - Annotated `render.crossplane.io/runtime: Development`, as crossplane render
//   knows it: called over gRPC at `render.crossplane.io/runtime-development-target`
//   (default localhost:9443): in plaintext, as crossplane render calls it, or
//   with mTLS when given client certificates (xfn host
//   --function-tls-certs-dir), verifying the server as <function>.<namespace>,
//   the name Crossplane gives a function's certificate.
// - Anything else would need a container engine, which xfn does not run.
import type { CallReport } from "../server/call.js";
import { dirname, extname, isAbsolute, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { JsonObject } from "@bufbuild/protobuf";
import { status as Code, type ServiceError } from "@grpc/grpc-js";
import { dial, type FunctionClient } from "../client/client.js";
import { loadFunction, resolveModule } from "../module/load.js";
import { decodeResponse, encodeRequest } from "../wire/codec.js";
import type { RunFunctionRequest, RunFunctionResponse } from "../gen/fn/v1/run_function_pb.js";
import type { Logger } from "pino";
import { Cancel, createHandler, DEFAULT_MAX_RESPONSE_BYTES, type Handler } from "../server/handler.js";
import { DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_QUEUE } from "../server/limits.js";
import { openPool, type Pool } from "../server/pool.js";
import { createLogger } from "../server/log.js";
import { identity, InputError, type Doc } from "./docs.js";
import { sharedWatchdog } from "./watchdog.js";
import { messageOf } from "../sdk/errors.js";

export const ANNOTATION_MODULE = "render.xfn.dev/module";
export const ANNOTATION_RUNTIME = "render.crossplane.io/runtime";
export const ANNOTATION_TARGET = "render.crossplane.io/runtime-development-target";
export const DEFAULT_DEVELOPMENT_TARGET = "localhost:9443";

/** RunOptions trace a call: metadata sent to a function over gRPC (its W3C traceparent), and the report of one run here. */
export interface RunOptions {
  metadata?: Record<string, string>;
  /** Told what a function run in this process (its own workers, or this thread) did, step by step (telemetry). */
  onReport?: (report: CallReport) => void;
}

/** Runner runs a named function once. */
export interface Runner {
  run(name: string, req: RunFunctionRequest, deadline: number, opts?: RunOptions): Promise<RunFunctionResponse>;
  close(): void;
}

/** FileRunner is the Runner of a functions file. */
export interface FileRunner extends Runner {
  /** plaintext lists the functions called over gRPC without TLS, with their targets. */
  plaintext(): Array<{ name: string; target: string }>;
}

/**
 * Isolation runs each module function on worker threads of its own, as `xfn
 * serve` does (server/pool.ts), for a long-running host: a call past its
 * deadline is answered DEADLINE_EXCEEDED and a function stuck on the CPU has
 * its worker ended and replaced, so one function never holds the host's
 * thread (reconciles of other XRs, watches, SIGTERM). In process (render,
 * test) a call holds the thread until it returns.
 */
export interface Isolation {
  log: Logger;
}

/** InProcess are the options of functions run in the process's own thread: a watchdog that holds their deadline. */
export interface InProcess {
  /** The command named when the watchdog ends the process (xfn render, xfn test). */
  watchdog: string;
}

/** FunctionTls is how the runner dials Development-runtime functions with mTLS. */
export interface FunctionTls {
  /** Folder with this client's tls.crt and tls.key and the functions' ca.crt (Crossplane's client Secret). */
  certsDir: string;
  /** Each function's certificate is verified as <function name>.<namespace>. Default crossplane-system. */
  namespace?: string;
}

const DEFAULT_FUNCTION_NAMESPACE = "crossplane-system";

type Backend =
  | { kind: "module"; handler: Handler }
  | { kind: "pool"; pool: Pool }
  | { kind: "grpc"; client: FunctionClient; target: string; serverName?: string };

/** The script pool workers run: the compiled worker entry (from src/, this repository's tests, the one npm run build wrote). */
function workerEntry(): URL {
  const here = fileURLToPath(import.meta.url);
  return extname(here) === ".ts"
    ? pathToFileURL(resolve(dirname(here), "../../lib/server/worker-entry.js"))
    : new URL("../server/worker-entry.js", import.meta.url);
}

/** isolated starts a pool of two workers for the function module at path, and waits for the first to load the function. */
async function isolated(name: string, path: string, log: Logger): Promise<Pool> {
  const pool = openPool(
    {
      // Two: while one is held by a call stuck on the CPU (until its deadline, and again on each retry), the other serves.
      workers: 2,
      // Both from the start: the host's calls overlap as soon as it reconciles two XRs.
      warmWorkers: 2,
      script: workerEntry(),
      workerData: { xfnWorker: true, module: path, label: name, debug: false, maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES },
      maxConcurrency: DEFAULT_MAX_CONCURRENCY,
      maxQueue: DEFAULT_MAX_QUEUE,
      // Each call's own deadline bounds it (the host's, at most 30 s a call).
      timeoutMs: 2 ** 31 - 1,
    },
    log.child({ function: name }),
  );
  await pool.firstReady;
  return pool;
}

const annotations = (o: JsonObject): Record<string, unknown> =>
  (((o["metadata"] ?? {}) as JsonObject)["annotations"] ?? {}) as Record<string, unknown>;

/** createRunner prepares every Function in the functions file. */
export async function createRunner(
  functions: Doc[],
  functionsPath: string,
  now: () => Date,
  tls?: FunctionTls,
  isolation?: Isolation | InProcess,
): Promise<FileRunner> {
  const isolate = isolation && "log" in isolation ? isolation : undefined;
  const watchdog = isolation && "watchdog" in isolation ? { command: isolation.watchdog, dog: sharedWatchdog() } : undefined;
  const backends = new Map<string, Backend>();
  const quiet = createLogger({ destination: { write: () => {} } });
  for (const doc of functions) {
    const { kind, name } = identity(doc, "a Function");
    if (kind !== "Function") throw new InputError(`${doc.source}: expected a pkg.crossplane.io Function, got kind ${kind}`);
    const a = annotations(doc.obj);
    const mod = a[ANNOTATION_MODULE];
    if (typeof mod === "string" && mod !== "") {
      const base = dirname(doc.source.replace(/ \(document \d+\)$/, ""));
      const path = isAbsolute(mod) ? mod : resolve(base, mod);
      try {
        if (isolate) backends.set(name, { kind: "pool", pool: await isolated(name, resolveModule(path), isolate.log) });
        else
          backends.set(name, {
            kind: "module",
            handler: createHandler(
              await loadFunction(path),
              { maxConcurrency: 1, maxQueue: 1, maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES, now },
              quiet,
            ),
          });
      } catch (err) {
        for (const b of backends.values()) if (b.kind === "pool") void b.pool.close();
        throw new InputError(`Function ${JSON.stringify(name)} (${doc.source}): ${messageOf(err)}`);
      }
    } else if (a[ANNOTATION_RUNTIME] === "Development") {
      const target =
        typeof a[ANNOTATION_TARGET] === "string" && a[ANNOTATION_TARGET] !== ""
          ? (a[ANNOTATION_TARGET] as string)
          : DEFAULT_DEVELOPMENT_TARGET;
      if (tls) {
        const serverName = `${name}.${tls.namespace ?? DEFAULT_FUNCTION_NAMESPACE}`;
        backends.set(name, { kind: "grpc", client: dial(target, { tlsCertsDir: tls.certsDir, serverName }), target, serverName });
      } else {
        backends.set(name, { kind: "grpc", client: dial(target, { insecure: true }), target });
      }
    } else {
      throw new InputError(
        `Function ${JSON.stringify(name)} (${doc.source}) has no runtime xfn can use: ` +
          `annotate it with ${ANNOTATION_MODULE}: <path to a function module> to run it in-process, ` +
          `or ${ANNOTATION_RUNTIME}: Development to call one already serving at ${DEFAULT_DEVELOPMENT_TARGET} ` +
          "(xfn runs no container engine)",
      );
    }
  }

  return {
    async run(name, req, deadline, opts) {
      const b = backends.get(name);
      if (!b) throw new InputError(`unknown Function ${JSON.stringify(name)}: it is not in ${functionsPath}`);
      if (b.kind === "grpc") {
        try {
          return await b.client.run(req, {
            timeoutMs: Math.max(1, deadline - Date.now()),
            ...(opts?.metadata ? { metadata: opts.metadata } : {}),
          });
        } catch (err) {
          const e = err as ServiceError;
          const hint =
            e.code !== Code.UNAVAILABLE
              ? ""
              : b.serverName
                ? ` (is it running at ${b.target}, serving mTLS with a certificate for ${b.serverName} from the CA in the client's ca.crt?)`
                : ` (is it running, with --insecure, at ${b.target}?)`;
          throw new Error(`cannot run Function ${JSON.stringify(name)}: ${e.message}${hint}`);
        }
      }
      const bytes = encodeRequest(req);
      let res;
      if (b.kind === "pool")
        res = await b.pool.handle(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), {
          version: "v1",
          deadline,
          cancel: new Cancel(),
          ...(opts?.onReport ? { trace: true } : {}),
        });
      else {
        watchdog?.dog.arm(
          deadline,
          `${watchdog.command}: Function ${JSON.stringify(name)} kept the process's thread busy past its deadline (--timeout), ` +
            "on the CPU in a loop or a regular expression; stopped",
        );
        try {
          res = await b.handler.handle(bytes, { version: "v1", deadline, ...(opts?.onReport ? { trace: true } : {}) });
        } finally {
          watchdog?.dog.disarm();
        }
      }
      if ("ok" in res) {
        if (res.report) opts?.onReport?.(res.report);
        return decodeResponse(res.ok);
      }
      throw new Error(`cannot run Function ${JSON.stringify(name)}: ${Code[res.code]}: ${res.details}`);
    },
    plaintext: () => [...backends].flatMap(([name, b]) => (b.kind === "grpc" && !b.serverName ? [{ name, target: b.target }] : [])),
    close() {
      for (const b of backends.values()) {
        if (b.kind === "grpc") b.client.close();
        if (b.kind === "pool") void b.pool.close();
      }
    },
  };
}
