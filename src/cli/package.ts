// `xfn package [dir]`: bundle a function module with xfn's server into
// server.mjs, which runs on plain Node 20 with no node_modules and no
// TypeScript loader, and write its entry, function.mjs, beside it and the
// Crossplane package metadata (package/). A runtime image copies the folder
// and runs `node function.mjs`, which starts the first worker and then loads
// server.mjs itself, so that both load at once (launch.ts); its workers load
// worker.mjs, the function without the server (bundled-worker.ts). `node
// server.mjs` serves too, loading one after the other. inspect.mjs is
// `xfn inspect`, so the same image runs the Pipeline Inspector sidecar.
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, extname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, Option } from "commander";
import { parse as parseYaml } from "yaml";
import { resolveModule } from "../module/load.js";
import { insideLink } from "../xpkg/package.js";
import { messageOf } from "../sdk/errors.js";

/** PackageOptions say what to bundle and where. */
export interface PackageOptions {
  /** dir is the function's folder (its module, and package/ if it has one). */
  dir: string;
  /** out is the folder to write function.mjs, server.mjs, worker.mjs, inspect.mjs and package/ to (emptied first). */
  out: string;
  /** name is the package's name; default: package/crossplane.yaml's, else function-<folder>. */
  name?: string;
}

/** PackageResult says what was written. */
export interface PackageResult {
  name: string;
  bundle: string;
  /** generatedMetadata is true when package/crossplane.yaml was made up, not copied. */
  generatedMetadata: boolean;
}

const here = dirname(fileURLToPath(import.meta.url));
/** The server bundle's file, beside function.mjs. */
export const SERVER_FILE = "server.mjs";
/** OTEL_FILE is the OpenTelemetry SDK beside server.mjs (telemetry/sdk.ts), loaded only when traces are exported. */
export const OTEL_FILE = "otel.mjs";

/**
 * otelApart is an esbuild plugin that leaves telemetry/sdk out of a bundle,
 * importing it from target instead (a file built from it on its own).
 */
export function otelApart(target: string) {
  return {
    name: "otel-apart",
    setup(b: {
      onResolve(
        o: { filter: RegExp },
        cb: (a: { path: string; importer: string }) => { path: string; external: boolean } | undefined,
      ): void;
    }) {
      // Any import of telemetry/sdk.js (from telemetry/ itself, or ../telemetry/sdk.js from beside it).
      b.onResolve({ filter: /sdk\.js$/ }, (a) =>
        /[\\/]telemetry[\\/]sdk\.js$/.test(join(dirname(a.importer), a.path)) ? { path: target, external: true } : undefined,
      );
    },
  };
}
/** What the launcher's pool workers load: the function without the server (bundled-worker.ts). */
export const WORKER_FILE = "worker.mjs";
/** The Pipeline Inspector sidecar's bundle, beside function.mjs (docs/inspect.md). */
export const INSPECT_FILE = "inspect.mjs";
// Run from src/ (this repository's tests) the sources are bundled; from lib/, the compiled code.
const fromSource = extname(fileURLToPath(import.meta.url)) === ".ts";

function metadataName(file: string): string | undefined {
  try {
    const meta = parseYaml(readFileSync(file, "utf8")) as { metadata?: { name?: unknown } } | null;
    return typeof meta?.metadata?.name === "string" ? meta.metadata.name : undefined;
  } catch (err) {
    throw new Error(`cannot read ${file}: ${messageOf(err)}`, { cause: err });
  }
}

/** functionMetadata is a minimal meta.pkg.crossplane.io/v1 Function for a folder with none. */
export function functionMetadata(name: string): string {
  return [
    "# Made by xfn package: this function has no package/crossplane.yaml of its own.",
    "apiVersion: meta.pkg.crossplane.io/v1",
    "kind: Function",
    "metadata:",
    `  name: ${name}`,
    "spec:",
    "  crossplane:",
    '    version: ">=v1.17.0-0"',
    "",
  ].join("\n");
}

/**
 * checkLinks refuses a symbolic link under path (or path itself) that leads
 * outside root, leads nowhere, or loops: what a package holds is the function
 * folder's own files, never /etc/hostname or a secret a link points to.
 */
export function checkLinks(path: string, root: string): void {
  const realRoot = realpathSync(root);
  const walk = (p: string): void => {
    const st = lstatSync(p);
    if (st.isSymbolicLink()) return insideLink(p, root, realRoot, `the function's folder ${root}`);
    if (st.isDirectory()) for (const n of readdirSync(p)) walk(join(p, n));
  };
  walk(path);
}

/** packageFunction bundles the function in opts.dir into opts.out. */
export async function packageFunction(opts: PackageOptions): Promise<PackageResult> {
  const dir = resolve(opts.dir);
  const module = resolveModule(dir);
  // The package's files may not lead out of the function's folder (checked before one is read).
  if (existsSync(join(dir, "package"))) checkLinks(join(dir, "package"), dir);
  const metaFile = join(dir, "package", "crossplane.yaml");
  const hasMeta = existsSync(metaFile);
  const name = opts.name ?? (hasMeta ? metadataName(metaFile) : undefined) ?? `function-${basename(dir)}`;
  const out = resolve(opts.out);
  if (out === dir || relative(out, dir).split(/[\\/]/)[0] !== "..") {
    throw new Error(`cannot package into ${opts.out}: it would empty the function's own folder`);
  }
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const { build } = await import("esbuild");
  // CommonJS dependencies bundled into an ES module (grpc-js, pino) call require() for Node built-ins.
  const requireBanner = {
    js: "import { createRequire as __xfnCreateRequire } from 'node:module'; const require = __xfnCreateRequire(import.meta.url);",
  };
  const source = (file: string) => JSON.stringify(join(here, fromSource ? `${file}.ts` : `${file}.js`));
  const common = {
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // In this repository, `import ... from "xfn-runtime"` must bundle the same sources as the entry.
    conditions: fromSource ? ["xfn-source"] : [],
    logLevel: "warning",
  } as const;
  // The server with the function built in: what every worker runs, and what the launcher loads.
  await build({
    ...common,
    stdin: {
      contents: [
        // Imported where the function runs (bundled.ts): a pool's server thread never evaluates it.
        `const load = () => import(${JSON.stringify(module)});`,
        `import { main, runsItself } from ${source("bundled")};`,
        `export const start = (argv, script, early) => main(load, ${JSON.stringify(name)}, argv, script ?? import.meta.url, early);`,
        `if (runsItself(import.meta.url)) await start(process.argv.slice(2));`,
      ].join("\n"),
      resolveDir: dir,
      loader: "js",
      sourcefile: `${name}-server.js`,
    },
    outfile: join(out, SERVER_FILE),
    // esbuild compiles a TypeScript module for `xfn serve <file>`; a bundle has its function built in and never does.
    external: ["esbuild"],
    // The OpenTelemetry SDK is a file of its own (below), loaded only when the OTEL_ variables ask for traces.
    plugins: [otelApart(`./${OTEL_FILE}`)],
    banner: requireBanner,
    legalComments: "linked",
  });
  // What the launcher's workers load: the function and the worker's side of the pool, none of the server.
  await build({
    ...common,
    stdin: {
      contents: [
        `import * as mod from ${JSON.stringify(module)};`,
        `import { workerEntry } from ${source("bundled-worker")};`,
        `workerEntry(mod, ${JSON.stringify(name)});`,
      ].join("\n"),
      resolveDir: dir,
      loader: "js",
      sourcefile: `${name}-worker.js`,
    },
    outfile: join(out, WORKER_FILE),
    banner: requireBanner,
    legalComments: "linked",
  });
  // The OpenTelemetry SDK and its exporters (telemetry/sdk.ts), for server.mjs to load when traces are asked for.
  await build({
    ...common,
    entryPoints: [join(here, fromSource ? "../telemetry/sdk.ts" : "../telemetry/sdk.js")],
    outfile: join(out, OTEL_FILE),
    banner: requireBanner,
    legalComments: "linked",
  });
  // The entry: a few kilobytes that start the first worker before the server loads.
  const url = (file: string) => `new URL(${JSON.stringify(`./${file}`)}, import.meta.url)`;
  await build({
    ...common,
    stdin: {
      contents: [
        `import { launch } from ${source("launch")};`,
        `await launch(import.meta.url, ${url(SERVER_FILE)}, ${url(WORKER_FILE)}, process.argv.slice(2));`,
      ].join("\n"),
      resolveDir: dir,
      loader: "js",
      sourcefile: `${name}-entry.js`,
    },
    outfile: join(out, "function.mjs"),
  });
  // The Pipeline Inspector sidecar (`xfn inspect`), so the function's image can run it beside Crossplane.
  await build({
    ...common,
    stdin: {
      contents: [
        `import { inspectMain } from ${source("inspect-bundled")};`,
        "await inspectMain(import.meta.url, process.argv.slice(2));",
      ].join("\n"),
      resolveDir: dir,
      loader: "js",
      sourcefile: `${name}-inspect.js`,
    },
    outfile: join(out, INSPECT_FILE),
    // Its spans (traces) load the OpenTelemetry SDK from otel.mjs too.
    plugins: [otelApart(`./${OTEL_FILE}`)],
    banner: requireBanner,
    legalComments: "linked",
  });
  // Links were checked before anything was written: they are followed (the package holds files).
  if (existsSync(join(dir, "package"))) cpSync(join(dir, "package"), join(out, "package"), { recursive: true, dereference: true });
  if (!hasMeta) {
    mkdirSync(join(out, "package"), { recursive: true });
    writeFileSync(join(out, "package", "crossplane.yaml"), functionMetadata(name));
  }
  return { name, bundle: join(out, "function.mjs"), generatedMetadata: !hasMeta };
}

interface PackageFlags {
  out: string;
  name?: string;
  xpkg?: string;
  embedRuntimeImageTarball?: string;
  examplesRoot?: string;
}

/** packageCommand builds the `package` subcommand. */
export function packageCommand(): Command {
  return new Command("package")
    .description(
      "bundle a function with xfn's server into function.mjs and server.mjs, and xfn inspect into inspect.mjs " +
        "(plain Node, no node_modules), beside its Crossplane package metadata",
    )
    .argument("[dir]", "the function's folder", ".")
    .addOption(
      new Option(
        "-o, --out <dir>",
        "where to write function.mjs, server.mjs, worker.mjs, inspect.mjs and package/ (emptied first)",
      ).default("dist"),
    )
    .addOption(new Option("--name <name>", "package name (default: package/crossplane.yaml's metadata.name, else function-<folder>)"))
    .addOption(
      new Option(
        "--xpkg <file>",
        "also write the Crossplane package (.xpkg) as `crossplane xpkg build` does: package/ checked as a Function package",
      ),
    )
    .addOption(
      new Option(
        "--embed-runtime-image-tarball <tar>",
        "with --xpkg: build it on this runtime image (a tarball from podman save or docker save of the function's image)",
      ),
    )
    .addOption(new Option("--examples-root <dir>", "with --xpkg: example YAML to add to the package (default: <dir>/examples, if there)"))
    .action(async (dir: string, flags: PackageFlags) => {
      try {
        if (!flags.xpkg && (flags.embedRuntimeImageTarball || flags.examplesRoot))
          throw new Error("--embed-runtime-image-tarball and --examples-root go with --xpkg <file>");
        const r = await packageFunction({ dir, out: flags.out, ...(flags.name ? { name: flags.name } : {}) });
        process.stdout.write(`packaged ${dir} as ${r.name} -> ${relative(process.cwd(), r.bundle) || r.bundle}\n`);
        if (r.generatedMetadata) {
          process.stdout.write(`note: ${dir} has no package/crossplane.yaml; wrote a minimal one (name ${r.name}) beside the bundle\n`);
        }
        if (flags.xpkg) {
          const { writeXpkg } = await import("../xpkg/xpkg.js");
          const x = await writeXpkg({
            packageRoot: join(flags.out, "package"),
            examplesRoot: resolve(flags.examplesRoot ?? join(dir, "examples")),
            ...(flags.embedRuntimeImageTarball ? { runtimeTarball: flags.embedRuntimeImageTarball } : {}),
            out: flags.xpkg,
          });
          const runtime = flags.embedRuntimeImageTarball
            ? `on the runtime image ${flags.embedRuntimeImageTarball}`
            : "with no runtime image";
          process.stdout.write(
            `wrote ${flags.xpkg}: the Crossplane package ${x.name} ${runtime}, ${x.layers} layers${x.examples ? " (examples too)" : ""}, ` +
              `image ID ${x.configDigest}\n`,
          );
        }
      } catch (err) {
        process.stderr.write(`xfn package: ${messageOf(err)}\n`);
        process.exitCode = 1;
      }
    });
}
