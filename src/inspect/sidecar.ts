// `xfn inspect`: a Pipeline Inspector sidecar. Crossplane (2.2 and later, with
// --enable-pipeline-inspector) sends it every step's RunFunctionRequest before
// the call and its RunFunctionResponse after, over a Unix socket, and goes on
// whatever it answers within 100 ms (crossplane internal/xfn/inspected at
// 2d040d2d: socket.go, runner.go). This sidecar turns each step into an
// `xfn test` case, and each reconcile into the makings of a pipeline case.
//
// It never slows or fails Crossplane: a call is answered as soon as its bytes
// are queued; parsing, redacting and writing happen after, one at a time. A
// full queue, a payload that does not parse and a write that fails (a full
// disk) are logged and dropped; the answer is always OK.
//
// Layout under the folder (names made safe for a file system):
//   <Kind>.<namespace>.<name>/<time>-<trace>/
//     <NN>-<step>/request.yaml, expected.yaml, case.yaml, inspected.yaml   one step: an `xfn test` case
//     pipeline/xr.yaml, observed.yaml, required.yaml                      the reconcile's inputs
// Operations' steps go under operation.<name>/ the same way.
import { randomUUID } from "node:crypto";
import { lstatSync, rmSync } from "node:fs";
import { lstat, mkdir, realpath, rename, writeFile } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { fromBinary, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Server, ServerCredentials, type sendUnaryData, type ServerUnaryCall, type ServiceDefinition } from "@grpc/grpc-js";
import type { Logger } from "pino";
import {
  EmitRequestRequestSchema,
  EmitResponseRequestSchema,
  PipelineInspectorService,
  type StepMeta,
} from "../gen/crossplane/pipeline/v1alpha1/pipeline_inspector_pb.js";
import {
  RunFunctionRequestSchema,
  RunFunctionResponseSchema,
  type RunFunctionRequest,
  type RunFunctionResponse,
} from "../gen/fn/v1/run_function_pb.js";
import { functionPath, redactRequest, redactResponse, yaml } from "../testing/record.js";
import { messageFromJson, messageToJson } from "../wire/protojson.js";
import { followLines } from "./follow.js";

/** The most bytes a call may carry by default: twice grpc's 4 MiB, as Crossplane's reference sidecar is run with 8 MiB. */
export const DEFAULT_MAX_RECV_BYTES = 8 * 1024 * 1024;
/** How many calls may wait to be written, and how many bytes they may hold. */
export const DEFAULT_QUEUE = 1000;
const QUEUE_BYTES = 256 * 1024 * 1024;
/** How many requests may wait for their response, and for how long. */
const PENDING = 10_000;
const PENDING_MS = 10 * 60_000;

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
  log: Logger;
}

export interface Inspector {
  /** The counts so far: calls answered, steps written, calls dropped (and why). */
  stats(): { received: number; written: number; dropped: Record<string, number> };
  /** flush resolves once every call queued so far is written (or dropped). */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

interface Job {
  kind: "request" | "response";
  bytes: Buffer;
  at: number;
}

interface Pending {
  meta: StepMeta;
  req: RunFunctionRequest;
  at: number;
}

/** rawInspectorService is the service with each call's message as its bytes: parsing is the queue's work, never the call's. */
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

/** safe is a name as a folder may be called: letters, digits, . _ -, at most 63 long, never . or .. */
export function safe(name: string): string {
  const s = name.replace(/[^A-Za-z0-9._-]+/g, "_").slice(0, 63);
  return s === "" || s === "." || s === ".." ? "_" : s;
}

/** startInspector listens on opts.socket and writes what it is sent under opts.dir. */
export async function startInspector(opts: InspectorOptions): Promise<Inspector> {
  const { log } = opts;
  const maxQueue = opts.maxQueue ?? DEFAULT_QUEUE;
  const queue: Job[] = [];
  let queuedBytes = 0;
  let received = 0;
  let written = 0;
  const dropped: Record<string, number> = {};
  const drop = (why: string, fields: Record<string, unknown>) => {
    dropped[why] = (dropped[why] ?? 0) + 1;
    // The first few of each kind are logged; then every hundredth, so a flood does not flood the log too.
    if (dropped[why]! <= 5 || dropped[why]! % 100 === 0)
      log.warn({ ...fields, why, times: dropped[why] }, "pipeline inspector dropped a call");
  };
  const pending = new Map<string, Pending>();
  const traces = new Map<string, string>(); // trace id -> its folder
  await mkdir(opts.dir, { recursive: true });
  const root = await realpath(opts.dir);

  let idle: Promise<void> = Promise.resolve();
  let draining = false;
  const drain = () => {
    if (draining) return;
    draining = true;
    idle = (async () => {
      while (queue.length) {
        const job = queue.shift()!;
        queuedBytes -= job.bytes.length;
        try {
          await handle(job);
        } catch (err) {
          drop("write failed", { err: (err as Error).message });
        }
      }
      draining = false;
    })();
  };

  const answer = (kind: Job["kind"]) => (call: ServerUnaryCall<Buffer, Buffer>, done: sendUnaryData<Buffer>) => {
    received++;
    const bytes = call.request;
    if (queue.length >= maxQueue || queuedBytes + bytes.length > QUEUE_BYTES) drop("queue full", { kind, bytes: bytes.length });
    else {
      queue.push({ kind, bytes, at: Date.now() });
      queuedBytes += bytes.length;
      setImmediate(drain);
    }
    done(null, Buffer.alloc(0));
  };

  async function handle(job: Job): Promise<void> {
    if (job.kind === "request") {
      let meta: StepMeta | undefined;
      let req: RunFunctionRequest;
      try {
        const m = fromBinary(EmitRequestRequestSchema, job.bytes);
        meta = m.meta;
        if (!meta?.spanId || !meta.traceId) throw new Error("no step metadata (span and trace IDs)");
        req = redactRequest(messageFromJson(RunFunctionRequestSchema, parseJson(m.request)));
      } catch (err) {
        return drop("bad request", { err: (err as Error).message, span: meta?.spanId });
      }
      evictOld(job.at);
      pending.set(meta.spanId, { meta, req, at: job.at });
      await writeReconcile(meta, req);
      return;
    }
    let meta: StepMeta | undefined;
    let rsp: RunFunctionResponse | undefined;
    let error = "";
    try {
      const m = fromBinary(EmitResponseRequestSchema, job.bytes);
      meta = m.meta;
      if (!meta?.spanId || !meta.traceId) throw new Error("no step metadata (span and trace IDs)");
      error = m.error;
      if (m.response.length) rsp = redactResponse(messageFromJson(RunFunctionResponseSchema, parseJson(m.response)));
    } catch (err) {
      return drop("bad response", { err: (err as Error).message, span: meta?.spanId });
    }
    const p = pending.get(meta.spanId);
    pending.delete(meta.spanId);
    if (!p) return drop("response without its request", { span: meta.spanId, step: meta.stepName });
    await writeStep(p, rsp, error);
    written++;
    if (opts.follow) for (const line of followLines(p.meta, p.req, rsp, error)) opts.follow(line);
  }

  function evictOld(now: number): void {
    for (const [span, p] of pending) {
      if (pending.size < PENDING && now - p.at < PENDING_MS) break;
      pending.delete(span);
      drop("no response came", { span, step: p.meta.stepName });
    }
  }

  /** traceDir is the reconcile's folder (made on first use): the XR's (or Operation's), then the time and trace ID. */
  async function traceDir(meta: StepMeta): Promise<string> {
    const known = traces.get(meta.traceId);
    if (known) return known;
    const c = meta.context;
    const xr = c.case === "compositionMeta" ? c.value : undefined;
    const owner = xr
      ? [xr.compositeResourceKind || "XR", xr.compositeResourceNamespace || "_", xr.compositeResourceName || "_"].map(safe).join(".")
      : c.case === "operationMeta"
        ? `operation.${safe(c.value.operationName || "_")}`
        : "unknown";
    const when = (meta.timestamp ? timestampDate(meta.timestamp) : new Date()).toISOString().replace(/[-:.]/g, "");
    const dir = join(root, owner, `${when}-${safe(meta.traceId).slice(0, 8)}`);
    if (traces.size >= PENDING) traces.delete(traces.keys().next().value!);
    traces.set(meta.traceId, dir);
    return dir;
  }

  /** writeReconcile writes a reconcile's inputs (the XR, observed and required resources) from its first step's request. */
  async function writeReconcile(meta: StepMeta, req: RunFunctionRequest): Promise<void> {
    const known = traces.has(meta.traceId);
    const dir = join(await traceDir(meta), "pipeline");
    if (known) return;
    const files: Record<string, string> = {};
    const composite = req.observed?.composite?.resource;
    if (composite) files["xr.yaml"] = yaml(composite);
    const observed = Object.values(req.observed?.resources ?? {}).map((r) => r.resource);
    if (observed.length) files["observed.yaml"] = stream(observed);
    const required = [...Object.values(req.requiredResources), ...Object.values(req.extraResources)].flatMap((rs) =>
      rs.items.map((i) => i.resource),
    );
    if (required.length) files["required.yaml"] = stream(required);
    await writeFiles(dir, files);
  }

  /** writeStep writes one step as an `xfn test` case. */
  async function writeStep(p: Pending, rsp: RunFunctionResponse | undefined, error: string): Promise<void> {
    const { meta } = p;
    const iteration = meta.iteration ? `-i${meta.iteration}` : "";
    const dir = join(await traceDir(meta), `${String(meta.stepIndex).padStart(2, "0")}-${safe(meta.stepName)}${iteration}`);
    const module = opts.functions?.get(meta.functionName);
    const when = meta.timestamp ? timestampDate(meta.timestamp).toISOString() : new Date(p.at).toISOString();
    const files: Record<string, string> = {
      "request.yaml": yaml(messageToJson(RunFunctionRequestSchema, p.req)),
      "case.yaml": yaml({ ...(module ? { function: functionPath(dir, module) } : {}), now: when }),
      "inspected.yaml": yaml({
        function: meta.functionName,
        step: meta.stepName,
        stepIndex: meta.stepIndex,
        iteration: meta.iteration,
        traceId: meta.traceId,
        spanId: meta.spanId,
        ...(meta.context.case === "compositionMeta" ? { composition: meta.context.value.compositionName } : {}),
        ...(meta.context.case === "operationMeta" ? { operation: meta.context.value.operationName } : {}),
        ...(error ? { error } : {}),
      }),
    };
    // A failed call has no response to expect: the case keeps its request, and the error says why.
    if (rsp) files["expected.yaml"] = yaml(messageToJson(RunFunctionResponseSchema, rsp));
    await writeFiles(dir, files);
  }

  /**
   * writeFiles writes each file into dir through a temporary name and a rename,
   * so no file is ever half written and a link planted at a file's name is
   * replaced, not followed; a link planted where a folder goes is refused.
   */
  async function writeFiles(dir: string, files: Record<string, string>): Promise<void> {
    // Each folder from the root down is made, or found as a folder: a link there is refused, not followed.
    let at = root;
    for (const part of relative(root, dir).split(sep)) {
      at = join(at, part);
      try {
        await mkdir(at);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
      const st = await lstat(at);
      if (st.isSymbolicLink()) throw new Error(`${at} is a link: it leads outside ${root}`);
      if (!st.isDirectory()) throw new Error(`${at} is not a folder`);
    }
    for (const [name, text] of Object.entries(files)) {
      const tmp = join(at, `.${name}.${randomUUID()}`);
      await writeFile(tmp, text, { flag: "wx", mode: 0o600 });
      await rename(tmp, join(at, name));
    }
  }

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
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix:${opts.socket}`, ServerCredentials.createInsecure(), (err) =>
      err ? reject(new Error(`cannot listen on ${opts.socket}: ${err.message}`)) : resolve(),
    ),
  );
  log.info({ socket: opts.socket, dir: root }, "pipeline inspector listening");

  const flush = async () => {
    while (queue.length || draining) {
      drain();
      await idle;
    }
  };
  return {
    stats: () => ({ received, written, dropped: { ...dropped } }),
    flush,
    async stop() {
      await new Promise<void>((r) => server.tryShutdown(() => r()));
      await flush();
      try {
        rmSync(opts.socket);
      } catch {
        // gone already
      }
    },
  };
}

/** parseJson reads a message's JSON bytes. */
function parseJson(bytes: Uint8Array): JsonValue {
  return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8")) as JsonValue;
}

/** stream is YAML documents, one per resource, as render's files hold them. */
function stream(docs: Array<JsonObject | undefined>): string {
  return docs
    .filter((d): d is JsonObject => d !== undefined)
    .map((d) => `---\n${yaml(d)}`)
    .join("");
}
