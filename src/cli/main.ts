// The xfn command line.
import { Command } from "commander";
import { callCommand } from "./call.js";
import { serveCommand } from "./serve.js";

/** program builds the root command. */
export function program(): Command {
  return new Command("xfn")
    .description("xfn: write, serve and test Crossplane composition functions in TypeScript")
    .version("0.1.0")
    .showHelpAfterError()
    .addCommand(serveCommand())
    .addCommand(callCommand());
}

await program().parseAsync(process.argv);
