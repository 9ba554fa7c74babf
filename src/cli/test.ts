// `xfn test [dir]`: run every recorded case under dir.
import { relative, resolve } from "node:path";
import { Command, Option } from "commander";
import { discoverCases, resolveFunctions, runCase, type CaseOptions, type Found } from "../testing/cases.js";
import { loadDocs } from "../engine/docs.js";
import { refuseExit } from "../module/exit.js";
import { messageOf } from "../sdk/errors.js";
import { printable } from "../terminal.js";
import { collect } from "./render.js";

/** What `xfn test` gives every case beside the folder: its --function, --required-resources and --required-schemas values. */
export interface TestFlags {
  /** NAME=MODULE: the module that replays the steps `xfn inspect` recorded of the Function NAME. */
  function?: string[];
  /** Files or folders of resources that answer a request case's resource requirements. */
  requiredResources?: string[];
  /** Files or folders of CRDs, XRDs or OpenAPI v3 documents that answer its schema requirements. */
  requiredSchemas?: string[];
}

/** runTests runs the cases and prints one line each; it returns the exit code. */
export async function runTests(dir: string, update: boolean, out: NodeJS.WritableStream, flags: TestFlags = {}): Promise<number> {
  const root = resolve(dir);
  let found: Found;
  let opts: CaseOptions;
  try {
    opts = {
      functions: resolveFunctions(flags.function ?? []),
      required: (flags.requiredResources ?? []).flatMap((p) => loadDocs(p)),
      schemas: (flags.requiredSchemas ?? []).flatMap((p) => loadDocs(p)),
    };
    found = discoverCases(root);
  } catch (err) {
    out.write(`xfn test: ${messageOf(err)}\n`);
    return 1;
  }
  const { cases, unreadable, outside } = found;
  for (const o of outside) out.write(`note: ${printable(relative(root, o))} is a link out of ${printable(dir)}; not followed\n`);
  // What could not be read is a failure of its own; the cases found are run all the same.
  for (const u of unreadable) out.write(`FAIL     ${printable(relative(root, u.path) || ".")}\n  cannot read it: ${printable(u.why)}\n`);
  if (cases.length === 0 && unreadable.length === 0) {
    out.write(
      `xfn test: no cases under ${dir} (a case is a folder with expected.yaml and request.yaml, or xr.yaml and composition.yaml)\n`,
    );
    return 1;
  }
  let passed = 0;
  let failed = unreadable.length;
  for (const c of cases) {
    const r = await runCase(c, root, update, opts);
    if (r.status === "failed") {
      failed++;
      out.write(`FAIL     ${printable(r.name)}\n${printable(r.detail ?? "", { lines: true })}\n`);
    } else {
      passed++;
      out.write(`${r.status === "updated" ? "UPDATED" : "ok"}${r.status === "updated" ? "  " : "       "}${printable(r.name)}\n`);
    }
    for (const w of r.warnings ?? []) out.write(`  warning: ${printable(w, { lines: true })}\n`);
  }
  out.write(`${passed} passed, ${failed} failed\n`);
  return failed > 0 ? 1 : 0;
}

/** testCommand builds the `test` subcommand. */
export function testCommand(): Command {
  return new Command("test")
    .description("run recorded cases: one function (request.yaml) or a whole pipeline (xr.yaml + composition.yaml), against expected.yaml")
    .argument("[dir]", "folder to search for cases", ".")
    .addOption(
      new Option(
        "--update",
        "rewrite each failing case's expected.yaml from the actual result, in its own shape ($absent kept); " +
          "an empty one gets the whole result",
      ).default(false),
    )
    .addOption(
      new Option(
        "--function <name=module>",
        "replay the steps xfn inspect recorded of the Function NAME (their inspected.yaml) with MODULE, " +
          "unless their case.yaml names one; repeatable",
      )
        .default([])
        .argParser(collect),
    )
    .addOption(
      new Option(
        "--required-resources <path>",
        "YAML file or directory with resources that answer the functions' resource requirements in request cases; repeatable",
      )
        .default([])
        .argParser(collect),
    )
    .addOption(
      new Option(
        "--required-schemas <path>",
        "CRDs, XRDs or OpenAPI v3 documents that answer the functions' schema requirements in request cases; repeatable",
      )
        .default([])
        .argParser(collect),
    )
    .action(async (dir: string, flags: TestFlags & { update: boolean }) => {
      refuseExit(); // a function calling process.exit fails its case, not the run
      process.exitCode = await runTests(dir, flags.update, process.stdout, flags);
    });
}
