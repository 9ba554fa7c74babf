// The spans of `xfn serve`: one per RunFunction call it answers (a server
// span, the child of the caller's W3C traceparent when the call carries one),
// and one per step of a pipeline inside it, made from the timings the worker
// that ran the function reports (CallReport): the OpenTelemetry SDK runs in
// the server's thread only.
import type * as SdkModule from "./sdk.js";
import type { Metadata } from "@grpc/grpc-js";
import type { Attributes, Span } from "@opentelemetry/api";
import type { CallReport, HandlerResult, StepTiming } from "../server/call.js";
import { Code } from "../server/codes.js";
import type { Tracing } from "./otel.js";

/** CallTracer starts a call's span when its request is in; the span ends with the answer. */
export interface CallTracer {
  start(metadata: Metadata, version: "v1" | "v1beta1", requestBytes: number): { end(res: HandlerResult): void };
}

/** The service and method as the RPC semantic conventions name them. */
const CODE_NAMES: Record<number, string> = Object.fromEntries(Object.entries(Code).map(([k, v]) => [v, k]));

const SERVICE = { v1: "apiextensions.fn.proto.v1.FunctionRunnerService", v1beta1: "apiextensions.fn.proto.v1beta1.FunctionRunnerService" };

/** callTracer makes the spans of a function server named fnName (its module or package). */
export async function callTracer(t: Tracing, fnName: string): Promise<CallTracer> {
  const api = await import("./sdk.js");
  return {
    start(metadata, version, requestBytes) {
      const first = (k: string) => {
        const v = metadata.get(k)[0];
        return typeof v === "string" ? v : undefined;
      };
      const parent = t.parentOf(first);
      const started = Date.now();
      const span = t.tracer.startSpan(
        `${SERVICE[version]}/RunFunction`,
        {
          kind: api.SpanKind.SERVER,
          startTime: started,
          attributes: {
            "rpc.system": "grpc",
            "rpc.service": SERVICE[version],
            "rpc.method": "RunFunction",
            "xfn.function": fnName,
            "xfn.request.bytes": requestBytes,
          },
        },
        parent,
      );
      return {
        end(res) {
          if ("ok" in res) {
            span.setAttribute("rpc.grpc.status_code", 0);
            if (res.report) describe(span, res.report);
            stepSpans(t, api, span, res.report?.steps ?? []);
            // A Fatal result is the function's failure, though the call succeeded.
            if (res.report?.severity === "Fatal") span.setStatus({ code: api.SpanStatusCode.ERROR, message: "a Fatal result" });
          } else {
            span.setAttribute("rpc.grpc.status_code", res.code);
            span.setStatus({ code: api.SpanStatusCode.ERROR, message: `${CODE_NAMES[res.code] ?? res.code}: ${res.details}` });
          }
          span.end();
        },
      };
    },
  };
}

type Sdk = typeof SdkModule;

/** stepSpans makes a child of span for each pipeline step a report timed. */
export function stepSpans(t: Tracing, api: Sdk, span: Span, steps: StepTiming[]): void {
  for (const s of steps) {
    const step = t.tracer.startSpan(
      `step ${s.name}`,
      {
        kind: api.SpanKind.INTERNAL,
        startTime: s.start,
        attributes: {
          "xfn.step.name": s.name,
          "xfn.step.resources": s.resources,
          "xfn.step.results": s.results,
          ...(s.severity ? { "xfn.step.severity": s.severity } : {}),
        },
      },
      api.trace.setSpan(api.ROOT_CONTEXT, span),
    );
    if (s.failed !== undefined) step.setStatus({ code: api.SpanStatusCode.ERROR, message: s.failed });
    step.end(s.end);
  }
}

/** describe sets what a report says of a call on its span. */
export function describe(span: { setAttributes(a: Attributes): void }, r: CallReport): void {
  span.setAttributes({
    "xfn.tag": r.tag,
    ...(r.xr ? { "crossplane.composite": r.xr } : {}),
    "xfn.response.bytes": r.responseBytes,
    "xfn.resources.observed": r.observed,
    "xfn.resources.desired.in": r.desiredIn,
    "xfn.resources.desired.out": r.desiredOut,
    "xfn.results": r.results,
    ...(r.severity ? { "xfn.result.severity": r.severity } : {}),
  });
}
