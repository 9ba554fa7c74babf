// The host at scale: `xfn dev-cluster` and `xfn host --kubeconfig` in their
// own processes, as a user runs them; N XRs of the bench/host XRD (each
// composing K Things, ready once they exist) are created as fast as the API
// server takes them, and timed until every one is Ready=True. Reports time per
// XR, the CPU and peak memory (the kernel's VmHWM) of both processes, and
// writes the "Host" section of bench/RESULTS.md.
//
// With Go 1.26 (the anchors), one more run puts `xfn host` on the real
// kube-apiserver (and etcd, over TLS, as test/crossplane/controlplane.ts starts
// them): its ms and CPU per XR, and its requests as kube counts them.
//
//   node --import tsx bench/host.ts [--sizes 100,500,1000,2000,10000] [--resources 3] [--memory 1000x10] [--kube 1000] [--quick]
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import { flag, writeSection } from "./results.js";
import { parseRequestTotals } from "../src/apiserver/metrics.js";
import { startControlPlane, type ControlPlane } from "../test/crossplane/controlplane.js";
import { whyMissing } from "../test/support/needs.js";

const ROOT = join(import.meta.dirname, "..");
const QUICK = process.argv.includes("--quick");
const SIZES = flag("--sizes", QUICK ? "100,500" : "100,500,1000,2000,10000")
  .split(",")
  .map(Number);
const K = flag("--resources", 3);
const [MEM_N, MEM_K] = flag("--memory", QUICK ? "300x10" : "1000x10")
  .split("x")
  .map(Number) as [number, number];
const LIMIT_S = flag("--limit", 900);
/** XRs for the run on the real kube-apiserver: 0 (or no Go 1.26) runs none. */
const KUBE_N = whyMissing("go1.26") ? 0 : flag("--kube", QUICK ? 0 : 1000);
const XRS = "/apis/bench.example.org/v1/xthings";

interface Proc {
  child: ChildProcess;
  out(): string;
}

function start(args: string[], ready: RegExp): Promise<Proc> {
  const child = spawn(process.execPath, [join(ROOT, "bin/xfn.js"), ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  return new Promise((resolve, reject) => {
    const t = setInterval(() => {
      if (ready.test(out)) {
        clearInterval(t);
        resolve({ child, out: () => out });
      }
    }, 50);
    child.once("exit", (code) => {
      clearInterval(t);
      reject(new Error(`xfn ${args[0]} exited ${code}:\n${out}`));
    });
  });
}

/** usage reads a process's CPU seconds (user + system) and memory (MiB) from /proc. */
function usage(pid: number): { cpu: number; rss: number; peak: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN) / 1024;
  // utime and stime are fields 14 and 15 of stat (11 and 12 after the command), in clock ticks (100 a second on Linux).
  return { cpu: (Number(f[11]) + Number(f[12])) / 100, rss: kb("VmRSS"), peak: kb("VmHWM") };
}

/**
 * watchReady watches the XRs (one stream, from before the first create) and
 * counts those Ready=True; all resolves once n are. A watch costs the API
 * server each change once; listing every XR on a timer would cost it every
 * XR on every tick, and at 10,000 XRs that listing was most of its CPU.
 */
/** Api is the API server as a kubeconfig names it: TLS with its CA, and its bearer token (xfn dev-cluster and host --embedded ask for both). */
interface Api {
  get(path: string, cb: (res: IncomingMessage) => void): ClientRequest;
  text(path: string): Promise<string>;
  post(path: string, body: unknown): Promise<{ status: number; text: string }>;
}

function apiOf(kubeconfig: string): Api {
  const kc = parse(readFileSync(kubeconfig, "utf8")) as any;
  const cluster = kc.clusters[0].cluster;
  const base = new URL(cluster.server as string);
  const ca = cluster["certificate-authority-data"] ? Buffer.from(cluster["certificate-authority-data"], "base64") : undefined;
  const token = kc.users?.[0]?.user?.token as string | undefined;
  const options = (method: string) => ({
    method,
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(ca ? { ca } : {}),
    agent: base.protocol === "https:" ? httpsAgent : httpAgent,
  });
  const request = base.protocol === "https:" ? httpsRequest : httpRequest;
  const get = (path: string, cb: (res: IncomingMessage) => void) => {
    const req = request(new URL(path, base), options("GET"), cb);
    req.end();
    return req;
  };
  return {
    get,
    text: (path) =>
      new Promise((resolve, reject) => {
        get(path, (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (text += d));
          res.on("end", () => (res.statusCode === 200 ? resolve(text) : reject(new Error(`GET ${path}: ${res.statusCode} ${text}`))));
        }).on("error", reject);
      }),
    post: (path, body) =>
      new Promise((resolve, reject) => {
        const req = request(new URL(path, base), options("POST"), (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (text += d));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        });
        req.on("error", reject);
        req.end(JSON.stringify(body));
      }),
  };
}
const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 32 });
const httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: 32 });

function watchReady(api: Api, n: number): { all: Promise<void>; count(): number; stop(): void } {
  const ready = new Set<string>();
  let stopped = false;
  let req: ClientRequest | undefined;
  let resolve = () => {};
  const all = new Promise<void>((r) => (resolve = r));
  // A watch the server ends is opened again; it starts with every XR as ADDED, so the count starts over.
  const watch = () => {
    if (stopped) return;
    ready.clear();
    req = api.get(`${XRS}?watch=true`, (res) => {
      let buf = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        const lines = (buf + chunk).split("\n");
        buf = lines.pop()!;
        for (const line of lines) {
          if (!line.trim()) continue;
          const ev = JSON.parse(line) as {
            type: string;
            object: { metadata?: { name?: string }; status?: { conditions?: Array<{ type: string; status: string }> } };
          };
          const name = ev.object.metadata?.name;
          if (name === undefined) continue;
          const isReady = ev.type !== "DELETED" && ev.object.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
          if (isReady) ready.add(name);
          else ready.delete(name);
        }
        if (ready.size === n) resolve();
      });
      res.on("end", watch);
      res.on("error", () => {});
    });
    req.on("error", () => setTimeout(watch, 100));
  };
  watch();
  return {
    all,
    count: () => ready.size,
    stop: () => {
      stopped = true;
      req?.destroy();
    },
  };
}

/** Where the API server runs: xfn dev-cluster, in the host (--embedded), or the real kube-apiserver and etcd. */
type Mode = "dev-cluster" | "embedded" | "kube";

interface Run {
  n: number;
  k: number;
  mode: Mode;
  seconds: number;
  done: number;
  host: { cpu: number; rss: number; peak: number };
  cluster: { cpu: number; rss: number; peak: number };
  /** The host's API requests over the run, by verb and resource, as the API server counted them (GET /metrics). */
  requests: Map<string, number>;
  /** TCP connections the API server accepted over the run (kube-apiserver counts none: NaN). */
  connections: number;
}

/** totals reads the API server's request counts (by "VERB resource[/subresource]") and connections from its /metrics. */
async function totals(api: Api): Promise<{ byKind: Map<string, number>; connections: number }> {
  const text = await api.text("/metrics");
  const byKind = new Map<string, number>();
  for (const r of parseRequestTotals(text)) {
    const k = `${r.verb} ${r.resource}${r.subresource ? `/${r.subresource}` : ""}`;
    byKind.set(k, (byKind.get(k) ?? 0) + r.n);
  }
  return { byKind, connections: Number(/^xfn_apiserver_connections_total (\d+)$/m.exec(text)?.[1] ?? NaN) };
}

/** measure runs n XRs x k; embedded runs `xfn host --embedded` alone (one process holds both). */
async function measure(n: number, k: number, mode: Mode = "dev-cluster"): Promise<Run> {
  const embedded = mode === "embedded";
  const dir = mkdtempSync(join(tmpdir(), "xfn-bench-host-"));
  let kubeconfig = join(dir, "kubeconfig");
  const cluster = mode === "dev-cluster" ? await start(["dev-cluster", "--kubeconfig", kubeconfig], /dev-cluster serving/) : undefined;
  let cp: ControlPlane | undefined;
  if (mode === "kube") {
    cp = await startControlPlane({ dir: join(dir, "cp"), log: (s) => process.stderr.write(`${s}\n`) });
    kubeconfig = cp.kubeconfig;
  }
  const host = await start(
    [
      "host",
      ...(embedded ? ["--embedded"] : ["--kubeconfig", kubeconfig]),
      "--functions",
      "bench/host/functions.yaml",
      "--manifests",
      "bench/host/manifests.yaml",
      "--metrics-address",
      "off",
    ],
    /started XR controller/,
  );
  // The embedded API server writes its own kubeconfig; xfn dev-cluster, the one given.
  const api = apiOf(embedded ? /"kubeconfig":"([^"]+)","msg":"embedded API server serving"/.exec(host.out())![1]! : kubeconfig);
  const ready = watchReady(api, n);
  try {
    const before = await totals(api);
    const started = performance.now();
    // Created 32 at a time, as a script applying a folder of XRs would.
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < n) {
          const i = next++;
          const r = await api.post(XRS, {
            apiVersion: "bench.example.org/v1",
            kind: "XThings",
            metadata: { name: `xr-${String(i).padStart(5, "0")}` },
            spec: { count: k },
          });
          if (r.status !== 201) throw new Error(`creating XR ${i}: ${r.status} ${r.text}`);
        }
      }),
    );
    // Progress on stderr, so that a run that stalls shows where.
    const progress = setInterval(
      () => process.stderr.write(`  ${n} x ${k}: ${ready.count()} Ready after ${Math.round((performance.now() - started) / 1000)} s\n`),
      30_000,
    );
    let limit: NodeJS.Timeout | undefined;
    await Promise.race([ready.all, new Promise((r) => (limit = setTimeout(r, LIMIT_S * 1000 - (performance.now() - started))))]);
    clearTimeout(limit);
    clearInterval(progress);
    const seconds = (performance.now() - started) / 1000;
    const done = ready.count();
    const none = { cpu: 0, rss: 0, peak: 0 };
    // kube's: kube-apiserver and etcd together (kube-controller-manager, running only the garbage collector here, left out).
    const clusterUsage = cluster
      ? usage(cluster.child.pid!)
      : cp
        ? [cp.pids()["kube-apiserver"], cp.pids().etcd]
            .map(usage)
            .reduce((a, b) => ({ cpu: a.cpu + b.cpu, rss: a.rss + b.rss, peak: a.peak + b.peak }))
        : none;
    const after = await totals(api);
    // The host's: less the bench's own creates and its first /metrics read (its watch ends later).
    const requests = new Map<string, number>();
    for (const [key, total] of after.byKind) {
      const own = (key === "POST xthings" ? n : 0) + (key === "GET " ? 1 : 0);
      const d = total - (before.byKind.get(key) ?? 0) - own;
      if (d > 0) requests.set(key, d);
    }
    const connections = after.connections - before.connections;
    return { n, k, mode, seconds, done, host: usage(host.child.pid!), cluster: clusterUsage, requests, connections };
  } finally {
    ready.stop();
    const procs = cluster ? [host, cluster] : [host];
    for (const p of procs) p.child.kill("SIGTERM");
    await Promise.all(procs.map((p) => new Promise((r) => (p.child.exitCode !== null ? r(null) : p.child.once("exit", r)))));
    await cp?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** requestsPerXr is the host's API requests over the run, per XR. */
const requestsPerXr = (r: Run) => [...r.requests.values()].reduce((a, b) => a + b, 0) / r.n;
/** breakdown is what those requests were, per XR, most first (those under 0.01 per XR summed as "others"). */
const breakdown = (r: Run) => {
  const all = [...r.requests].sort((a, b) => b[1] - a[1]);
  const big = all.filter(([, v]) => v / r.n >= 0.005);
  const rest = all.slice(big.length).reduce((a, [, v]) => a + v, 0);
  return [...big.map(([k, v]) => `${k} ${(v / r.n).toFixed(2)}`), ...(rest > 0 ? [`others ${(rest / r.n).toFixed(3)}`] : [])].join(", ");
};
const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);
const runs: Run[] = [];
for (const n of SIZES) {
  const r = await measure(n, K);
  runs.push(r);
  console.log(
    `${n} XRs x ${K}: ${r.done}/${n} Ready in ${f1(r.seconds)} s (${f2((r.seconds * 1000) / n)} ms/XR); ` +
      `host ${f1(r.host.cpu)} s CPU, peak ${Math.round(r.host.peak)} MiB; dev-cluster ${f1(r.cluster.cpu)} s CPU, peak ${Math.round(r.cluster.peak)} MiB; ` +
      `${f1(requestsPerXr(r))} API requests and ${f2(r.connections / r.n)} connections per XR (${breakdown(r)})`,
  );
}
const mems: Run[] = [];
for (const mode of ["dev-cluster", "embedded"] as const) {
  const m = await measure(MEM_N, MEM_K, mode);
  mems.push(m);
  console.log(
    `${MEM_N} XRs x ${MEM_K}${mode === "embedded" ? " (--embedded)" : ""}: ${m.done}/${MEM_N} Ready in ${f1(m.seconds)} s; ` +
      `host peak ${Math.round(m.host.peak)} MiB (now ${Math.round(m.host.rss)})` +
      (mode === "embedded" ? "" : `, dev-cluster peak ${Math.round(m.cluster.peak)} MiB`),
  );
}
const kube: Run[] = [];
if (KUBE_N > 0) {
  const r = await measure(KUBE_N, K, "kube");
  kube.push(r);
  console.log(
    `${KUBE_N} XRs x ${K} on kube-apiserver: ${r.done}/${KUBE_N} Ready in ${f1(r.seconds)} s (${f2((r.seconds * 1000) / KUBE_N)} ms/XR); ` +
      `host ${f1(r.host.cpu)} s CPU, peak ${Math.round(r.host.peak)} MiB; kube-apiserver + etcd ${f1(r.cluster.cpu)} s CPU; ` +
      `${f1(requestsPerXr(r))} API requests per XR (${breakdown(r)})`,
  );
}

const base = runs[0]!;
const perXr = (r: Run) => (r.seconds * 1000) / r.n;
const label = { "dev-cluster": "", embedded: " (--embedded: one process)", kube: " (real kube-apiserver and etcd, TLS)" };
const row = (r: Run) =>
  `| ${r.n} x ${r.k}${label[r.mode]} | ${r.done === r.n ? "all" : `${r.done} of ${r.n}`} | ${f1(r.seconds)} | ${f2(perXr(r))} | ${f2(perXr(r) / perXr(base))} | ` +
  `${f2((r.host.cpu * 1000) / r.n)} | ${Math.round(r.host.peak)} | ` +
  (r.mode === "embedded" ? "(in the host) | (in the host) |" : `${f2((r.cluster.cpu * 1000) / r.n)} | ${Math.round(r.cluster.peak)} |`) +
  (r.mode === "embedded"
    ? " (in the host) | (in the host) |"
    : ` ${f1(requestsPerXr(r))} | ${Number.isNaN(r.connections) ? "(not counted)" : f2(r.connections / r.n)} |`);
const section = `## Host

\`node --import tsx bench/host.ts\`, ${new Date().toISOString().slice(0, 10)}: \`xfn dev-cluster\` and \`xfn host --kubeconfig\` in
their own processes; N XRs created 32 at a time, each composing K Things (ready once they exist),
timed from the first create until every XR is Ready=True (seen through a watch on the XRs). CPU is user + system
time of each process over the whole run; memory is its peak resident set (VmHWM). API requests and
connections are the host's over the run, as the API server counts them (its GET /metrics,
apiserver_request_total as kube-apiserver names it), the bench's own creates left out. On the real
kube-apiserver (built from the anchors, with etcd, as the real-Crossplane tier starts them) the API server's
columns are kube-apiserver's and etcd's together, and its requests include the few of kube-controller-manager's
garbage collector; kube counts no connections.

| XRs x resources | Ready | seconds | ms per XR | per XR / at ${base.n} | host CPU ms per XR | host peak MiB | API server CPU ms per XR | API server peak MiB | API requests per XR | connections per XR |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${[...runs, ...mems, ...kube].map(row).join("\n")}
${kube.map((r) => `\nOn kube-apiserver, ${r.n} x ${r.k}, requests per XR: ${breakdown(r)}.\n`).join("")}`;
// A quick run only prints: RESULTS.md keeps full runs.
if (QUICK) process.stdout.write(`\n${section}`);
else writeSection("Host", section);
