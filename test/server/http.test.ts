// The plain-HTTP endpoints of xfn serve and xfn host (metrics, probes).
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parseAddress, probeRoutes, startHttpServer } from "../../src/http.js";
import { memoryLog } from "../support/log.js";

const H = suite("http: metrics and probe endpoints");

H("parseAddress takes host:port, [v6]:port, :port and a bare port; anything else names the flag", () => {
  const ok: Array<[string, { host: string; port: number }]> = [
    ["127.0.0.1:8081", { host: "127.0.0.1", port: 8081 }],
    ["[::1]:8081", { host: "::1", port: 8081 }],
    [":8081", { host: "0.0.0.0", port: 8081 }],
    ["8081", { host: "0.0.0.0", port: 8081 }],
    ["localhost:0", { host: "localhost", port: 0 }],
  ];
  for (const [a, want] of ok) assert.equal(parseAddress(a, "the probes address"), want, a);
  for (const bad of ["localhost", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:80a", "127.0.0.1:-1", ""])
    assert.throws(
      () => parseAddress(bad, "the probes address"),
      (e: Error) => e.message === `the probes address must be host:port, got ${JSON.stringify(bad)}`,
      bad,
    );
});

H("routes answer GET and HEAD; other paths 404 listing the routes, other methods 405, a failing route 500", async () => {
  const mem = memoryLog();
  let why: string | undefined = "starting";
  const srv = await startHttpServer(
    "127.0.0.1:0",
    {
      ...probeRoutes(() => why),
      "/broken": () => {
        throw new Error("no figures");
      },
    },
    mem.log,
    "probes",
  );
  const get = async (path: string, method = "GET") => {
    const r = await fetch(`http://127.0.0.1:${srv.port}${path}`, { method });
    return [r.status, await r.text(), r.headers.get("content-type")];
  };
  try {
    assert.equal(await get("/healthz"), [200, "ok\n", "text/plain"]);
    assert.equal(await get("/readyz"), [503, "not ready: starting\n", "text/plain"]);
    why = undefined;
    assert.equal(await get("/readyz?verbose"), [200, "ok\n", "text/plain"]);
    assert.equal(await get("/readyz", "HEAD"), [200, "", "text/plain"]);
    assert.equal(await get("/readyz", "DELETE"), [405, "DELETE not allowed: use GET\n", "text/plain"]);
    assert.equal(await get("/"), [404, "not found: try /healthz, /readyz, /broken\n", "text/plain"]);
    assert.equal(await get("/toString"), [404, "not found: try /healthz, /readyz, /broken\n", "text/plain"]);
    assert.equal(await get("/broken"), [500, "no figures\n", "text/plain"]);
    assert.match(mem.text(), /"address":"127\.0\.0\.1:\d+","msg":"serving probes at \/healthz, \/readyz, \/broken"/);
  } finally {
    await srv.stop();
  }
});

H("an address already in use is named", async () => {
  const a = await startHttpServer(
    "127.0.0.1:0",
    probeRoutes(() => undefined),
    memoryLog().log,
    "probes",
  );
  try {
    await startHttpServer(
      `127.0.0.1:${a.port}`,
      probeRoutes(() => undefined),
      memoryLog().log,
      "probes",
    ).then(
      () => assert.unreachable("bound twice"),
      (e: Error) => assert.match(e.message, new RegExp(`^cannot serve probes on 127\\.0\\.0\\.1:${a.port}: listen EADDRINUSE`)),
    );
  } finally {
    await a.stop();
  }
});

H.run();
