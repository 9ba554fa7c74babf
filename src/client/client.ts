// A RunFunction client, as Crossplane dials a function: v1 first, falling back
// to v1beta1 when the server answers UNIMPLEMENTED (a function built for
// Crossplane 1.14-1.16).
import type { TLSSocket } from "node:tls";
import { Client, credentials, status as Code, type ChannelCredentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import { FunctionRunnerService, type RunFunctionRequest, type RunFunctionResponse } from "../gen/fn/v1/run_function_pb.js";
import { FunctionRunnerService as BetaFunctionRunnerService } from "../gen/fn/v1beta1/zz_generated_run_function_pb.js";
import { setOwn } from "../own.js";
import { installFrameDecoder } from "../server/frames.js";
import { checkServerCertificate, loadTlsFiles } from "../server/tls.js";
import { decodeResponse, encodeRequest } from "../wire/codec.js";

/** ClientOptions say how to reach a function. */
export interface ClientOptions {
  /** Plaintext, as `crossplane render` dials. */
  insecure?: boolean;
  /** Directory with tls.crt, tls.key (this client's certificate) and ca.crt (the server's CA). */
  tlsCertsDir?: string;
  /** Name to verify the server certificate against, e.g. function-x.crossplane-system. */
  serverName?: string;
  /** Largest response accepted, in bytes. Default 4 MiB, like Crossplane. */
  maxRecvBytes?: number;
}

/** FunctionClient calls one function. */
export interface FunctionClient {
  /** run calls the function; onHeaders is told the response headers of the call that answered (see server/served-by.ts). */
  run(
    req: RunFunctionRequest,
    opts?: {
      timeoutMs?: number;
      api?: "v1" | "v1beta1";
      onHeaders?: (headers: Record<string, string>) => void;
      /** Metadata sent with the call (a W3C traceparent). */
      metadata?: Record<string, string>;
    },
  ): Promise<RunFunctionResponse>;
  /**
   * waitForReady resolves once the function accepts a connection, retrying
   * with gRPC's backoff (a server still starting), or rejects after waitMs.
   */
  waitForReady(waitMs: number): Promise<void>;
  close(): void;
}

/** Refusals keeps why the latest connection's server certificate was refused, for the errors that follow. */
interface Refusals {
  latest?: string;
}

function clientCredentials(opts: ClientOptions, refusals: Refusals): ChannelCredentials {
  if (opts.insecure) return credentials.createInsecure();
  if (!opts.tlsCertsDir) throw new Error("cannot dial a function without TLS: give a client certificates directory, or insecure");
  const { ca, key, cert } = loadTlsFiles(opts.tlsCertsDir, "client TLS certificates");
  return (
    checkingServers(credentials.createSsl(ca, key, cert, { rejectUnauthorized: false }), ca, refusals) ??
    credentials.createSsl(ca, key, cert)
  );
}

/** What checkingServers reaches inside grpc-js (1.10 and later): each subchannel's connector, and its TLS options. */
interface Connecting {
  _createSecureConnector?: (...args: unknown[]) => {
    connectionOptions?: { servername?: unknown };
    connect(socket: unknown): Promise<{ socket: unknown; secure: boolean }>;
  };
}

/**
 * checkingServers makes creds (built with rejectUnauthorized false, so that
 * OpenSSL's verdict does not end the handshake) check each connection's
 * server certificate with checkServerCertificate before it carries calls:
 * OpenSSL alone refuses the certificates Crossplane's package runtime makes
 * for functions (server/tls.ts). It returns undefined, and the caller falls
 * back to OpenSSL's own verification, where this grpc-js keeps its connector
 * elsewhere; a connection whose server name cannot be read is refused.
 */
function checkingServers(creds: ChannelCredentials, ca: Buffer, refusals: Refusals): ChannelCredentials | undefined {
  const c = creds as unknown as Connecting;
  const create = c._createSecureConnector?.bind(creds);
  if (!create) return undefined;
  const check = checkServerCertificate(ca);
  c._createSecureConnector = (...args) => {
    const connector = create(...args);
    const serverName = connector.connectionOptions?.servername;
    const connect = connector.connect.bind(connector);
    connector.connect = async (socket) => {
      const r = await connect(socket);
      const tls = r.socket as TLSSocket;
      const why = typeof serverName === "string" ? check(tls, serverName) : "cannot read the server name to check its certificate against";
      if (why === undefined) {
        delete refusals.latest;
        return r;
      }
      tls.destroy();
      refusals.latest = `refused the function's certificate: ${why}`;
      throw new Error(refusals.latest);
    };
    return connector;
  };
  return creds;
}

const path = (typeName: string) => `/${typeName}/RunFunction`;

/** CROSSPLANE_RECV_BYTES is what Crossplane's client accepts: grpc-go's default receive limit (it sets none). */
const CROSSPLANE_RECV_BYTES = 4 * 1024 * 1024;

/**
 * tooLarge says in xfn's words that a response was over the receive limit
 * (grpc-js's own words, which frames.ts keeps for clients, name neither side),
 * and, at Crossplane's limit, that Crossplane would refuse it too. Any other
 * error is returned as it is.
 */
export function tooLarge(err: ServiceError, maxRecvBytes = CROSSPLANE_RECV_BYTES): ServiceError {
  const m = err.code === Code.RESOURCE_EXHAUSTED ? /^Received message larger than max \((\d+) vs (\d+)\)$/.exec(err.details) : null;
  if (!m) return err;
  const details =
    `the function's response is ${m[1]} bytes, larger than the ${m[2]}-byte limit ` +
    (maxRecvBytes === CROSSPLANE_RECV_BYTES
      ? "Crossplane accepts (grpc-go's default): Crossplane would fail this call too"
      : "this client accepts");
  const said = new Error(`${err.code} RESOURCE_EXHAUSTED: ${details}`);
  return Object.assign(said, { code: err.code, details, metadata: err.metadata });
}

/** textHeaders are metadata's text values, the first of each (binary ones left out). */
function textHeaders(md: Metadata): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(md.getMap())) if (typeof v === "string") setOwn(out, k, v);
  return out;
}

/** dial returns a client for the function at address (host:port). */
export function dial(address: string, opts: ClientOptions = {}): FunctionClient {
  // Responses are framed without keeping their chunks, as the server does (server/frames.ts).
  installFrameDecoder();
  const refusals: Refusals = {};
  const client = new Client(address, clientCredentials(opts, refusals), {
    "grpc.max_receive_message_length": opts.maxRecvBytes ?? 4 * 1024 * 1024,
    ...(opts.serverName ? { "grpc.ssl_target_name_override": opts.serverName, "grpc.default_authority": opts.serverName } : {}),
  });
  const call = (
    method: string,
    bytes: Uint8Array,
    timeoutMs: number,
    onHeaders?: (headers: Record<string, string>) => void,
    sent?: Record<string, string>,
  ) =>
    new Promise<Buffer>((resolve, reject) => {
      const md = new Metadata();
      for (const [k, v] of Object.entries(sent ?? {})) md.set(k, v);
      const c = client.makeUnaryRequest(
        method,
        (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength),
        (b: Buffer) => b,
        bytes,
        md,
        { deadline: Date.now() + timeoutMs },
        (err: ServiceError | null, value?: Buffer) => (err ? reject(tooLarge(err, opts.maxRecvBytes)) : resolve(value!)),
      );
      if (onHeaders) c.on("metadata", (md: Metadata) => onHeaders(textHeaders(md)));
    });
  return {
    async run(req, o = {}) {
      const bytes = encodeRequest(req);
      const timeoutMs = o.timeoutMs ?? 60_000;
      let out: Buffer;
      if (o.api === "v1beta1") {
        out = await call(path(BetaFunctionRunnerService.typeName), bytes, timeoutMs, o.onHeaders, o.metadata);
      } else {
        try {
          out = await call(path(FunctionRunnerService.typeName), bytes, timeoutMs, o.onHeaders, o.metadata);
        } catch (err) {
          if ((err as ServiceError).code !== Code.UNIMPLEMENTED || o.api === "v1") throw err;
          out = await call(path(BetaFunctionRunnerService.typeName), bytes, timeoutMs, o.onHeaders, o.metadata);
        }
      }
      return decodeResponse(out);
    },
    waitForReady: (waitMs) =>
      new Promise<void>((resolve, reject) => {
        client.waitForReady(Date.now() + waitMs, (err) => {
          if (!err) return resolve();
          const secs = Math.round(waitMs / 100) / 10;
          reject(
            new Error(
              `cannot reach a function at ${address} within ${secs} s ` +
                (refusals.latest ? `(${refusals.latest})` : "(is it serving, with the same TLS setting?)"),
              { cause: err },
            ),
          );
        });
      }),
    close: () => client.close(),
  };
}
