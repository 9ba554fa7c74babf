// `xfn dev-cluster`: run the embedded API server on loopback until SIGTERM/SIGINT (shutdown.ts).
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { messageOf } from "../sdk/errors.js";
import { createLogger } from "../server/log.js";
import { onShutdown } from "./shutdown.js";

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
      new Option(
        "--kubeconfig <file>",
        "write a kubeconfig for this server here and keep it (default: a file in the temp directory, printed, removed when it stops)",
      ),
    )
    .addOption(
      new Option(
        "--data <file>",
        "persist state to this file (and a write-ahead log beside it): no acknowledged write is lost, even to kill -9",
      ),
    )
    .action(async (flags: { port: number; kubeconfig?: string; data?: string }) => {
      const log = createLogger({ debug: false });
      const shutdown = onShutdown(log, { stoppedMsg: "dev-cluster stopped" });
      let cluster;
      try {
        // Imported when used: `xfn --help` and the other commands need none of it.
        const { startDevCluster } = await import("../apiserver/server.js");
        // A token only the kubeconfig's reader has: no other local user reads the cluster (Secrets included).
        cluster = await startDevCluster({
          port: flags.port,
          token: randomBytes(32).toString("base64url"),
          ...(flags.data ? { dataFile: resolve(flags.data) } : {}),
        });
      } catch (err) {
        process.stderr.write(`xfn dev-cluster: ${messageOf(err)}\n`);
        process.exitCode = 1;
        return;
      }
      const kubeconfig = resolve(flags.kubeconfig ?? join(tmpdir(), `xfn-dev-cluster-${cluster.port}.kubeconfig`));
      try {
        // Readable by this user only, and never written through a link someone left at the path.
        const { writeFilePrivate } = await import("../apiserver/files.js");
        writeFilePrivate(kubeconfig, cluster.kubeconfig(), "kubeconfig");
      } catch (err) {
        process.stderr.write(`xfn dev-cluster: cannot write the kubeconfig: ${messageOf(err)}\n`);
        await cluster.stop();
        process.exitCode = 1;
        return;
      }
      log.info({ url: cluster.url, port: cluster.port, kubeconfig }, "dev-cluster serving");
      shutdown.ready(async () => {
        await cluster.stop();
        // A kubeconfig of its own choosing goes with the server; one the user named is theirs to keep.
        if (!flags.kubeconfig) rmSync(kubeconfig, { force: true });
      });
    });
}
