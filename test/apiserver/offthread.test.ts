// A long regular-expression match in a write (a schema's pattern, a rule's
// matches()) runs off the serving thread (src/schema/offthread.ts): other
// clients are answered meanwhile, the answer is the one the match gives, and
// SIGTERM ends the CLI's server while the match runs. On one thread, the
// pattern [ab]*a[ab]{500}$ over a 1.4 MB value held every client 9-28 s.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster } from "../../src/apiserver/server.js";
import { crd } from "../support/cluster.js";
import { kubeFetch } from "../support/kubefetch.js";
import { XFN } from "../support/spawn.js";

const O = suite("dev-cluster: long regular-expression matches off the serving thread");

const PATTERN = "[ab]*a[ab]{500}$";
const BASE = "/apis/example.org/v1/namespaces/default/widgets";
const CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const json = { "Content-Type": "application/json" };
const widgets = () =>
  JSON.stringify(
    crd("example.org", "Widget", "widgets", "Namespaced", [
      {
        name: "v1",
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: {
                type: "object",
                properties: {
                  s: { type: "string", pattern: PATTERN },
                  t: { type: "string", maxLength: 400_000, "x-kubernetes-validations": [{ rule: `self.matches('${PATTERN}')` }] },
                },
              },
            },
          },
        },
      },
    ]),
  );
const widget = (name: string, spec: object) => JSON.stringify({ apiVersion: "example.org/v1", kind: "Widget", metadata: { name }, spec });
/**
 * A value of n characters the pattern matches (an a 501 from the end) or not (a b there): a and b
 * alternating, which keeps RE2's state set large (about 10 ns a character per instruction here).
 */
const value = (n: number, matching: boolean) => "ab".repeat(n).slice(0, n - 501) + (matching ? "a" : "b") + "ab".repeat(250);

O("a long pattern match: other clients answered while it runs; the write is stored or refused as the match says", async () => {
  const c = await startDevCluster();
  try {
    assert.is((await fetch(`${c.url}${CRDS}`, { method: "POST", headers: json, body: widgets() })).status, 201);
    const N = 200_000; // 200,000 × 506 instructions: about a second of RE2 here
    let done = false;
    const write = fetch(`${c.url}${BASE}`, { method: "POST", headers: json, body: widget("bad", { s: value(N, false) }) }).then(
      async (r) => {
        done = true;
        return { status: r.status, body: (await r.json()) as { message: string } };
      },
    );
    // Answered while the write is still being validated (on one thread they waited for it).
    for (const path of ["/version", "/readyz", `${BASE}`]) {
      assert.is((await fetch(`${c.url}${path}`)).status, 200, path);
      assert.not.ok(done, `${path} was answered only after the write`);
    }
    const refused = await write;
    assert.is(refused.status, 422);
    assert.match(refused.body.message, `spec.s: Invalid value: "abab`);
    assert.match(refused.body.message, `should match '${PATTERN}'`);
    const stored = await fetch(`${c.url}${BASE}`, { method: "POST", headers: json, body: widget("good", { s: value(N, true) }) });
    assert.is(stored.status, 201);
    // A rule's matches() the same way, for a create and for a patch.
    const rule = await fetch(`${c.url}${BASE}`, { method: "POST", headers: json, body: widget("rule", { t: value(N, false) }) });
    assert.is(rule.status, 422);
    assert.match(((await rule.json()) as { message: string }).message, `failed rule: self.matches('${PATTERN}')`);
    const patched = await fetch(`${c.url}${BASE}/good`, {
      method: "PATCH",
      headers: { "Content-Type": "application/merge-patch+json" },
      body: JSON.stringify({ spec: { t: value(N, true) } }),
    });
    assert.is(patched.status, 200);
    const got = (await (await fetch(`${c.url}${BASE}/good`)).json()) as { spec: { s: string; t: string } };
    assert.is(got.spec.t.length, N);
    assert.is(got.spec.s.length, N);
  } finally {
    await c.stop();
  }
});

O("SIGTERM ends `xfn dev-cluster` while a long match runs: the write is never answered", async () => {
  const dir = mkdtempSync(join(tmpdir(), "xfn-offthread-"));
  const kubeconfig = join(dir, "kubeconfig");
  const child = spawn(process.execPath, [XFN, "dev-cluster", "--port", "0", "--kubeconfig", kubeconfig]);
  try {
    await new Promise<void>((resolve, reject) => {
      let out = "";
      child.stdout.on("data", (d) => {
        out += d;
        if (/"port":\d+/.test(out)) resolve();
      });
      child.on("exit", (code) => reject(new Error(`dev-cluster exited with ${code}: ${out}`)));
    });
    const kf = kubeFetch(kubeconfig);
    assert.is((await kf(CRDS, { method: "POST", headers: json, body: widgets() })).status, 201);
    // 1.4 MB: many seconds of RE2.
    const write = kf(BASE, { method: "POST", headers: json, body: widget("w", { s: value(1_400_000, true) }) }).then(
      (r) => `answered ${r.status}`,
      (err: Error) => `not answered: ${err.message}`,
    );
    assert.is((await kf("/version")).status, 200, "the server answers while the match runs");
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    child.kill("SIGTERM");
    assert.is(await exited, 0);
    assert.match(await write, /^not answered/);
  } finally {
    child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
});

O.run();
