// Requests to an API server as its kubeconfig says to make them: its server,
// the CA it names (xfn dev-cluster and xfn host --embedded serve TLS on a
// certificate of their own) and its bearer token. A fetch-like answer.
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { parse } from "yaml";

export interface KubeAnswer {
  status: number;
  ok: boolean;
  text(): Promise<string>;
  json(): Promise<any>;
}

/** kubeFetch returns a fetch for paths of the server the kubeconfig file names, with its CA and token. */
export function kubeFetch(kubeconfig: string) {
  const kc = parse(readFileSync(kubeconfig, "utf8")) as any;
  const cluster = kc.clusters[0].cluster;
  const server: string = cluster.server;
  const ca = cluster["certificate-authority-data"] ? Buffer.from(cluster["certificate-authority-data"], "base64") : undefined;
  const token: string | undefined = kc.users?.[0]?.user?.token;
  return (path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<KubeAnswer> =>
    new Promise((resolve, reject) => {
      const url = new URL(`${server}${path}`);
      const request = url.protocol === "https:" ? httpsRequest : httpRequest;
      const req = request(
        url,
        {
          method: init.method ?? "GET",
          headers: { ...init.headers, ...(token ? { authorization: `Bearer ${token}` } : {}) },
          ...(ca ? { ca } : {}),
          // A connection of its own, closed after: a kept-alive one would hold a test's process open.
          agent: false,
        },
        (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (body += d));
          res.on("end", () => {
            const status = res.statusCode ?? 0;
            resolve({ status, ok: status >= 200 && status < 300, text: async () => body, json: async () => JSON.parse(body) });
          });
        },
      );
      req.on("error", reject);
      if (init.body !== undefined) req.write(init.body);
      req.end();
    });
}
