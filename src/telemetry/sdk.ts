// The OpenTelemetry SDK, as one module that otel.ts and calls.ts import when
// traces are asked for. One module so that `xfn package` can build it into a
// file of its own (otel.mjs) that a function's server loads only then, and
// the server's bundle (server.mjs) stays as small without traces as before.
export { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace } from "@opentelemetry/api";
export { W3CTraceContextPropagator } from "@opentelemetry/core";
export { defaultResource, detectResources, envDetector, resourceFromAttributes } from "@opentelemetry/resources";
export { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base";

/** exporterFor makes the OTLP exporter of a protocol; it reads the endpoint, headers, timeout and compression from OTEL_ variables. */
export async function exporterFor(protocol: "http/protobuf" | "http/json" | "grpc") {
  if (protocol === "grpc") return new (await import("@opentelemetry/exporter-trace-otlp-grpc")).OTLPTraceExporter();
  if (protocol === "http/json") return new (await import("@opentelemetry/exporter-trace-otlp-http")).OTLPTraceExporter();
  return new (await import("@opentelemetry/exporter-trace-otlp-proto")).OTLPTraceExporter();
}
