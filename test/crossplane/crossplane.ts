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
import { spawnSync } from "node:child_process";
import { closeSync, mkdirSync, openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
// @ts-expect-error -- a plain .mjs script without types
import { build, moduleSource } from "../../scripts/anchors.mjs";
import { freePort, kubectl, listening, startProcess, stopProcess, tail, type ControlPlane, type Proc } from "./controlplane.js";

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

/**
 * startCrossplane runs `core init` until it succeeds, then `core start`, and
 * resolves once Crossplane is ready. With inspectorSocket, Crossplane emits
 * every step it runs to a Pipeline Inspector there (the alpha flags
 * --enable-pipeline-inspector and --pipeline-inspector-socket). args are more
 * flags of core start (--debug).
 */
export async function startCrossplane(
  cp: ControlPlane,
  log = (s: string) => process.stderr.write(`${s}\n`),
  opts: { inspectorSocket?: string; args?: string[] } = {},
): Promise<Crossplane> {
  const bin = (build("crossplane", log) as { crossplane: string }).crossplane;
  const source = moduleSource("crossplane") as string;
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

  const inspector = opts.inspectorSocket ? ["--enable-pipeline-inspector", `--pipeline-inspector-socket=${opts.inspectorSocket}`] : [];
  const procs: Proc[] = [];
  const metricsPort = await listening(
    "crossplane core start",
    async () => {
      const [health, metrics] = [await freePort(), await freePort()];
      const p = startProcess(dir, "core-start", bin, ["core", "start", "--package-runtime=External", ...inspector, ...(opts.args ?? [])], {
        ...env,
        LEADER_ELECTION: "false",
        TLS_CLIENT_CERTS_DIR: join(dir, "tls/client"),
        METRICS_PORT: String(metrics),
        HEALTH_PROBE_PORT: String(health),
        CACHE_DIR: join(dir, "cache/xpkg"),
        XFN_CACHE_DIR: join(dir, "cache/xfn"),
      });
      return { p, value: metrics, ready: async () => (await fetch(`http://127.0.0.1:${health}/readyz`)).ok };
    },
    120_000,
    procs,
  );
  const startLog = join(dir, "core-start.log");
  const stop = () => Promise.all(procs.map(stopProcess)).then(() => undefined);
  return { source, clientCertsDir: join(dir, "tls/client"), metricsPort, logTail: (lines) => tail(startLog, lines), stop };
}
