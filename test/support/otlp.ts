// An OTLP trace receiver for tests: HTTP (/v1/traces, protobuf or JSON) and
// gRPC (TraceService/Export), decoding what arrives with the OTLP types the
// OpenTelemetry packages generate, and keeping every span.
import { createServer, type Server as HttpServer } from "node:http";
import { createRequire } from "node:module";
import { Server, ServerCredentials, type sendUnaryData, type ServerUnaryCall } from "@grpc/grpc-js";

const require = createRequire(import.meta.url);
// The OTLP protobuf types, as @opentelemetry/otlp-transformer generates them (protobufjs static code).
const root = require("@opentelemetry/otlp-transformer/build/src/generated/root") as {
  opentelemetry: {
    proto: {
      collector: {
        trace: {
          v1: {
            ExportTraceServiceRequest: {
              decode(b: Uint8Array): unknown;
              toObject(m: unknown, o: object): ExportRequest;
            };
          };
        };
      };
    };
  };
};
const REQUEST = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

interface ExportRequest {
  resourceSpans?: {
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: { spans?: RawSpan[] }[];
  }[];
}
interface KeyValue {
  key: string;
  value: { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
}
interface RawSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number | string;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes?: KeyValue[];
  status?: { code?: number | string; message?: string };
}

/** Span is a received span, its IDs in hex and its attributes as a plain map. */
export interface Span {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  startMs: number;
  endMs: number;
  attributes: Record<string, string | number | boolean>;
  status: { code: number; message: string };
  service: string;
}

export interface Receiver {
  /** The endpoint to put in OTEL_EXPORTER_OTLP_ENDPOINT (http://127.0.0.1:port). */
  endpoint: string;
  spans: Span[];
  /** How each export came: "http/protobuf", "http/json" or "grpc". */
  protocols: Set<string>;
  /** until waits for spans matching ok, up to ms. */
  until(ok: (spans: Span[]) => boolean, ms?: number): Promise<Span[]>;
  close(): Promise<void>;
}

const valueOf = (v: KeyValue["value"]): string | number | boolean =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue ?? ""));
const attrs = (kv: KeyValue[] = []) => Object.fromEntries(kv.map((a) => [a.key, valueOf(a.value)]));
// JSON OTLP carries IDs as hex; protobufjs's toObject is told to give bytes as base64.
const hex = (id: string, json: boolean) => (json ? id : Buffer.from(id, "base64").toString("hex"));
const STATUS: Record<string, number> = { STATUS_CODE_UNSET: 0, STATUS_CODE_OK: 1, STATUS_CODE_ERROR: 2 };

function collect(into: Span[], req: ExportRequest, json: boolean): void {
  for (const rs of req.resourceSpans ?? []) {
    const service = String(attrs(rs.resource?.attributes)["service.name"] ?? "");
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? []) {
        const code = s.status?.code;
        into.push({
          traceId: hex(s.traceId, json),
          spanId: hex(s.spanId, json),
          parentSpanId: s.parentSpanId ? hex(s.parentSpanId, json) : "",
          name: s.name,
          startMs: Number(BigInt(s.startTimeUnixNano) / 1000n) / 1000,
          endMs: Number(BigInt(s.endTimeUnixNano) / 1000n) / 1000,
          attributes: attrs(s.attributes),
          status: { code: typeof code === "string" ? (STATUS[code] ?? 0) : (code ?? 0), message: s.status?.message ?? "" },
          service,
        });
      }
  }
}

const TO_OBJECT = { longs: String, bytes: String, enums: Number, defaults: false };

/** startReceiver listens on 127.0.0.1 (a kernel-picked port) for OTLP over HTTP, and over gRPC when grpc is true. */
export async function startReceiver(opts: { grpc?: boolean } = {}): Promise<Receiver> {
  const spans: Span[] = [];
  const protocols = new Set<string>();
  let endpoint: string;
  let http: HttpServer | undefined;
  let grpc: Server | undefined;
  if (opts.grpc) {
    grpc = new Server();
    grpc.addService(
      {
        Export: {
          path: "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
          requestStream: false,
          responseStream: false,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      {
        Export: (call: ServerUnaryCall<Buffer, Buffer>, cb: sendUnaryData<Buffer>) => {
          protocols.add("grpc");
          collect(spans, REQUEST.toObject(REQUEST.decode(call.request), TO_OBJECT), false);
          cb(null, Buffer.alloc(0));
        },
      },
    );
    const port = await new Promise<number>((res, rej) =>
      grpc!.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
    );
    endpoint = `http://127.0.0.1:${port}`;
  } else {
    http = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        const json = (req.headers["content-type"] ?? "").includes("json");
        if (req.url !== "/v1/traces") {
          res.writeHead(404).end();
          return;
        }
        protocols.add(json ? "http/json" : "http/protobuf");
        collect(
          spans,
          json ? (JSON.parse(body.toString("utf8")) as ExportRequest) : REQUEST.toObject(REQUEST.decode(body), TO_OBJECT),
          json,
        );
        res.writeHead(200, { "content-type": json ? "application/json" : "application/x-protobuf" }).end(json ? "{}" : "");
      });
    });
    await new Promise<void>((r) => http!.listen(0, "127.0.0.1", r));
    endpoint = `http://127.0.0.1:${(http.address() as { port: number }).port}`;
  }
  return {
    endpoint,
    spans,
    protocols,
    async until(ok, ms = 15_000) {
      const end = Date.now() + ms;
      while (!ok(spans)) {
        if (Date.now() > end)
          throw new Error(`the OTLP receiver did not get the spans within ${ms} ms; it has: ${spans.map((s) => s.name).join(", ")}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      return spans;
    },
    close: () =>
      new Promise<void>((r) => {
        if (http) http.close(() => r());
        else grpc!.tryShutdown(() => r());
      }),
  };
}
