// A light load generator: RunFunction calls over node:http2 directly, with the
// request framed once ahead of time, so that the generator takes as little of
// the machine's two cores as it can from the server it measures (a grpc-js
// client costs about as much as the server's own transport). It checks every
// answer's grpc-status and can hand back the response bytes for verification.
import { connect, constants, type ClientHttp2Session } from "node:http2";
import { performance } from "node:perf_hooks";

const PATH = "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction";
const { HTTP2_HEADER_METHOD, HTTP2_HEADER_PATH, HTTP2_HEADER_CONTENT_TYPE, HTTP2_HEADER_TE } = constants;
// grpc-timeout: a call the server never answers ends, so no bench run waits for ever.
const HEADERS = {
  [HTTP2_HEADER_METHOD]: "POST",
  [HTTP2_HEADER_PATH]: PATH,
  [HTTP2_HEADER_CONTENT_TYPE]: "application/grpc",
  [HTTP2_HEADER_TE]: "trailers",
  "grpc-timeout": "120S",
};

/** frame prefixes a message with gRPC's length-prefixed message header (uncompressed). */
export function frame(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

/** H2Caller sends framed requests on one HTTP/2 connection. */
export interface H2Caller {
  /** call sends one framed request and resolves with its latency in ms (and the response message when keep is set). */
  call(framed: Buffer, keep?: boolean): Promise<{ ms: number; response?: Buffer }>;
  close(): void;
}

/** h2Caller connects to a plaintext server on 127.0.0.1:port. */
export async function h2Caller(port: number): Promise<H2Caller> {
  // The receive windows stay at Node's 64 KiB, as a grpc-js client's do. A
  // Node HTTP/2 peer stops reading its socket while one of its writes is in
  // progress: if both peers grant windows larger than the socket buffers hold,
  // each can end up writing to the other while neither reads (seen here with
  // 16 MiB windows on both sides: both connections wedged, unread data queued
  // in both directions). The server grants large windows; Crossplane's Go
  // client never stops reading, so it does not need small ones.
  const session: ClientHttp2Session = connect(`http://127.0.0.1:${port}`, {
    // Node refuses new streams past 10 MB of session memory by default; 16 calls of 3.5 MiB are more.
    maxSessionMemory: 1024,
  });
  await new Promise<void>((resolve, reject) => {
    session.once("connect", () => resolve());
    session.once("error", reject);
  });
  return {
    call(framed, keep = false) {
      return new Promise((resolve, reject) => {
        const t = performance.now();
        const stream = session.request(HEADERS, { endStream: false });
        const chunks: Buffer[] = [];
        let status: string | undefined;
        let message = "";
        const onHeaders = (h: Record<string, unknown>) => {
          if (h["grpc-status"] !== undefined) status = String(h["grpc-status"]);
          if (h["grpc-message"] !== undefined) message = decodeURIComponent(String(h["grpc-message"]));
        };
        stream.on("response", onHeaders);
        stream.on("trailers", onHeaders);
        stream.on("data", (c: Buffer) => keep && chunks.push(c));
        stream.on("error", reject);
        // The server should have ended the call long before; this is the bench's own guard.
        stream.setTimeout(150_000, () => stream.close());
        stream.on("close", () => {
          const ms = performance.now() - t;
          if (status !== "0") return reject(new Error(`grpc-status ${status ?? "missing"}: ${message}`));
          if (!keep) return resolve({ ms });
          const all = Buffer.concat(chunks);
          resolve({ ms, response: all.subarray(5, 5 + all.readUInt32BE(1)) });
        });
        stream.end(framed);
      });
    },
    close: () => session.close(),
  };
}
