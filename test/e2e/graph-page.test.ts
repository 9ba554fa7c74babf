// The host's /graph page in a real headless browser (Debian's chromium): the
// XR and its resources are on the page; a bucket made ready with kubectl
// changes what the page shows; a screenshot goes to .tmp/test-output/.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { loadDocs } from "../../src/engine/docs.js";
import { graphRoutes } from "../../src/graph/page.js";
import { applyManifests } from "../../src/host/manifests.js";
import { startHttpServer } from "../../src/http.js";
import { until } from "../support/cluster.js";
import { hostFor } from "../support/host.js";
import { ROOT } from "../support/spawn.js";
import { needs } from "../support/needs.js";

const S = suite("host: the /graph page in chromium");
const P = needs(S, "chromium");
/** The test that also changes the cluster with the real kubectl. */
const PK = needs(S, "chromium", "kubectl");
const OUT = join(ROOT, ".tmp/test-output");

/**
 * chromium runs headless Chromium once (a fresh profile each time) and returns
 * what it printed. Not synchronously: the page it loads is served by this
 * process.
 */
async function chromium(args: string[]): Promise<string> {
  const profile = mkdtempSync(join(tmpdir(), "xfn-chromium-"));
  try {
    const { stdout } = await promisify(execFile)(
      "chromium",
      ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", `--user-data-dir=${profile}`, ...args],
      { encoding: "utf8", timeout: 60_000, maxBuffer: 16 * 1024 * 1024 },
    );
    return stdout;
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
}

PK("the page lists the XR, draws its resources by state, follows a readiness change, and can be photographed", async () => {
  const { c, kc, mem, host, dir } = await hostFor(join(ROOT, "examples"), { maxBackoffMs: 500, graphs: true });
  const page = await startHttpServer("127.0.0.1:0", graphRoutes(host), mem.log, "the XR graph page");
  const scratch = mkdtempSync(join(tmpdir(), "xfn-graph-page-"));
  const kubeconfig = join(scratch, "kubeconfig");
  writeFileSync(kubeconfig, c.kubeconfig());
  try {
    await host.start();
    await applyManifests(
      kc,
      ["host", "composition.yaml", "xr.yaml"].flatMap((f) => loadDocs(join(dir, f))),
      mem.log,
    );
    await until(
      "the XR's graph with bucket-logs created",
      () => host.graph(host.xrs()[0]?.key ?? "")?.nodes.some((n) => n.id === "bucket-logs" && n.state === "unready") === true,
      15_000,
    );
    const key = host.xrs()[0]!.key;
    const url = `http://127.0.0.1:${page.port}/graph?xr=${encodeURIComponent(key)}`;
    const dom = await chromium(["--virtual-time-budget=3000", "--dump-dom", url]);
    assert.match(dom, /<a href="\?xr=[^"]+">XBuckets\/team-a<\/a>/, "the XR in the list");
    assert.match(dom, /<g class="node" data-name="bucket-logs" data-state="unready">/);
    assert.match(dom, /<g class="node" data-name="bucket-assets" data-state="waiting">/);
    assert.match(dom, /<g class="edge" data-from="bucket-logs" data-to="bucket-assets">/);

    // Play the provider: bucket-logs is Ready. The host reconciles; the page shows it ready and bucket-assets created.
    // kubectl runs beside this process, which serves the API: not synchronously.
    const kubectl = async (...args: string[]) =>
      (await promisify(execFile)("kubectl", ["--kubeconfig", kubeconfig, ...args], { encoding: "utf8" })).stdout;
    const logs = (await kubectl("get", "buckets", "-l", "hello.xfn.dev/bucket=logs", "-o", "name")).trim();
    await kubectl(
      "patch",
      logs,
      "--subresource=status",
      "--type=merge",
      "-p",
      '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Available","lastTransitionTime":"2026-11-26T10:00:00Z"}]}}',
    );
    await until(
      "bucket-logs ready in the host's graph",
      () => host.graph(key)?.nodes.find((n) => n.id === "bucket-logs")?.state === "ready",
      15_000,
    );
    const after = await chromium(["--virtual-time-budget=3000", "--dump-dom", url]);
    assert.match(after, /<g class="node" data-name="bucket-logs" data-state="ready">/);
    assert.not.match(after, /data-name="bucket-assets" data-state="waiting"/, "bucket-assets no longer held back");
    // What the page's script fetches every two seconds is the same main part, current.
    const main = await (await fetch(`http://127.0.0.1:${page.port}/graph/main?xr=${encodeURIComponent(key)}`)).text();
    assert.match(main, /data-name="bucket-logs" data-state="ready"/);

    mkdirSync(OUT, { recursive: true });
    const shot = join(OUT, "host-graph-page.png");
    rmSync(shot, { force: true });
    await chromium(["--virtual-time-budget=3000", "--window-size=1200,700", `--screenshot=${shot}`, url]);
    assert.ok(existsSync(shot), "the screenshot is written");
    assert.equal([...readFileSync(shot).subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], "a PNG");
  } finally {
    await page.stop();
    await host.stop();
    await c.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
});

P("values from the cluster are escaped on the page", async () => {
  const routes = graphRoutes({
    xrs: () => [
      {
        key: "x|/<b>",
        xr: {
          kind: "XEvil",
          metadata: { name: "<script>alert(1)</script>" },
          status: { conditions: [{ type: "Ready", status: '"><img src=x>' }] },
        },
      },
    ],
    graph: () => ({ xr: { kind: "XEvil", name: "<script>" }, nodes: [{ id: "a&b", state: "ready" }], edges: [], waves: [["a&b"]] }),
  });
  const body = (await routes["/graph"]!(new URLSearchParams({ xr: "x|/<b>" }))).body;
  assert.not.match(body, /<script>alert/);
  assert.not.match(body, /<img src=x>/);
  assert.match(body, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
  assert.match(body, /data-name="a&amp;b"/);
  assert.is((body.match(/<script>/g) ?? []).length, 1, "only the page's own script");
  const gone = graphRoutes({ xrs: () => [], graph: () => undefined });
  assert.match(
    (await gone["/graph/main"]!(new URLSearchParams({ xr: "x|/<gone>" }))).body,
    /^<p>No XRs yet\.<\/p><p>No XR x\|\/&lt;gone&gt; \(it may be gone\)\.<\/p>$/,
  );
});

S.run();
