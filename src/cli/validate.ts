// `xfn validate EXTENSIONS RESOURCES`: manifests checked offline against CRDs
// and XRDs, as `crossplane resource validate` checks them (crossplane/cli
// 3d72f93 cmd/crossplane/validate/cmd.go): the same arguments, flags, output
// and exit status (0 when every resource is valid, missing schemas aside
// unless --error-on-missing-schemas; 1 otherwise, or on bad input).
//
// Packages: a Provider, Function or Configuration among the extensions has
// its CRDs read from the cache crossplane's validate keeps (--cache-dir,
// <registry>/<repository>@<tag>/), since xfn reaches no registry; one not in
// the cache is an error that says how to get it there.
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join, relative, resolve } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { Command, InvalidArgumentError, Option } from "commander";
import { InputError, readStdinBounded, type Doc } from "../engine/input.js";
import { isObject } from "../json.js";
import { printable } from "../terminal.js";
import { eachSource, loadSources } from "../validate/load.js";
import { FORMATS, render, type Format } from "../validate/output.js";
import { resultError, Schemas, schemaValidate } from "../validate/validate.js";
import { messageOf } from "../sdk/errors.js";

export interface ValidateFlags {
  cacheDir: string;
  errorOnMissingSchemas: boolean;
  output: Format;
  skipSuccessResults: boolean;
}

/** packagesOf are the package images extensions name: Providers, Functions and Configurations, and a crossplane.yaml's dependencies. */
export function packagesOf(docs: Doc[]): string[] {
  const out = new Set<string>();
  for (const d of docs) {
    const o = d.obj;
    const spec = isObject(o["spec"]) ? o["spec"] : {};
    if (
      o["apiVersion"] &&
      String(o["apiVersion"]).startsWith("pkg.crossplane.io/") &&
      ["Provider", "Function", "Configuration"].includes(String(o["kind"]))
    ) {
      if (typeof spec["package"] !== "string" || spec["package"] === "")
        throw new InputError(`${d.source}: cannot get ${String(o["kind"]).toLowerCase()} package image: spec.package is not set`);
      out.add(spec["package"]);
    }
    if (String(o["apiVersion"]).startsWith("meta.pkg.crossplane.io/") && o["kind"] === "Configuration")
      for (const dep of Array.isArray(spec["dependsOn"]) ? spec["dependsOn"] : []) {
        if (!isObject(dep)) continue;
        const image = [dep["package"], dep["configuration"], dep["provider"], dep["function"]].find(
          (x) => typeof x === "string" && x !== "",
        );
        if (typeof image !== "string" || typeof dep["version"] !== "string") continue;
        out.add(/^sha256:[0-9a-f]{64}$/.test(dep["version"]) ? `${image}@${dep["version"]}` : `${image}:${dep["version"]}`);
      }
  }
  return [...out];
}

/** cached reads a package's schemas from the cache (crossplane's LocalCache layout: ':' becomes '@'). */
function cached(cacheDir: string, image: string): Doc[] {
  const dir = join(cacheDir, image.replaceAll(":", "@"));
  // A package named ../../secret would have its "schemas" read from outside the cache.
  const inside = relative(resolve(cacheDir), resolve(dir));
  if (inside === "" || inside.startsWith("..") || isAbsolute(inside))
    throw new InputError(`cannot look up package ${JSON.stringify(image)} in the cache ${cacheDir}: its name leads out of the cache`);
  if (!existsSync(dir))
    throw new InputError(
      `cannot find the schemas of ${image} in the cache ${cacheDir}: xfn validate does not download packages; ` +
        "give the package's CRDs among the extensions, or fill the cache (crossplane resource validate --cache-dir)",
    );
  return loadSources(dir, () => "");
}

/** schemasOf are the schemas in docs and those of the packages docs name, from the cache at cacheDir (~ is the home folder). */
export function schemasOf(docs: Doc[], cacheDir: string): Schemas {
  const dir = cacheDir.startsWith("~/") ? join(homedir(), cacheDir.slice(2)) : cacheDir;
  return new Schemas().add(docs).add(packagesOf(docs).flatMap((image) => cached(dir, image)));
}

/** runValidate does the work of the command; it returns the exit code. */
export function runValidate(
  extensions: string,
  resources: string,
  flags: ValidateFlags,
  out: NodeJS.WritableStream,
  err: NodeJS.WritableStream,
  readStdin: () => string = () => readStdinBounded(),
): number {
  try {
    if (extensions === "-" && resources === "-") throw new InputError("cannot use stdin for both extensions and resources");
    let stdin: string | undefined;
    const once = () => (stdin ??= readStdin());
    // Which argument could not be read, as crossplane's validate says it (cmd/crossplane/validate/cmd.go).
    const loadError = (what: string, sources: string, e: unknown) =>
      new InputError(`cannot load ${what} from ${JSON.stringify(sources)}: ${messageOf(e)}`);
    let ext: Doc[];
    try {
      ext = loadSources(extensions, once);
    } catch (e) {
      throw loadError("extensions", extensions, e);
    }
    // Resources are read one at a time as they are checked, each dropped after: 50,000 of them
    // held parsed took 1.34 GB. The first is read before the packages' schemas are looked up, so
    // that resources that cannot be read are said first, as crossplane says it.
    function* res(): Generator<JsonObject> {
      try {
        for (const d of eachSource(resources, once)) yield d.obj as JsonObject;
      } catch (e) {
        throw loadError("resources", resources, e);
      }
    }
    const rest = res();
    const first = rest.next();
    const schemas = schemasOf(ext, flags.cacheDir);
    const result = schemaValidate(
      (function* () {
        if (!first.done) yield first.value;
        yield* rest;
      })(),
      schemas,
    );
    out.write(render(result, flags.output, { skipSuccessResults: flags.skipSuccessResults }));
    const failed = resultError(result, flags.errorOnMissingSchemas);
    if (failed) {
      err.write(`xfn validate: ${failed}\n`);
      return 1;
    }
    return 0;
  } catch (e) {
    err.write(`xfn validate: ${printable(messageOf(e), { lines: true })}\n`);
    return 1;
  }
}

export function validateCommand(): Command {
  return new Command("validate")
    .description(
      "check manifests offline against CRDs and XRDs (schema, unknown fields, defaults, CEL rules), like crossplane resource validate",
    )
    .argument("<extensions>", "CRDs, XRDs, OpenAPI v3 documents, Providers: comma-separated files, folders, or - for standard input")
    .argument("<resources>", "the manifests to check: comma-separated files, folders, or - for standard input (e.g. xfn render's output)")
    .addOption(new Option("--cache-dir <dir>", "where crossplane's validate cached package schemas").default("~/.crossplane/cache"))
    .addOption(new Option("--error-on-missing-schemas", "fail when a resource's kind has no schema").default(false))
    .addOption(
      new Option("-o, --output <format>", "text, json or yaml").default("text").argParser((v) => {
        if (!(FORMATS as string[]).includes(v))
          throw new InvalidArgumentError(`unknown output format: ${JSON.stringify(v)} (text, json or yaml)`);
        return v;
      }),
    )
    .addOption(new Option("--skip-success-results", "leave out the lines of resources that passed").default(false))
    .action((extensions: string, resources: string, flags: ValidateFlags) => {
      process.exitCode = runValidate(extensions, resources, flags, process.stdout, process.stderr);
    });
}
