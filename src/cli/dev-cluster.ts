// `xfn dev-cluster`: run the embedded API server on loopback until SIGTERM/SIGINT.
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";

export function devClusterCommand(): Command {
  return new Command("dev-cluster")
    .description("run an embedded Kubernetes API server on 127.0.0.1 for local runs and tests (kubectl and client-node work against it)")
    .addOption(
      new Option("--port <n>", "port on 127.0.0.1 (0 picks a free one)").default(0).argParser((v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError(`--port must be 0-65535, got ${JSON.stringify(v)}`);
        return n;
      }),
    )
    .addOption(
      new Option("--kubeconfig <file>", "write a kubeconfig for this server here (default: a file in the temp directory, printed)"),
    )
    .addOption(new Option("--data <file>", "persist state to this file, so a restart loses nothing"))
    .action(async (flags: { port: number; kubeconfig?: string; data?: string }) => {
      let cluster;
      try {
        // Imported when used: `xfn --help` and the other commands need none of it.
        const { startDevCluster } = await import("../devcluster/server.js");
        cluster = await startDevCluster({ port: flags.port, ...(flags.data ? { dataFile: resolve(flags.data) } : {}) });
      } catch (err) {
        process.stderr.write(`xfn dev-cluster: ${(err as Error).message}\n`);
        process.exitCode = 1;
        return;
      }
      const kubeconfig = resolve(flags.kubeconfig ?? join(tmpdir(), `xfn-dev-cluster-${cluster.port}.kubeconfig`));
      writeFileSync(kubeconfig, cluster.kubeconfig());
      process.stdout.write(`${JSON.stringify({ msg: "dev-cluster serving", url: cluster.url, port: cluster.port, kubeconfig })}\n`);
      const c = cluster;
      const stop = () => void c.stop().then(() => process.exit(0));
      process.once("SIGTERM", stop);
      process.once("SIGINT", stop);
    });
}
