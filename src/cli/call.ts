// `xfn call <address> <request>`: send one RunFunctionRequest to a running
// function and print its response, both in protobuf JSON form.
import { readFileSync } from "node:fs";
import { Command, InvalidArgumentError, Option } from "commander";
import { dial } from "../client/client.js";
import { RunFunctionResponseSchema, Severity } from "../gen/fn/v1/run_function_pb.js";
import { describeServedBy, readServedBy } from "../server/served-by.js";
import { parseRequest } from "../testing/unit.js";
import { messageToJson } from "../wire/protojson.js";
import { messageOf } from "../sdk/errors.js";
import { safeJson } from "../terminal.js";

/** EXIT_FATAL is the exit code when the function returned a Fatal result (as `crossplane render`). */
export const EXIT_FATAL = 3;

interface CallFlags {
  insecure: boolean;
  tlsCertsDir?: string;
  serverName?: string;
  timeout: number;
  wait: number;
  api?: "v1" | "v1beta1";
  debug: boolean;
}

/** callCommand builds the `call` subcommand. */
export function callCommand(): Command {
  return new Command("call")
    .description("send a RunFunctionRequest (YAML or JSON, protobuf JSON form) to a running function and print the response")
    .argument("<address>", "host:port of the function")
    .argument("<request>", "request file, or - for standard input")
    .addOption(new Option("--insecure", "dial without TLS").default(false))
    .addOption(
      new Option("--tls-certs-dir <dir>", "directory with this client's tls.crt and tls.key, and the server's ca.crt").env(
        "TLS_CLIENT_CERTS_DIR",
      ),
    )
    .addOption(new Option("--server-name <name>", "name to verify the server certificate against, e.g. function-hello.crossplane-system"))
    .addOption(
      new Option("--timeout <seconds>", "deadline for the call").default(60).argParser((v) => {
        const n = Number(v);
        if (!(n > 0)) throw new InvalidArgumentError(`--timeout must be a positive number of seconds, got ${JSON.stringify(v)}`);
        return n;
      }),
    )
    .addOption(
      new Option("--wait <seconds>", "how long to wait for the function to accept a connection (one still starting)")
        .default(10)
        .argParser((v) => {
          const n = Number(v);
          if (!(n >= 0)) throw new InvalidArgumentError(`--wait must be a number of seconds, 0 or more, got ${JSON.stringify(v)}`);
          return n;
        }),
    )
    .addOption(
      new Option("--api <version>", "call only this API version (default: v1, falling back to v1beta1)").choices(["v1", "v1beta1"]),
    )
    .addOption(
      new Option("-d, --debug", "say on standard error which function answered (xfn serve's module, process and start time)").default(
        false,
      ),
    )
    .action(async (address: string, file: string, flags: CallFlags) => {
      try {
        const source = file === "-" ? "standard input" : file;
        let text: string;
        try {
          text = readFileSync(file === "-" ? 0 : file, "utf8");
        } catch (err) {
          throw new Error(`cannot read ${source}: ${messageOf(err)}`);
        }
        const req = parseRequest(text, source);
        const client = dial(address, {
          insecure: flags.insecure,
          ...(flags.tlsCertsDir ? { tlsCertsDir: flags.tlsCertsDir } : {}),
          ...(flags.serverName ? { serverName: flags.serverName } : {}),
        });
        try {
          if (flags.wait > 0) await client.waitForReady(flags.wait * 1000);
          let headers: Record<string, string> = {};
          const rsp = await client.run(req, {
            timeoutMs: flags.timeout * 1000,
            ...(flags.api ? { api: flags.api } : {}),
            ...(flags.debug ? { onHeaders: (h: Record<string, string>) => (headers = h) } : {}),
          });
          if (flags.debug) process.stderr.write(`xfn call: ${describeServedBy(readServedBy(headers))}\n`);
          process.stdout.write(safeJson(JSON.stringify(messageToJson(RunFunctionResponseSchema, rsp), null, 2)) + "\n");
          if (rsp.results.some((r) => r.severity === Severity.FATAL)) process.exitCode = EXIT_FATAL;
        } finally {
          client.close();
        }
      } catch (err) {
        process.stderr.write(`xfn call: ${messageOf(err)}\n`);
        process.exitCode = 1;
      }
    });
}
