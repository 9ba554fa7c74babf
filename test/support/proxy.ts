// A TCP proxy in front of a server that can make its connections go silent:
// freeze() stops forwarding on every open connection without closing it, as a
// NAT entry or load balancer that drops a connection's state does. Neither end
// learns of it; connections made after a freeze are forwarded again.
//
// The embedded API server answers only requests addressed to its own port
// (its Host check), so the proxy rewrites the Host header of requests it
// forwards. It assumes a request's headers arrive in one read, which holds for
// the small requests of client-node on loopback.
import { createServer, connect, type Socket } from "node:net";

export interface Proxy {
  port: number;
  /** freeze silences every open connection; returns how many. */
  freeze(): number;
  /** blackhole freezes every open connection and every one made after it. */
  blackhole(): void;
  /** open counts the connections accepted and not yet closed. */
  open(): number;
  close(): Promise<void>;
}

/**
 * startProxy forwards to targetPort. sent, when given, is told the request line
 * of each request once it has been forwarded (a test can blackhole right after
 * the one it waits for: the server acts on it, the client never hears back, as
 * when the client's process is killed at that moment).
 */
export async function startProxy(targetPort: number, host = "127.0.0.1", sent?: (requestLine: string) => void): Promise<Proxy> {
  const pairs = new Set<[Socket, Socket]>();
  const frozen: Socket[] = [];
  let silent = false;
  const server = createServer((client) => {
    if (silent) {
      // Accepted, and then nothing: no answer, no end.
      client.pause();
      frozen.push(client);
      return;
    }
    const upstream = connect(targetPort, host);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    client.on("data", (chunk: Buffer) => {
      const text = chunk.toString("latin1");
      upstream.write(ours.test(text) ? Buffer.from(text.replace(ours, `Host: ${host}:${targetPort}\r`), "latin1") : chunk);
      const line = /^[A-Z]+ \S+ HTTP\/1\.1\r\n/.exec(text);
      if (line && sent) sent(line[0].trimEnd());
    });
    upstream.pipe(client);
    const done = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("close", done).on("error", done);
    upstream.on("close", done).on("error", done);
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as { port: number }).port;
  const ours = new RegExp(`^host: ${host.replace(/\./g, "\\.")}:${port}\r$`, "im");
  const freeze = () => {
    for (const [client, upstream] of pairs) {
      client.removeAllListeners("data");
      upstream.unpipe(client);
      // Read nothing more from either side, so that nothing is forwarded and
      // neither side sees an end; what the kernel already holds stays there.
      client.pause();
      upstream.pause();
      frozen.push(client, upstream);
    }
    const n = pairs.size;
    pairs.clear();
    return n;
  };
  return {
    port,
    freeze,
    blackhole() {
      silent = true;
      freeze();
    },
    open: () => pairs.size,
    async close() {
      for (const s of [...[...pairs].flat(), ...frozen]) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
