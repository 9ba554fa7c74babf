// A raw RunFunction client over real grpc-js sockets: bytes in, bytes out, so
// tests can send malformed requests and check exactly what comes back.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { Client, credentials, Metadata, type ChannelCredentials, type ServiceError } from "@grpc/grpc-js";
import {
  RunFunctionRequestSchema,
  RunFunctionResponseSchema,
  type RunFunctionRequest,
  type RunFunctionResponse,
} from "../../src/gen/fn/v1/run_function_pb.js";
import { FUNCTION_HOST, type TestPki } from "./certs.js";

export const V1 = "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction";
export const V1BETA1 = "/apiextensions.fn.proto.v1beta1.FunctionRunnerService/RunFunction";

/** CallOptions: the method's path (v1 by default), a timeout, and metadata to send (a W3C traceparent). */
export interface CallOptions {
  path?: string;
  timeoutMs?: number;
  metadata?: Record<string, string>;
}

export interface RawClient {
  call(bytes: Uint8Array, opts?: CallOptions): Promise<Buffer>;
  run(req: RunFunctionRequest, opts?: CallOptions): Promise<RunFunctionResponse>;
  close(): void;
}

/** mtlsCredentials builds client credentials from the test PKI. */
export function mtlsCredentials(
  pki: TestPki,
  which:
    | "client"
    | "strangerClient"
    | "expiredClient"
    | "crossplane"
    | "crossplaneExpired"
    | "crossplaneServerOnly"
    | "crossplaneSelfSigned"
    | "none" = "client",
): ChannelCredentials {
  if (which === "none") return credentials.createSsl(pki.ca);
  const c = pki[which];
  return credentials.createSsl(pki.ca, c.key, c.cert);
}

/**
 * rawClient dials 127.0.0.1:port. With TLS it verifies the server as
 * FUNCTION_HOST (or serverName), the way Crossplane verifies <fn>.<ns>.
 */
export function rawClient(port: number, creds: ChannelCredentials = credentials.createInsecure(), serverName = FUNCTION_HOST): RawClient {
  const client = new Client(`127.0.0.1:${port}`, creds, {
    "grpc.ssl_target_name_override": serverName,
    "grpc.default_authority": serverName,
    "grpc.max_send_message_length": -1,
    "grpc.max_receive_message_length": -1,
  });
  const call = (bytes: Uint8Array, opts: CallOptions = {}) =>
    new Promise<Buffer>((resolve, reject) => {
      const md = new Metadata();
      for (const [k, v] of Object.entries(opts.metadata ?? {})) md.set(k, v);
      client.makeUnaryRequest(
        opts.path ?? V1,
        (b: Uint8Array) => Buffer.from(b),
        (b: Buffer) => b,
        bytes,
        md,
        { deadline: Date.now() + (opts.timeoutMs ?? 10_000) },
        (err: ServiceError | null, value?: Buffer) => (err ? reject(err) : resolve(value!)),
      );
    });
  return {
    call,
    run: async (req, opts) => fromBinary(RunFunctionResponseSchema, await call(toBinary(RunFunctionRequestSchema, req), opts)),
    close: () => client.close(),
  };
}

/** codeOf returns the gRPC status code of a rejected call. */
export async function codeOf(p: Promise<unknown>): Promise<{ code: number; details: string }> {
  try {
    await p;
  } catch (err) {
    const e = err as ServiceError;
    return { code: e.code, details: e.details };
  }
  throw new Error("expected the call to fail, it succeeded");
}
