// Crossplane core, built from its Go module (scripts/anchors.mjs), run as two
// processes against the real control plane as its Helm chart runs it
// (cluster/charts/crossplane/templates/deployment.yaml of the pinned release):
// `core init` (CRDs from the module's cluster/crds, the TLS CA and client
// Secrets), retried while it fails as the init container is restarted (its
// first run can find a CRD it has just written not yet discovered), then `core
// start` with the chart's environment. Differences from the chart, and why:
// no leader election (one replica); webhooks off (the chart's default is on:
// they need a Service routing to the webhook server, which a process cluster
// has not; Usages need them, issue 61); the client certificates are written
// from their Secret to a folder, as the chart mounts them; functions run
// outside (--package-runtime=External), for now.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, mkdirSync, openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
// @ts-expect-error -- a plain .mjs script without types
import { build, MODULES } from "../../scripts/anchors.mjs";
import { freePort, kubectl, tail, type ControlPlane } from "./controlplane.js";

export interface Crossplane {
  /** The folder of the Crossplane module the binary was built from (its cluster/crds). */
  source: string;
  /** Crossplane's client certificates (tls.crt, tls.key, ca.crt), written from their Secret as the chart mounts them. */
  clientCertsDir: string;
  /** Crossplane's Prometheus metrics, on 127.0.0.1 (function_run_function_request_total and the rest). */
  metricsPort: number;
  logTail(lines?: number): string;
  stop(): Promise<void>;
}

const NAMESPACE = "crossplane-system";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** moduleDir is where the go command keeps the pinned Crossplane module's source. */
function moduleDir(): string {
  const m = MODULES.crossplane as { module: string; version: string };
  const r = spawnSync("go", ["mod", "download", "-json", `${m.module}@${m.version}`], {
    encoding: "utf8",
    env: { ...process.env, PATH: `/usr/local/go/bin:${process.env["PATH"] ?? ""}` },
  });
  if (r.status !== 0) throw new Error(`cannot find Crossplane ${m.version}'s source: ${r.stderr}`);
  return (JSON.parse(r.stdout) as { Dir: string }).Dir;
}

/**
 * startCrossplane runs `core init` until it succeeds, then `core start`, and
 * resolves once Crossplane is ready. With inspectorSocket, Crossplane emits
 * every step it runs to a Pipeline Inspector there (the alpha flags
 * --enable-pipeline-inspector and --pipeline-inspector-socket).
 */
export async function startCrossplane(
  cp: ControlPlane,
  log = (s: string) => process.stderr.write(`${s}\n`),
  opts: { inspectorSocket?: string } = {},
): Promise<Crossplane> {
  const bin = (build("crossplane", log) as { crossplane: string }).crossplane;
  const source = moduleDir();
  const dir = join(cp.dir, "crossplane");
  for (const d of ["tls/client", "cache/xpkg", "cache/xfn"]) mkdirSync(join(dir, d), { recursive: true });
  await kubectl(cp, "create", "namespace", NAMESPACE);
  const env = {
    ...process.env,
    KUBECONFIG: cp.kubeconfig,
    POD_NAMESPACE: NAMESPACE,
    POD_SERVICE_ACCOUNT: "crossplane",
    ENABLE_WEBHOOKS: "false",
    TLS_CA_SECRET_NAME: "crossplane-root-ca",
    TLS_SERVER_SECRET_NAME: "crossplane-tls-server",
    TLS_CLIENT_SECRET_NAME: "crossplane-tls-client",
  };

  const initLog = join(dir, "core-init.log");
  for (let attempt = 1; ; attempt++) {
    const fd = openSync(initLog, "a");
    const r = spawnSync(
      bin,
      [
        "core",
        "init",
        `--cr-ds-path=${join(source, "cluster/crds")}`,
        `--webhook-configurations-path=${join(source, "cluster/webhookconfigurations")}`,
      ],
      { env, stdio: ["ignore", fd, fd], timeout: 120_000 },
    );
    closeSync(fd);
    if (r.status === 0) break;
    if (attempt >= 10) throw new Error(`crossplane core init failed ${attempt} times; its log ends:\n${tail(initLog)}`);
    await sleep(1_000);
  }

  // The client certificates, as the chart mounts its Secret: tls.crt, tls.key, ca.crt.
  const secret = JSON.parse(await kubectl(cp, "-n", NAMESPACE, "get", "secret", "crossplane-tls-client", "-o", "json")) as {
    data: Record<string, string>;
  };
  for (const k of ["tls.crt", "tls.key", "ca.crt"])
    writeFileSync(join(dir, "tls/client", k), Buffer.from(secret.data[k] ?? "", "base64"), { mode: 0o600 });

  const health = await freePort();
  const metricsPort = await freePort();
  const startLog = join(dir, "core-start.log");
  const fd = openSync(startLog, "a");
  const inspector = opts.inspectorSocket ? ["--enable-pipeline-inspector", `--pipeline-inspector-socket=${opts.inspectorSocket}`] : [];
  const child: ChildProcess = spawn(bin, ["core", "start", "--package-runtime=External", ...inspector], {
    env: {
      ...env,
      LEADER_ELECTION: "false",
      TLS_CLIENT_CERTS_DIR: join(dir, "tls/client"),
      METRICS_PORT: String(metricsPort),
      HEALTH_PROBE_PORT: String(health),
      CACHE_DIR: join(dir, "cache/xpkg"),
      XFN_CACHE_DIR: join(dir, "cache/xfn"),
    },
    stdio: ["ignore", fd, fd],
  });
  closeSync(fd);
  const killOnExit = () => child.kill("SIGKILL");
  process.on("exit", killOnExit);
  const stop = async () => {
    process.off("exit", killOnExit);
    if (child.exitCode !== null || child.signalCode !== null) return;
    const t = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.kill("SIGTERM");
    });
    clearTimeout(t);
  };
  for (const until = Date.now() + 120_000; ;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`crossplane core start ended (${child.exitCode ?? child.signalCode}); its log ends:\n${tail(startLog)}`);
    const ok = await fetch(`http://127.0.0.1:${health}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > until) {
      await stop();
      throw new Error(`crossplane core start was not ready within 120 s; its log ends:\n${tail(startLog)}`);
    }
    await sleep(250);
  }
  return { source, clientCertsDir: join(dir, "tls/client"), metricsPort, logTail: (lines) => tail(startLog, lines), stop };
}
