// `xfn inspect`: a Pipeline Inspector sidecar. Crossplane (2.2 and later, with
// --enable-pipeline-inspector) sends it every step's RunFunctionRequest before
// the call and its RunFunctionResponse after, over a Unix socket, and goes on
// whatever it answers within 100 ms (crossplane internal/xfn/inspected at
// 2d040d2d: socket.go, runner.go). This sidecar turns each step into an
// `xfn test` case, and each reconcile into the makings of a pipeline case.
//
// It never slows or fails Crossplane: this thread only answers, each call as
// soon as its bytes are handed on; parsing, redacting and writing happen in a
// thread of their own (writer.ts), one call at a time. A full queue, a
// payload that does not parse and a write that fails (a full disk) are logged
// and dropped; the answer is always OK.
//
// Layout under the folder (names made safe for a file system):
//   <Kind>.<namespace>.<name>/<time>-<trace>/
//     <NN>-<step>/request.yaml, expected.yaml, case.yaml, inspected.yaml   one step: an `xfn test` case
//     pipeline/xr.yaml, observed.yaml, required.yaml                      the reconcile's inputs
// Operations' steps go under operation.<name>/ the same way.
import { otlpEndpoint, tracingWanted } from "../telemetry/otel.js";
import { chmodSync, lstatSync, rmSync } from "node:fs";
import { mkdir, realpath } from "node:fs/promises";
import { extname } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { Server, ServerCredentials, type sendUnaryData, type ServerUnaryCall, type ServiceDefinition } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { PipelineInspectorService } from "../gen/crossplane/pipeline/v1alpha1/pipeline_inspector_pb.js";
import { collectGarbage } from "../gc.js";
import { LARGE_CALL_BYTES, type Job, type Outcome } from "./writer.js";
import { messageOf } from "../sdk/errors.js";

/** The most bytes a call may carry by default, as Crossplane's reference sidecar is run with (8 MiB). */
export const DEFAULT_MAX_RECV_BYTES = 8 * 1024 * 1024;
/** How many calls may wait to be written by default, and how many bytes they may hold. */
export const DEFAULT_QUEUE = 1000;
/**
 * WRITER_HEAP_MB bounds the writer thread's heap: a call of 8 MiB (the largest
 * taken) parses, redacts and writes within it, and V8 collects before the
 * process grows past the sidecar's limit (it let the heap grow lazily to
 * several times what was live).
 */
const WRITER_HEAP_MB = 96;
// With the writer's own bound on requests waiting for their responses (writer.ts, PENDING_BYTES), what the
// sidecar holds stays within the 256 MiB its documented limit gives it.
const QUEUE_BYTES = 32 * 1024 * 1024;

// Run from src/ (this repository's tests) the worker script is TypeScript.
const WRITER = new URL(`./writer-worker${extname(fileURLToPath(import.meta.url))}`, import.meta.url);

export interface InspectorOptions {
  /** The Unix socket to listen on. */
  socket: string;
  /** The folder cases are written under. */
  dir: string;
  /** Functions by name, as local modules: a step's case names its module, so `xfn test` replays it. */
  functions?: Map<string, string>;
  /** Told a few lines per step: what changed in desired state, results and conditions (--follow). */
  follow?: (line: string) => void;
  maxRecvBytes?: number;
  maxQueue?: number;
  /** The script the writer thread runs: by default writer-worker beside this module; a bundle's own URL in inspect.mjs. */
  writerScript?: URL;
  log: Logger;
}

export interface Inspector {
  /** The counts so far: calls answered, steps written, calls dropped (and why). */
  stats(): { received: number; written: number; dropped: Record<string, number> };
  /** flush resolves once every call handed on so far is written (or dropped). */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

/** rawInspectorService is the service with each call's message as its bytes: parsing is the writer's work, never the call's. */
function rawInspectorService(): ServiceDefinition {
  const method = (name: string) => ({
    path: `/${PipelineInspectorService.typeName}/${name}`,
    requestStream: false,
    responseStream: false,
    requestSerialize: (b: Buffer) => b,
    requestDeserialize: (b: Buffer) => b,
    responseSerialize: () => Buffer.alloc(0), // both answers are empty messages
    responseDeserialize: (b: Buffer) => b,
  });
  return { EmitRequest: method("EmitRequest"), EmitResponse: method("EmitResponse") };
}

/** typeScriptWorker starts the writer from src/ (this repository's tests): the thread registers tsx, then loads it. */
function typeScriptWorker(script: URL, workerData: unknown): Worker {
  const tsx = JSON.stringify(import.meta.resolve("tsx/esm/api"));
  return new Worker(`import(${tsx}).then((t) => (t.register(), import(${JSON.stringify(script.href)})));`, {
    eval: true,
    workerData,
    resourceLimits: { maxOldGenerationSizeMb: WRITER_HEAP_MB },
  });
}

/**
 * openToAll lets every user connect to socket. Crossplane runs as a user of its
 * own (65532 in its chart) and a sidecar often as another; connecting to a Unix
 * socket takes write permission on it, which the usual umask gives only its
 * owner. The socket's folder (the pod's shared emptyDir) bounds who can reach it.
 */
function openToAll(socket: string, log: Logger): void {
  try {
    chmodSync(socket, 0o666);
  } catch (err) {
    log.warn({ socket, err: messageOf(err) }, "cannot open the socket to other users; Crossplane must run as this user");
  }
}

/** startInspector listens on opts.socket and writes what it is sent under opts.dir. */
export async function startInspector(opts: InspectorOptions): Promise<Inspector> {
  const { log } = opts;
  const maxQueue = opts.maxQueue ?? DEFAULT_QUEUE;
  let received = 0;
  let written = 0;
  const { dropped, drop } = dropCounter(log);
  await mkdir(opts.dir, { recursive: true });
  const root = await realpath(opts.dir);

  // Calls handed to the writer and not yet done with, and who waits for there to be none.
  let inFlight = 0;
  let inFlightBytes = 0;
  const sizes: number[] = [];
  let idle: Array<() => void> = [];
  const settled = () => {
    if (inFlight > 0) return;
    for (const r of idle) r();
    idle = [];
  };
  let writer: Worker;
  const startWriter = () => {
    const workerData = { root, functions: [...(opts.functions ?? new Map())], follow: opts.follow !== undefined };
    const script = opts.writerScript ?? WRITER;
    writer = script.pathname.endsWith(".ts")
      ? typeScriptWorker(script, workerData)
      : new Worker(script, { workerData, resourceLimits: { maxOldGenerationSizeMb: WRITER_HEAP_MB } });
    writer.on("message", (o: Outcome | { ended: true }) => {
      if ("ended" in o) return; // the answer to stop's "end"
      inFlight--;
      inFlightBytes -= sizes.shift() ?? 0;
      if (o.written) {
        written++;
        for (const line of o.lines) opts.follow?.(line);
      } else if (o.drop) drop(o.drop.why, o.drop.fields);
      settled();
    });
    // A writer that dies loses what it held; another takes the calls that come next.
    writer.on("error", (err) => log.error({ err: err.message }, "pipeline inspector's writer failed; starting another"));
    writer.on("exit", (code) => {
      if (stopping) return;
      if (inFlight > 0) drop("writer failed", { lost: inFlight, code });
      inFlight = 0;
      inFlightBytes = 0;
      sizes.length = 0;
      settled();
      startWriter();
    });
  };
  let stopping = false;
  startWriter();

  const answer = (kind: Job["kind"]) => (call: ServerUnaryCall<Buffer, Buffer>, done: sendUnaryData<Buffer>) => {
    received++;
    const bytes = call.request;
    if (inFlight >= maxQueue || inFlightBytes + bytes.length > QUEUE_BYTES) drop("queue full", { kind, bytes: bytes.length });
    else {
      // Handed over whole: grpc's buffer itself when the message is all of it, else a copy of its own
      // (a small one may share its memory with others). No copy of a large call lingers here for the collector.
      const own =
        bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
          ? new Uint8Array(bytes.buffer as ArrayBuffer, 0, bytes.byteLength)
          : new Uint8Array(bytes);
      inFlight++;
      inFlightBytes += own.length;
      sizes.push(own.length);
      writer.postMessage({ kind, bytes: own, at: Date.now() } satisfies Job, [own.buffer]);
    }
    done(null, Buffer.alloc(0));
    // grpc's buffers of a large call are garbage now: given back once the answer is out, not when the heap next grows.
    if (bytes.length >= LARGE_CALL_BYTES) setImmediate(collectGarbage);
  };

  // A socket left by a previous run (not a file of another kind) is replaced.
  try {
    if (lstatSync(opts.socket).isSocket()) rmSync(opts.socket);
  } catch {
    // nothing there
  }
  const server = new Server({
    "grpc.max_receive_message_length": opts.maxRecvBytes ?? DEFAULT_MAX_RECV_BYTES,
    "grpc.max_send_message_length": 1024,
  });
  server.addService(rawInspectorService(), { EmitRequest: answer("request"), EmitResponse: answer("response") });
  try {
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix:${opts.socket}`, ServerCredentials.createInsecure(), (err) =>
        err ? reject(new Error(`cannot listen on ${opts.socket}: ${err.message}`)) : resolve(),
      ),
    );
  } catch (err) {
    stopping = true;
    await writer!.terminate();
    throw err;
  }
  openToAll(opts.socket, log);
  log.info({ socket: opts.socket, dir: root }, "pipeline inspector listening");
  sayTraces(log);

  const flush = () => new Promise<void>((resolve) => (inFlight === 0 ? resolve() : idle.push(resolve)));
  return {
    stats: () => ({ received, written, dropped: { ...dropped } }),
    flush,
    async stop() {
      await new Promise<void>((r) => server.tryShutdown(() => r()));
      await flush();
      stopping = true;
      await endWriter(writer);
      try {
        rmSync(opts.socket);
      } catch {
        // gone already
      }
    },
  };
}

/** endWriter has the writer export its last spans (traces), then ends it; one that does not answer in 5 s is ended anyway. */
async function endWriter(writer: Worker): Promise<void> {
  await new Promise<void>((r) => {
    const t = setTimeout(r, 5_000);
    writer.on("message", (o: object) => "ended" in o && (clearTimeout(t), r()));
    writer.postMessage({ kind: "end" });
  });
  await writer.terminate();
}

/** sayTraces logs where the writer thread exports each step as a span, when the OTEL_ variables ask it to (spans.ts). */
function sayTraces(log: Logger): void {
  const traces = tracingWanted(process.env);
  if (traces) log.info({ protocol: traces, endpoint: otlpEndpoint(process.env) }, "exporting each step as a span over OTLP");
}

/** dropCounter counts the calls the sidecar drops, by why, and logs the first few of each kind, then every hundredth. */
function dropCounter(log: Logger) {
  const dropped: Record<string, number> = {};
  const drop = (why: string, fields: Record<string, unknown>) => {
    dropped[why] = (dropped[why] ?? 0) + 1;
    // So that a flood does not flood the log too.
    if (dropped[why]! <= 5 || dropped[why]! % 100 === 0)
      log.warn({ ...fields, why, times: dropped[why] }, "pipeline inspector dropped a call");
  };
  return { dropped, drop };
}
