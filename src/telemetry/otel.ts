// OpenTelemetry traces, when the standard OTEL_ variables ask for them.
//
// Nothing here loads, and nothing is traced, unless an OTLP endpoint is given
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and
// neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none says no: a
// server or host without them pays one check at start. With them, spans go
// over OTLP as the variables say: the protocol (OTEL_EXPORTER_OTLP_[TRACES_]
// PROTOCOL: http/protobuf, the default, http/json or grpc), headers, timeout
// and compression (read by the exporters), the batch (OTEL_BSP_*), the
// sampler (OTEL_TRACES_SAMPLER[_ARG]) and the resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES). Parents come from a W3C traceparent, only
// explicitly: no context manager is installed.
import type { Context, Span, SpanContext, Tracer } from "@opentelemetry/api";
import type { IdGenerator } from "@opentelemetry/sdk-trace-base";
import type { Logger } from "pino";
import { messageOf } from "../sdk/errors.js";

/** PROTOCOLS are the OTLP protocols the exporters speak, as OTEL_EXPORTER_OTLP_PROTOCOL names them. */
export const PROTOCOLS = ["http/protobuf", "http/json", "grpc"] as const;
export type Protocol = (typeof PROTOCOLS)[number];

/** tracingWanted tells whether the environment asks for traces, and over which protocol; a protocol it does not know is an error. */
export function tracingWanted(env: NodeJS.ProcessEnv = process.env): Protocol | undefined {
  if ((env["OTEL_SDK_DISABLED"] ?? "").trim().toLowerCase() === "true") return undefined;
  if ((env["OTEL_TRACES_EXPORTER"] ?? "").trim().toLowerCase() === "none") return undefined;
  const endpoint = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] || env["OTEL_EXPORTER_OTLP_ENDPOINT"];
  if (!endpoint) return undefined;
  const p = (env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] || env["OTEL_EXPORTER_OTLP_PROTOCOL"] || "http/protobuf").trim();
  if (!(PROTOCOLS as readonly string[]).includes(p))
    throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL ${JSON.stringify(p)}: xfn exports traces over ${PROTOCOLS.join(", ")}`);
  return p as Protocol;
}

/** otlpEndpoint is where spans go, as the variables say (the traces' own endpoint first). */
export const otlpEndpoint = (env: NodeJS.ProcessEnv) => env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] || env["OTEL_EXPORTER_OTLP_ENDPOINT"];

/** Tracing is a started tracer: spans, the W3C parent of a carrier, and how to flush and stop. */
export interface Tracing {
  tracer: Tracer;
  /** parentOf reads a W3C traceparent (and tracestate) through get; ROOT when there is none or it is malformed. */
  parentOf(get: (key: string) => string | undefined): Context;
  /** inject writes the span's traceparent (and tracestate) through set. */
  inject(span: Span, set: (key: string, value: string) => void): void;
  /** spanContext makes a parent of known IDs (hex), e.g. Crossplane's Pipeline Inspector's. */
  remoteParent(sc: Pick<SpanContext, "traceId" | "spanId">): Context;
  /** shutdown exports what is pending and stops; it never throws. */
  shutdown(): Promise<void>;
}

/**
 * startTracing starts tracing when the environment asks for it (tracingWanted),
 * naming the service serviceName unless OTEL_SERVICE_NAME does; undefined
 * otherwise. The OpenTelemetry packages load only here.
 */
export async function startTracing(
  serviceName: string,
  log: Logger,
  env: NodeJS.ProcessEnv = process.env,
  /** Where span and trace IDs come from (default: random), e.g. Crossplane's, for xfn inspect. */
  idGenerator?: IdGenerator,
): Promise<Tracing | undefined> {
  const protocol = tracingWanted(env);
  if (!protocol) return undefined;
  const sdk = await import("./sdk.js");
  const exporter = await sdk.exporterFor(protocol);
  // The service's own name unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES give one (read by the env detector).
  const detected = sdk.detectResources({ detectors: [sdk.envDetector] });
  const resource = sdk
    .defaultResource()
    .merge(sdk.resourceFromAttributes({ "service.name": serviceName }))
    .merge(detected);
  const provider = new sdk.BasicTracerProvider({
    resource,
    spanProcessors: [new sdk.BatchSpanProcessor(exporter)],
    ...(idGenerator ? { idGenerator } : {}),
  });
  const tracer = provider.getTracer("xfn");
  const propagator = new sdk.W3CTraceContextPropagator();
  const getter = {
    get: (carrier: (key: string) => string | undefined, key: string) => carrier(key),
    keys: () => ["traceparent", "tracestate"],
  };
  const endpoint = otlpEndpoint(env);
  log.info({ protocol, endpoint, service: String(resource.attributes["service.name"]) }, "exporting traces over OTLP");
  return {
    tracer,
    parentOf: (get) => propagator.extract(sdk.ROOT_CONTEXT, get, getter),
    inject(span, set) {
      propagator.inject(sdk.trace.setSpan(sdk.ROOT_CONTEXT, span), set, { set: (c, k, v) => c(k, v) });
    },
    remoteParent: (sc) => sdk.trace.setSpanContext(sdk.ROOT_CONTEXT, { ...sc, traceFlags: sdk.TraceFlags.SAMPLED, isRemote: true }),
    async shutdown() {
      try {
        await provider.shutdown();
      } catch (err) {
        log.warn({ err: messageOf(err) }, "cannot export the last traces");
      }
    },
  };
}
