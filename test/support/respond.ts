// What a local function module answers a request, as protobuf JSON: run through
// the same in-process runner render and the host use (engine/runner.ts), for
// tests that need a function's real response to a request.
import type { JsonObject } from "@bufbuild/protobuf";
import { createRunner } from "../../src/engine/runner.js";
import { RunFunctionRequestSchema, RunFunctionResponseSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { messageFromJson, messageToJson } from "../../src/wire/protojson.js";

/** respond runs the module at path (named name) on req and answers its response; now is the clock it sees. */
export async function respond(path: string, req: JsonObject, name = "function", now = () => new Date()): Promise<JsonObject> {
  const fn = { apiVersion: "pkg.crossplane.io/v1", kind: "Function", metadata: { name, annotations: { "render.xfn.dev/module": path } } };
  const runner = await createRunner([{ obj: fn, source: "test" }], path, now);
  try {
    const rsp = await runner.run(name, messageFromJson(RunFunctionRequestSchema, req), Date.now() + 30_000);
    return messageToJson(RunFunctionResponseSchema, rsp) as JsonObject;
  } finally {
    runner.close();
  }
}
