// GET /metrics: the embedded API server counts requests as kube-apiserver's
// apiserver_request_total does (verb, resource, subresource, code; LIST and
// WATCH for collection reads, APPLY for server-side apply, the method for the
// rest, resource "" for paths that name none), and the TCP connections it
// accepted; bench/host.ts reads it to count the host's requests per XR.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { get as httpsGet } from "node:https";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parseRequestTotals, requestLabels } from "../../src/apiserver/metrics.js";
import { startDevCluster } from "../../src/apiserver/server.js";
import { kubeFetch } from "../support/kubefetch.js";

const M = suite("GET /metrics: requests counted as kube-apiserver counts them");

M("labels: verbs as kube's cleanVerb names them, the resource and subresource from the path", () => {
  const J = "application/json";
  const table: [string, string, string, string, string, string][] = [
    ["GET", "/api/v1/namespaces/default/configmaps", J, "LIST", "configmaps", ""],
    ["GET", "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=3", J, "WATCH", "configmaps", ""],
    ["GET", "/api/v1/namespaces/default/configmaps?watch=1", J, "WATCH", "configmaps", ""],
    ["GET", "/api/v1/namespaces/default/configmaps/a", J, "GET", "configmaps", ""],
    [
      "PATCH",
      "/apis/example.org/v1/namespaces/ns/widgets/a/status?fieldManager=m",
      "application/apply-patch+yaml",
      "APPLY",
      "widgets",
      "status",
    ],
    ["PATCH", "/apis/example.org/v1/widgets/a", "application/merge-patch+json", "PATCH", "widgets", ""],
    ["POST", "/apis/example.org/v1/widgets", J, "POST", "widgets", ""],
    ["PUT", "/api/v1/namespaces/gone/finalize", J, "PUT", "namespaces", "finalize"],
    ["GET", "/api/v1/namespaces/gone", J, "GET", "namespaces", ""],
    ["DELETE", "/api/v1/namespaces/default/configmaps", J, "DELETECOLLECTION", "configmaps", ""],
    ["DELETE", "/api/v1/namespaces/default/configmaps/a", J, "DELETE", "configmaps", ""],
    ["GET", "/apis/example.org/v1", J, "GET", "", ""],
    ["GET", "/metrics", J, "GET", "", ""],
  ];
  for (const [method, url, type, verb, resource, subresource] of table)
    assert.equal(requestLabels(method, url, type), { verb, resource, subresource }, `${method} ${url}`);
});

M("over HTTP: each answered request counted once by its code, connections counted, the text read back by parseRequestTotals", async () => {
  const c = await startDevCluster({ token: "metrics" });
  const dir = mkdtempSync(join(tmpdir(), "xfn-metrics-"));
  try {
    writeFileSync(join(dir, "kubeconfig"), c.kubeconfig());
    const f = kubeFetch(join(dir, "kubeconfig"));
    const cm = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a" }, data: { k: "v" } };
    const post = { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(cm) };
    assert.is((await f("/api/v1/namespaces/default/configmaps", post)).status, 201);
    assert.is((await f("/api/v1/namespaces/default/configmaps", post)).status, 409);
    for (let i = 0; i < 3; i++) assert.is((await f("/api/v1/namespaces/default/configmaps/a")).status, 200);
    const res = await f("/metrics");
    assert.is(res.status, 200);
    const totals = parseRequestTotals(await res.text());
    const n = (verb: string, code: string) =>
      totals.filter((t) => t.verb === verb && t.resource === "configmaps" && t.code === code).reduce((a, t) => a + t.n, 0);
    assert.is(n("POST", "201"), 1);
    assert.is(n("POST", "409"), 1);
    assert.is(n("GET", "200"), 3);
    const again = await (await f("/metrics")).text();
    assert.match(again, /^apiserver_request_total\{code="200",resource="",subresource="",verb="GET"\} 1$/m);
    assert.ok(Number(/^xfn_apiserver_connections_total (\d+)$/m.exec(again)?.[1]) >= 1);
    // Without the token it is refused, as kube-apiserver refuses /metrics to anyone unauthenticated.
    const anon = await new Promise<number>((resolve, reject) =>
      httpsGet(`${c.url}/metrics`, { rejectUnauthorized: false }, (r) => {
        r.resume();
        resolve(r.statusCode ?? 0);
      }).on("error", reject),
    );
    assert.is(anon, 401);
  } finally {
    await c.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

M.run();
