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
import { dirname, isAbsolute, resolve } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { status as Code, type ServiceError } from "@grpc/grpc-js";
import { dial, type FunctionClient } from "../client/client.js";
import { loadFunction } from "../module/load.js";
import { decodeResponse, encodeRequest } from "../wire/codec.js";
import type { RunFunctionRequest, RunFunctionResponse } from "../gen/fn/v1/run_function_pb.js";
import { createHandler, DEFAULT_MAX_RESPONSE_BYTES, type Handler } from "../server/handler.js";
import { createLogger } from "../server/log.js";
import { identity, InputError, type Doc } from "./docs.js";
import { messageOf } from "../sdk/errors.js";

export const ANNOTATION_MODULE = "render.xfn.dev/module";
export const ANNOTATION_RUNTIME = "render.crossplane.io/runtime";
export const ANNOTATION_TARGET = "render.crossplane.io/runtime-development-target";
export const DEFAULT_DEVELOPMENT_TARGET = "localhost:9443";

/** Runner runs a named function once. */
export interface Runner {
  run(name: string, req: RunFunctionRequest, deadline: number): Promise<RunFunctionResponse>;
  close(): void;
}

/** FileRunner is the Runner of a functions file. */
export interface FileRunner extends Runner {
  /** plaintext lists the functions called over gRPC without TLS, with their targets. */
  plaintext(): Array<{ name: string; target: string }>;
}

/** FunctionTls is how the runner dials Development-runtime functions with mTLS. */
export interface FunctionTls {
  /** Folder with this client's tls.crt and tls.key and the functions' ca.crt (Crossplane's client Secret). */
  certsDir: string;
  /** Each function's certificate is verified as <function name>.<namespace>. Default crossplane-system. */
  namespace?: string;
}

const DEFAULT_FUNCTION_NAMESPACE = "crossplane-system";

type Backend = { kind: "module"; handler: Handler } | { kind: "grpc"; client: FunctionClient; target: string; serverName?: string };

const annotations = (o: JsonObject): Record<string, unknown> =>
  (((o["metadata"] ?? {}) as JsonObject)["annotations"] ?? {}) as Record<string, unknown>;

/** createRunner prepares every Function in the functions file. */
export async function createRunner(functions: Doc[], functionsPath: string, now: () => Date, tls?: FunctionTls): Promise<FileRunner> {
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
      let fn;
      try {
        fn = await loadFunction(path);
      } catch (err) {
        throw new InputError(`Function ${JSON.stringify(name)} (${doc.source}): ${messageOf(err)}`);
      }
      backends.set(name, {
        kind: "module",
        handler: createHandler(fn, { maxConcurrency: 1, maxQueue: 1, maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES, now }, quiet),
      });
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
    async run(name, req, deadline) {
      const b = backends.get(name);
      if (!b) throw new InputError(`unknown Function ${JSON.stringify(name)}: it is not in ${functionsPath}`);
      if (b.kind === "grpc") {
        try {
          return await b.client.run(req, { timeoutMs: Math.max(1, deadline - Date.now()) });
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
      const res = await b.handler.handle(encodeRequest(req), { version: "v1", deadline });
      if ("ok" in res) return decodeResponse(res.ok);
      throw new Error(`cannot run Function ${JSON.stringify(name)}: ${Code[res.code]}: ${res.details}`);
    },
    plaintext: () => [...backends].flatMap(([name, b]) => (b.kind === "grpc" && !b.serverName ? [{ name, target: b.target }] : [])),
    close() {
      for (const b of backends.values()) if (b.kind === "grpc") b.client.close();
    },
  };
}
