// Recording served requests as replayable test cases (`xfn serve --record-dir`).
//
// Each request and its response become a case folder that `xfn test` replays
// unchanged: request.yaml, expected.yaml (protobuf JSON form) and case.yaml
// (which function, and the instant it saw). Credentials, connection details and
// the data of Secrets are replaced by "[REDACTED]" in both; tags and TTLs are
// kept.
import { existsSync, readFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join, relative, resolve, sep } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import { stringify } from "yaml";
import {
  RunFunctionRequestSchema,
  RunFunctionResponseSchema,
  type RunFunctionRequest,
  type RunFunctionResponse,
  type State,
} from "../gen/fn/v1/run_function_pb.js";
import { copyMessage, messageToJson } from "../wire/protojson.js";

/** REDACTED_TEXT replaces every secret string value; REDACTED, every secret byte value. */
const REDACTED_TEXT = "[REDACTED]";
export const REDACTED = new TextEncoder().encode(REDACTED_TEXT);

const redactMap = (m: Record<string, Uint8Array>) => {
  for (const k of Object.keys(m)) m[k] = REDACTED;
};

/**
 * redactSecret replaces the values of a Secret's data and stringData (a
 * function may write either) with "[REDACTED]", keeping the keys, as
 * Crossplane's pipeline inspector does.
 */
function redactSecret(resource: JsonObject | undefined): void {
  if (!resource || resource["apiVersion"] !== "v1" || resource["kind"] !== "Secret") return;
  for (const field of ["data", "stringData"]) {
    const d = resource[field];
    if (d && typeof d === "object" && !Array.isArray(d)) for (const k of Object.keys(d)) (d as JsonObject)[k] = REDACTED_TEXT;
  }
}

function redactState(s: State | undefined): void {
  if (!s) return;
  if (s.composite) redactMap(s.composite.connectionDetails);
  for (const r of Object.values(s.resources)) {
    redactMap(r.connectionDetails);
    redactSecret(r.resource);
  }
}

/** redactRequest returns a copy of req with credentials, connection details and Secrets' data redacted. */
export function redactRequest(req: RunFunctionRequest): RunFunctionRequest {
  const out = copyMessage(req);
  for (const c of Object.values(out.credentials)) if (c.source.case === "credentialData") redactMap(c.source.value.data);
  redactState(out.observed);
  redactState(out.desired);
  for (const rs of [...Object.values(out.requiredResources), ...Object.values(out.extraResources)])
    for (const r of rs.items) {
      redactMap(r.connectionDetails);
      redactSecret(r.resource);
    }
  return out;
}

/** redactResponse returns a copy of rsp with connection details and Secrets' data redacted. */
export function redactResponse(rsp: RunFunctionResponse): RunFunctionResponse {
  const out = copyMessage(rsp);
  redactState(out.desired);
  return out;
}

export const yaml = (v: unknown): string => stringify(v, { lineWidth: 0 });

/** Recorder is the handler hook, and a way to wait for writes still under way. */
export interface Recorder {
  record(req: RunFunctionRequest, rsp: RunFunctionResponse, at: Date): void;
  /** flush resolves once every recording begun so far is on disk (or has failed and been logged). */
  flush(): Promise<void>;
}

/** createRecorder returns a recorder that writes each exchange as a case under dir. */
export function createRecorder(dir: string, moduleFile: string, log: Logger): Recorder {
  let seq = 0;
  const pending = new Set<Promise<void>>();
  const record = (req: RunFunctionRequest, rsp: RunFunctionResponse, at: Date): void => {
    seq++;
    const tag = (req.meta?.tag ?? "").replace(/[^A-Za-z0-9_-]/g, "").slice(0, 12) || "untagged";
    const caseDir = join(dir, `${at.toISOString().replace(/[-:.]/g, "")}-${String(seq).padStart(4, "0")}-${tag}`);
    let files: Record<string, string>;
    try {
      files = {
        "request.yaml": yaml(messageToJson(RunFunctionRequestSchema, redactRequest(req))),
        "expected.yaml": yaml(messageToJson(RunFunctionResponseSchema, redactResponse(rsp))),
        "case.yaml": yaml({ ...functionRef(moduleFile), now: at.toISOString() }),
      };
    } catch (err) {
      // A request too deep for a YAML case file, or bytes that do not decode: logged, never thrown at the call.
      log.error({ dir: caseDir, err: (err as Error).message }, "cannot record test case");
      return;
    }
    // Off the request path: a failed write is logged, never fails the call.
    const write = (async () => {
      await mkdir(caseDir, { recursive: true });
      for (const [name, text] of Object.entries(files)) await writeFile(join(caseDir, name), text);
    })()
      .catch((err: unknown) => log.error({ dir: caseDir, err: (err as Error).message }, "cannot record test case"))
      .finally(() => pending.delete(write));
    pending.add(write);
  };
  return { record, flush: async () => void (await Promise.all([...pending])) };
}

/**
 * functionRef is what a recorded case's case.yaml names its function by. A
 * module inside a project (the nearest folder up from it with a package.json
 * that has a name) is named from the project's root (function: src/index.ts),
 * with the project's name (project: function-buckets) and where it was
 * (projectPath). xfn test looks for that project from the case's folder up,
 * so the case replays once moved anywhere into the project or a clone of it
 * (testdata/cases/...); elsewhere it runs the module at projectPath, if that
 * is still the project; and otherwise fails naming what it needs. A case
 * copied into another project never runs that project's module of the same
 * path. A module in no named project is named by its absolute path.
 */
export function functionRef(moduleFile: string): { function: string; project?: string; projectPath?: string } {
  for (let d = dirname(resolve(moduleFile)); ; d = dirname(d)) {
    const pkg = join(d, "package.json");
    if (existsSync(pkg)) {
      const name = packageName(pkg);
      if (name) return { function: relative(d, resolve(moduleFile)).split(sep).join("/"), project: name, projectPath: d };
      break;
    }
    if (dirname(d) === d) break;
  }
  return { function: resolve(moduleFile) };
}

/** packageName is a package.json's name, or undefined when it has none (or cannot be read). */
export function packageName(file: string): string | undefined {
  try {
    const name = (JSON.parse(readFileSync(file, "utf8")) as { name?: unknown }).name;
    return typeof name === "string" && name !== "" ? name : undefined;
  } catch {
    return undefined;
  }
}
