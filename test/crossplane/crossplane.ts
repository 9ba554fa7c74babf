// Crossplane core, built from its Go module (scripts/anchors.mjs), run as two
// processes against the real control plane as its Helm chart runs it
// (cluster/charts/crossplane/templates/deployment.yaml and service.yaml of the
// pinned release): `core init` (CRDs from the module's cluster/crds, the
// webhook configurations from cluster/webhookconfigurations, the TLS CA, server
// and client Secrets), retried while it fails as the init container is
// restarted (its first run can find a CRD it has just written not yet
// discovered), then `core start` with the chart's environment, webhooks on (the
// chart's default; Usages need them). Differences from the chart, and why: no
// leader election (one replica); the Service crossplane-webhooks has no
// selector, as no pod runs here: an EndpointSlice of our own gives this
// machine's address and the webhook server's port (kube-apiserver runs with
// --enable-aggregator-routing, so it dials that address, and it refuses
// loopback ones), while TLS still names the Service as the chart's does; the
// TLS Secrets are written from their Secret to folders, as the chart mounts
// them; functions run outside (--package-runtime=External), for now.
import { spawnSync } from "node:child_process";
import { closeSync, mkdirSync, openSync, writeFileSync } from "node:fs";
import { networkInterfaces } from "node:os";
import { join } from "node:path";
// @ts-expect-error -- a plain .mjs script without types
import { build, moduleSource } from "../../scripts/anchors.mjs";
import {
  freePort,
  kubectl,
  kubectlApply,
  listening,
  startProcess,
  stopProcess,
  tail,
  type ControlPlane,
  type Proc,
} from "./controlplane.js";

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
/** The chart's webhook Service: its name, and the port it serves on (WEBHOOK_SERVICE_PORT). */
const WEBHOOK_SERVICE = "crossplane-webhooks";
const WEBHOOK_SERVICE_PORT = 9443;

/**
 * machineAddress is an address of this machine other than loopback, which
 * kube-apiserver accepts in an EndpointSlice (core validation's
 * ValidateEndpointIP refuses loopback and link-local ones): IPv4 first.
 */
export function machineAddress(): { ip: string; family: "IPv4" | "IPv6" } {
  const all = Object.values(networkInterfaces())
    .flat()
    .filter((a) => a !== undefined && !a.internal);
  const v4 = all.find((a) => a!.family === "IPv4" && !a!.address.startsWith("169.254."));
  if (v4) return { ip: v4.address, family: "IPv4" };
  const v6 = all.find((a) => a!.family === "IPv6" && !/^fe[89ab]/i.test(a!.address));
  if (v6) return { ip: v6.address, family: "IPv6" };
  throw new Error(
    "Crossplane's webhook needs an address of this machine other than loopback or link-local for kube-apiserver to dial " +
      "(it refuses those in an EndpointSlice); this machine has none",
  );
}
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
  for (const d of ["tls/client", "tls/server", "cache/xpkg", "cache/xfn"]) mkdirSync(join(dir, d), { recursive: true });
  await kubectl(cp, "create", "namespace", NAMESPACE);
  const env = {
    ...process.env,
    KUBECONFIG: cp.kubeconfig,
    POD_NAMESPACE: NAMESPACE,
    POD_SERVICE_ACCOUNT: "crossplane",
    WEBHOOK_SERVICE_NAME: WEBHOOK_SERVICE,
    WEBHOOK_SERVICE_NAMESPACE: NAMESPACE,
    WEBHOOK_SERVICE_PORT: String(WEBHOOK_SERVICE_PORT),
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

  // The client and server certificates, as the chart mounts their Secrets: tls.crt, tls.key, ca.crt.
  for (const [secretName, folder] of [
    ["crossplane-tls-client", "tls/client"],
    ["crossplane-tls-server", "tls/server"],
  ] as const) {
    const secret = JSON.parse(await kubectl(cp, "-n", NAMESPACE, "get", "secret", secretName, "-o", "json")) as {
      data: Record<string, string>;
    };
    for (const k of ["tls.crt", "tls.key", "ca.crt"])
      writeFileSync(join(dir, folder, k), Buffer.from(secret.data[k] ?? "", "base64"), { mode: 0o600 });
  }

  // The chart's Service, without a selector: the EndpointSlice below says where the webhook server is.
  const address = machineAddress();
  await kubectlApply(cp, {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: WEBHOOK_SERVICE, namespace: NAMESPACE },
    spec: { ports: [{ protocol: "TCP", port: WEBHOOK_SERVICE_PORT }] },
  });
  const endpoints = (port: number) =>
    kubectlApply(cp, {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: { name: WEBHOOK_SERVICE, namespace: NAMESPACE, labels: { "kubernetes.io/service-name": WEBHOOK_SERVICE } },
      addressType: address.family,
      // The Service's port has no name, so the slice's port is named "" (kube-apiserver matches them by name).
      ports: [{ name: "", protocol: "TCP", port }],
      endpoints: [{ addresses: [address.ip], conditions: { ready: true } }],
    });

  const inspector = opts.inspectorSocket ? ["--enable-pipeline-inspector", `--pipeline-inspector-socket=${opts.inspectorSocket}`] : [];
  const procs: Proc[] = [];
  const metricsPort = await listening(
    "crossplane core start",
    async () => {
      const [health, metrics, webhook] = [await freePort(), await freePort(), await freePort()];
      await endpoints(webhook);
      const p = startProcess(dir, "core-start", bin, ["core", "start", "--package-runtime=External", ...inspector, ...(opts.args ?? [])], {
        ...env,
        LEADER_ELECTION: "false",
        TLS_CLIENT_CERTS_DIR: join(dir, "tls/client"),
        TLS_SERVER_CERTS_DIR: join(dir, "tls/server"),
        WEBHOOK_PORT: String(webhook),
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
