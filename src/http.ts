// The plain-HTTP side of xfn serve and xfn host: Prometheus metrics
// (/metrics) and Kubernetes probes (/healthz, /readyz), on addresses of their
// own or sharing one. Nothing here loads prom-client: the probes alone must not
// slow start-up.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";

/** An answer to a GET: status, content type and body. */
export interface HttpAnswer {
  status: number;
  type?: string;
  body: string;
}

/** Routes maps a path to what answers a GET of it (given the request's query). */
export type Routes = Record<string, (query: URLSearchParams) => HttpAnswer | Promise<HttpAnswer>>;

/** HttpServer is a started plain-HTTP endpoint. */
export interface HttpServer {
  readonly port: number;
  stop(): Promise<void>;
}

/** parseAddress splits host:port ("[::1]:8080", ":8081" for every interface). */
export function parseAddress(address: string, what: string): { host: string; port: number } {
  const i = address.lastIndexOf(":");
  const host = i > 0 ? address.slice(0, i).replace(/^\[|\]$/g, "") : "0.0.0.0";
  const text = address.slice(i + 1);
  const port = Number(text);
  if (!/^\d+$/.test(text) || port > 65535) throw new Error(`${what} must be host:port, got ${JSON.stringify(address)}`);
  return { host, port };
}

/**
 * startHttpServer serves routes at address (GET and HEAD only). It rejects,
 * naming the address, if it cannot listen. what names the endpoint in errors
 * and in the log line that says where it listens.
 */
export async function startHttpServer(address: string, routes: Routes, log: Logger, what: string): Promise<HttpServer> {
  const { host, port } = parseAddress(address, `the ${what} address`);
  const paths = Object.keys(routes);
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const path = url.pathname;
    const route = Object.hasOwn(routes, path) ? routes[path] : undefined;
    if (!route) {
      res.writeHead(404, { "Content-Type": "text/plain" }).end(`not found: try ${paths.join(", ")}\n`);
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { Allow: "GET, HEAD", "Content-Type": "text/plain" }).end(`${req.method} not allowed: use GET\n`);
      return;
    }
    Promise.resolve()
      .then(() => route(url.searchParams))
      .then(
        (a) => res.writeHead(a.status, { "Content-Type": a.type ?? "text/plain" }).end(req.method === "HEAD" ? undefined : a.body),
        (err: Error) => res.writeHead(500, { "Content-Type": "text/plain" }).end(`${err.message}\n`),
      );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err) => reject(new Error(`cannot serve ${what} on ${address}: ${err.message}`)));
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as AddressInfo).port;
  log.info({ address: `${host}:${bound}` }, `serving ${what} at ${paths.join(", ")}`);
  return {
    port: bound,
    // Node (19 and later) closes idle keep-alive connections on close().
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/**
 * probeRoutes are the Kubernetes probes: /healthz answers 200 while this
 * thread turns its event loop (a liveness probe that times out means it does
 * not); /readyz answers 200 while notReady() says nothing, and 503 with its
 * reason otherwise.
 */
export function probeRoutes(notReady: () => string | undefined, note: () => string | undefined = () => undefined): Routes {
  return {
    "/healthz": () => ({ status: 200, body: "ok\n" }),
    "/readyz": () => {
      const why = notReady();
      if (why !== undefined) return { status: 503, body: `not ready: ${why}\n` };
      // Ready, with what an operator should know (a serving certificate about to expire).
      const n = note();
      return { status: 200, body: n ? `ok; ${n}\n` : "ok\n" };
    },
  };
}
