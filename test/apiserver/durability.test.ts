// `xfn dev-cluster --data`: an acknowledged write survives kill -9, and a
// resourceVersion a client saw is never handed out again. The real command in
// its own process, killed with SIGKILL while writers are mid-flight; the log
// cut mid-line; compaction; the files' permissions.
import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster } from "../../src/apiserver/server.js";
import { readLog } from "../../src/apiserver/persist.js";
import { sleep } from "../support/cluster.js";
import { kubeFetch } from "../support/kubefetch.js";
import { XFN } from "../support/spawn.js";

const D = suite("dev-cluster: durable state");
let scratch: string;
D.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-durable-"));
});
D.after(() => rmSync(scratch, { recursive: true, force: true }));

/**
 * devCluster starts `xfn dev-cluster --data file` and resolves once it serves, with a fetch that reaches it as its
 * kubeconfig says (TLS with its CA, its token).
 */
function devCluster(
  data: string,
  port = 0,
): Promise<{ child: ChildProcess; url: string; port: number; fetch: ReturnType<typeof kubeFetch> }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [
      XFN,
      "dev-cluster",
      "--port",
      String(port),
      "--data",
      data,
      "--kubeconfig",
      `${data}.kubeconfig`,
    ]);
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const m = /"port":(\d+)/.exec(out);
      if (m) resolve({ child, url: `https://127.0.0.1:${m[1]}`, port: Number(m[1]), fetch: kubeFetch(`${data}.kubeconfig`) });
    });
    child.stderr.on("data", (d) => (out += d));
    child.on("exit", (code) => reject(new Error(`dev-cluster exited with ${code}:\n${out}`)));
  });
}

const json = { "Content-Type": "application/json" };
const CM = "/api/v1/namespaces/default/configmaps";

D("kill -9 mid-write, three times: every acknowledged create and delete is there after a restart, no resourceVersion reused", async () => {
  const data = join(scratch, "state.json");
  const acknowledged = new Set<string>(); // created and answered 201
  const deleted = new Set<string>(); // deleted and answered 200
  const deleting = new Set<string>(); // a delete was sent: gone or not, if the server died before answering
  let maxSeen = 0;
  let total = 0;
  let port = 0;
  for (let round = 0; round < 3; round++) {
    const c = await devCluster(data, port);
    port = c.port;
    // Everything acknowledged before is still there, and nothing deleted came back.
    const list = (await (await c.fetch(`${CM}`)).json()) as { metadata: { resourceVersion: string }; items: any[] };
    const names = new Set(list.items.map((i) => i.metadata.name as string));
    for (const n of acknowledged) if (!deleting.has(n)) assert.ok(names.has(n), `round ${round}: acknowledged ${n} was lost`);
    for (const n of deleted) assert.not.ok(names.has(n), `round ${round}: deleted ${n} came back`);
    // A new write gets a version above every one any client saw.
    const probe = (await (
      await c.fetch(`${CM}`, { method: "POST", headers: json, body: JSON.stringify({ metadata: { name: `probe-${round}` } }) })
    ).json()) as any;
    assert.ok(Number(probe.metadata.resourceVersion) > maxSeen, `round ${round}: ${probe.metadata.resourceVersion} <= ${maxSeen}`);
    acknowledged.add(`probe-${round}`);

    // Writers: create, and delete every third one they created; kill -9 while they run.
    let stop = false;
    const writer = async (w: number) => {
      for (let i = 0; !stop; i++) {
        const name = `r${round}-w${w}-${i}`;
        try {
          const r = await c.fetch(`${CM}`, {
            method: "POST",
            headers: json,
            body: JSON.stringify({ metadata: { name }, data: { i: String(i) } }),
          });
          if (r.status !== 201) continue;
          const o = (await r.json()) as any;
          acknowledged.add(name);
          maxSeen = Math.max(maxSeen, Number(o.metadata.resourceVersion));
          total++;
          if (i % 3 === 0) {
            deleting.add(name);
            const d = await c.fetch(`${CM}/${name}`, { method: "DELETE" });
            if (d.status === 200) deleted.add(name);
          }
        } catch {
          return; // the server is gone
        }
      }
    };
    const writers = Array.from({ length: 8 }, (_, w) => writer(w));
    // Kill once this round has had its share of acknowledged writes (not after a fixed time: on a loaded machine
    // a TLS handshake per request made a fixed 400 ms too few writes), plus a little, so the kill lands mid-write.
    const before = total;
    for (const deadline = Date.now() + 30_000; total - before < 40 && Date.now() < deadline;) await sleep(20);
    await sleep(30 + round * 40);
    c.child.kill("SIGKILL");
    stop = true;
    await Promise.all(writers);
    await new Promise((r) => (c.child.exitCode !== null || c.child.signalCode !== null ? r(undefined) : c.child.once("exit", r)));
  }
  assert.ok(total > 100, `only ${total} writes were acknowledged`);
  const c = await devCluster(data, port);
  try {
    const list = (await (await c.fetch(`${CM}`)).json()) as { items: any[] };
    const names = new Set(list.items.map((i) => i.metadata.name as string));
    for (const n of acknowledged) if (!deleting.has(n)) assert.ok(names.has(n), `acknowledged ${n} was lost`);
    for (const n of deleted) assert.not.ok(names.has(n), `deleted ${n} came back`);
  } finally {
    c.child.kill("SIGTERM");
    await new Promise((r) => c.child.once("exit", r));
  }
});

D("a log cut mid-line (the process died while appending) loads up to the cut, and is cut there", async () => {
  const data = join(scratch, "torn.json");
  const c1 = await startDevCluster({ dataFile: data, compactAfter: 1_000_000 });
  for (const name of ["a", "b"])
    await fetch(`${c1.url}${CM}`, { method: "POST", headers: json, body: JSON.stringify({ metadata: { name } }) });
  // Stop without the final snapshot, as a crash would: only the log holds the writes.
  c1.journal!["compact"] = () => {};
  await c1.stop();
  appendFileSync(`${data}.wal`, '{"rv":999,"t":"/configmaps","k":"default/c","o":{"metad');
  const c2 = await startDevCluster({ dataFile: data });
  try {
    const names = ((await (await fetch(`${c2.url}${CM}`)).json()) as { items: any[] }).items.map((i) => i.metadata.name);
    assert.equal(names.sort(), ["a", "b"]);
    assert.not.match(readFileSync(`${data}.wal`, "utf8"), /"rv":999/, "the torn line is gone");
  } finally {
    await c2.stop();
  }
});

D("compaction: past compactAfter entries the state is one snapshot and the log starts again; a restart reads both", async () => {
  const data = join(scratch, "compact.json");
  const c1 = await startDevCluster({ dataFile: data, compactAfter: 20 });
  for (let i = 0; i < 45; i++)
    await fetch(`${c1.url}${CM}`, { method: "POST", headers: json, body: JSON.stringify({ metadata: { name: `cm-${i}` } }) });
  assert.ok(readLog(`${data}.wal`).length < 20, "the log was started again");
  assert.ok(statSync(data).size > 0, "a snapshot was written");
  c1.journal!["compact"] = () => {};
  await c1.stop();
  const c2 = await startDevCluster({ dataFile: data });
  try {
    const items = ((await (await fetch(`${c2.url}${CM}`)).json()) as { items: any[] }).items;
    assert.is(items.length, 45);
  } finally {
    await c2.stop();
  }
});

D("the state, its log and the kubeconfig are readable by their owner only; a symbolic link in their place is refused", async () => {
  const data = join(scratch, "perm.json");
  const c = await devCluster(data);
  await c.fetch(`${CM}`, { method: "POST", headers: json, body: JSON.stringify({ metadata: { name: "x" } }) });
  c.child.kill("SIGTERM");
  await new Promise((r) => c.child.once("exit", r));
  for (const f of [data, `${data}.wal`, `${data}.kubeconfig`]) assert.is(statSync(f).mode & 0o777, 0o600, f);

  const target = join(scratch, "victim");
  writeFileSync(target, "someone else's file");
  const linked = join(scratch, "linked.json");
  symlinkSync(target, linked);
  const refused = await startDevCluster({ dataFile: linked }).then(
    (c) => c.stop().then(() => "started"),
    (err: Error) => err.message,
  );
  assert.match(refused, /refusing to use dev-cluster state .*linked\.json: it is a symbolic link/);
  const kubeLink = join(scratch, "kube-link");
  symlinkSync(target, kubeLink);
  const r = spawn(process.execPath, [XFN, "dev-cluster", "--kubeconfig", kubeLink]);
  let err = "";
  r.stderr.on("data", (d) => (err += d));
  const code = await new Promise((res) => r.once("exit", res));
  assert.is(code, 1);
  assert.match(err, /cannot write the kubeconfig: refusing to use kubeconfig .*kube-link: it is a symbolic link/);
  assert.is(readFileSync(target, "utf8"), "someone else's file");
});

D.run();
