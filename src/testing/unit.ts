// Helpers for a function's own unit tests, exported as `testing` from
// xfn-runtime. A test reads a request in protobuf JSON form (the shape of a
// recorded request.yaml), runs the function exactly as the server does
// (request bytes decoded by xfn's codec, a thrown error turned into a Fatal
// result, the response encoded, so a value that is not JSON fails here as it
// would in Crossplane), and compares the response in protobuf JSON form.
import { readFileSync } from "node:fs";
import type { JsonObject } from "@bufbuild/protobuf";
import { parseDoc } from "../engine/docs.js";
import type { RunFunction } from "../function.js";
import {
  RunFunctionRequestSchema,
  RunFunctionResponseSchema,
  type RunFunctionRequest,
  type RunFunctionResponse,
} from "../gen/fn/v1/run_function_pb.js";
import { createHandler, DEFAULT_MAX_RESPONSE_BYTES } from "../server/handler.js";
import { createLogger } from "../server/log.js";
import { decodeResponse, encodeRequest } from "../wire/codec.js";
import { messageFromJson, messageToJson } from "../wire/protojson.js";
import { messageOf } from "../sdk/errors.js";

/**
 * requestFromJson builds a RunFunctionRequest from its protobuf JSON form. It
 * takes any object (typed resources included) and checks it as protobuf-es
 * does, throwing an error that names what does not fit.
 */
export function requestFromJson(json: JsonObject | object): RunFunctionRequest {
  try {
    return messageFromJson(RunFunctionRequestSchema, json);
  } catch (err) {
    throw new Error(`cannot read a RunFunctionRequest: ${messageOf(err)}`, { cause: err });
  }
}

/**
 * parseRequest parses a RunFunctionRequest from YAML or JSON text in its
 * protobuf JSON form (xfn call, xfn test, unit tests); errors name source.
 */
export function parseRequest(text: string, source: string): RunFunctionRequest {
  const doc = parseDoc(text, source);
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    throw new Error(`cannot read ${source}: expected a RunFunctionRequest object`);
  }
  try {
    return messageFromJson(RunFunctionRequestSchema, doc);
  } catch (err) {
    throw new Error(`cannot read ${source} as a RunFunctionRequest: ${messageOf(err)}`, { cause: err });
  }
}

/** readRequest reads a RunFunctionRequest from a YAML or JSON file in protobuf JSON form. */
export function readRequest(file: string): RunFunctionRequest {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new Error(`cannot read ${file}: ${messageOf(err)}`, { cause: err });
  }
  return parseRequest(text, file);
}

/** responseToJson returns a response in protobuf JSON form, as `xfn call` prints it. */
export function responseToJson(rsp: RunFunctionResponse): JsonObject {
  return messageToJson(RunFunctionResponseSchema, rsp) as JsonObject;
}

/** CallOptions tune callFunction. */
export interface CallOptions {
  /** The instant the function sees as now (default: the real clock). */
  now?: Date;
}

let quiet: ReturnType<typeof createLogger> | undefined;

/**
 * callFunction runs fn over req as `xfn serve` would and returns its response.
 * It rejects only where a server would answer with a gRPC error instead of a
 * response (a response over 4 MiB, say), naming the status.
 */
export async function callFunction(fn: RunFunction, req: RunFunctionRequest, opts: CallOptions = {}): Promise<RunFunctionResponse> {
  const at = opts.now;
  // Made on first use: importing xfn-runtime does no work of its own.
  quiet ??= createLogger({ destination: { write: () => {} } });
  const handler = createHandler(
    fn,
    { maxConcurrency: 1, maxQueue: 1, maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES, ...(at ? { now: () => at } : {}) },
    quiet,
  );
  const res = await handler.handle(encodeRequest(req), { version: "v1", deadline: Date.now() + 60_000 });
  if (!("ok" in res)) throw new Error(`the function's call failed with gRPC status ${res.code}: ${res.details}`);
  return decodeResponse(res.ok);
}
