// Builders for requests used across tests, written in protobuf JSON form as
// Crossplane would send them.
import { fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { RunFunctionRequestSchema, type RunFunctionRequest } from "../../src/gen/fn/v1/run_function_pb.js";

export const xr = (spec: JsonObject = {}, extra: JsonObject = {}): JsonObject => ({
  apiVersion: "example.org/v1",
  kind: "XBucket",
  metadata: { name: "my-xr", uid: "uid-1" },
  spec,
  ...extra,
});

/** request builds a RunFunctionRequest from its protobuf JSON form. */
export function request(json: JsonObject = {}): RunFunctionRequest {
  return fromJson(RunFunctionRequestSchema, { meta: { tag: "tag-1" }, observed: { composite: { resource: xr() } }, ...json } as JsonValue);
}

/** nest is the string "leaf" under `levels` (at least 1) objects, each with the one key "a" (for depth limits). */
export function nest(levels: number): JsonObject {
  let v: JsonValue = "leaf";
  for (let i = 0; i < levels; i++) v = { a: v };
  return v as JsonObject;
}
