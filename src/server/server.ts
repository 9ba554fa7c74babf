// The function server: one grpc-js server serving RunFunction for both the v1
// and v1beta1 APIs (wire-identical, so one handler serves both), plus the gRPC
// health service.
import { callTracer } from "../telemetry/calls.js";
import { startTracing, type Tracing } from "../telemetry/otel.js";
import { Metadata, Server, ServerCredentials, type status as Code, type ServerReadableStream, type ServiceDefinition } from "@grpc/grpc-js";
import type { EventEmitter } from "node:events";
import type { ServerHttp2Session } from "node:http2";
import type { TLSSocket } from "node:tls";
import type { Logger } from "pino";
import type { RunFunction } from "../function.js";
import { RUN_FUNCTION_SERVICE, RUN_FUNCTION_SERVICE_V1BETA1 } from "./services.js";
import { DEFAULT_MAX_RESPONSE_BYTES, type Cancel } from "./call.js";
import type { HandlerOptions } from "./handler.js";
import { installFrameDecoder } from "./frames.js";
import { Intake } from "./intake.js";
import { CONNECTION_WINDOW, DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_QUEUE, DEFAULT_MAX_RECV_MB, STREAM_WINDOW } from "./limits.js";
import { addHealth } from "./health.js";
import { watchDescriptors } from "./fds.js";
import { refusals, REFUSED_REPORT_MS, type Refusals } from "./log.js";
import { openPool, type Pool, type PoolOptions } from "./pool.js";
import { Shares } from "./shares.js";
import { expiryNote, loadServerCredentials, type ClientCheck } from "./tls.js";

/** ServeOptions configure a function server. Defaults follow Crossplane's function spec. */
export interface ServeOptions {
  /** host:port to listen on. Default 0.0.0.0:9443. Port 0 picks a free port. */
  address?: string;
  /** How long a client may take to finish a TLS handshake before its connection is closed (TLS_HANDSHAKE_TIMEOUT_MS). */
  tlsHandshakeTimeoutMs?: number;
  /** Directory holding tls.crt, tls.key and ca.crt. Required unless insecure. */
  tlsCertsDir?: string;
  /** Serve plaintext. Wins over tlsCertsDir, as the spec requires. */
  insecure?: boolean;
  /** Largest request accepted, in MiB. Default 4. */
  maxRecvMessageSizeMB?: number;
  /** Largest response sent, in bytes. Default 4 MiB (Crossplane's receive limit). */
  maxResponseBytes?: number;
  /** Functions running at once. Default 16. */
  maxConcurrency?: number;
  /** Requests waiting for a slot before RESOURCE_EXHAUSTED. Default 128. */
  maxQueue?: number;
  /** The clock handed to functions (tests). */
  now?: () => Date;
  /** Told of every response sent (see `--record-dir`). */
  onResponse?: HandlerOptions["onResponse"];
  /**
   * The server's own bound on one call, in ms; a caller's earlier deadline wins.
   * In process a call past it is answered and its slot freed, though the
   * function cannot be stopped; with workers, a stuck worker is replaced.
   */
  timeoutMs?: number;
  /** How long a request may take to arrive once the server starts reading it (BODY_TIMEOUT_MS). */
  bodyTimeoutMs?: number;
  /** Streams one connection may hold open at once. Default 1000. */
  maxConcurrentStreams?: number;
  /** Run the function on worker threads (see pool.ts) instead of in this thread. */
  workers?: Pick<
    PoolOptions,
    "workers" | "warmWorkers" | "script" | "workerData" | "maxHeapMB" | "memoryGuardMB" | "rss" | "slowPickupMs" | "pickupFreshMs" | "early"
  >;
  /**
   * Headers sent with every answer from the function (not with refusals), such as
   * which function answered (SERVED_BY_HEADERS): `xfn call --debug` prints them.
   * Values must be printable ASCII.
   */
  headers?: Readonly<Record<string, string>>;
  /** Told of every RunFunction call answered, refusals included (see `--metrics-address`). */
  onCall?: (code: keyof typeof Code, seconds: number) => void;
  /** Told when the pool replaces a worker. */
  onWorkerRestart?: () => void;
  /**
   * Traces (telemetry/otel.ts): by default started when the OTEL_ variables
   * ask for them (an OTLP endpoint), else none; false for none whatever they
   * say. serviceName names the service unless OTEL_SERVICE_NAME does.
   */
  tracing?: Tracing | false;
  serviceName?: string;
}

/**
 * BODY_TIMEOUT_MS bounds how long a request may take to arrive once the server
 * starts reading it: 4 MiB at 140 KiB/s, where Crossplane's in-cluster calls
 * take milliseconds. A caller sending slower loses its body slot to others.
 * (10 s ended a quarter of the calls bench/memory.ts's flood of 8,000 3 MiB
 * requests admitted, which its one client process sent that slowly.)
 */
export const BODY_TIMEOUT_MS = 30_000;

/** DEFAULT_MAX_CONCURRENT_STREAMS bounds the streams of one connection. */
export const DEFAULT_MAX_CONCURRENT_STREAMS = 1000;

/** DEFAULT_ADDRESS is where Crossplane expects a function: port 9443 on every interface. */
export const DEFAULT_ADDRESS = "0.0.0.0:9443";

/** RunningServer is a started server. */
export interface RunningServer {
  /** The port actually bound. */
  readonly port: number;
  /** Whether the server requires client certificates. */
  readonly mtls: boolean;
  /** RunFunction calls admitted and not yet answered (running, waiting to be read or to run). */
  inFlight(): number;
  /**
   * Resolves once the function can run: at once in the server's thread, with
   * workers once the first has loaded it (calls that come before wait).
   * Rejects with why the first worker could not load it, once the server has
   * answered the calls that waited and stopped listening.
   */
  readonly loaded: Promise<void>;
  /**
   * notReady says why the server should not be sent calls now (a readiness
   * probe's answer: it is shutting down, or no worker can run the function),
   * or undefined when it is ready.
   */
  notReady(): string | undefined;
  /** certificateNote says when the serving certificate expires, once that is within a week (or past). */
  certificateNote(): string | undefined;
  /**
   * stop stops accepting calls, lets in-flight calls finish for up to graceMs,
   * then cancels what is left. It resolves when the server is down.
   */
  stop(graceMs?: number): Promise<void>;
}

const FULL_SERVICE_NAMES = [RUN_FUNCTION_SERVICE, RUN_FUNCTION_SERVICE_V1BETA1];

/**
 * rawService defines a RunFunction service whose requests and responses cross
 * grpc-js as raw bytes: decoding happens in the handler, where a malformed
 * request can be answered with INVALID_ARGUMENT. With admitFirst the handler
 * is registered as client-streaming, which is the same on the wire as unary
 * (one message, then half-close): grpc-js then calls it when a call starts,
 * before reading its body, so a call can be refused without its bytes ever
 * being held in memory (HTTP/2 flow control stops the sender meanwhile).
 */
export function rawService(typeName: string, admitFirst = false): ServiceDefinition {
  return {
    RunFunction: {
      path: `/${typeName}/RunFunction`,
      requestStream: admitFirst,
      responseStream: false,
      requestSerialize: (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength),
      requestDeserialize: (b: Buffer) => b,
      responseSerialize: (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength),
      responseDeserialize: (b: Buffer) => b,
    },
  };
}

/** credentialsFor picks plaintext or mTLS, refusing to guess when neither is chosen. */
export function credentialsFor(opts: ServeOptions): {
  creds: ServerCredentials;
  mtls: boolean;
  notAfter?: Date;
  checkClient?: ClientCheck;
} {
  if (opts.insecure) return { creds: ServerCredentials.createInsecure(), mtls: false };
  if (!opts.tlsCertsDir) {
    throw new Error(
      "refusing to serve without TLS: give --tls-certs-dir (or set TLS_SERVER_CERTS_DIR) to serve mTLS, " +
        "or --insecure for local development",
    );
  }
  return { ...loadServerCredentials(opts.tlsCertsDir, opts.tlsHandshakeTimeoutMs), mtls: true };
}

/**
 * serve starts a server for fn and resolves once it listens. With
 * opts.workers, the workers load the function themselves and fn may be null.
 */
export async function serve(fn: RunFunction | null, opts: ServeOptions, log: Logger): Promise<RunningServer> {
  if (!opts.workers && typeof fn !== "function") throw new Error(`cannot serve ${typeof fn}: a function is required`);
  const { creds, mtls, notAfter, checkClient } = credentialsFor(opts);
  const maxRecvMB = checkedRecvMB(opts);
  const address = opts.address ?? DEFAULT_ADDRESS;

  const headers = opts.headers ? headerMetadata(opts.headers) : undefined;

  // Before anything serves: an OTEL_ variable that cannot be honoured fails the start, naming it.
  const tracing = opts.tracing === false ? undefined : (opts.tracing ?? (await startTracing(opts.serviceName ?? "xfn-function", log)));
  const tracer = tracing ? await callTracer(tracing, opts.serviceName ?? "function") : undefined;
  const { common, timeoutMs, pool, handler } = await answererFor(fn, opts, log);

  // Calls in flight, cancelled on a forced stop so functions still running see their signal fire.
  const live = new Set<Cancel>();
  // Descriptors are the process's: a function leaking them starves every connection (fds.ts).
  const descriptors = watchDescriptors(log);

  // Admission: calls running or waiting, counted from the moment they start,
  // before their bodies are read. One more is refused at once (unless another
  // connection holds more and gives a place up: shares.ts), so memory holds at
  // most this many requests, however many callers send at once.
  // Bodies read or being read: twice the calls that can run, so the next ones are ready.
  const admitLimit = common.maxConcurrency + common.maxQueue;
  const shares = new Shares(admitLimit, 2 * common.maxConcurrency);
  const bodyTimeoutMs = opts.bodyTimeoutMs ?? BODY_TIMEOUT_MS;
  const busy = refusals(log);
  // Requests refused for what they hold (undecodable, over the size limit): the
  // first at once with its peer, then summed up, so a peer sending garbage in a
  // loop cannot flood the log.
  const badRequests = refusals(log, REFUSED_REPORT_MS, { noun: "bad request", fields: {} });
  const refuseRequest = (call: ServerReadableStream<Buffer, Uint8Array>, fields: Record<string, unknown>, details: string) => {
    const peer = call.getPeer();
    badRequests.refused({ ...fields, peer }, `refused a request from ${peer}: ${details}`);
  };

  const intake = new Intake({
    answerer: handler,
    pooled: pool !== undefined,
    shares,
    admitLimit,
    maxRecvMB,
    timeoutMs,
    bodyTimeoutMs,
    headers,
    onCall: opts.onCall,
    busy,
    refuseRequest,
    live,
    ...(tracer ? { tracer } : {}),
  });

  if (!installFrameDecoder())
    log.warn("cannot install xfn's message framing into this grpc-js version: request chunks are kept until each message is in");
  const server = new Server({
    "grpc.max_receive_message_length": Math.floor(maxRecvMB * 1024 * 1024),
    // We check the response size ourselves, to answer with a clear message.
    "grpc.max_send_message_length": -1,
    // Streams one connection may hold open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); a gRPC
    // client waits for a free one. Each open stream's unread body is bounded by flow control.
    "grpc.max_concurrent_streams": opts.maxConcurrentStreams ?? DEFAULT_MAX_CONCURRENT_STREAMS,
  });
  server.addService(rawService(RUN_FUNCTION_SERVICE, true), { RunFunction: intake.handler("v1") });
  server.addService(rawService(RUN_FUNCTION_SERVICE_V1BETA1, true), { RunFunction: intake.handler("v1beta1") });

  const health = addHealth(server, FULL_SERVICE_NAMES, { starting: pool !== undefined });

  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(address, creds, (err, p) => (err ? reject(new Error(`cannot listen on ${address}: ${err.message}`)) : resolve(p)));
  }).catch(async (err: unknown) => {
    clearInterval(descriptors);
    await pool?.close();
    throw err;
  });
  let handshakes: Refusals | undefined;
  try {
    handshakes = listening(server, { address, port, maxRecvMB, notAfter, checkClient }, log);
  } catch (err) {
    server.forceShutdown();
    clearInterval(descriptors);
    await pool?.close();
    throw err;
  }

  return runningServer(
    { server, port, mtls, notAfter, pool, handler, health, descriptors, shares, live, flush: [busy, badRequests, handshakes], tracing },
    log,
  );
}

/** checkedRecvMB is --max-recv-message-size, once every numeric option is checked. */
function checkedRecvMB(opts: ServeOptions): number {
  const maxRecvMB = opts.maxRecvMessageSizeMB ?? DEFAULT_MAX_RECV_MB;
  if (!(maxRecvMB > 0)) throw new Error(`--max-recv-message-size must be a positive number of MB, got ${maxRecvMB}`);
  for (const [name, v] of [
    ["maxConcurrency", opts.maxConcurrency],
    ["maxQueue", opts.maxQueue],
    ["maxResponseBytes", opts.maxResponseBytes],
    ["bodyTimeoutMs", opts.bodyTimeoutMs],
  ] as const) {
    if (v !== undefined && !(Number.isInteger(v) && v > 0)) throw new Error(`${name} must be a positive whole number, got ${v}`);
  }
  return maxRecvMB;
}

/**
 * answererFor is what answers calls: the worker pool, or the function in this
 * thread. Workers load the function while the server binds its port: calls
 * that come meanwhile wait for the first worker (the pool), health says
 * NOT_SERVING and /readyz why; serve resolves once it listens, and loaded once
 * a worker has loaded the function (it rejects, the server having stopped
 * listening, if the first cannot).
 */
async function answererFor(fn: RunFunction | null, opts: ServeOptions, log: Logger) {
  const common = {
    maxConcurrency: opts.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY,
    maxQueue: opts.maxQueue ?? DEFAULT_MAX_QUEUE,
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.onResponse ? { onResponse: opts.onResponse } : {}),
  };
  const timeoutMs = opts.timeoutMs ?? Infinity;
  const pool: Pool | undefined = opts.workers
    ? openPool(
        {
          ...opts.workers,
          ...common,
          timeoutMs: Number.isFinite(timeoutMs) ? timeoutMs : 2 ** 31 - 1,
          ...(opts.onWorkerRestart ? { onWorkerRestart: opts.onWorkerRestart } : {}),
        },
        log,
      )
    : undefined;
  // The handler (protobuf-es, the generated types) loads only where the function runs here: a pool's server thread never needs it.
  const handler =
    pool ??
    (await import("./handler.js")).createHandler(
      fn!,
      { ...common, maxResponseBytes: opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES },
      log,
    );
  return { common, timeoutMs, pool, handler };
}

/**
 * listening widens the bound server's HTTP/2 windows, checks each client
 * certificate and logs refused TLS handshakes (with mTLS), says where it
 * serves, and warns of a serving certificate that has expired or soon will
 * (said at start, and by /readyz). With mTLS it throws, and nothing may be
 * served, if it cannot reach the HTTP/2 servers to check certificates on.
 */
function listening(
  server: Server,
  at: { address: string; port: number; maxRecvMB: number; notAfter: Date | undefined; checkClient: ClientCheck | undefined },
  log: Logger,
): Refusals | undefined {
  const h2 = http2ServersOf(server);
  if (!h2) log.warn("cannot reach grpc-js's HTTP/2 servers with this grpc-js version: flow-control windows stay at 64 KiB");
  else widenWindows(h2);
  let handshakes: Refusals | undefined;
  const mtls = at.checkClient !== undefined;
  if (at.checkClient) {
    if (!h2)
      throw new Error("refusing to serve mTLS: this grpc-js version keeps its HTTP/2 servers where xfn cannot check client certificates");
    handshakes = checkHandshakes(h2, at.checkClient, log);
  }
  log.info(
    { address: at.address, port: at.port, mtls, maxRecvMessageSizeMB: at.maxRecvMB },
    mtls ? "serving mTLS gRPC" : "serving insecure gRPC (local development only)",
  );
  const expiry = at.notAfter ? expiryNote(at.notAfter) : undefined;
  if (expiry)
    log.warn(
      { notAfter: at.notAfter!.toISOString() },
      `${expiry.text}: Crossplane's calls ${expiry.expired ? "fail" : "will fail"} its handshake; renew it`,
    );
  return handshakes;
}

/** What a running server is made of, for runningServer. */
interface Parts {
  server: Server;
  port: number;
  mtls: boolean;
  notAfter: Date | undefined;
  pool: Pool | undefined;
  handler: { inFlight(): number };
  health: ReturnType<typeof addHealth>;
  descriptors: ReturnType<typeof watchDescriptors>;
  shares: Shares;
  live: Set<Cancel>;
  /** Refusal logs whose counts are written out on stop. */
  flush: Array<Refusals | undefined>;
  /** Exports its last spans on stop. */
  tracing: Tracing | undefined;
}

/** runningServer is the started server: readiness, loading, and its graceful stop. */
function runningServer(o: Parts, log: Logger): RunningServer {
  const { server, port, mtls, notAfter, pool, handler, health, descriptors, shares, live } = o;
  let loading = pool !== undefined;
  const loaded = pool
    ? pool.firstReady.then(
        () => {
          loading = false;
          health.serving();
        },
        async (err: unknown) => {
          // Calls that waited have been answered UNAVAILABLE with the reason (pool.ts); let those answers out.
          health.shutdown();
          clearInterval(descriptors);
          const force = setTimeout(() => server.forceShutdown(), 1000);
          await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
          clearTimeout(force);
          throw err;
        },
      )
    : Promise.resolve();
  // Whoever serves awaits it; a stop while loading ends the workers and rejects it, as intended.
  loaded.catch(() => {});

  let stopped: Promise<void> | undefined;
  return {
    port,
    mtls,
    loaded,
    inFlight: () => shares.inFlight(),
    certificateNote() {
      return notAfter ? expiryNote(notAfter)?.text : undefined;
    },
    notReady() {
      if (stopped) return "shutting down: finishing the calls in flight";
      if (notAfter && notAfter.getTime() <= Date.now()) return expiryNote(notAfter)!.text;
      if (loading) return "starting: a worker is loading the function";
      if (pool && pool.ready() === 0) return "no worker can run the function: every one has ended and is being replaced (see the log)";
      return undefined;
    },
    stop(graceMs = 10_000) {
      stopped ??= new Promise<void>((resolve) => {
        health.shutdown();
        clearInterval(descriptors);
        for (const r of o.flush) r?.flush();
        log.info({ inFlight: handler.inFlight(), graceMs }, "shutting down");
        const force = setTimeout(() => {
          log.warn({ inFlight: handler.inFlight() }, "grace period over; cancelling in-flight calls");
          for (const c of live) c.cancel();
          server.forceShutdown();
          void (pool?.close() ?? Promise.resolve()).then(() => o.tracing?.shutdown()).then(() => resolve());
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          void (pool?.close() ?? Promise.resolve())
            .then(() => o.tracing?.shutdown())
            .then(() => {
              log.info("stopped");
              resolve();
            });
        });
      });
      return stopped;
    },
  };
}

/** headerMetadata checks response headers and makes them grpc-js metadata, once. */
function headerMetadata(headers: Readonly<Record<string, string>>): Metadata {
  const md = new Metadata();
  for (const [k, v] of Object.entries(headers)) {
    if (!/^[0-9a-z_.-]+$/.test(k) || k.startsWith("grpc-") || k.endsWith("-bin"))
      throw new Error(
        `response header ${JSON.stringify(k)}: a name must be lower-case letters, digits, "-", "_" or "." (not grpc-*, not *-bin)`,
      );
    if (!/^[\x20-\x7e]*$/.test(v)) throw new Error(`response header ${k}: ${JSON.stringify(v)} is not printable ASCII`);
    md.set(k, v);
  }
  return md;
}

/**
 * http2ServersOf returns grpc-js's HTTP/2 servers, through a private field
 * (http2Servers, grpc-js 1.10 and later), or undefined if a later grpc-js
 * renamed it: what uses them is then left out, and serving is unaffected.
 */
function http2ServersOf(server: Server): EventEmitter[] | undefined {
  const servers = (server as unknown as { http2Servers?: Map<unknown, unknown> }).http2Servers;
  return servers instanceof Map ? ([...servers.keys()] as EventEmitter[]) : undefined;
}

/** widenWindows sets the stream and connection receive windows on every new HTTP/2 session. */
function widenWindows(servers: EventEmitter[]): void {
  for (const s of servers) {
    s.on("session", (session: ServerHttp2Session) => {
      session.settings({ initialWindowSize: STREAM_WINDOW });
      session.setLocalWindowSize(CONNECTION_WINDOW);
    });
  }
}

/**
 * checkHandshakes admits a TLS connection to gRPC only once check accepts its
 * client certificate, and logs the handshakes the server refuses (no client
 * certificate, one from another CA, plaintext), naming the peer and the
 * reason: grpc-js drops them silently. A refused connection is closed before
 * the HTTP/2 server sees it (its 'secureConnection' event is not passed on).
 * Anyone who can reach the port can make them, as fast as they can: the
 * first is logged, and those after it counted (refusals), as refused calls
 * are.
 */
function checkHandshakes(servers: EventEmitter[], check: ClientCheck, log: Logger): Refusals {
  const refused = refusals(log, REFUSED_REPORT_MS, { noun: "TLS handshake", fields: {} });
  // A socket the client has already reset no longer knows its peer: each
  // connection's is kept from when it was accepted, by its raw socket.
  const peers = new WeakMap<object, string>();
  const peerOfSocket = (socket: Peer & { _parent?: object }) =>
    (socket.remoteAddress !== undefined ? peerOf(socket) : undefined) ?? (socket._parent && peers.get(socket._parent)) ?? "?";
  for (const s of servers) {
    s.on("connection", (raw: Peer) => peers.set(raw, peerOf(raw)));
    const emit = s.emit.bind(s);
    s.emit = (event: string | symbol, ...args: unknown[]): boolean => {
      if (event !== "secureConnection") return emit(event, ...args);
      const socket = args[0] as TLSSocket & { _parent?: object };
      let reason: string | undefined;
      try {
        reason = check(socket);
      } catch (err) {
        reason = `the client certificate could not be checked: ${err instanceof Error ? err.message : String(err)}`;
      }
      if (reason === undefined) return emit(event, ...args);
      const peer = peerOfSocket(socket);
      socket.destroy();
      const certificate = reason !== "ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE";
      refused.refused({ peer, reason }, `refused a TLS handshake from ${peer}: ${reason}${refusalHint(reason, certificate)}`);
      return false;
    };
    s.on("tlsClientError", (err: Error & { code?: string }, socket: Peer & { _parent?: object }) => {
      const peer = peerOfSocket(socket);
      const reason = err.code ?? err.message;
      refused.refused({ peer, reason }, `refused a TLS handshake from ${peer}: ${reason}${refusalHint(reason, false)}`);
    });
  }
  return refused;
}

/**
 * refusalHint says what a refused handshake's reason most likely means. Go's
 * TLS (Crossplane's client) sends a client certificate only if it is signed by
 * a CA the server names in its request, the CA of ca.crt; one from another CA
 * is withheld, so the server sees no certificate at all. OpenSSL's clients
 * send it anyway, and the CA check fails instead (unauthorized).
 */
function refusalHint(reason: string, unauthorized: boolean): string {
  if (unauthorized) return ` (${CERTIFICATE_REFUSALS[reason] ?? "the client's certificate is not signed by this server's ca.crt"})`;
  if (reason === "ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE") {
    return (
      " (the client sent no certificate: it has none, or none signed by this server's ca.crt, " +
      "which Go clients such as Crossplane's then withhold)"
    );
  }
  if (reason === "ECONNRESET") return " (the client hung up: does it trust this server's certificate and name?)";
  return "";
}

/** What a refused client certificate's verification error means, where it is not the CA's signature. */
const CERTIFICATE_REFUSALS: Record<string, string> = {
  CERT_HAS_EXPIRED: "the client's certificate has expired: renew it",
  CERT_NOT_YET_VALID: "the client's certificate is not valid yet: its start is in the future (a clock behind?)",
  CERT_REVOKED: "the client's certificate was revoked",
  INVALID_PURPOSE: "the client's certificate is not for client authentication (extKeyUsage clientAuth)",
};

interface Peer {
  remoteAddress?: string | undefined;
  remotePort?: number | undefined;
}
const peerOf = (s: Peer): string => `${s.remoteAddress ?? "?"}:${s.remotePort ?? "?"}`;
