// The function calls of `xfn host`'s reconciles: counted and timed (metrics),
// and, with traces, spans: one per XR reconcile, with a child per function
// call of its pipeline (a client span whose W3C traceparent goes with a call
// over gRPC, so the function's own span is its child), and, for a function
// the host runs itself, a child per pipeline step (telemetry/calls.ts).
import type * as SdkModule from "../telemetry/sdk.js";
import type { Span } from "@opentelemetry/api";
import type { Runner } from "../engine/runner.js";
import type { HostMetrics } from "../metrics.js";
import { describe, stepSpans } from "../telemetry/calls.js";
import type { Tracing } from "../telemetry/otel.js";

type Sdk = typeof SdkModule;

/** Traced is one reconcile's span: the runner whose calls are its children, and how it ends. */
export interface Traced {
  runner(r: Runner): Runner;
  end(outcome: { error?: unknown; requeueAfterMs?: number | undefined }): void;
}

/** counted is the runner of a reconcile: each call counted, timed and held to the longest a call may take; traced too, if it is. */
export function counted(d: { runner: Runner; metrics: HostMetrics; functionTimeoutMs: number }, traced: Traced | undefined): Runner {
  const { runner, metrics, functionTimeoutMs } = d;
  const r: Runner = {
    async run(fn, req, deadline, opts) {
      const t = performance.now();
      try {
        // Each call within the reconcile's time, and no longer than a call may take.
        const rsp = await runner.run(fn, req, Math.min(deadline, Date.now() + functionTimeoutMs), opts);
        metrics.functionCalls.inc({ function: fn, result: rsp.results.some((x) => x.severity === 1) ? "fatal" : "ok" });
        return rsp;
      } catch (err) {
        metrics.functionCalls.inc({ function: fn, result: "error" });
        throw err;
      } finally {
        metrics.functionSeconds.observe({ function: fn }, (performance.now() - t) / 1000);
      }
    },
    close: () => runner.close(),
  };
  return traced ? traced.runner(r) : r;
}

/** sdkOf loads the SDK once (tracing is on: startTracing loaded it already). */
let sdk: Sdk | undefined;
export async function loadSdk(): Promise<Sdk> {
  return (sdk ??= await import("../telemetry/sdk.js"));
}

/** traceReconcile starts the span of one reconcile of the XR key ("<xrd>|<namespace>/<name>") of kind. */
export function traceReconcile(t: Tracing, api: Sdk, kind: string, key: string): Traced {
  const [xrd, nsName] = key.split("|") as [string, string];
  const [ns, name] = nsName.split("/") as [string, string];
  const span = t.tracer.startSpan(
    `reconcile ${kind}`,
    {
      kind: api.SpanKind.INTERNAL,
      attributes: { "crossplane.composite": ns ? `${ns}/${kind}/${name}` : `${kind}/${name}`, "crossplane.xrd": xrd },
    },
    api.ROOT_CONTEXT,
  );
  const parent = api.trace.setSpan(api.ROOT_CONTEXT, span);
  return {
    runner: (r) => ({
      async run(fn, req, deadline) {
        const call = t.tracer.startSpan(
          `RunFunction ${fn}`,
          { kind: api.SpanKind.CLIENT, attributes: { "rpc.system": "grpc", "rpc.method": "RunFunction", "xfn.function": fn } },
          parent,
        );
        const metadata: Record<string, string> = {};
        t.inject(call, (k, v) => (metadata[k] = v));
        try {
          const rsp = await r.run(fn, req, deadline, {
            metadata,
            onReport: (report) => {
              describe(call, report);
              stepSpans(t, api, call, report.steps);
            },
          });
          if (rsp.results.some((x) => x.severity === 1)) call.setStatus({ code: api.SpanStatusCode.ERROR, message: "a Fatal result" });
          return rsp;
        } catch (err) {
          fail(api, call, err);
          throw err;
        } finally {
          call.end();
        }
      },
      close: () => r.close(),
    }),
    end({ error, requeueAfterMs }) {
      if (error !== undefined) fail(api, span, error);
      if (requeueAfterMs !== undefined) span.setAttribute("xfn.requeue_after_ms", requeueAfterMs);
      span.end();
    },
  };
}

function fail(api: Sdk, span: Span, err: unknown): void {
  span.setStatus({ code: api.SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
}
