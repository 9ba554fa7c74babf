// xfn's public API for function authors. The helpers for a function's own unit
// tests are xfn-runtime/testing (src/testing/unit.ts): a function that imports
// this module does not load them, nor their YAML parser, where it is served.
export * as request from "./sdk/request.js";
export * as response from "./sdk/response.js";
export * as fieldpath from "./sdk/fieldpath.js";
export * from "./sdk/object.js";
export type { TypedResource } from "./sdk/response.js";
export { FieldPathError } from "./sdk/fieldpath.js";
export { XfnError, UsageError, EncodingError, InputError } from "./sdk/errors.js";
export { defineFunction, type RunContext, type RunFunction } from "./function.js";
export { pipeline, runSteps, step, freeze, type Step, type StepContext, type StepRecord } from "./pipeline.js";
export * as steps from "./steps/index.js";
export {
  Capability,
  Ready,
  Severity,
  Status,
  Target,
  RunFunctionRequestSchema,
  RunFunctionResponseSchema,
  type Resource,
  type RunFunctionRequest,
  type RunFunctionResponse,
} from "./gen/fn/v1/run_function_pb.js";
export type { JsonObject, JsonValue } from "@bufbuild/protobuf";

// Serving and calling functions from your own code.
export { serve, DEFAULT_ADDRESS, type RunningServer, type ServeOptions } from "./server/server.js";
export { createLogger, type LogOptions } from "./server/log.js";
export { dial, type ClientOptions, type FunctionClient } from "./client/client.js";
