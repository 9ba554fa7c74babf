// The API server a host test runs against: the embedded one (src/apiserver),
// or, with XFN_TEST_APISERVER=kube-apiserver (the real-Crossplane tier's
// test/crossplane/host-e2e.test.ts), the real kube-apiserver of
// test/crossplane/controlplane.ts (etcd, kube-apiserver, and
// kube-controller-manager's garbage collector), started afresh for each test.
//
// The real one speaks TLS and wants a bearer token; the tests written for the
// embedded one fetch plain URLs and build a kubeconfig without credentials.
// So the real one is reached through a proxy of the test's own on 127.0.0.1
// that adds the token and checks the server's certificate against its CA:
// every request and watch goes to kube-apiserver unchanged, and the answers
// come back as it gave them (status, headers, the watch stream as it
// flows). What the host does over TLS to a real API server is tested
// without it (test/crossplane/functions.test.ts runs `xfn host --kubeconfig`).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { Agent, request } from "node:https";
import type { AddressInfo } from "node:net";
import { startDevCluster, type DevClusterOptions } from "../../src/apiserver/server.js";

/** What host tests use of a cluster: its URL, a kubeconfig for it, and stop. */
export interface TestCluster {
  readonly url: string;
  readonly port: number;
  kubeconfig(): string;
  stop(): Promise<void>;
}

/** REAL_APISERVER: host tests run against the real kube-apiserver (the real-Crossplane tier sets it). */
export const REAL_APISERVER = process.env["XFN_TEST_APISERVER"] === "kube-apiserver";

/**
 * startCluster starts the embedded API server with opts, or under
 * REAL_APISERVER a real control plane behind an authenticating proxy (opts,
 * the embedded server's own, do not apply to it).
 */
export async function startCluster(opts: DevClusterOptions = {}): Promise<TestCluster> {
  if (!REAL_APISERVER) return startDevCluster(opts);
  const { startControlPlane } = await import("../crossplane/controlplane.js");
  const cp = await startControlPlane();
  try {
    const proxy = await authProxy(cp.url, cp.token, cp.ca);
    const port = (proxy.address() as AddressInfo).port;
    const url = `http://127.0.0.1:${port}`;
    return {
      url,
      port,
      kubeconfig: () =>
        [
          "apiVersion: v1",
          "kind: Config",
          // Plain HTTP to the proxy on loopback: client-node refuses http:// unless told TLS is not checked.
          "clusters: [{name: real, cluster: {server: " + JSON.stringify(url) + ", insecure-skip-tls-verify: true}}]",
          "users: [{name: proxied, user: {}}]",
          "contexts: [{name: real, context: {cluster: real, user: proxied}}]",
          "current-context: real",
          "",
        ].join("\n"),
      async stop() {
        proxy.closeAllConnections();
        await new Promise((r) => proxy.close(r));
        await cp.stop();
      },
    };
  } catch (err) {
    await cp.stop();
    throw err;
  }
}

/** authProxy serves plain HTTP on a free loopback port and forwards each request to upstream with the token. */
async function authProxy(upstream: string, token: string, ca: Buffer): Promise<Server> {
  const target = new URL(upstream);
  const agent = new Agent({ keepAlive: true, ca });
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const headers = { ...req.headers, host: target.host, authorization: `Bearer ${token}` };
    const up = request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers, agent }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on("error", (err) => {
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
      res.end(`the test's proxy to kube-apiserver: ${err.message}`);
    });
    // A client that goes (a watch closed, a request aborted) ends its request upstream too.
    res.on("close", () => up.destroy());
    req.pipe(up);
  });
  server.on("close", () => agent.destroy());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}
