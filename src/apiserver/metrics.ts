// What the embedded API server was asked, counted as kube-apiserver counts it
// in its apiserver_request_total metric (verb, resource, subresource, code;
// verbs as kube's cleanVerb names them: LIST and WATCH for reads of a
// collection, APPLY for a server-side apply, the HTTP method otherwise), and
// the TCP connections it accepted (xfn's own). GET /metrics answers them in
// Prometheus' text form, as kube-apiserver's /metrics does, so that a bench or
// a test counts a client's requests the same way on both servers.
import type { IncomingMessage } from "node:http";

/** requestLabels are a request's verb, resource and subresource, read from its method and path. */
export function requestLabels(method: string, url: string, contentType: string): { verb: string; resource: string; subresource: string } {
  const q = url.indexOf("?");
  const path = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? "" : url.slice(q + 1);
  const segs = path.split("/").filter(Boolean);
  let rest = segs[0] === "api" ? segs.slice(2) : segs[0] === "apis" ? segs.slice(3) : [];
  // A namespaced resource's path; a namespace itself is /api/v1/namespaces/<name>[/<subresource>].
  if (rest[0] === "namespaces" && rest.length >= 3 && !(rest.length === 3 && (rest[2] === "status" || rest[2] === "finalize")))
    rest = rest.slice(2);
  const [resource = "", name, subresource = ""] = rest;
  let verb = method;
  // A path that names no resource (discovery, /version, /metrics) is counted by its method.
  if (resource === "") return { verb, resource, subresource };
  if (method === "GET") verb = name !== undefined ? "GET" : /(?:^|&)watch=(?:true|1)(?:&|$)/.test(query) ? "WATCH" : "LIST";
  else if (method === "PATCH" && contentType.startsWith("application/apply-patch")) verb = "APPLY";
  else if (method === "DELETE" && name === undefined) verb = "DELETECOLLECTION";
  return { verb, resource, subresource };
}

/** RequestCounts counts requests by verb, resource, subresource and code, and connections accepted. */
export class RequestCounts {
  private readonly counts = new Map<string, number>();
  connections = 0;

  /** add counts req, answered with code. */
  add(req: IncomingMessage, code: number): void {
    const l = requestLabels(req.method ?? "GET", req.url ?? "/", String(req.headers["content-type"] ?? ""));
    const key = `code="${code}",resource="${l.resource}",subresource="${l.subresource}",verb="${l.verb}"`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  /** text is the counts in Prometheus' text form. */
  text(): string {
    const lines = [
      "# HELP apiserver_request_total Requests answered, by verb, resource, subresource and HTTP code.",
      "# TYPE apiserver_request_total counter",
      ...[...this.counts].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, n]) => `apiserver_request_total{${k}} ${n}`),
      "# HELP xfn_apiserver_connections_total TCP connections the server accepted.",
      "# TYPE xfn_apiserver_connections_total counter",
      `xfn_apiserver_connections_total ${this.connections}`,
    ];
    return `${lines.join("\n")}\n`;
  }
}

/** RequestTotal is one apiserver_request_total series: its labels and count. */
export interface RequestTotal {
  verb: string;
  resource: string;
  subresource: string;
  code: string;
  n: number;
}

/** parseRequestTotals reads apiserver_request_total out of a /metrics text (kube-apiserver's or ours). */
export function parseRequestTotals(text: string): RequestTotal[] {
  const out: RequestTotal[] = [];
  for (const line of text.split("\n")) {
    const m = /^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1]!, x[2]!]));
    out.push({
      verb: labels["verb"] ?? "",
      resource: labels["resource"] ?? "",
      subresource: labels["subresource"] ?? "",
      code: labels["code"] ?? "",
      n: Number(m[2]),
    });
  }
  return out;
}
