// `xfn inspect`: a Pipeline Inspector sidecar (src/inspect/sidecar.ts) until
// SIGTERM/SIGINT (shutdown.ts), writing each step Crossplane runs as an `xfn test` case.
import { resolve } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { createLogger } from "../server/log.js";
import { onShutdown } from "./shutdown.js";
import { messageOf } from "../sdk/errors.js";

interface InspectFlags {
  socket: string;
  dir: string;
  function: string[];
  follow: boolean;
  maxRecvMsgSize: number;
  queue: number;
  debug: boolean;
}

const positive = (what: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`${what} must be a whole number above 0`);
  return n;
};

/**
 * inspectCommand builds the `inspect` subcommand. writerScript is what its
 * writer thread runs, when not the module beside the sidecar's (a bundle
 * names itself: inspect-bundled.ts).
 */
export function inspectCommand(writerScript?: URL): Command {
  return new Command("inspect")
    .description(
      "serve as Crossplane's Pipeline Inspector sidecar: write every step's request and response as an xfn test case, " +
        "and each reconcile's XR and observed resources",
    )
    .addOption(
      new Option("--socket <path>", "the Unix socket Crossplane emits to (its --pipeline-inspector-socket)")
        .env("PIPELINE_INSPECTOR_SOCKET")
        .default("/var/run/pipeline-inspector/socket"),
    )
    .addOption(new Option("--dir <dir>", "where cases are written").default("inspected"))
    .addOption(
      new Option("--function <name=module>", "a Function's local module, named in its cases so xfn test replays them; repeatable")
        .default([])
        .argParser((v: string, prev: string[]) => {
          if (!/^[^=]+=.+$/.test(v)) throw new InvalidArgumentError(`expected NAME=MODULE, got ${JSON.stringify(v)}`);
          return [...prev, v];
        }),
    )
    .addOption(new Option("--follow", "print, per step, what changed in desired state, its results and conditions").default(false))
    .addOption(
      new Option("--max-recv-msg-size <bytes>", "the largest call accepted")
        .default(8 * 1024 * 1024)
        .argParser(positive("--max-recv-msg-size")),
    )
    .addOption(
      new Option("--queue <n>", "calls that may wait to be written before more are dropped").default(1000).argParser(positive("--queue")),
    )
    .addOption(new Option("--debug", "log at debug level").default(false))
    .action(async (flags: InspectFlags) => {
      const log = createLogger({ debug: flags.debug });
      const shutdown = onShutdown(log, { stoppedMsg: "pipeline inspector stopped" });
      const { startInspector } = await import("../inspect/sidecar.js");
      let inspector;
      try {
        inspector = await startInspector({
          socket: resolve(flags.socket),
          dir: resolve(flags.dir),
          functions: new Map(
            flags.function.map((f) => {
              const i = f.indexOf("=");
              return [f.slice(0, i), resolve(f.slice(i + 1))];
            }),
          ),
          ...(flags.follow ? { follow: (line: string) => void process.stdout.write(`${line}\n`) } : {}),
          maxRecvBytes: flags.maxRecvMsgSize,
          maxQueue: flags.queue,
          ...(writerScript ? { writerScript } : {}),
          log,
        });
      } catch (err) {
        log.error({ err: messageOf(err) }, "cannot start the pipeline inspector");
        process.exitCode = 1;
        return;
      }
      const running = inspector;
      shutdown.ready(async () => {
        await running.stop();
        return running.stats();
      });
    });
}
