// xfn host and xfn dev-cluster as a user runs them.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { once } from "node:events";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { until } from "../support/cluster.js";
import { makePki } from "../support/certs.js";
import { kubeFetch } from "../support/kubefetch.js";
import { ROOT, run, startServe, XFN } from "../support/spawn.js";

const C = suite("cli: xfn host");

C("the README demo: xfn host --embedded composes the example buckets and reports status", async () => {
  const child = spawn(
    process.execPath,
    [
      XFN,
      "host",
      "--embedded",
      "--functions",
      "examples/functions.yaml",
      "--manifests",
      "examples/host",
      "--manifests",
      "examples/composition.yaml",
      "--manifests",
      "examples/xr.yaml",
    ],
    { cwd: ROOT },
  );
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  try {
    await until(
      "the XR controller and an applied bucket",
      () => /started XR controller/.test(out) && /"kind":"XBuckets"/.test(out),
      20_000,
    );
    // The embedded API server serves TLS and asks for the token its kubeconfig holds.
    const kubeconfig = /"url":"https:\/\/127\.0\.0\.1:\d+","kubeconfig":"([^"]+)"/.exec(out)?.[1];
    assert.ok(kubeconfig, out);
    const get = kubeFetch(kubeconfig!);
    await until(
      "a composed bucket",
      async () => {
        const r = await get(`/apis/s3.aws.upbound.io/v1beta1/buckets`);
        return ((await r.json()) as { items: unknown[] }).items.length === 1;
      },
      20_000,
    );
    // The status is written after the apply, in the same reconcile: wait for it too.
    let xr: any;
    await until(
      "the XR's status",
      async () => {
        xr = await (await get(`/apis/example.xfn.dev/v1alpha1/xbuckets/team-a`)).json();
        return xr.status?.bucketCount !== undefined;
      },
      20_000,
    );
    assert.is(xr.status.bucketCount, 2);
  } finally {
    child.kill("SIGTERM");
  }
  assert.is(await exited, 0);
  // The kubeconfig it wrote in the temporary folder (a token of a server now gone) goes with it.
  const kubeconfig = /"kubeconfig":"([^"]+)"/.exec(out)![1]!;
  assert.match(kubeconfig, /\/xfn-host-\d+\.kubeconfig$/);
  assert.not.ok(existsSync(kubeconfig), `${kubeconfig} was left behind`);
});

C("bad input: a missing kubeconfig or functions file is a clear error, exit 1", async () => {
  const k = await run(["host", "--kubeconfig", "/nonexistent/kubeconfig"]);
  assert.is(k.code, 1);
  assert.match(k.stderr, /cannot read kubeconfig \/nonexistent\/kubeconfig: no such file/);
  const f = await run(["host", "--embedded", "--functions", "/nonexistent/functions.yaml"]);
  assert.is(f.code, 1);
  assert.match(f.stderr, /cannot read \/nonexistent\/functions\.yaml/);
  // The embedded server had started and written its kubeconfig (its log says where): a failed start-up
  // removes it (each such run left one in the temp folder).
  const written = /"kubeconfig":"([^"]+)"/.exec(f.stdout + f.stderr)?.[1];
  assert.ok(written, `the host logged its kubeconfig:\n${f.stdout}${f.stderr}`);
  assert.not.ok(existsSync(written), `${written} is left`);
  const d = await run(["dev-cluster", "--port", "99999"]);
  assert.is(d.code, 1);
  assert.match(d.stderr, /--port must be 0-65535/);
  for (const bad of ["abc", "0", "-5"]) {
    const t = await run(["host", "--embedded", "--request-timeout", bad]);
    assert.is(t.code, 1, `--request-timeout ${bad}`);
    assert.match(t.stderr, new RegExp(`--request-timeout must be a positive number of seconds, got "${bad}"`));
  }
});

C("bad input: --function-tls-certs-dir missing or holding garbage is a clear error naming the file, exit 1 (xfn call too)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "xfn-host-tls-"));
  try {
    const functions = join(dir, "functions.yaml");
    writeFileSync(
      functions,
      "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-hello\n  annotations:\n" +
        "    render.crossplane.io/runtime: Development\n    render.crossplane.io/runtime-development-target: 127.0.0.1:1\n",
    );
    const garbage = join(dir, "garbage");
    mkdirSync(garbage);
    for (const f of ["tls.crt", "tls.key", "ca.crt"]) writeFileSync(join(garbage, f), "not a PEM file\n");
    const host = (certs: string) =>
      run(["host", "--embedded", "--metrics-address", "off", "--functions", functions, "--function-tls-certs-dir", certs]);
    const missing = await host(join(dir, "nope"));
    assert.is(missing.code, 1);
    assert.match(missing.stderr, /xfn host: cannot load client TLS certificates from .*nope: tls\.crt: ENOENT/);
    // Before: "xfn host: error:0480006C:PEM routines::no start line", naming no file.
    const bad = await host(garbage);
    assert.is(bad.code, 1);
    assert.match(bad.stderr, /xfn host: cannot load client TLS certificates from .*garbage: tls\.crt is not a valid PEM certificate/);
    const call = await run(["call", "127.0.0.1:1", "functions/hello/example/request.yaml", "--tls-certs-dir", garbage]);
    assert.is(call.code, 1);
    assert.match(call.stderr, /xfn call: cannot load client TLS certificates from .*garbage: tls\.crt is not a valid PEM certificate/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** startHost runs `xfn host ...args` and collects its output until stopped. */
function startHost(args: string[], env: NodeJS.ProcessEnv = {}) {
  const child = spawn(process.execPath, [XFN, "host", ...args], { cwd: ROOT, env: { ...process.env, ...env } });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  return { output: () => out, exited, stop: () => (child.kill("SIGTERM"), exited) };
}

C("xfn dev-cluster removes the kubeconfig it wrote in the temporary folder when it stops, and keeps one the user named", async () => {
  const named = join(mkdtempSync(join(tmpdir(), "xfn-dev-cluster-named-")), "kubeconfig");
  const own = spawn(process.execPath, [XFN, "dev-cluster"], { cwd: ROOT });
  const theirs = spawn(process.execPath, [XFN, "dev-cluster", "--kubeconfig", named], { cwd: ROOT });
  const outs = [own, theirs].map((c) => {
    const o = { text: "", exited: new Promise<number | null>((r) => c.on("exit", (code) => r(code))) };
    c.stdout.on("data", (d) => (o.text += d));
    c.stderr.on("data", (d) => (o.text += d));
    return o;
  });
  try {
    await until("both serving", () => outs.every((o) => /"msg":"dev-cluster serving"/.test(o.text)), 20_000);
    const written = outs.map((o) => /"kubeconfig":"([^"]+)"/.exec(o.text)![1]!);
    assert.match(written[0]!, /\/xfn-dev-cluster-\d+\.kubeconfig$/);
    assert.is(written[1], named);
    for (const f of written) assert.ok(existsSync(f), f);
  } finally {
    own.kill("SIGTERM");
    theirs.kill("SIGTERM");
  }
  assert.equal(await Promise.all(outs.map((o) => o.exited)), [0, 0]);
  const written = outs.map((o) => /"kubeconfig":"([^"]+)"/.exec(o.text)![1]!);
  assert.not.ok(existsSync(written[0]!), `${written[0]} was left behind`);
  assert.ok(existsSync(named), "the kubeconfig the user named was removed");
  rmSync(dirname(named), { recursive: true, force: true });
});

C("--leader-election holds a Lease and --metrics-address serves /metrics, leader gauge included", async () => {
  const h = startHost(["--embedded", "--leader-election", "--leader-election-id", "cli-host", "--metrics-address", "127.0.0.1:0"]);
  try {
    await until("leadership and metrics", () => /became the leader/.test(h.output()) && /serving metrics at/.test(h.output()), 20_000);
    const kubeconfig = /"url":"https:\/\/127\.0\.0\.1:\d+","kubeconfig":"([^"]+)"/.exec(h.output())?.[1];
    const metrics = /"address":"(127\.0\.0\.1:\d+)","msg":"serving metrics/.exec(h.output())?.[1];
    assert.ok(kubeconfig && metrics, h.output());
    const lease = (await (await kubeFetch(kubeconfig!)(`/apis/coordination.k8s.io/v1/namespaces/default/leases/cli-host`)).json()) as any;
    const identity = /"identity":"([^"]+)","msg":"became the leader/.exec(h.output())?.[1];
    assert.is(lease.spec?.holderIdentity, identity);
    const text = await (await fetch(`http://${metrics}/metrics`)).text();
    assert.match(text, /^xfn_host_leader 1$/m);
    assert.match(text, /^xfn_host_watches \d+$/m);
    for (const path of ["/healthz", "/readyz"]) {
      const r = await fetch(`http://${metrics}${path}`);
      assert.equal([r.status, await r.text()], [200, "ok\n"], path);
    }
  } finally {
    assert.is(await h.stop(), 0);
  }
});

C("a busy --metrics-address is logged and the host runs on; off serves none", async () => {
  const blocker = createServer().listen(0, "127.0.0.1");
  await once(blocker, "listening");
  const port = (blocker.address() as AddressInfo).port;
  const h = startHost(["--embedded", "--metrics-address", `127.0.0.1:${port}`]);
  const off = startHost(["--embedded", "--metrics-address", "off"]);
  try {
    await until(
      "the busy port reported and the host started",
      () => /running without \/metrics/.test(h.output()) && /host started/.test(h.output()),
      20_000,
    );
    // Started (its signal handlers are installed once it has), not only listening.
    await until("the host without metrics started", () => /host started/.test(off.output()), 20_000);
    assert.not.match(off.output(), /serving metrics/);
  } finally {
    blocker.close();
    // Both stopped before either is checked: a failed check must not leave a host running.
    assert.equal(await Promise.all([h.stop(), off.stop()]), [0, 0]);
  }
});

C("SIGTERM while the host is still starting stops it as gracefully as after: exit 0", async () => {
  const h = startHost(["--embedded", "--metrics-address", "127.0.0.1:0"]);
  try {
    // /metrics is served just before the host starts installing Crossplane's kinds and its watches.
    await until("metrics served", () => /serving metrics at/.test(h.output()), 20_000);
  } finally {
    assert.is(await h.stop(), 0, h.output());
  }
});

C("--function-tls-certs-dir: a Development-runtime function is called with mTLS, as Crossplane calls it; without, a warning", async () => {
  const pki = await makePki();
  // Crossplane's client Secret as files; the server's certificate names function-hello.crossplane-system.
  const client = join(pki.dir, "client-secret");
  mkdirSync(client);
  writeFileSync(join(client, "ca.crt"), pki.ca);
  writeFileSync(join(client, "tls.crt"), pki.client.cert);
  writeFileSync(join(client, "tls.key"), pki.client.key);
  const fn = await startServe(["functions/hello"], { TLS_SERVER_CERTS_DIR: pki.serverDir });
  const functions = join(pki.dir, "functions.yaml");
  writeFileSync(
    functions,
    "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-hello\n  annotations:\n" +
      `    render.crossplane.io/runtime: Development\n    render.crossplane.io/runtime-development-target: 127.0.0.1:${fn.port}\n---\n` +
      "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-lifecycle\n  annotations:\n" +
      `    render.xfn.dev/module: ${join(ROOT, "functions/lifecycle")}\n`,
  );
  const args = ["--embedded", "--metrics-address", "off", "--functions", functions];
  const manifests = ["--manifests", "examples/host", "--manifests", "examples/composition.yaml", "--manifests", "examples/xr.yaml"];
  const secure = startHost([...args, ...manifests, "--function-tls-certs-dir", client]);
  const plain = startHost([...args, ...manifests], { TLS_CLIENT_CERTS_DIR: "" });
  try {
    await until(
      "a bucket composed through the mTLS call",
      async () => {
        const kubeconfig = /"url":"https:\/\/127\.0\.0\.1:\d+","kubeconfig":"([^"]+)"/.exec(secure.output())?.[1];
        if (!kubeconfig) return false;
        const r = await kubeFetch(kubeconfig)(`/apis/s3.aws.upbound.io/v1beta1/buckets`);
        return r.status === 200 && ((await r.json()) as { items: unknown[] }).items.length === 1;
      },
      30_000,
    );
    assert.not.match(secure.output(), /in plaintext/);
    await until(
      "the plaintext warning and the refused call",
      () => /cannot run Function \\"function-hello\\"/.test(plain.output()),
      30_000,
    );
    assert.match(
      plain.output(),
      new RegExp(`calling Function \\\\"function-hello\\\\" at 127\\.0\\.0\\.1:${fn.port} in plaintext: give --function-tls-certs-dir`),
    );
  } finally {
    assert.is(await secure.stop(), 0);
    assert.is(await plain.stop(), 0);
    await fn.stop();
    pki.cleanup();
  }
});

C("in a pod (KUBERNETES_SERVICE_HOST set) the host uses the in-cluster config and says which server", async () => {
  // Without a service account the first request fails naming the missing file: exit 1, not a hang.
  const r = await run(["host", "--metrics-address", "off"], {
    env: { KUBERNETES_SERVICE_HOST: "127.0.0.1", KUBERNETES_SERVICE_PORT: "1" },
  });
  assert.is(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /"server":"https:\/\/127\.0\.0\.1:1".*using in-cluster config/);
  assert.match(r.stderr, /serviceaccount/);
});

C.run();
