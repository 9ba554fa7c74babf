// The xfn command line.
import { readFileSync } from "node:fs";
import { Command } from "commander";
import { callCommand } from "./call.js";
import { devClusterCommand } from "./dev-cluster.js";
import { generateCommand } from "./generate.js";
import { hostCommand } from "./host.js";
import { initCommand } from "./init.js";
import { packageCommand } from "./package.js";
import { renderCommand } from "./render.js";
import { serveCommand } from "./serve.js";
import { testCommand } from "./test.js";

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  return pkg.version;
}

/** program builds the root command. */
export function program(): Command {
  return (
    new Command("xfn")
      .description("xfn: write, serve and test Crossplane composition functions in TypeScript")
      .version(version())
      .showHelpAfterError()
      // Options after a subcommand are its own, down to `render op`.
      .enablePositionalOptions()
      .addCommand(initCommand())
      .addCommand(serveCommand())
      .addCommand(callCommand())
      .addCommand(renderCommand())
      .addCommand(testCommand())
      .addCommand(packageCommand())
      .addCommand(generateCommand())
      .addCommand(devClusterCommand())
      .addCommand(hostCommand())
  );
}

await program().parseAsync(process.argv);
