// Shared by the start-up benches (startup.ts, image-startup.ts): waiting for a
// function to accept a connection, then for its first answer.
import { connect } from "node:net";
import { Client, credentials, type ServiceError } from "@grpc/grpc-js";

/** accepting resolves once something accepts a TCP connection on port (polled every 2 ms); it throws once gone() says the server ended. */
export async function accepting(port: number, gone: () => boolean): Promise<void> {
  for (;;) {
    if (gone()) throw new Error("the server ended before it listened");
    const ok = await new Promise<boolean>((r) => {
      const s = connect(port, "127.0.0.1");
      s.once("connect", () => (s.destroy(), r(true)));
      s.once("error", () => r(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 2));
  }
}

/**
 * firstAnswer calls RunFunction on port until it answers: an error from a
 * server still starting (or a port forwarder in front of one) is retried, up to
 * tries times, or until gone() says the server ended.
 */
export async function firstAnswer(port: number, bytes: Uint8Array, opts: { tries?: number; gone?: () => boolean } = {}): Promise<void> {
  const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure());
  try {
    for (let tries = 0; ; tries++) {
      const err = await new Promise<ServiceError | null>((resolve) =>
        client.makeUnaryRequest(
          "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction",
          (b: Uint8Array) => Buffer.from(b),
          (b: Buffer) => b,
          bytes,
          { deadline: Date.now() + 10_000 },
          (e: ServiceError | null) => resolve(e),
        ),
      );
      if (!err) return;
      if (opts.gone?.() || tries > (opts.tries ?? 100)) throw err;
      await new Promise((r) => setTimeout(r, 2));
    }
  } finally {
    client.close();
  }
}
