// The xfn command line. Only the command being run is loaded: `xfn serve`
// brings in no YAML parser, diff, render, engine or testing code (and starts
// sooner for it); `xfn --help` loads every command to list them.
import { readFileSync } from "node:fs";
import { Command } from "commander";

const COMMANDS: Record<string, () => Promise<Command>> = {
  init: async () => (await import("./init.js")).initCommand(),
  serve: async () => (await import("./serve.js")).serveCommand(),
  call: async () => (await import("./call.js")).callCommand(),
  render: async () => (await import("./render.js")).renderCommand(),
  test: async () => (await import("./test.js")).testCommand(),
  package: async () => (await import("./package.js")).packageCommand(),
  generate: async () => (await import("./generate.js")).generateCommand(),
  "dev-cluster": async () => (await import("./dev-cluster.js")).devClusterCommand(),
  host: async () => (await import("./host.js")).hostCommand(),
  trace: async () => (await import("./trace.js")).traceCommand(),
  inspect: async () => (await import("./inspect.js")).inspectCommand(),
  validate: async () => (await import("./validate.js")).validateCommand(),
};

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  return pkg.version;
}

/** program builds the root command with the commands named (all of them by default). */
export async function program(names: string[] = Object.keys(COMMANDS)): Promise<Command> {
  const root = new Command("xfn")
    .description("xfn: write, serve and test Crossplane composition functions in TypeScript")
    .version(version())
    .showHelpAfterError()
    // Options after a subcommand are its own, down to `render op`.
    .enablePositionalOptions();
  for (const n of names) root.addCommand(await COMMANDS[n]!());
  return root;
}

const wanted = process.argv[2];
const names = wanted !== undefined && Object.hasOwn(COMMANDS, wanted) ? [wanted] : Object.keys(COMMANDS);
await (await program(names)).parseAsync(process.argv);
