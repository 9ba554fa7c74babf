// The real control plane of the real-Crossplane tier (issue 58), built from Go
// modules at the versions of test/anchors/versions.json: it starts, the real
// kubectl reads it, its garbage collector and namespace controller work, and
// stopping it leaves nothing running.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { alive } from "../support/procs.js";
import { ROOT } from "../support/spawn.js";
import { until } from "../support/cluster.js";
import { needs } from "../support/needs.js";
import { freePort, kubectl as kubectlOn, kubectlApply, startControlPlane, type ControlPlane } from "./controlplane.js";

const C = suite("the real control plane: etcd, kube-apiserver, kube-controller-manager from Go modules");
const G = needs(C, "go1.26");
let cp: ControlPlane | undefined;

/** A port held by this process while the control plane starts: each process is given it first, as if another took it meanwhile. */
let taken: Server | undefined;
const givenTaken = new Set<string>();

/** The connections readiness checks made to the held port: it accepts and never answers (they hang until cut). */
const held = new Set<Socket>();

G.before(async () => {
  taken = createServer((socket) => void held.add(socket));
  await new Promise<void>((r) => taken!.listen(0, "127.0.0.1", r));
  const port = (taken.address() as AddressInfo).port;
  cp = await startControlPlane({
    port: async (who) => {
      if (who === "etcd peer" || givenTaken.has(who)) return freePort();
      givenTaken.add(who);
      return port;
    },
  });
});
G.after(async () => {
  // Closed with what it accepted, or they would keep the test process from exiting.
  for (const socket of held) socket.destroy();
  taken?.close();
  await cp?.stop();
});

/** kubectl runs the real kubectl against the control plane, answering its output. */
const kubectl = (...args: string[]) => kubectlOn(cp!, ...args);

G("kubectl reads it: its version, namespaces, and a ConfigMap written and read back", async () => {
  const version = JSON.parse(await kubectl("version", "-o", "json")) as { serverVersion: { gitVersion: string } };
  assert.match(version.serverVersion.gitVersion, /^v1\.\d+\.\d+$/);
  assert.match(await kubectl("get", "namespaces", "-o", "name"), /namespace\/default/);
  await kubectl("create", "configmap", "hello", "--from-literal=a=b");
  assert.is(await kubectl("get", "configmap", "hello", "-o", "jsonpath={.data.a}"), "b");
});

G("its garbage collector deletes a dependent whose owner is gone; its namespace controller empties a deleted namespace", async () => {
  await kubectl("create", "configmap", "owner");
  const uid = await kubectl("get", "configmap", "owner", "-o", "jsonpath={.metadata.uid}");
  const dependent = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "dependent", ownerReferences: [{ apiVersion: "v1", kind: "ConfigMap", name: "owner", uid }] },
  };
  await kubectlApply(cp!, dependent);
  await kubectl("delete", "configmap", "owner", "--wait=true");
  await until(
    "the dependent collected",
    async () => !(await kubectl("get", "configmaps", "-o", "name")).includes("configmap/dependent"),
    60_000,
  );

  await kubectl("create", "namespace", "doomed");
  await kubectl("-n", "doomed", "create", "configmap", "inside");
  await kubectl("delete", "namespace", "doomed", "--wait=false");
  await until("the namespace gone", async () => !(await kubectl("get", "namespaces", "-o", "name")).includes("namespace/doomed"), 60_000);
});

G("npm run crossplane:up prints its KUBECONFIG when ready, and Ctrl-C stops every process it started", async () => {
  // In a process group of its own, as in a terminal, where Ctrl-C signals the whole foreground group.
  const child = spawn("npm", ["run", "--silent", "crossplane:up"], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], detached: true });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  let out = "";
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  try {
    const kubeconfig = await new Promise<string>((resolve, reject) => {
      child.stdout.on("data", (d) => {
        out += d;
        const m = /^KUBECONFIG=(.+)$/m.exec(out);
        if (m) resolve(m[1]!);
      });
      child.once("exit", (code) => reject(new Error(`crossplane:up ended (${code}) before it was ready:\n${err}`)));
    });
    const version = execFileSync(cp!.kubectl, ["--kubeconfig", kubeconfig, "get", "--raw", "/version"], { encoding: "utf8" });
    assert.match(version, /"gitVersion": "v1\./);
    assert.match(
      execFileSync(cp!.kubectl, ["--kubeconfig", kubeconfig, "get", "crds", "-o", "name"], { encoding: "utf8" }),
      /crossplane\.io/,
    );
    // What it started: the children of the node process that runs it (under npm and its shell).
    const node = execFileSync("pgrep", ["-f", "test/crossplane/up.ts"], { encoding: "utf8" }).trim().split("\n").map(Number);
    const children = node.flatMap((p) =>
      execFileSync("pgrep", ["-P", String(p)], { encoding: "utf8" })
        .trim()
        .split("\n")
        .map(Number),
    );
    const named = new Map(children.map((p) => [readFileSync(`/proc/${p}/comm`, "utf8").trim(), p]));
    // (comm is cut at 15 characters: kube-controller-manager is "kube-controller".)
    const want = ["etcd", "kube-apiserver", "kube-controller", "crossplane"];
    for (const name of want) assert.ok(named.has(name), `${name} runs (${[...named.keys()].join(", ")})`);
    const pids = want.map((n) => named.get(n)!);
    process.kill(-child.pid!, "SIGINT");
    await exited;
    assert.match(err, /SIGINT received: stopping the control plane/);
    await until("its processes gone", () => pids.every((p) => !alive(p)), 15_000);
    // And crossplane:up itself, which removes its work folder last (SIGKILL below would cut that short).
    await until("crossplane:up ended", () => node.every((p) => !alive(p)), 30_000);
  } finally {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // ended already
    }
  }
});

G("a port taken between its choice and the process's listen is retried on another, for each process", () => {
  assert.equal([...givenTaken].sort(), ["etcd client", "kube-apiserver", "kube-controller-manager"]);
  for (const name of ["etcd", "kube-apiserver", "kube-controller-manager"]) {
    const log = cp!.logTail(name, 100_000);
    assert.match(log, "address already in use", `${name} was not given the taken port`);
  }
});

G("a process that ends while starting fails the start naming it, with its log's tail, and what had started is stopped", async () => {
  const dir = mkdtempSync(join(tmpdir(), "xfn-controlplane-bad-"));
  try {
    const err = await startControlPlane({ dir, log: () => {}, args: { "kube-apiserver": ["--no-such-flag=1"] } }).then(
      () => undefined,
      (e: Error) => e,
    );
    assert.ok(err, "it started");
    assert.match(err.message, /^kube-apiserver ended \(1\) while starting; its log ends:\n/);
    assert.match(err.message, "unknown flag: --no-such-flag");
    const left = spawnSync("pgrep", ["-f", dir], { encoding: "utf8" }).stdout.trim();
    assert.is(left, "", `processes of the failed start still run: ${left}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

G("stopped, it leaves no process running", async () => {
  const pids = execFileSync("pgrep", ["-f", cp!.dir], { encoding: "utf8" })
    .trim()
    .split("\n")
    .map(Number)
    .filter((p) => p !== process.pid);
  assert.ok(pids.length >= 3, `etcd, kube-apiserver and kube-controller-manager run (${pids.join(", ")})`);
  await cp!.stop();
  for (const pid of pids) assert.not.ok(alive(pid), `process ${pid} still runs`);
  cp = undefined;
});

C.run();
