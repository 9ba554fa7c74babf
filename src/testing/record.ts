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
import type { Logger } from "pino";
import { stringify } from "yaml";
import {
  RunFunctionRequestSchema,
  RunFunctionResponseSchema,
  type RunFunctionRequest,
  type RunFunctionResponse,
} from "../gen/fn/v1/run_function_pb.js";
import { messageToJson } from "../wire/protojson.js";
import { redactRequest, redactResponse } from "../wire/redact.js";
import { messageOf } from "../sdk/errors.js";

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
      log.error({ dir: caseDir, err: messageOf(err) }, "cannot record test case");
      return;
    }
    // Off the request path: a failed write is logged, never fails the call.
    const write = (async () => {
      await mkdir(caseDir, { recursive: true });
      for (const [name, text] of Object.entries(files)) await writeFile(join(caseDir, name), text);
    })()
      .catch((err: unknown) => log.error({ dir: caseDir, err: messageOf(err) }, "cannot record test case"))
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
