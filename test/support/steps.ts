// Helpers for step tests: build requests from compact specs and read results.
import type { JsonObject } from "@bufbuild/protobuf";
import type { RunFunctionResponse } from "../../src/gen/fn/v1/run_function_pb.js";
import { type Severity } from "../../src/gen/fn/v1/run_function_pb.js";
import { runSteps, type Step } from "../../src/pipeline.js";
import { request } from "./requests.js";

export const NOW = new Date("2026-06-01T12:00:00Z");
const ALL = [
  "CAPABILITY_CAPABILITIES",
  "CAPABILITY_REQUIRED_RESOURCES",
  "CAPABILITY_CREDENTIALS",
  "CAPABILITY_CONDITIONS",
  "CAPABILITY_REQUIRED_SCHEMAS",
];

export interface Spec {
  xr?: JsonObject;
  observed?: Record<string, JsonObject>;
  desired?: Record<string, JsonObject>;
  desiredReady?: Record<string, "READY_TRUE" | "READY_FALSE">;
  /** The pipeline's context (xfn host sends steps.HOST_CONTEXT_KEY). */
  context?: JsonObject;
  /** The caller lists every capability, as Crossplane v2.2 and later do (request.advertisesCapabilities). */
  capabilities?: boolean;
}

/** run runs steps over a request built from spec. */
export function run(steps: Step[], spec: Spec, now = NOW): RunFunctionResponse {
  const json: JsonObject = {
    ...(spec.context ? { context: spec.context } : {}),
    ...(spec.capabilities ? { meta: { tag: "tag-1", capabilities: ALL } } : {}),
    observed: {
      composite: { resource: spec.xr ?? { apiVersion: "x/v1", kind: "XNet", metadata: { name: "net" } } },
      resources: Object.fromEntries(Object.entries(spec.observed ?? {}).map(([k, v]) => [k, { resource: v }])),
    },
    desired: {
      resources: Object.fromEntries(
        Object.entries(spec.desired ?? {}).map(([k, v]) => [
          k,
          { resource: v, ...(spec.desiredReady?.[k] ? { ready: spec.desiredReady[k] } : {}) },
        ]),
      ),
    },
  };
  return runSteps(steps, request(json), now);
}

export const messages = (rsp: RunFunctionResponse, severity?: Severity) =>
  rsp.results.filter((r) => severity === undefined || r.severity === severity).map((r) => r.message);

export const annotated = (name: string, annotations: Record<string, string>, extra: JsonObject = {}): JsonObject => ({
  apiVersion: "s3/v1",
  kind: "Bucket",
  metadata: { name, annotations },
  ...extra,
});

export const readyCondition = (status: string, reason = "", message = "") => ({
  status: { conditions: [{ type: "Ready", status, ...(reason ? { reason } : {}), ...(message ? { message } : {}) }] },
});
