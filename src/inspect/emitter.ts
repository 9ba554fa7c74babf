// Emitting a pipeline's steps to a Pipeline Inspector sidecar, as Crossplane's
// socket inspector does (crossplane internal/xfn/inspected/socket.go at
// 2d040d2d): gRPC over a Unix socket, each step's request before its call and
// its response (or error) after, as protobuf JSON with credentials, connection
// details and Secrets' data redacted, each emit given 100 ms and its failure
// only logged: the pipeline goes on whatever the sidecar does. `xfn host
// --inspector-socket` uses it, so a host run records the cases a cluster would.
import { randomUUID } from "node:crypto";
import { create, toBinary, type MessageShape, type DescMessage } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { Client, credentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import type { Logger } from "pino";
import {
  EmitRequestRequestSchema,
  EmitResponseRequestSchema,
  PipelineInspectorService,
  StepMetaSchema,
  type StepMeta,
} from "../gen/crossplane/pipeline/v1alpha1/pipeline_inspector_pb.js";
import { RunFunctionRequestSchema, RunFunctionResponseSchema } from "../gen/fn/v1/run_function_pb.js";
import type { StepInfo, StepObserver } from "../engine/observer.js";
import { redactRequest, redactResponse } from "../wire/redact.js";
import { messageToJson } from "../wire/protojson.js";
import { messageOf } from "../sdk/errors.js";

/** EMIT_TIMEOUT_MS is how long Crossplane gives each emit. */
export const EMIT_TIMEOUT_MS = 100;

const json = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

/** stepMeta is the StepMeta Crossplane builds for a step (step.BuildMetadata). */
export function stepMeta(step: StepInfo): StepMeta {
  return create(StepMetaSchema, {
    timestamp: timestampNow(),
    traceId: step.traceId,
    spanId: randomUUID(),
    stepIndex: step.stepIndex,
    stepName: step.stepName,
    iteration: 0,
    functionName: step.functionName,
    context: step.composition
      ? {
          case: "compositionMeta",
          value: {
            compositionName: step.composition.name,
            compositeResourceUid: step.composition.xr.uid,
            compositeResourceName: step.composition.xr.name,
            compositeResourceNamespace: step.composition.xr.namespace,
            compositeResourceApiVersion: step.composition.xr.apiVersion,
            compositeResourceKind: step.composition.xr.kind,
          },
        }
      : step.operation
        ? { case: "operationMeta", value: { operationName: step.operation.name, operationUid: step.operation.uid } }
        : { case: undefined },
  });
}

/** connectInspector dials the sidecar at socket (lazily, as grpc does) and returns the observer that emits to it. */
export function connectInspector(socket: string, log: Logger): StepObserver {
  const client = new Client(`unix:${socket}`, credentials.createInsecure());
  let failures = 0;
  const call = <D extends DescMessage>(method: string, schema: D, msg: MessageShape<D>, what: string) =>
    new Promise<void>((resolve) => {
      client.makeUnaryRequest(
        `/${PipelineInspectorService.typeName}/${method}`,
        (m: MessageShape<D>) => Buffer.from(toBinary(schema, m)),
        (b: Buffer) => b,
        msg,
        new Metadata(),
        { deadline: Date.now() + EMIT_TIMEOUT_MS },
        (err: ServiceError | null) => {
          if (err) {
            failures++;
            // Logged, never raised: the first few, then every hundredth.
            if (failures <= 5 || failures % 100 === 0)
              log.info({ socket, err: err.details || err.message, failures }, `cannot inspect ${what} for function`);
          }
          resolve();
        },
      );
    });
  return {
    async begin(step, req) {
      const meta = stepMeta(step);
      try {
        const request = json(messageToJson(RunFunctionRequestSchema, redactRequest(req)));
        await call("EmitRequest", EmitRequestRequestSchema, create(EmitRequestRequestSchema, { request, meta }), "request");
      } catch (err) {
        log.info({ err: messageOf(err) }, "cannot inspect request for function");
      }
      return async (rsp, err) => {
        try {
          const response = rsp ? json(messageToJson(RunFunctionResponseSchema, redactResponse(rsp))) : new Uint8Array();
          await call(
            "EmitResponse",
            EmitResponseRequestSchema,
            create(EmitResponseRequestSchema, { response, error: err?.message ?? "", meta }),
            "response",
          );
        } catch (e) {
          log.info({ err: messageOf(e) }, "cannot inspect response for function");
        }
      };
    },
    close: () => client.close(),
  };
}
