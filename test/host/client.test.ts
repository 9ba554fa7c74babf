// The host's bounded API clients and watches (src/host/client.ts), against
// servers that answer late, stall half-way, refuse, or split their lines.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { CoreV1Api, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster } from "../../src/apiserver/server.js";
import { apiClient, BoundedWatch, objectClient, TimeoutError } from "../../src/host/client.js";
import { apiMessage } from "../../src/host/kube.js";
import { kubeconfigFor } from "../support/cluster.js";
import { startProxy } from "../support/proxy.js";

const C = suite("host: bounded API client and watch");

/** failure settles with what p rejects with, or with a note if it neither settles nor fails within 3 s (so a hang fails the test). */
const failure = (p: Promise<unknown>) =>
  Promise.race([
    p.then(
      () => "succeeded",
      (e: unknown) => e,
    ),
    new Promise((r) => setTimeout(() => r("still waiting after 3 s"), 3000).unref()),
  ]);

/** serve starts a plain HTTP server with handler and returns a kubeconfig for it. */
async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void) {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: `http://127.0.0.1:${(server.address() as { port: number }).port}`, skipTLSVerify: true }],
    users: [{ name: "u" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return {
    kc,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    },
  };
}

C("a request the API server never answers fails after the timeout, naming the request and the wait", async () => {
  const c = await startDevCluster();
  const proxy = await startProxy(c.port);
  const kc = kubeconfigFor(c, proxy.port);
  try {
    const core = apiClient(kc, CoreV1Api, 300);
    // Answered: the client works as client-node's own.
    const ns = await core.listNamespacedConfigMap({ namespace: "default" });
    assert.equal(ns.items, []);
    proxy.blackhole();
    const started = Date.now();
    const err = await failure(core.readNamespacedConfigMap({ namespace: "default", name: "a" }));
    assert.instance(err, TimeoutError);
    assert.is((err as Error).message, "GET /api/v1/namespaces/default/configmaps/a: the API server did not answer within 0.3 s");
    assert.ok(Date.now() - started < 2000, "given up at the timeout");
    // KubernetesObjectApi (server-side apply, reads by kind) is bounded too.
    const objects = objectClient(kc, 300);
    const e2 = await failure(objects.read({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a", namespace: "default" } }));
    assert.instance(e2, TimeoutError);
    // Without an agent of its own (none to close), the caller still gets the error at the deadline.
    class NoAgent extends KubeConfig {
      override async applySecurityAuthentication(ctx: Parameters<KubeConfig["applySecurityAuthentication"]>[0]) {
        await super.applySecurityAuthentication(ctx);
        ctx.setAgent(undefined as never);
      }
    }
    const bare = new NoAgent();
    bare.loadFromString(kc.exportConfig());
    const e3 = await failure(apiClient(bare, CoreV1Api, 300).readNamespacedConfigMap({ namespace: "default", name: "a" }));
    assert.instance(e3, TimeoutError);
  } finally {
    await proxy.close();
    await c.stop();
  }
});

C("the timeout covers the body: headers then silence fails; a slow but whole answer within it succeeds", async () => {
  const s = await serve((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    if (req.url!.includes("/stall")) return void res.write('{"kind":"ConfigMap","metadata":{"na');
    setTimeout(() => res.end('{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"slow"}}'), 100);
  });
  try {
    // 2 s: the slow answer (0.1 s) must be within it on a machine as busy as ours get (0.4 s was not, beside two CPU hogs).
    const core = apiClient(s.kc, CoreV1Api, 2_000);
    const ok = await core.readNamespacedConfigMap({ namespace: "default", name: "slow" });
    assert.is(ok.metadata?.name, "slow");
    const err = await failure(core.readNamespacedConfigMap({ namespace: "default", name: "stall" }));
    assert.instance(err, TimeoutError);
    assert.match((err as Error).message, /configmaps\/stall: the API server did not answer within 2 s/);
  } finally {
    await s.close();
  }
});

C("an API error is passed on as client-node gives it, not as a timeout, however long the timeout", async () => {
  const c = await startDevCluster();
  try {
    // A timeout longer than setTimeout can wait (2^31 - 1 ms) is a long wait, not none.
    const custom = apiClient(kubeconfigFor(c), CustomObjectsApi, 3_000_000_000);
    const err = await failure(custom.getClusterCustomObject({ group: "example.org", version: "v1", plural: "nothings", name: "x" }));
    assert.not.instance(err, TimeoutError);
    assert.is((err as { code?: number }).code, 404);
  } finally {
    await c.stop();
  }
});

C("a watch asks for bookmarks and a server-side timeout, delivers lines whole however they are split, and ends cleanly", async () => {
  let url = "";
  const big = "x".repeat(200_000);
  const s = await serve((req, res) => {
    url = req.url!;
    res.writeHead(200, { "content-type": "application/json" });
    const a = JSON.stringify({ type: "ADDED", object: { metadata: { name: "a", resourceVersion: "1" }, data: big } });
    const b = JSON.stringify({ type: "BOOKMARK", object: { metadata: { resourceVersion: "7" } } });
    // Split mid-line, several lines in one write, a line that is not JSON, no newline at the very end.
    res.write(a.slice(0, 1000));
    setTimeout(() => {
      res.write(`${a.slice(1000)}\nnot json\n${b.slice(0, 10)}`);
      setTimeout(() => res.end(b.slice(10)), 20);
    }, 20);
  });
  try {
    const w = new BoundedWatch(s.kc, "things", { timeoutMs: [7000, 7000] });
    const seen: Array<[string, any]> = [];
    const err = await new Promise(
      (resolve) => void w.watch("/apis/x/v1/things", { resourceVersion: "0" }, (t, o) => seen.push([t, o]), resolve),
    );
    assert.is(err, null, "the server ended it: no error");
    assert.equal(
      seen.map(([t, o]) => [t, o.metadata.name ?? o.metadata.resourceVersion]),
      [
        ["ADDED", "a"],
        ["BOOKMARK", "7"],
      ],
    );
    assert.is(seen[0]![1].data.length, big.length);
    const q = new URL(url, "http://x").searchParams;
    assert.is(q.get("watch"), "true");
    assert.is(q.get("resourceVersion"), "0");
    assert.is(q.get("allowWatchBookmarks"), "true");
    assert.is(q.get("timeoutSeconds"), "7");
  } finally {
    await s.close();
  }
});

C("a refused watch ends with the status code (410 Gone makes the informer list again) and the server's message", async () => {
  const s = await serve((_req, res) => {
    res.writeHead(410, { "content-type": "application/json" });
    res.end(JSON.stringify({ kind: "Status", code: 410, reason: "Expired", message: "too old resource version: 1 (20)" }));
  });
  try {
    const w = new BoundedWatch(s.kc, "things");
    const err = (await new Promise<unknown>((resolve) => void w.watch("/apis/x/v1/things", {}, () => {}, resolve))) as Error & {
      statusCode: number;
    };
    assert.is(err.statusCode, 410);
    assert.is(err.message, "the API server answered 410: too old resource version: 1 (20)");
  } finally {
    await s.close();
  }
});

C("a watch the server never ends is given up after its timeout and grace; one aborted is not reported", async () => {
  const s = await serve((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.write(`${JSON.stringify({ type: "ADDED", object: { metadata: { name: "a", resourceVersion: "1" } } })}\n`);
    // ... and then nothing, for ever.
  });
  try {
    // No bookmark ever comes, so silence alone is no sign of a dead connection: the idle time does not apply.
    const w = new BoundedWatch(s.kc, "example.org/v1/things", { timeoutMs: [1000, 1000], graceMs: 300, idleMs: 200 });
    const started = Date.now();
    let events = 0;
    const err = (await new Promise<unknown>((resolve) => void w.watch("/apis/x/v1/things", {}, () => events++, resolve))) as Error;
    assert.is(events, 1);
    assert.instance(err, TimeoutError);
    assert.is(
      err.message,
      "the watch of example.org/v1/things is still open 0.3 s past the 1 s the server was asked to end it in; its connection seems dead",
    );
    assert.ok(Date.now() - started >= 1300);
    let called = false;
    const controller = await w.watch(
      "/apis/x/v1/things",
      {},
      () => {},
      () => (called = true),
    );
    controller.abort();
    await new Promise((r) => setTimeout(r, 1500));
    assert.not.ok(called, "an aborted watch does not call done");
  } finally {
    await s.close();
  }
});

C("once the server has sent a bookmark, a watch of that kind silent for the idle time is given up; a busy one is not", async () => {
  let n = 0;
  const bookmark = `${JSON.stringify({ type: "BOOKMARK", object: { metadata: { resourceVersion: "7" } } })}\n`;
  const s = await serve((_req, res) => {
    n++;
    res.writeHead(200, { "content-type": "application/json" });
    if (n === 1) {
      // The server shows it sends bookmarks, then ends the watch as asked.
      res.write(bookmark);
      setTimeout(() => res.end(), 100);
    } else if (n === 4) {
      // A bookmark every 100 ms, for ever.
      const t = setInterval(() => res.write(bookmark), 100);
      res.on("close", () => clearInterval(t));
    }
    // 2 and 3: nothing, for ever.
  });
  const w = new BoundedWatch(s.kc, "example.org/v1/things", { timeoutMs: [1000, 1000], graceMs: 300, idleMs: 400 });
  const run = async () => {
    const started = Date.now();
    const err = await new Promise<unknown>((resolve) => void w.watch("/apis/x/v1/things", {}, () => {}, resolve));
    return { err: err as Error | null, ms: Date.now() - started };
  };
  const timedOut = /^the watch of example\.org\/v1\/things is still open 0\.3 s past the 1 s/;
  try {
    const first = await run();
    assert.is(first.err, null, "ended by the server");
    // The next watch is watched for silence from its start.
    const second = await run();
    assert.instance(second.err, TimeoutError);
    assert.is(
      second.err!.message,
      "the watch of example.org/v1/things has been silent for 0.4 s, though the server sends bookmarks on it; its connection seems dead",
    );
    assert.ok(second.ms >= 400 && second.ms < 1200, `given up at the idle time, not the timeout (${second.ms} ms)`);
    // Given up for silence, the kind is learned again: with no bookmark since, only the timeout ends a watch.
    const third = await run();
    assert.match(third.err!.message, timedOut);
    // At the timeout and grace (1.3 s), far from the idle time; timers may fire a millisecond early by the clock.
    assert.ok(third.ms >= 1250, `${third.ms} ms`);
    // Bookmarks coming more often than the idle time keep a watch open until its timeout.
    const fourth = await run();
    assert.match(fourth.err!.message, timedOut);
    assert.ok(fourth.ms >= 1250, `${fourth.ms} ms`);
    assert.is(n, 4);
  } finally {
    await s.close();
  }
});

C(
  "apiMessage: the API server's Status message, its plain-text answer with the status (kube-apiserver's for a kind not served), else the error",
  () => {
    const err = (code: number, body: unknown) =>
      Object.assign(new Error(`HTTP-Code: ${code}\nMessage: Unknown API Status Code!\nBody: ${JSON.stringify(body)}\nHeaders: {}`), {
        code,
        body,
      });
    assert.is(apiMessage(err(404, JSON.stringify({ kind: "Status", message: 'buckets "b" not found' }))), 'buckets "b" not found');
    assert.is(apiMessage(err(404, { message: "parsed already" })), "parsed already");
    assert.is(apiMessage(err(404, "404 page not found\n")), "404 page not found (HTTP 404)");
    // Not one short line: the whole error, as before.
    assert.match(apiMessage(err(502, "<html>\n<body>bad gateway</body>\n</html>")), /^HTTP-Code: 502/);
    assert.match(apiMessage(err(500, "")), /^HTTP-Code: 500/);
  },
);

C.run();
