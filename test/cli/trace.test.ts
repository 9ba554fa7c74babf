// `xfn trace` as a user runs it: against the embedded API server while `xfn
// host` (in-process here) composes three nested levels, and against servers
// that refuse it.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster } from "../../src/apiserver/server.js";
import { apis, crd, kubeconfigFor, sleep, typed, until } from "../support/cluster.js";
import { hostFor, NESTED, nestedUp } from "../support/host.js";
import { XFN, run } from "../support/spawn.js";

const T = suite("cli: xfn trace");
let scratch: string;
T.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-trace-"));
});
T.after(() => rmSync(scratch, { recursive: true, force: true }));

T("traces three nested levels the host composes: each XR's resources, and the one that waits for a field", async () => {
  const h = await hostFor(NESTED);
  const { c, host, objects } = h;
  const kubeconfig = join(scratch, "kubeconfig");
  writeFileSync(kubeconfig, c.kubeconfig());
  try {
    await host.start();
    await nestedUp(h);
    await until("the platform's wait recorded", async () => {
      const p = (await objects.getClusterCustomObject({
        group: "nest.example.org",
        version: "v1",
        plural: "xplatforms",
        name: "team-a",
      })) as any;
      return p.status?.waiting?.cluster !== undefined;
    });
    const r = await run(["trace", "xplatforms/team-a", "--kubeconfig", kubeconfig]);
    assert.is(r.code, 0, r.stderr);
    const lines = r.stdout.trimEnd().split("\n");
    assert.match(lines[0]!, /^NAME\s+SYNCED\s+READY\s+AGE\s+STATUS$/);
    assert.match(lines[1]!, /^XPlatform\/team-a\s+True\s+False\s+\d+s\s+/);
    assert.match(lines[2]!, /^├─ XNetwork\/team-a-[0-9a-f]{12}\s+True\s+/);
    assert.match(lines[3]!, /^│ {2}└─ Subnet\/team-a-[0-9a-f]{12}\s/, "the network's own resources, one level further");
    assert.ok(
      lines.some((l) => /^└─ \(cluster\)\s+-\s+-\s+-\s+Waiting: not created until vpc\.status\.privateSubnet1ID/.test(l)),
      r.stdout,
    );
    assert.ok(
      lines.some((l) => /Subnet\//.test(l)),
      r.stdout,
    );

    const wide = await run(["trace", "XPlatform", "team-a", "-o", "wide", "--kubeconfig", kubeconfig]);
    assert.is(wide.code, 0, wide.stderr);
    assert.match(wide.stdout, /^NAME\s+RESOURCE\s+SYNCED\s+READY\s+AGE\s+EXTERNAL-NAME\s+WAITS\s+STATUS\n/);
    assert.match(wide.stdout, /\n└─ \(cluster\)\s+cluster\s+-\s+-\s+-\s+for vpc\.status\.privateSubnet1ID\s+Waiting/);

    const json = await run(["trace", "xplatform.nest.example.org/team-a", "-o", "json", "--kubeconfig", kubeconfig]);
    assert.is(json.code, 0, json.stderr);
    const tree = JSON.parse(json.stdout);
    assert.equal([tree.kind, tree.name, tree.children.length], ["XPlatform", "team-a", 2]);
    assert.equal(tree.children[1].waitingFor, ["vpc.status.privateSubnet1ID"]);
    assert.is(tree.children[0].object.kind, "XNetwork", "the objects as read, for scripts");
  } finally {
    await host.stop();
    await c.stop();
  }
});

T(
  "text from the cluster reaches the terminal with its control characters escaped: no escape sequence, bell or carriage return",
  async () => {
    const c = await startDevCluster();
    const kubeconfig = join(scratch, "kubeconfig-hostile");
    writeFileSync(kubeconfig, c.kubeconfig());
    // What a hostile status can plant: clear the screen, set the window title, a hyperlink, a bell, a line rewritten.
    const clear = "\x1b[H\x1b[2J";
    const title = "\x1b]0;pwned\x07";
    const link = "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\";
    const hostile = `${clear}${title}all fine${link}\r\u202eReady\x9b31m`;
    try {
      const post = (path: string, body: unknown) =>
        fetch(`${c.url}${path}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      const patchStatus = (path: string, status: unknown) =>
        fetch(`${c.url}${path}/status`, {
          method: "PATCH",
          headers: { "Content-Type": "application/merge-patch+json" },
          body: JSON.stringify({ status }),
        });
      for (const [kind, plural] of [
        ["XThing", "xthings"],
        ["Bucket", "buckets"],
      ] as const)
        assert.is((await post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd("example.org", kind, plural))).status, 201);
      await until("the kinds served", async () => (await fetch(`${c.url}/apis/example.org/v1/buckets`)).status === 200);
      const bucket = {
        apiVersion: "example.org/v1",
        kind: "Bucket",
        metadata: {
          name: "b1",
          annotations: { "crossplane.io/composition-resource-name": `bucket${title}`, "crossplane.io/external-name": `ext${clear}` },
        },
      };
      assert.is((await post("/apis/example.org/v1/buckets", bucket)).status, 201);
      await patchStatus("/apis/example.org/v1/buckets/b1", {
        conditions: [
          { type: "Synced", status: "True", reason: "ReconcileSuccess" },
          { type: "Ready", status: "False", reason: `Creating${title}`, message: hostile },
        ],
      });
      const xr = {
        apiVersion: "example.org/v1",
        kind: "XThing",
        metadata: { name: "x1" },
        spec: { crossplane: { resourceRefs: [{ apiVersion: "example.org/v1", kind: "Bucket", name: "b1" }] } },
      };
      assert.is((await post("/apis/example.org/v1/xthings", xr)).status, 201);
      await patchStatus("/apis/example.org/v1/xthings/x1", {
        conditions: [{ type: "Ready", status: "False", reason: "Creating", message: hostile }],
        waiting: { [`later${clear}`]: { for: [`bucket.status.id${link}`], since: "2026-11-26T09:01:00Z" } },
      });
      for (const output of ["default", "wide"]) {
        const r = await run(["trace", "xthings/x1", "-o", output, "--kubeconfig", kubeconfig]);
        assert.is(r.code, 0, r.stderr);
        // eslint-disable-next-line no-control-regex -- what must not be printed
        assert.not.match(r.stdout, /[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]/, JSON.stringify(r.stdout));
        assert.match(r.stdout, /pwned\\x07all fine\^\[\]8;;https:\/\/evil\.example\^\[\\click/, r.stdout);
        assert.match(r.stdout, /\\r\\u202eReady\\x9b31m/);
        // Still one row per object.
        assert.is(r.stdout.trimEnd().split("\n").length, 4, r.stdout);
      }
      const wide = (await run(["trace", "xthings/x1", "-o", "wide", "--kubeconfig", kubeconfig])).stdout;
      assert.match(wide, /ext\^\[\[H\^\[\[2J/, wide);
      assert.match(wide, /\^\[\[H\^\[\[2J\^\[\]0;pwned\\x07all fine/, wide);
      // -o json escapes them as JSON does.
      const json = await run(["trace", "xthings/x1", "-o", "json", "--kubeconfig", kubeconfig]);
      assert.is(JSON.parse(json.stdout).children[0].object.status.conditions[1].message, hostile);
    } finally {
      await c.stop();
    }
  },
);

T("--watch prints the tree again when it changes, not for ages alone, and ends when the XR is gone", async () => {
  const c = await startDevCluster();
  const kubeconfig = join(scratch, "kc-watch");
  writeFileSync(kubeconfig, c.kubeconfig());
  const { crds, objects } = apis(kubeconfigFor(c));
  await crds.createCustomResourceDefinition({ body: typed(crd("example.org", "XThing", "xthings")) as never });
  const base = { group: "example.org", version: "v1", plural: "xthings" };
  await until("the kind served", async () => {
    try {
      await objects.listClusterCustomObject(base);
      return true;
    } catch {
      return false;
    }
  });
  await objects.createClusterCustomObject({
    ...base,
    body: { apiVersion: "example.org/v1", kind: "XThing", metadata: { name: "t" }, spec: {} },
  });
  const child = spawn(process.execPath, [XFN, "trace", "xthings/t", "--watch", "--interval", "200", "--kubeconfig", kubeconfig]);
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
  try {
    await until("the first tree", () => /XThing\/t\s+-\s+-/.test(out), 10_000);
    await sleep(1500); // ages change, the tree does not: nothing more is printed
    assert.is((out.match(/^NAME/gm) ?? []).length, 1, out);
    await objects.patchClusterCustomObjectStatus(
      {
        ...base,
        name: "t",
        body: {
          status: {
            conditions: [
              { type: "Ready", status: "True", reason: "Available" },
              { type: "Synced", status: "True", reason: "ReconcileSuccess" },
            ],
          },
        },
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await until("the tree again, Ready", () => /XThing\/t\s+True\s+True\s+\S+\s+Available/.test(out), 10_000);
    assert.is((out.match(/^NAME/gm) ?? []).length, 2, out);
    await objects.deleteClusterCustomObject({ ...base, name: "t" });
    assert.is(await exited, 0, out);
    assert.match(out, /xthings\.example\.org "t" not found: the XR is gone\n$/);
  } finally {
    child.kill();
    await c.stop();
  }
});

T("bad input is one clear line and exit 1: an unknown kind, a missing XR, a server that refuses, no server", async () => {
  const c = await startDevCluster();
  const kubeconfig = join(scratch, "kc-bad");
  writeFileSync(kubeconfig, c.kubeconfig());
  // A server that answers every request 403, as an RBAC refusal does.
  const refusing = createServer((_req, res) => {
    const body = JSON.stringify({
      kind: "Status",
      apiVersion: "v1",
      status: "Failure",
      message: 'customresourcedefinitions is forbidden: User "dev" cannot list resource',
      reason: "Forbidden",
      code: 403,
    });
    res.writeHead(403, { "Content-Type": "application/json" }).end(body);
  });
  await new Promise<void>((r) => refusing.listen(0, "127.0.0.1", r));
  const refusingConfig = join(scratch, "kc-403");
  writeFileSync(refusingConfig, c.kubeconfig().replace(c.url, `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`));
  const nowhere = join(scratch, "kc-none");
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
  const deadPort = (closed.address() as AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  writeFileSync(nowhere, c.kubeconfig().replace(c.url, `http://127.0.0.1:${deadPort}`));
  try {
    const cases: Record<string, { args: string[]; want: RegExp }> = {
      UnknownKind: {
        args: ["trace", "gizmos/x", "--kubeconfig", kubeconfig],
        want: /^xfn trace: the server doesn't have a resource type "gizmos"\n$/,
      },
      MissingXR: {
        args: ["trace", "namespaces/nope", "--kubeconfig", kubeconfig],
        want: /^xfn trace: namespaces\.core "nope" not found\n$/,
      },
      NoName: {
        args: ["trace", "namespaces", "--kubeconfig", kubeconfig],
        want: /^xfn trace: name the XR: xfn trace namespaces\/NAME \(or TYPE NAME\)\n$/,
      },
      Forbidden: {
        args: ["trace", "xbuckets/x", "--kubeconfig", refusingConfig],
        want: /^xfn trace: customresourcedefinitions is forbidden: User "dev" cannot list resource\n$/,
      },
      NoServer: {
        args: ["trace", "xbuckets/x", "--kubeconfig", nowhere],
        want: /^xfn trace: cannot reach the API server at http:\/\/127\.0\.0\.1:\d+: connect ECONNREFUSED/,
      },
    };
    for (const [name, tc] of Object.entries(cases)) {
      const r = await run(tc.args);
      assert.is(r.code, 1, `${name}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, tc.want, name);
    }
  } finally {
    refusing.close();
    await c.stop();
  }
});

T.run();
