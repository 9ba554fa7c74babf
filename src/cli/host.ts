// `xfn host`: run compositions without Crossplane, against a Kubernetes API
// (a kubeconfig, or an embedded API server), until SIGTERM/SIGINT (shutdown.ts).
import { startTracing } from "../telemetry/otel.js";
import { loadSdk } from "../host/tracing.js";
import { existsSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { hostname, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import type { Logger } from "pino";
import { probeRoutes } from "../http.js";
import { messageOf } from "../sdk/errors.js";
import { createLogger } from "../server/log.js";
import { onShutdown } from "./shutdown.js";

interface HostFlags {
  kubeconfig?: string;
  embedded: boolean;
  embeddedPort: number;
  embeddedKubeconfig?: string;
  data?: string;
  functions?: string;
  manifests: string[];
  watchGcInterval: number;
  requestTimeout: number;
  debug: boolean;
  metricsAddress: string;
  graphAddress?: string;
  leaderElection: boolean;
  leaderElectionNamespace: string;
  leaderElectionId: string;
  functionTlsCertsDir?: string;
  /** Default crossplane-system, engine/runner.ts's default too (not imported: the runner loads only when the host starts). */
  functionNamespace: string;
  inspectorSocket?: string;
}

export function hostCommand(): Command {
  return addHostFlags(
    new Command("host").description(
      "run compositions without Crossplane: watch XRDs and XRs, call the pipeline's functions, apply, delete, report status",
    ),
  ).action(runHost);
}

/** addHostFlags adds the host's flags to cmd. */
function addHostFlags(cmd: Command): Command {
  return cmd
    .addOption(new Option("--kubeconfig <file>", "kubeconfig of the cluster to drive").env("KUBECONFIG"))
    .addOption(new Option("--embedded", "run an embedded API server instead of using a kubeconfig").default(false))
    .addOption(new Option("--embedded-port <n>", "port of the embedded API server").default(0).argParser(Number))
    .addOption(
      new Option(
        "--embedded-kubeconfig <file>",
        "with --embedded: write the embedded API server's kubeconfig here and keep it " +
          "(default: xfn-host-<port>.kubeconfig in the temp folder, removed when the host stops)",
      ),
    )
    .addOption(new Option("--data <file>", "with --embedded: persist the API server's state here"))
    .addOption(
      new Option("--functions <file>", "Functions, as for xfn render (render.xfn.dev/module or render.crossplane.io/runtime: Development)"),
    )
    .addOption(
      new Option(
        "--function-tls-certs-dir <dir>",
        "call Development-runtime functions with mTLS: this client's tls.crt and tls.key, and the functions' ca.crt " +
          "(as Crossplane's client Secret); without it they are called in plaintext, with a warning",
      ).env("TLS_CLIENT_CERTS_DIR"),
    )
    .addOption(
      new Option(
        "--function-namespace <ns>",
        "with --function-tls-certs-dir: each function's certificate is verified as <function name>.<ns>, as Crossplane names it",
      ).default("crossplane-system"),
    )
    .addOption(
      new Option("--manifests <path>", "YAML file or folder to apply at start (CRDs, XRDs, Compositions, XRs); repeatable")
        .default([])
        .argParser((v: string, prev: string[]) => [...prev, v]),
    )
    .addOption(
      new Option("--watch-gc-interval <seconds>", "how often watches of XRs that are gone are released").default(60).argParser((v) => {
        const n = Number(v);
        if (!(n > 0)) throw new InvalidArgumentError(`--watch-gc-interval must be a positive number of seconds, got ${JSON.stringify(v)}`);
        return n;
      }),
    )
    .addOption(
      new Option(
        "--request-timeout <seconds>",
        "give up a request to the API server that has no answer after this long (watches end and are renewed every 5 to 10 minutes)",
      )
        .default(60)
        .argParser((v) => {
          const n = Number(v);
          if (!(n > 0)) throw new InvalidArgumentError(`--request-timeout must be a positive number of seconds, got ${JSON.stringify(v)}`);
          return n;
        }),
    )
    .addOption(new Option("-d, --debug", "log each reconcile (what it applied, skipped, deleted, and how long it took)").default(false))
    .addOption(
      new Option(
        "--metrics-address <host:port>",
        'serve Prometheus metrics at http://<host:port>/metrics and Kubernetes probes at /healthz and /readyz ("off" for none)',
      ).default("127.0.0.1:8080"),
    )
    .addOption(
      new Option(
        "--graph-address <host:port>",
        "serve a page of the XRs and each one's resource graph at http://<host:port>/graph, updated live (off unless given)",
      ),
    )
    .addOption(
      new Option("--leader-election", "reconcile only while holding a coordination.k8s.io Lease (run several replicas safely)").default(
        false,
      ),
    )
    .addOption(new Option("--leader-election-namespace <ns>", "namespace of the leader Lease").default("default"))
    .addOption(new Option("--leader-election-id <name>", "name of the leader Lease").default("xfn-host"))
    .addOption(
      new Option(
        "--inspector-socket <path>",
        "emit every step's request and response to a Pipeline Inspector on this Unix socket (xfn inspect), as Crossplane does",
      ).env("PIPELINE_INSPECTOR_SOCKET"),
    );
}

/** The modules the host runs on, imported when it starts: client-node alone takes longer to load than every other command's start-up. */
async function hostModules() {
  const [{ KubeConfig }, { startDevCluster }, { Host }, { loadDocs }, { createRunner }, { applyManifests }, { startMetricsServer }] =
    await Promise.all([
      import("@kubernetes/client-node"),
      import("../apiserver/server.js"),
      import("../host/host.js"),
      import("../engine/docs.js"),
      import("../engine/runner.js"),
      import("../host/manifests.js"),
      import("../metrics.js"),
    ]);
  return { KubeConfig, startDevCluster, Host, loadDocs, createRunner, applyManifests, startMetricsServer };
}
type HostModules = Awaited<ReturnType<typeof hostModules>>;

/** runHost runs the host until SIGTERM/SIGINT (or, started by npx, until npx ends): shutdown.ts. */
async function runHost(flags: HostFlags): Promise<void> {
  const log = createLogger({ debug: flags.debug });
  const shutdown = onShutdown(log, { stoppedMsg: "host stopped" });
  try {
    const mods = await hostModules();
    const { kc, stopCluster } = await connect(flags, mods, log);
    // A start-up that fails after the embedded server started stops it, and removes the kubeconfig it wrote.
    const runner = await functionRunner(flags, mods, log).catch(async (err: unknown) => {
      await stopCluster();
      throw err;
    });
    const inspector = flags.inspectorSocket
      ? (await import("../inspect/emitter.js")).connectInspector(resolve(flags.inspectorSocket), log)
      : undefined;
    // Traces when the OTEL_ variables ask for them: a span per reconcile, its function calls its children.
    const tracing = await startTracing("xfn-host", log);
    const host = new mods.Host({
      kc,
      runner,
      log,
      ...(inspector ? { inspector } : {}),
      ...(tracing ? { tracing: { t: tracing, api: await loadSdk() } } : {}),
      watchGcIntervalMs: flags.watchGcInterval * 1000,
      requestTimeoutMs: flags.requestTimeout * 1000,
      graphs: flags.graphAddress !== undefined,
      ...(flags.leaderElection
        ? {
            leaderElection: {
              namespace: flags.leaderElectionNamespace,
              name: flags.leaderElectionId,
              identity: `${hostname()}-${randomBytes(4).toString("hex")}`,
            },
            // As controller-runtime does: a replica that lost the Lease exits, and is restarted to campaign again.
            onLostLeadership: () => {
              log.error("lost the leader Lease; exiting");
              process.exit(1);
            },
          }
        : {}),
    });
    // The Kubernetes probes, beside /metrics: a standby replica (waiting for the Lease) is ready.
    let phase: string | undefined = "starting: installing Crossplane's kinds and starting the watches";
    const stopEndpoints = await startEndpoints(flags, mods, host, log, () => phase);
    // Before starting: a SIGTERM while the host starts stops it as gracefully as one after.
    shutdown.ready(async () => {
      phase = "shutting down";
      await host.stop();
      await stopEndpoints();
      await stopCluster();
      inspector?.close();
      await tracing?.shutdown();
    });
    await host.start();
    if (shutdown.stopping) return;
    phase = undefined;
    if (flags.manifests.length)
      await mods.applyManifests(
        kc,
        flags.manifests.flatMap((m) => mods.loadDocs(m)),
        log,
        flags.requestTimeout * 1000,
      );
  } catch (err) {
    process.stderr.write(`xfn host: ${messageOf(err)}\n`);
    process.exitCode = 1;
    process.exit(1);
  }
}

/** connect loads the kubeconfig the flags name, or starts the embedded API server and writes its own. */
async function connect(flags: HostFlags, mods: HostModules, log: Logger) {
  const kc = new mods.KubeConfig();
  let stopCluster = async () => {};
  if (flags.embedded) {
    const cluster = await mods.startDevCluster({
      port: flags.embeddedPort,
      // As xfn dev-cluster: only the kubeconfig's reader may use the embedded API server.
      token: randomBytes(32).toString("base64url"),
      ...(flags.data ? { dataFile: resolve(flags.data) } : {}),
    });
    const file = flags.embeddedKubeconfig ? resolve(flags.embeddedKubeconfig) : join(tmpdir(), `xfn-host-${cluster.port}.kubeconfig`);
    const { writeFilePrivate } = await import("../apiserver/files.js");
    writeFilePrivate(file, cluster.kubeconfig(), "kubeconfig");
    kc.loadFromString(cluster.kubeconfig());
    log.info({ url: cluster.url, kubeconfig: file }, "embedded API server serving");
    stopCluster = async () => {
      await cluster.stop();
      // A kubeconfig of its own choosing goes with the server; one the user named is theirs to keep.
      if (!flags.embeddedKubeconfig) rmSync(file, { force: true });
    };
  } else if (flags.kubeconfig) {
    if (!existsSync(flags.kubeconfig)) throw new Error(`cannot read kubeconfig ${flags.kubeconfig}: no such file`);
    kc.loadFromFile(flags.kubeconfig);
    log.info({ kubeconfig: flags.kubeconfig, server: kc.getCurrentCluster()?.server }, "using the cluster of a kubeconfig");
  } else if (process.env["KUBERNETES_SERVICE_HOST"]) {
    // In a pod: its service account and the cluster's own address.
    kc.loadFromCluster();
    log.info({ server: kc.getCurrentCluster()?.server }, "using in-cluster config (the pod's service account)");
  } else {
    kc.loadFromDefault();
    log.info({ server: kc.getCurrentCluster()?.server }, "using the default kubeconfig");
  }
  return { kc, stopCluster };
}

/** functionRunner calls the functions of --functions, warning of each it calls in plaintext. */
async function functionRunner(flags: HostFlags, mods: HostModules, log: Logger) {
  const functionsPath = flags.functions ? resolve(flags.functions) : undefined;
  const runner = await mods.createRunner(
    functionsPath ? mods.loadDocs(functionsPath) : [],
    functionsPath ?? "(no --functions file)",
    () => new Date(),
    flags.functionTlsCertsDir ? { certsDir: resolve(flags.functionTlsCertsDir), namespace: flags.functionNamespace } : undefined,
    // Module functions on worker threads: one stuck on the CPU holds neither other XRs' reconciles nor SIGTERM.
    { log },
  );
  // Crossplane always calls functions with mTLS; requests can carry credentials from Secrets.
  for (const { name, target } of runner.plaintext()) {
    log.warn(
      { function: name, target },
      `calling Function ${JSON.stringify(name)} at ${target} in plaintext: ` +
        "give --function-tls-certs-dir (TLS_CLIENT_CERTS_DIR) to call it with mTLS, as Crossplane does",
    );
  }
  return runner;
}

/** startEndpoints serves /metrics with the probes, and /graph when asked; what it returns stops them. */
async function startEndpoints(
  flags: HostFlags,
  mods: HostModules,
  host: InstanceType<HostModules["Host"]>,
  log: Logger,
  phase: () => string | undefined,
): Promise<() => Promise<void>> {
  let stopMetrics = async () => {};
  if (flags.metricsAddress !== "off") {
    try {
      stopMetrics = (await mods.startMetricsServer(flags.metricsAddress, host.metrics.registry, log, probeRoutes(phase))).stop;
    } catch (err) {
      // A dev host beside another on the same machine: say so, and go on without /metrics.
      log.error({ err: messageOf(err) }, "running without /metrics; pass --metrics-address host:port, or off");
    }
  }
  let stopGraph = async () => {};
  if (flags.graphAddress) {
    try {
      const [{ startHttpServer }, { graphRoutes }] = await Promise.all([import("../http.js"), import("../graph/page.js")]);
      stopGraph = (await startHttpServer(flags.graphAddress, graphRoutes(host), log, "the XR graph page")).stop;
    } catch (err) {
      log.error({ err: messageOf(err) }, "running without /graph");
    }
  }
  return async () => {
    await stopMetrics();
    await stopGraph();
  };
}
