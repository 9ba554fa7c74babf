// xfn inspect's spans: one per pipeline step Crossplane ran, exported over
// OTLP when the OTEL_ variables ask for them, carrying Crossplane's own IDs:
// the Pipeline Inspector's trace_id (a UUID per reconcile, shared by its
// steps) is the span's trace ID, its 32 hex digits, and its span_id (a UUID
// per call) gives the span's ID, its first 16. So the steps of one reconcile
// are one trace, and a span found in a tracing backend names the same call
// `xfn inspect --follow` and its cases do.
import { randomBytes } from "node:crypto";
import type { IdGenerator } from "@opentelemetry/sdk-trace-base";
import type { Logger } from "pino";
import type { StepMeta } from "../gen/crossplane/pipeline/v1alpha1/pipeline_inspector_pb.js";
import type { RunFunctionRequest, RunFunctionResponse } from "../gen/fn/v1/run_function_pb.js";
import { worstSeverity } from "../pipeline.js";
import { startTracing } from "../telemetry/otel.js";

/** StepSpans records one step as a span; it never throws. */
export type StepSpans = (
  meta: StepMeta,
  req: RunFunctionRequest,
  rsp: RunFunctionResponse | undefined,
  error: string,
  at: number,
  doneAt: number,
) => void;

/** hexOf is a UUID's 32 hex digits, or undefined for anything else. */
export function hexOf(uuid: string): string | undefined {
  const h = uuid.replace(/-/g, "").toLowerCase();
  return /^[0-9a-f]{32}$/.test(h) && !/^0+$/.test(h) ? h : undefined;
}

/** Crossplane's IDs for the span about to start; random ones for anything else. */
class CrossplaneIds implements IdGenerator {
  trace: string | undefined;
  span: string | undefined;
  generateTraceId(): string {
    const t = this.trace ?? randomBytes(16).toString("hex");
    this.trace = undefined;
    return t;
  }
  generateSpanId(): string {
    const s = this.span ?? randomBytes(8).toString("hex");
    this.span = undefined;
    return s;
  }
}

/** startStepSpans starts exporting when the OTEL_ variables ask for it; undefined otherwise. */
export async function startStepSpans(log: Logger): Promise<{ record: StepSpans; shutdown(): Promise<void> } | undefined> {
  const ids = new CrossplaneIds();
  const t = await startTracing("xfn-inspect", log, process.env, ids);
  if (!t) return undefined;
  const api = await import("../telemetry/sdk.js");
  return {
    shutdown: () => t.shutdown(),
    record(meta, req, rsp, error, at, doneAt) {
      const trace = hexOf(meta.traceId);
      const span = hexOf(meta.spanId)?.slice(0, 16);
      ids.trace = trace;
      ids.span = span;
      const c = meta.context.case === "compositionMeta" ? meta.context.value : undefined;
      const xr = c
        ? `${c.compositeResourceNamespace ? `${c.compositeResourceNamespace}/` : ""}${c.compositeResourceKind}/${c.compositeResourceName}`
        : "";
      const s = t.tracer.startSpan(
        `step ${meta.stepName}`,
        {
          kind: api.SpanKind.CLIENT,
          startTime: meta.timestamp ? Number(meta.timestamp.seconds) * 1000 + meta.timestamp.nanos / 1e6 : at,
          attributes: {
            "xfn.step.name": meta.stepName,
            "xfn.function": meta.functionName,
            "crossplane.step_index": meta.stepIndex,
            "crossplane.iteration": meta.iteration,
            "crossplane.trace_id": meta.traceId,
            "crossplane.span_id": meta.spanId,
            ...(c ? { "crossplane.composition": c.compositionName, "crossplane.composite": xr } : {}),
            ...(rsp?.meta?.tag || req.meta?.tag ? { "xfn.tag": rsp?.meta?.tag || req.meta?.tag || "" } : {}),
            "xfn.resources.observed": Object.keys(req.observed?.resources ?? {}).length,
            "xfn.resources.desired.in": Object.keys(req.desired?.resources ?? {}).length,
            ...(rsp
              ? { "xfn.resources.desired.out": Object.keys(rsp.desired?.resources ?? {}).length, "xfn.results": rsp.results.length }
              : {}),
            ...(rsp && worstSeverity(rsp.results) ? { "xfn.result.severity": worstSeverity(rsp.results) } : {}),
          },
        },
        api.ROOT_CONTEXT,
      );
      ids.trace = ids.span = undefined;
      if (error) s.setStatus({ code: api.SpanStatusCode.ERROR, message: error });
      else if (rsp && worstSeverity(rsp.results) === "Fatal") s.setStatus({ code: api.SpanStatusCode.ERROR, message: "a Fatal result" });
      s.end(doneAt);
    },
  };
}
