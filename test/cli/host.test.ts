// xfn host and xfn dev-cluster as a user runs them.
import { spawn } from "node:child_process";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { until } from "../support/cluster.js";
import { ROOT, run, XFN } from "../support/spawn.js";

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
    const url = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(out)?.[1];
    assert.ok(url, out);
    await until(
      "a composed bucket",
      async () => {
        const r = await fetch(`${url}/apis/s3.aws.upbound.io/v1beta1/buckets`);
        return ((await r.json()) as { items: unknown[] }).items.length === 1;
      },
      20_000,
    );
    // The status is written after the apply, in the same reconcile: wait for it too.
    let xr: any;
    await until(
      "the XR's status",
      async () => {
        xr = await (await fetch(`${url}/apis/example.xfn.dev/v1alpha1/xbuckets/team-a`)).json();
        return xr.status?.bucketCount !== undefined;
      },
      20_000,
    );
    assert.is(xr.status.bucketCount, 2);
  } finally {
    child.kill("SIGTERM");
  }
  assert.is(await exited, 0);
});

C("bad input: a missing kubeconfig or functions file is a clear error, exit 1", async () => {
  const k = await run(["host", "--kubeconfig", "/nonexistent/kubeconfig"]);
  assert.is(k.code, 1);
  assert.match(k.stderr, /cannot read kubeconfig \/nonexistent\/kubeconfig: no such file/);
  const f = await run(["host", "--embedded", "--functions", "/nonexistent/functions.yaml"]);
  assert.is(f.code, 1);
  assert.match(f.stderr, /cannot read \/nonexistent\/functions\.yaml/);
  const d = await run(["dev-cluster", "--port", "99999"]);
  assert.is(d.code, 1);
  assert.match(d.stderr, /--port must be 0-65535/);
});

C.run();
