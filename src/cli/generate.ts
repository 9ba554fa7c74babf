// `xfn generate types FILE...`: TypeScript interfaces from CRDs and XRDs.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { Command, Option } from "commander";
import { messageOf } from "../sdk/errors.js";

/** generateCommand builds the `generate` subcommand and its `types` child. */
export function generateCommand(): Command {
  const types = new Command("types")
    .description("write TypeScript interfaces for the kinds the given CRDs and XRDs serve (files or folders of YAML)")
    .argument("<files...>", "YAML files or folders holding CustomResourceDefinitions or CompositeResourceDefinitions")
    .addOption(new Option("-o, --output <file>", "write the module here instead of to standard output"))
    .action(async (files: string[], flags: { output?: string }) => {
      try {
        const [{ loadDocs }, { generateTypes }] = await Promise.all([import("../engine/docs.js"), import("../codegen/types.js")]);
        const { code, kinds } = await generateTypes(files.flatMap((f) => loadDocs(f)));
        if (!flags.output) {
          process.stdout.write(code);
          return;
        }
        const out = resolve(flags.output);
        mkdirSync(dirname(out), { recursive: true });
        writeFileSync(out, code);
        const list = kinds.map((k) => `${k.name} and ${k.observed} (${k.apiVersion} ${k.kind})`).join(", ");
        process.stderr.write(`wrote ${relative(process.cwd(), out) || out}: ${list}\n`);
      } catch (err) {
        process.stderr.write(`xfn generate types: ${messageOf(err)}\n`);
        process.exitCode = 1;
      }
    });
  return new Command("generate").description("generate code from Kubernetes schemas").addCommand(types);
}
