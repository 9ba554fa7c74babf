// The real Kubernetes control plane as plain processes, for the real-Crossplane
// tier (issue 58): etcd, kube-apiserver (127.0.0.1, a bearer token, RBAC, TLS
// with a CA of its own) and kube-controller-manager (the garbage collector and
// the namespace controller), from the binaries scripts/anchors.mjs builds. The
// flags are envtest's (controller-runtime v0.22.4,
// pkg/internal/testing/controlplane: apiserver.go's defaults, etcd.go's
// --unsafe-no-fsync) with a token file in place of its client certificates.
// Every process has a log file; one that ends before it is stopped has the
// tail of its log in the error. Each stays in the test process's group, so
// the test runner's end of a lane (a signal to its group) and Ctrl-C end them
// too; stop() ends them, and so does the test process's exit or a SIGTERM or
// SIGINT to it alone.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { closeSync, fstatSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import selfsigned from "selfsigned";
// @ts-expect-error -- a plain .mjs script without types
import { build } from "../../scripts/anchors.mjs";

export interface ControlPlane {
  /** The kube-apiserver's address (https://127.0.0.1:PORT). */
  url: string;
  /** A kubeconfig for it: its CA and a token of system:masters. */
  kubeconfig: string;
  token: string;
  ca: Buffer;
  dir: string;
  /** kubectl, built with the control plane. */
  kubectl: string;
  /** The tail of a process's log. */
  logTail(name: string, lines?: number): string;
  /** The process ids of etcd, kube-apiserver and kube-controller-manager (a bench reads their CPU). */
  pids(): Record<Component, number>;
  stop(): Promise<void>;
}

/**
 * Processes of every control plane this test process started: killed when it
 * exits, whatever the path; and the folders it made for them (etcd's data,
 * logs, keys), removed.
 */
const running = new Set<ChildProcess>();
const folders = new Set<string>();
process.on("exit", () => {
  for (const p of running) end(p, "SIGKILL");
  for (const d of folders) rmSync(d, { recursive: true, force: true, maxRetries: 3 });
});
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(128 + (signal === "SIGINT" ? 2 : 15)));

function end(p: ChildProcess, signal: NodeJS.Signals): void {
  if (p.exitCode === null && p.signalCode === null) p.kill(signal);
}

/** freePort is a port free on 127.0.0.1 now (a start that finds it taken is retried on another). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** tail is the last lines of a file, or what could not be read. */
export function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch (err) {
    return `(no log: ${(err as Error).message})`;
  }
}

/** A process startProcess started: log is its log file, where its own output begins at byte from. */
export interface Proc {
  child: ChildProcess;
  log: string;
  from: number;
}

/** startProcess runs bin with args, its output to dir/name.log; it is killed when the test process ends. */
export function startProcess(dir: string, name: string, bin: string, args: string[], env?: NodeJS.ProcessEnv): Proc {
  const log = join(dir, `${name}.log`);
  const fd = openSync(log, "a");
  const from = fstatSync(fd).size;
  const child = spawn(bin, args, { stdio: ["ignore", fd, fd], ...(env ? { env } : {}) });
  closeSync(fd);
  running.add(child);
  child.once("exit", () => running.delete(child));
  return { child, log, from };
}

/**
 * listening starts a process on ports start picks and waits until it is
 * ready (ms at most); one that ends saying a port was taken meanwhile (a
 * race with another process on the machine) is started again on other ports,
 * three tries in all. Each process started is pushed to procs, to be stopped.
 */
export async function listening<T>(
  name: string,
  start: () => Promise<{ p: Proc; ready: () => Promise<boolean>; value: T }>,
  ms: number,
  procs: Proc[] = [],
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const { p, ready, value } = await start();
    procs.push(p);
    try {
      await waitFor(name, p, ready, ms);
      return value;
    } catch (err) {
      await stopProcess(p);
      const own = readFileSync(p.log).subarray(p.from).toString("utf8");
      if (attempt < 3 && /address already in use/.test(own)) continue;
      throw err;
    }
  }
}

/** stopProcess ends a process started by startProcess: SIGTERM, then SIGKILL after 5 s. */
export function stopProcess(p: { child: ChildProcess }): Promise<void> {
  return new Promise<void>((resolve) => {
    if (p.child.exitCode !== null || p.child.signalCode !== null) return resolve();
    const t = setTimeout(() => end(p.child, "SIGKILL"), 5_000);
    p.child.once("exit", () => (clearTimeout(t), resolve()));
    end(p.child, "SIGTERM");
  });
}

/** waitFor polls ready until it is true, failing with the process's log tail if it ends first or the wait passes. */
export async function waitFor(name: string, p: Pick<Proc, "child" | "log">, ready: () => Promise<boolean>, ms: number): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    if (p.child.exitCode !== null || p.child.signalCode !== null)
      throw new Error(`${name} ended (${p.child.exitCode ?? p.child.signalCode}) while starting; its log ends:\n${tail(p.log)}`);
    // One check may hang (a port another process holds and never answers on): each has 5 s at most.
    let timer: NodeJS.Timeout | undefined;
    const answered = await Promise.race([
      ready().catch(() => false),
      new Promise<false>((r) => (timer = setTimeout(() => r(false), 5_000))),
    ]).finally(() => clearTimeout(timer));
    if (answered) return;
    if (Date.now() > until) throw new Error(`${name} was not ready within ${ms / 1000} s; its log ends:\n${tail(p.log)}`);
    await sleep(200);
  }
}

/**
 * eventually polls check by the wall clock (not the CPU-aware budget of the
 * default tier's until(): a tier's waits are on other processes) until it
 * answers something truthy, and answers that; past ms it fails naming what,
 * the last error check threw, and what logs() gives (log tails).
 */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false | null | "" | 0>,
  ms: number,
  logs: () => string,
): Promise<T> {
  const until = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > until)
      throw new Error(`not within ${ms / 1000} s: ${what}${last ? ` (last: ${(last as Error).message})` : ""}\n${logs()}`);
    await sleep(250);
  }
}

/** kubectl runs the control plane's kubectl and returns its output. */
export async function kubectl(cp: ControlPlane, ...args: string[]): Promise<string> {
  const r = await promisify(execFile)(cp.kubectl, ["--kubeconfig", cp.kubeconfig, ...args], {
    encoding: "utf8",
    maxBuffer: 64 << 20,
  }).catch((err: Error & { stderr?: string }) => {
    throw new Error(`kubectl ${args.join(" ")}: ${err.stderr ?? err.message}`, { cause: err });
  });
  return r.stdout;
}

/** kubectlApply applies one object given as JSON. */
export async function kubectlApply(cp: ControlPlane, obj: object): Promise<void> {
  const p = spawn(cp.kubectl, ["--kubeconfig", cp.kubeconfig, "apply", "-f", "-"], { stdio: ["pipe", "pipe", "pipe"] });
  let err = "";
  p.stderr.on("data", (d) => (err += d));
  p.stdin.end(JSON.stringify(obj));
  const code = await new Promise<number | null>((resolve) => p.once("exit", resolve));
  if (code !== 0) throw new Error(`kubectl apply: ${err}`);
}

/** get answers a GET's status and body from the API server. */
export function get(url: string, ca: Buffer, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, agent: false, headers: token ? { authorization: `Bearer ${token}` } : {} }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    // A server that accepts and never answers (a port another process holds) is given up on, not waited for.
    req.setTimeout(5_000, () => req.destroy(new Error(`no answer from ${url} in 5 s`)));
    req.on("error", reject);
    req.end();
  });
}

/** certificates makes the API server's CA and serving certificate (127.0.0.1, localhost). */
async function certificates(): Promise<{ ca: { cert: string; key: string }; server: { cert: string; key: string } }> {
  const now = Date.now();
  const dates = { notBeforeDate: new Date(now - 60_000), notAfterDate: new Date(now + 7 * 86_400_000) };
  const ca = await selfsigned.generate([{ name: "commonName", value: "xfn-test-kubernetes-ca" }], {
    keySize: 2048,
    algorithm: "sha256",
    ...dates,
    extensions: [
      { name: "basicConstraints", cA: true, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  const server = await selfsigned.generate([{ name: "commonName", value: "kube-apiserver" }], {
    keySize: 2048,
    algorithm: "sha256",
    ...dates,
    extensions: [
      {
        name: "subjectAltName",
        altNames: [
          { type: 7, ip: "127.0.0.1" },
          { type: 2, value: "localhost" },
          { type: 2, value: "kubernetes.default.svc" },
        ],
      },
      { name: "extKeyUsage", serverAuth: true },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true },
    ],
    ca: { key: ca.private, cert: ca.cert },
  });
  return { ca: { cert: ca.cert, key: ca.private }, server: { cert: server.cert, key: server.private } };
}

type Component = "etcd" | "kube-apiserver" | "kube-controller-manager";

/**
 * startControlPlane builds (or finds) the binaries and starts etcd,
 * kube-apiserver and kube-controller-manager. A test may pass more flags for
 * a process (args), and the ports each listens on (port, asked once per port;
 * freePort by default).
 */
export async function startControlPlane(
  opts: {
    dir?: string;
    log?: (s: string) => void;
    args?: Partial<Record<Component, string[]>>;
    port?: (who: "etcd client" | "etcd peer" | Component) => Promise<number>;
  } = {},
): Promise<ControlPlane> {
  const log = opts.log ?? ((s: string) => process.stderr.write(`${s}\n`));
  const port = opts.port ?? (() => freePort());
  const more = (c: Component) => opts.args?.[c] ?? [];
  const etcdBin = (build("etcd", log) as { etcd: string }).etcd;
  const kube = build("kubernetes", log) as Record<"kube-apiserver" | "kube-controller-manager" | "kubectl", string>;
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), "xfn-controlplane-"));
  if (!opts.dir) folders.add(dir);
  mkdirSync(join(dir, "etcd"), { recursive: true });
  const procs: Proc[] = [];
  const stop = () => Promise.all(procs.reverse().map(stopProcess));
  try {
    // etcd, retried on other ports if one was taken meanwhile.
    const etcdURL = await listening(
      "etcd",
      async () => {
        const [client, peer] = [await port("etcd client"), await port("etcd peer")];
        const url = `http://127.0.0.1:${client}`;
        const p = startProcess(dir, "etcd", etcdBin, [
          `--data-dir=${join(dir, "etcd")}`,
          `--listen-client-urls=${url}`,
          `--advertise-client-urls=${url}`,
          `--listen-peer-urls=http://127.0.0.1:${peer}`,
          `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
          `--initial-cluster=default=http://127.0.0.1:${peer}`,
          "--unsafe-no-fsync=true",
          ...more("etcd"),
        ]);
        return { p, value: url, ready: async () => (await fetch(`${url}/health`, { signal: AbortSignal.timeout(5_000) })).ok };
      },
      60_000,
      procs,
    );

    const certs = await certificates();
    const sa = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const token = randomBytes(24).toString("hex");
    const files = {
      ca: join(dir, "ca.crt"),
      cert: join(dir, "apiserver.crt"),
      key: join(dir, "apiserver.key"),
      sa: join(dir, "sa.key"),
      tokens: join(dir, "tokens.csv"),
    };
    writeFileSync(files.ca, certs.ca.cert);
    writeFileSync(files.cert, certs.server.cert);
    writeFileSync(files.key, certs.server.key, { mode: 0o600 });
    writeFileSync(files.sa, sa.privateKey.export({ type: "pkcs1", format: "pem" }), { mode: 0o600 });
    writeFileSync(files.tokens, `${token},xfn-admin,xfn-admin,"system:masters"\n`, { mode: 0o600 });

    const url = await listening(
      "kube-apiserver",
      async () => {
        const secure = await port("kube-apiserver");
        const url = `https://127.0.0.1:${secure}`;
        const p = startProcess(dir, "kube-apiserver", kube["kube-apiserver"], [
          `--etcd-servers=${etcdURL}`,
          "--advertise-address=127.0.0.1",
          "--bind-address=127.0.0.1",
          `--secure-port=${secure}`,
          `--tls-cert-file=${files.cert}`,
          `--tls-private-key-file=${files.key}`,
          `--token-auth-file=${files.tokens}`,
          "--authorization-mode=RBAC",
          `--service-account-issuer=${url}/`,
          `--service-account-key-file=${files.sa}`,
          `--service-account-signing-key-file=${files.sa}`,
          "--service-cluster-ip-range=10.0.0.0/24",
          "--allow-privileged=true",
          // envtest's choice: without the token controller no default ServiceAccount exists to admit pods with.
          "--disable-admission-plugins=ServiceAccount",
          // No kube-proxy routes a ClusterIP here: a webhook's Service (Crossplane's) is reached at the
          // address its EndpointSlice gives (cmd/kube-apiserver/app/server.go buildServiceResolver, v1.36.3).
          "--enable-aggregator-routing=true",
          ...more("kube-apiserver"),
        ]);
        return { p, value: url, ready: async () => (await get(`${url}/readyz`, Buffer.from(certs.ca.cert), token)).status === 200 };
      },
      120_000,
      procs,
    );

    const kubeconfig = join(dir, "kubeconfig");
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [
          { name: "xfn-test", cluster: { server: url, "certificate-authority-data": Buffer.from(certs.ca.cert).toString("base64") } },
        ],
        users: [{ name: "xfn-admin", user: { token } }],
        contexts: [{ name: "xfn-test", context: { cluster: "xfn-test", user: "xfn-admin", namespace: "default" } }],
        "current-context": "xfn-test",
      }),
      { mode: 0o600 },
    );

    // Ready once both controllers have started (their own log lines: garbagecollector.go, namespace_controller.go).
    await listening(
      "kube-controller-manager",
      async () => {
        const p = startProcess(dir, "kube-controller-manager", kube["kube-controller-manager"], [
          `--kubeconfig=${kubeconfig}`,
          `--authentication-kubeconfig=${kubeconfig}`,
          `--authorization-kubeconfig=${kubeconfig}`,
          "--controllers=garbage-collector-controller,namespace-controller",
          "--leader-elect=false",
          "--bind-address=127.0.0.1",
          `--secure-port=${await port("kube-controller-manager")}`,
          ...more("kube-controller-manager"),
        ]);
        const ready = async () => {
          const text = readFileSync(p.log).subarray(p.from).toString("utf8");
          return text.includes('"Starting controller" controller="garbagecollector"') && text.includes("Starting namespace controller");
        };
        return { p, ready, value: undefined };
      },
      60_000,
      procs,
    );

    return {
      url,
      kubeconfig,
      token,
      ca: Buffer.from(certs.ca.cert),
      dir,
      kubectl: kube.kubectl,
      logTail: (name, lines) => tail(join(dir, `${name}.log`), lines),
      pids: () => {
        // The last started of each name (one that found its port taken was started again).
        const pid = (name: string) => procs.filter((p) => p.log === join(dir, `${name}.log`)).at(-1)?.child.pid ?? NaN;
        return { etcd: pid("etcd"), "kube-apiserver": pid("kube-apiserver"), "kube-controller-manager": pid("kube-controller-manager") };
      },
      async stop() {
        await stop();
        if (!opts.dir) rmSync(dir, { recursive: true, force: true });
        folders.delete(dir);
      },
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
