// What `xfn inspect` does with each call once it has answered it: parse it,
// redact it, pair a step's request with its response, and write the step as
// an `xfn test` case and the reconcile's inputs (sidecar.ts says where). It
// runs in its own thread (writer-worker.ts), so that parsing a large request
// or waiting on a slow disk never delays an answer.
import type { StepSpans } from "./spans.js";
import { randomUUID } from "node:crypto";
import { lstat, mkdir, rename, rm, writeFile } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { fromBinary, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import {
  EmitRequestRequestSchema,
  EmitResponseRequestSchema,
  type StepMeta,
} from "../gen/crossplane/pipeline/v1alpha1/pipeline_inspector_pb.js";
import {
  RunFunctionRequestSchema,
  RunFunctionResponseSchema,
  type RunFunctionRequest,
  type RunFunctionResponse,
} from "../gen/fn/v1/run_function_pb.js";
import { toYamlStream } from "../render/output.js";
import { functionRef, yaml } from "../testing/record.js";
import { redactRequest, redactResponse } from "../wire/redact.js";
import { decodeRequest, encodeRequest } from "../wire/codec.js";
import { messageFromJson, messageToJson } from "../wire/protojson.js";
import { followLines } from "./follow.js";
import { messageOf } from "../sdk/errors.js";

/**
 * How many requests may wait for their response, how many bytes they may
 * hold, and for how long. Requests whose responses never came (150 of 5 MB)
 * held 1.1 GB, past the 256 MiB the sidecar's documented limit gives it: the
 * oldest are dropped past these bounds. Each waits as its encoded bytes, not
 * parsed.
 */
const PENDING = 10_000;
export const PENDING_BYTES = 32 * 1024 * 1024;
const PENDING_MS = 10 * 60_000;

/** A call at least this large has its garbage collected once it is handled (writer-worker.ts, sidecar.ts). */
export const LARGE_CALL_BYTES = 1024 * 1024;

/** Job is one call as it was received: which method, its message's bytes, and when. */
export interface Job {
  kind: "request" | "response";
  bytes: Uint8Array;
  at: number;
}

/** Outcome is what became of a job: a step written (with what --follow prints), or a drop and why. */
export type Outcome = { written: true; lines: string[] } | { written: false; drop?: { why: string; fields: Record<string, unknown> } };

interface Pending {
  meta: StepMeta;
  /** The redacted request, encoded: parsed again once its response comes. */
  req: Uint8Array;
  at: number;
}

/** WriterIO is how files are written (tests make a disk that fills up). */
export interface WriterIO {
  writeFile: typeof writeFile;
}

/** safe is a name as a folder may be called: letters, digits, . _ -, at most 63 long, never . or .. */
export function safe(name: string): string {
  const s = name.replace(/[^A-Za-z0-9._-]+/g, "_").slice(0, 63);
  return s === "" || s === "." || s === ".." ? "_" : s;
}

/** parseJson reads a message's JSON bytes. */
function parseJson(bytes: Uint8Array): JsonValue {
  return JSON.parse(new TextDecoder().decode(bytes)) as JsonValue;
}

/** stream is YAML documents, one per resource, as render prints them (and reads them back as -o and -e files). */
const stream = (docs: Array<JsonObject | undefined>): string => toYamlStream(docs.filter((d): d is JsonObject => d !== undefined));

/** CaseWriter writes the steps it is given under root (a real path: no links in it). */
export class CaseWriter {
  private readonly pending = new Map<string, Pending>();
  private pendingBytes = 0;
  private readonly traces = new Map<string, string>(); // trace ID -> its folder

  constructor(
    private readonly root: string,
    private readonly functions: Map<string, string>,
    private readonly follow: boolean,
    private readonly io: WriterIO = { writeFile },
    /** Each step as a span, when traces are exported (spans.ts). */
    private readonly spans?: StepSpans,
  ) {}

  /** held is what waits for responses: requests and their bytes. */
  held(): { requests: number; bytes: number } {
    return { requests: this.pending.size, bytes: this.pendingBytes };
  }

  /** handle parses, redacts and writes one job (a request waits for its response). */
  async handle(job: Job): Promise<Outcome> {
    if (job.kind === "request") {
      let meta: StepMeta | undefined;
      let req: RunFunctionRequest;
      try {
        const m = fromBinary(EmitRequestRequestSchema, job.bytes);
        meta = m.meta;
        if (!meta?.spanId || !meta.traceId) throw new Error("no step metadata (span and trace IDs)");
        req = redactRequest(messageFromJson(RunFunctionRequestSchema, parseJson(m.request)));
      } catch (err) {
        return { written: false, drop: { why: "bad request", fields: { err: messageOf(err), span: meta?.spanId } } };
      }
      const encoded = encodeRequest(req);
      const evicted = this.evictOld(job.at, encoded.length);
      this.forget(meta.spanId);
      this.pending.set(meta.spanId, { meta, req: encoded, at: job.at });
      this.pendingBytes += encoded.length;
      await this.writeReconcile(meta, req);
      return { written: false, ...(evicted ? { drop: evicted } : {}) };
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
      return { written: false, drop: { why: "bad response", fields: { err: messageOf(err), span: meta?.spanId } } };
    }
    const p = this.forget(meta.spanId);
    if (!p) return { written: false, drop: { why: "response without its request", fields: { span: meta.spanId, step: meta.stepName } } };
    const req = decodeRequest(p.req);
    await this.writeStep(p.meta, req, rsp, error, p.at, job.at);
    try {
      this.spans?.(p.meta, req, rsp, error, p.at, job.at);
    } catch {
      // A span that cannot be made never costs the case.
    }
    return { written: true, lines: this.follow ? followLines(p.meta, req, rsp, error) : [] };
  }

  /** forget takes a request out of those waiting, and returns it. */
  private forget(span: string): Pending | undefined {
    const p = this.pending.get(span);
    if (!p) return undefined;
    this.pending.delete(span);
    this.pendingBytes -= p.req.length;
    return p;
  }

  /** evictOld forgets the oldest requests past the bounds, with room for incoming bytes more, telling of one (the rest are as old). */
  private evictOld(now: number, incoming: number): { why: string; fields: Record<string, unknown> } | undefined {
    let told: { why: string; fields: Record<string, unknown> } | undefined;
    let forgotten = 0;
    for (const [span, p] of this.pending) {
      if (this.pending.size < PENDING && now - p.at < PENDING_MS && this.pendingBytes + incoming <= PENDING_BYTES) break;
      this.forget(span);
      forgotten++;
      told = { why: "no response came", fields: { span, step: p.meta.stepName, forgotten, heldBytes: this.pendingBytes } };
    }
    return told;
  }

  /** traceDir is the reconcile's folder: the XR's (or Operation's), then the time and trace ID. */
  private traceDir(meta: StepMeta): string {
    const known = this.traces.get(meta.traceId);
    if (known) return known;
    const c = meta.context;
    const xr = c.case === "compositionMeta" ? c.value : undefined;
    const owner = xr
      ? [xr.compositeResourceKind || "XR", xr.compositeResourceNamespace || "_", xr.compositeResourceName || "_"].map(safe).join(".")
      : c.case === "operationMeta"
        ? `operation.${safe(c.value.operationName || "_")}`
        : "unknown";
    const when = (meta.timestamp ? timestampDate(meta.timestamp) : new Date()).toISOString().replace(/[-:.]/g, "");
    const dir = join(this.root, owner, `${when}-${safe(meta.traceId).slice(0, 8)}`);
    if (this.traces.size >= PENDING) this.traces.delete(this.traces.keys().next().value!);
    this.traces.set(meta.traceId, dir);
    return dir;
  }

  /** writeReconcile writes a reconcile's inputs (the XR, observed and required resources) from its first step's request. */
  private async writeReconcile(meta: StepMeta, req: RunFunctionRequest): Promise<void> {
    if (this.traces.has(meta.traceId)) return;
    const dir = join(this.traceDir(meta), "pipeline");
    const files: Record<string, string> = {};
    const composite = req.observed?.composite?.resource;
    if (composite) files["xr.yaml"] = yaml(composite);
    const observed = Object.values(req.observed?.resources ?? {}).map((r) => r.resource);
    if (observed.length) files["observed.yaml"] = stream(observed);
    const required = [...Object.values(req.requiredResources), ...Object.values(req.extraResources)].flatMap((rs) =>
      rs.items.map((i) => i.resource),
    );
    if (required.length) files["required.yaml"] = stream(required);
    await this.writeFiles(dir, files);
  }

  /** writeStep writes one step as an `xfn test` case. */
  private async writeStep(
    meta: StepMeta,
    req: RunFunctionRequest,
    rsp: RunFunctionResponse | undefined,
    error: string,
    at: number,
    answeredAt: number,
  ): Promise<void> {
    const iteration = meta.iteration ? `-i${meta.iteration}` : "";
    const dir = join(this.traceDir(meta), `${String(meta.stepIndex).padStart(2, "0")}-${safe(meta.stepName)}${iteration}`);
    const module = this.functions.get(meta.functionName);
    const when = meta.timestamp ? timestampDate(meta.timestamp).toISOString() : new Date(at).toISOString();
    const files: Record<string, string> = {
      "request.yaml": yaml(messageToJson(RunFunctionRequestSchema, req)),
      // The function read its clock after now and before until (when its response came): xfn test matches a time it
      // wrote in that window with the replay's (cases.ts clockWindow).
      "case.yaml": yaml({
        ...(module ? functionRef(module) : {}),
        now: when,
        ...(rsp && answeredAt >= Date.parse(when) ? { until: new Date(answeredAt).toISOString() } : {}),
      }),
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
    await this.writeFiles(dir, files);
  }

  /**
   * writeFiles writes each file into dir through a temporary name and a rename,
   * so no file is ever half written and a link planted at a file's name is
   * replaced, not followed; a link planted where a folder goes is refused.
   */
  private async writeFiles(dir: string, files: Record<string, string>): Promise<void> {
    // Each folder from the root down is made, or found as a folder: a link there is refused, not followed.
    let at = this.root;
    for (const part of relative(this.root, dir).split(sep)) {
      at = join(at, part);
      try {
        await mkdir(at);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
      const st = await lstat(at);
      if (st.isSymbolicLink()) throw new Error(`${at} is a link: it leads outside ${this.root}`);
      if (!st.isDirectory()) throw new Error(`${at} is not a folder`);
    }
    for (const [name, text] of Object.entries(files)) {
      const tmp = join(at, `.${name}.${randomUUID()}`);
      try {
        await this.io.writeFile(tmp, text, { flag: "wx", mode: 0o600 });
        await rename(tmp, join(at, name));
      } catch (err) {
        // A full disk leaves the temporary file empty or cut short: it goes, and the write fails whole.
        await rm(tmp, { force: true }).catch(() => {});
        throw err;
      }
    }
  }
}
