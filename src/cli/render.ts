// `xfn render`: run a Composition's function pipeline offline and print what
// Crossplane would create. Arguments and flags follow `crossplane render`.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, extname, join } from "node:path";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Command, InvalidArgumentError, Option } from "commander";
import { parse as parseYaml, type ParseOptions } from "yaml";
import { KUBE_YAML, toKubeJson } from "../engine/kubeyaml.js";
import { FatalResultError, StepError } from "../engine/composition.js";
import { isObject } from "../json.js";
import { setOwn } from "../own.js";
import { ComposeError, FIXED_TIME, mergeFullXR, render } from "../render/render.js";
import { InputError, loadDocs, loadOne, readStdinBounded } from "../engine/docs.js";
import { toYamlStream } from "../render/output.js";
import { renderOperation } from "../render/operation.js";
import { checkRules, converge, type Converged, type ConvergeRules } from "../render/converge.js";
import { createRunner } from "../engine/runner.js";
import { parseDuration } from "../steps/duration.js";
import { EXIT_FATAL } from "./call.js";
import { refuseExit } from "../module/exit.js";
import { printable } from "../terminal.js";
import { messageOf } from "../sdk/errors.js";

interface RenderFlags {
  observedResources?: string;
  requiredResources: string[];
  extraResources: string[];
  contextValues: string[];
  contextFiles: string[];
  functionCredentials?: string;
  timeout: number;
  includeFunctionResults: boolean;
  includeFullXr: boolean;
  includeContext: boolean;
  now: Date;
  legacyOutput: boolean;
  xrd?: string;
  requiredSchemas?: string;
  graph?: string;
  validate?: string;
  converge?: boolean;
  maxRounds?: string;
  readyAfter?: string[];
  ready?: string[];
  readyStatus?: string[];
}

/** DEFAULT_NOW is the clock in-process functions see unless --now says otherwise: fixed, so output is reproducible. */
export const DEFAULT_NOW = FIXED_TIME;

/** collect gathers a repeatable option's values. */
export const collect = (v: string, prev: string[]) => [...prev, v];

function keyValue(flag: string, entry: string): [string, string] {
  const i = entry.indexOf("=");
  if (i <= 0) throw new InputError(`${flag} ${JSON.stringify(entry)}: expected key=value`);
  return [entry.slice(0, i), entry.slice(i + 1)];
}

function parseValue(flag: string, key: string, text: string): JsonValue {
  try {
    // YAML is a superset of JSON, read as crossplane render reads it (sigs.k8s.io/yaml: yes is true).
    return toKubeJson(parseYaml(text, KUBE_YAML as ParseOptions)) as JsonValue;
  } catch (err) {
    throw new InputError(`${flag}: cannot parse the value of ${JSON.stringify(key)}: ${messageOf(err).split("\n")[0]}`);
  }
}

/** contextFrom builds the initial pipeline context; values win over files. */
export function contextFrom(files: string[], values: string[]): Record<string, JsonValue> {
  const ctx: Record<string, JsonValue> = {};
  for (const e of files) {
    const [k, path] = keyValue("--context-files", e);
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (err) {
      throw new InputError(`--context-files: cannot read ${path} for key ${JSON.stringify(k)}: ${messageOf(err)}`);
    }
    setOwn(ctx, k, parseValue("--context-files", k, text));
  }
  for (const e of values) {
    const [k, v] = keyValue("--context-values", e);
    setOwn(ctx, k, parseValue("--context-values", k, v));
  }
  return ctx;
}

/**
 * convergeRules reads --converge's flags: --max-rounds N, and per resource
 * (NAME=..., or * for every one not named) --ready-after N, --ready CEL and
 * --ready-status YAML; --ready-after N alone is every resource's.
 */
export function convergeRules(flags: Pick<RenderFlags, "maxRounds" | "readyAfter" | "ready" | "readyStatus">): ConvergeRules {
  const rules: ConvergeRules = {};
  if (flags.maxRounds !== undefined) rules.maxRounds = wholeNumber("--max-rounds", flags.maxRounds);
  for (const e of flags.readyAfter ?? []) {
    const [name, n] = e.includes("=") ? keyValue("--ready-after", e) : ["*", e];
    setOwn((rules.readyAfter ??= {}), name, wholeNumber(`--ready-after ${name}`, n));
  }
  for (const e of flags.ready ?? []) {
    const [name, text] = keyValue("--ready", e);
    setOwn((rules.ready ??= {}), name, text);
  }
  for (const e of flags.readyStatus ?? []) {
    const [name, text] = keyValue("--ready-status", e);
    const v = parseValue("--ready-status", name, text);
    if (!isObject(v)) throw new InputError(`--ready-status ${name}: expected a map of status fields, e.g. ${name}={atProvider: {id: x}}`);
    setOwn((rules.readyStatus ??= {}), name, v);
  }
  checkRules(rules, "--converge");
  return rules;
}

function wholeNumber(flag: string, text: string): number {
  if (!/^\d+$/.test(text)) throw new InputError(`${flag}: ${JSON.stringify(text)} is not a whole number`);
  return Number(text);
}

/** EXIT_NOT_CONVERGED is render --converge's exit code when the pipeline still changed things after --max-rounds. */
export const EXIT_NOT_CONVERGED = 2;

/** functionsFile is the functions file given, or functions.yaml beside the pipeline's file (a Composition, an Operation). */
function functionsFile(given: string | undefined, beside: string, what: string): string {
  if (given) return given;
  const p = join(dirname(beside), "functions.yaml");
  if (!existsSync(p)) throw new InputError(`no functions file: give one after the ${what}, or put functions.yaml beside ${beside}`);
  return p;
}

/** runRender does the work of the command; it returns the exit code. */
export async function runRender(
  xrPath: string,
  compPath: string,
  fnPath: string | undefined,
  flags: RenderFlags,
  out: NodeJS.WritableStream,
  err: NodeJS.WritableStream,
): Promise<number> {
  let runner;
  try {
    // Before anything runs: a graph it cannot write is refused, not written as SVG under another name.
    if (flags.graph !== undefined) graphFormat(flags.graph);
    const xr = loadOne(xrPath, "composite resource");
    const composition = loadOne(compPath, "Composition");
    const functionsPath = functionsFile(fnPath, compPath, "Composition");
    const inputs = {
      xr,
      composition,
      observed: flags.observedResources ? loadDocs(flags.observedResources) : [],
      // Every -e/--required-resources and --extra-resources counts, in that order, as in crossplane render.
      required: [...flags.requiredResources.flatMap((p) => loadDocs(p)), ...flags.extraResources.flatMap((p) => loadDocs(p))],
      credentials: flags.functionCredentials ? loadDocs(flags.functionCredentials) : [],
      context: contextFrom(flags.contextFiles, flags.contextValues),
      ...(flags.xrd ? { xrd: loadOne(flags.xrd, "CompositeResourceDefinition") } : {}),
      ...(flags.requiredSchemas ? { schemas: loadDocs(flags.requiredSchemas) } : {}),
    };
    // Schemas are read before anything runs: a file that is not one fails at once.
    const schemas = flags.validate ? await validationSchemas(flags.validate) : undefined;
    const now = flags.now;
    const rules = flags.converge ? convergeRules(flags) : undefined;
    if (!flags.converge && (flags.maxRounds !== undefined || flags.readyAfter?.length || flags.ready?.length || flags.readyStatus?.length))
      throw new InputError("--max-rounds, --ready-after, --ready and --ready-status go with --converge");
    runner = await createRunner(loadDocs(functionsPath), functionsPath, () => now, undefined, { watchdog: "xfn render" });
    let converged: Converged | undefined;
    if (rules) {
      converged = await converge(inputs, runner, { timeoutMs: flags.timeout, now }, rules, (r) => {
        err.write(`${printable(r.summary)}\n${r.diff ? `${printable(r.diff, { lines: true }).trimEnd()}\n` : ""}`);
      });
    }
    const o = await render(converged?.inputs ?? inputs, runner, { timeoutMs: flags.timeout, legacy: flags.legacyOutput, now });
    const docs: unknown[] = [flags.includeFullXr ? mergeFullXR(o.input, o.xr) : o.xr, ...o.composed];
    if (flags.includeFunctionResults) docs.push(...o.results);
    if (flags.includeContext) docs.push(o.context);
    out.write(toYamlStream(docs));
    if (flags.graph) await writeGraph(flags.graph, o);
    for (const w of o.warnings) err.write(`xfn render: warning: ${printable(w, { lines: true })}\n`);
    if (schemas) {
      // The XR as it would be stored (its input with what the pipeline wrote) and every composed resource.
      const { problems } = await import("../validate/validate.js");
      const composed = o.composed as JsonObject[];
      const found = problems([mergeFullXR(o.input, o.xr) as JsonObject, ...composed], composed, schemas);
      if (found) {
        for (const line of found.report) err.write(`${line}\n`);
        // What a cluster would answer when Crossplane applies them, so the error met there is recognised here.
        for (const line of found.refusals)
          err.write(`xfn render: --validate: a cluster's server-side apply would refuse: ${printable(line)}\n`);
        if (found.failed) {
          err.write(`xfn render: --validate: ${found.failed}\n`);
          return 1;
        }
      }
    }
    if (converged) {
      const n = converged.rounds.length;
      if (!converged.converged) {
        const what = printable(converged.changing ?? "");
        err.write(`xfn render: did not converge in ${n} rounds (--max-rounds): the next round's input would still differ: ${what}\n`);
        return EXIT_NOT_CONVERGED;
      }
      err.write(`xfn render: converged after ${n} ${n === 1 ? "round" : "rounds"}: round ${n} changed nothing the next would see\n`);
    }
    return 0;
  } catch (e) {
    if (e instanceof FatalResultError) {
      err.write(`xfn render: cannot compose resources: ${printable(e.message, { lines: true })}\n`);
      return EXIT_FATAL;
    }
    if (e instanceof ComposeError || e instanceof StepError) {
      err.write(`xfn render: cannot compose resources: ${printable(e.message, { lines: true })}\n`);
      return 1;
    }
    err.write(`xfn render: ${printable(messageOf(e), { lines: true })}\n`);
    return 1;
  } finally {
    runner?.close();
  }
}

/** validationSchemas reads --validate's schemas: CRDs, XRDs, OpenAPI v3 documents, and cached packages as xfn validate reads them. */
async function validationSchemas(sources: string) {
  const { loadSources } = await import("../validate/load.js");
  const { schemasOf } = await import("./validate.js");
  return schemasOf(
    loadSources(sources, () => readStdinBounded()),
    "~/.crossplane/cache",
  );
}

/** The graph formats --graph writes, by the file's extension. */
const GRAPH_FORMATS: Record<string, "svg" | "mermaid" | "markdown"> = { ".svg": "svg", ".mmd": "mermaid", ".md": "markdown" };

/** graphFormat is what --graph writes to file, by its extension; any other extension is refused, naming those it writes. */
export function graphFormat(file: string): "svg" | "mermaid" | "markdown" {
  const ext = extname(file).toLowerCase();
  const format = Object.hasOwn(GRAPH_FORMATS, ext) ? GRAPH_FORMATS[ext] : undefined;
  if (!format)
    throw new InputError(
      `--graph ${file}: cannot write ${ext ? `a ${ext} file` : "a file without an extension"}; ` +
        "it writes SVG (.svg) and Mermaid (.mmd, or .md for a Markdown page) " +
        "(for a PNG, convert the SVG: rsvg-convert -o graph.png graph.svg)",
    );
  return format;
}

/** writeGraph draws the rendered resources' graph to file: SVG, Mermaid, or Mermaid in a Markdown page. */
async function writeGraph(file: string, o: Awaited<ReturnType<typeof render>>): Promise<void> {
  const format = graphFormat(file);
  const { graphOf, mermaid } = await import("../graph/model.js");
  const model = graphOf(o.xr, o.states, isObject(o.context["fields"]) ? o.context["fields"] : {});
  const text = format === "svg" ? (await import("../graph/svg.js")).svg(model) : mermaid(model);
  try {
    writeFileSync(file, format === "markdown" ? `\`\`\`mermaid\n${text}\`\`\`\n` : text);
  } catch (e) {
    throw new InputError(`cannot write the graph to ${file}: ${messageOf(e)}`);
  }
}

interface RenderOpFlags {
  requiredResources: string[];
  watchedResource?: string;
  functionCredentials?: string;
  requiredSchemas?: string;
  timeout: number;
  now: Date;
  includeFunctionResults: boolean;
}

/** runRenderOp renders an Operation (or the one a Cron/WatchOperation would create); it returns the exit code. */
export async function runRenderOp(
  opPath: string,
  fnPath: string | undefined,
  flags: RenderOpFlags,
  out: NodeJS.WritableStream,
  err: NodeJS.WritableStream,
): Promise<number> {
  let runner;
  try {
    const operation = loadOne(opPath, "Operation");
    const functionsPath = functionsFile(fnPath, opPath, "Operation");
    const now = flags.now;
    runner = await createRunner(loadDocs(functionsPath), functionsPath, () => now, undefined, { watchdog: "xfn render" });
    const o = await renderOperation(
      {
        operation,
        required: flags.requiredResources.flatMap((p) => loadDocs(p)),
        credentials: flags.functionCredentials ? loadDocs(flags.functionCredentials) : [],
        ...(flags.watchedResource ? { watched: loadOne(flags.watchedResource, "watched resource") } : {}),
        ...(flags.requiredSchemas ? { schemas: loadDocs(flags.requiredSchemas) } : {}),
      },
      runner,
      { timeoutMs: flags.timeout },
    );
    out.write(toYamlStream([o.operation, ...o.applied, ...(flags.includeFunctionResults ? o.results : [])]));
    return 0;
  } catch (e) {
    err.write(`xfn render op: ${printable(messageOf(e), { lines: true })}\n`);
    return e instanceof FatalResultError ? EXIT_FATAL : 1;
  } finally {
    runner?.close();
  }
}

const timeoutOption = () =>
  new Option("--timeout <duration>", "how long to run before timing out").default(60_000, "1m").argParser((v) => {
    try {
      return parseDuration(v);
    } catch (e) {
      throw new InvalidArgumentError(messageOf(e));
    }
  });

const nowOption = () =>
  new Option("--now <time>", "the time in-process functions see, RFC 3339 (fixed by default so output is reproducible)")
    .default(new Date(DEFAULT_NOW), DEFAULT_NOW)
    .argParser((v) => {
      const d = new Date(v);
      if (Number.isNaN(d.getTime()))
        throw new InvalidArgumentError(`${JSON.stringify(v)} is not an RFC 3339 time (e.g. 2026-05-01T08:00:00Z)`);
      return d;
    });

/** renderOpCommand builds `render op`: an Operation's pipeline, as crossplane render does for Operations. */
function renderOpCommand(): Command {
  return new Command("op")
    .description(
      "run an Operation's function pipeline offline (or the Operation a CronOperation or WatchOperation would create) and print " +
        "the Operation's status and the resources it would apply",
    )
    .argument("<operation>", "YAML file with the Operation, CronOperation or WatchOperation")
    .argument("[functions]", "YAML file or directory with the Functions (default: functions.yaml beside the Operation)")
    .addOption(
      new Option("-e, --required-resources <path>", "YAML file or directory with resources that functions may require; repeatable")
        .default([])
        .argParser(collect),
    )
    .addOption(
      new Option(
        "-w, --watched-resource <file>",
        "the resource whose change starts a WatchOperation's Operation (handed to every step as ops.crossplane.io/watched-resource)",
      ),
    )
    .addOption(new Option("--function-credentials <path>", "YAML file or directory with Secrets the pipeline's credentials refer to"))
    .addOption(new Option("--required-schemas <path>", "CRDs, XRDs or OpenAPI v3 documents that answer functions' schema requirements"))
    .addOption(timeoutOption())
    .addOption(nowOption())
    .addOption(new Option("-r, --include-function-results", "include the functions' results as kind: Result documents").default(false))
    .action(async (op: string, fns: string | undefined, flags: RenderOpFlags) => {
      refuseExit(); // a function calling process.exit fails its step, not the render
      process.exitCode = await runRenderOp(op, fns, flags, process.stdout, process.stderr);
    });
}

/** renderCommand builds the `render` subcommand. */
export function renderCommand(): Command {
  return (
    new Command("render")
      // Options after `op` are op's own (its -r, --timeout), not render's.
      .enablePositionalOptions()
      .addCommand(renderOpCommand())
      .description(
        "run a Composition's function pipeline offline and print the XR and composed resources Crossplane would produce, " +
          "like crossplane render",
      )
      .argument("<composite-resource>", "YAML file with the composite resource (XR)")
      .argument("<composition>", "YAML file with the Composition (mode: Pipeline)")
      .argument("[functions]", "YAML file or directory with the Functions (default: functions.yaml beside the Composition)")
      .addOption(new Option("-o, --observed-resources <path>", "YAML file or directory with the observed composed resources"))
      .addOption(
        new Option("-e, --required-resources <path>", "YAML file or directory with resources that functions may require; repeatable")
          .default([])
          .argParser(collect),
      )
      .addOption(new Option("--extra-resources <path>", "deprecated: as --required-resources; repeatable").default([]).argParser(collect))
      .addOption(
        new Option("--context-values <key=value>", "a context key and its JSON/YAML value; repeatable; wins over --context-files")
          .default([])
          .argParser(collect),
      )
      .addOption(
        new Option("--context-files <key=path>", "a context key and a file holding its JSON/YAML value; repeatable")
          .default([])
          .argParser(collect),
      )
      .addOption(new Option("--function-credentials <path>", "YAML file or directory with Secrets the pipeline's credentials refer to"))
      .addOption(
        new Option(
          "--xrd <file>",
          "the XR's CompositeResourceDefinition: defaults the XR from its schema, prunes the rendered XR as the API server would " +
            "(a warning names each field dropped), and answers schema requirements for the XR's kind",
        ),
      )
      .addOption(
        new Option(
          "--required-schemas <path>",
          "CRDs, XRDs or OpenAPI v3 documents (JSON, as /openapi/v3/<group-version> returns) that answer functions' schema requirements",
        ),
      )
      .addOption(
        new Option(
          "--validate <schemas>",
          "check the XR and composed resources against CRDs and XRDs (comma-separated files or folders), as xfn validate does: " +
            "a resource a schema refuses fails the render (exit 1), with what is wrong on standard error",
        ),
      )
      .addOption(timeoutOption())
      .addOption(nowOption())
      .addOption(new Option("-r, --include-function-results", "include the functions' results as kind: Result documents").default(false))
      .addOption(new Option("-x, --include-full-xr", "include the input XR's spec and metadata in the rendered XR").default(false))
      .addOption(new Option("-c, --include-context", "include the final context as a kind: Context document").default(false))
      .addOption(
        new Option(
          "--graph <file>",
          "also draw the composed resources' graph (state, dependencies and waits, deletion waves) to file: " +
            "SVG for .svg, Mermaid for .mmd and .md",
        ),
      )
      .addOption(
        new Option(
          "--converge",
          "run reconcile after reconcile, feeding each round's composed resources back as observed (ready by the rules below), " +
            "until a round changes nothing; each round's change to standard error, the final state to standard output",
        ).default(false),
      )
      .addOption(new Option("--max-rounds <n>", "with --converge: the most rounds to run (default 10)"))
      .addOption(
        new Option(
          "--ready-after <[name=]n>",
          "with --converge: rounds after it is composed that a resource is ready (default 1); repeatable",
        )
          .default([])
          .argParser(collect),
      )
      .addOption(
        new Option(
          "--ready <name=cel>",
          "with --converge: a CEL expression (self, xr) that must also hold for it to be ready; * for all; repeatable",
        )
          .default([])
          .argParser(collect),
      )
      .addOption(
        new Option("--ready-status <name=yaml>", "with --converge: status fields a provider publishes once it is ready; repeatable")
          .default([])
          .argParser(collect),
      )
      .addOption(
        new Option(
          "--legacy-output",
          "print what crossplane render printed before v2: no spec.crossplane.resourceRefs, only the Ready condition, " +
            "composed resources with only a generateName, results with their step and SEVERITY_*",
        ).default(false),
      )
      .addHelpText(
        "after",
        `
Functions in the functions file run:
  in-process          annotated render.xfn.dev/module: <path to a function module, relative to the file>
  over gRPC           annotated render.crossplane.io/runtime: Development, at
                      render.crossplane.io/runtime-development-target (default localhost:9443, insecure)

Exit codes: 0 rendered; 1 bad input, a function that cannot be run, or (with --validate) a resource a schema refuses;
2 (with --converge) still changing after --max-rounds; 3 a step returned a Fatal result.`,
      )
      .action(async (xr: string, comp: string, fns: string | undefined, flags: RenderFlags) => {
        refuseExit(); // a function calling process.exit fails its step, not the render
        process.exitCode = await runRender(xr, comp, fns, flags, process.stdout, process.stderr);
      })
  );
}
