// Compiles a TypeScript function module once, for every pool worker.
//
// Without this, each worker registers tsx's loader (a loader thread of its own
// on Node 20) and compiles the module's files itself: with three workers, about
// twice the CPU of starting them on compiled code (bench/README.md, "Why the
// code is as it is"). Here the server's thread bundles the module's own files
// with esbuild (tsx's compiler) into one ES module, written to a folder of its
// own under the system's temporary folder (removed when the server exits), and
// each worker imports that. With the worker runtime built (lib/worker-runtime.mjs,
// server/worker-runtime.ts), the compiled module's imports of this very
// xfn-runtime load that one bundled file, and a script beside it starts each
// worker from the runtime instead of from lib/server/worker-entry.js.
//
// What the module sees is what it sees under tsx:
// - packages (xfn-runtime above all) stay imports, resolved where the module
//   is, with the conditions Node runs with, and written as absolute file URLs,
//   so a worker loads the very files it would have loaded;
// - import.meta.url, import.meta.filename and import.meta.dirname, and
//   __filename and __dirname, name each source file, not the bundle; require
//   works, from the module's folder;
// - stack traces name the source files and lines (an inline source map, and
//   source maps turned on in the worker, as tsx turns them on).
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, extname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { isTypeScript } from "./load.js";

/** Compiled is a module ready for workers: its URL, and whether its imports need TypeScript too. */
export interface Compiled {
  url: string;
  /** dispose removes the compiled file (the server calls it as it exits). */
  dispose(): void;
  /** An import resolved to a TypeScript file (this repository's own tests, run from src/): the worker registers tsx as well. */
  needsTypeScript: boolean;
  /** With compileModule's worker option: the workers' script (the worker runtime, then this module), instead of worker-entry. */
  script?: string;
}

/**
 * OWN_NAMES are the names a source file's own location goes by, and what
 * each becomes in the compiled module. The CommonJS two are spelled in pieces:
 * this file, when it is compiled itself (a module that imports xfn by its
 * path), must keep its own patterns as they are.
 */
const OWN_NAMES: [RegExp, (file: string) => string][] = [
  [/\bimport\.meta\.url\b/g, (f) => JSON.stringify(pathToFileURL(f).href)],
  [/\bimport\.meta\.filename\b/g, (f) => JSON.stringify(f)],
  [/\bimport\.meta\.dirname\b/g, (f) => JSON.stringify(dirname(f))],
  [new RegExp(`(?<![.\\w$])${"__file" + "name"}\\b`, "g"), (f) => JSON.stringify(f)],
  [new RegExp(`(?<![.\\w$])${"__dir" + "name"}\\b`, "g"), (f) => JSON.stringify(dirname(f))],
];

/** conditions are the module conditions Node runs with (--conditions / -C, on the command line or in NODE_OPTIONS). */
export function nodeConditions(argv = process.execArgv, options = process.env["NODE_OPTIONS"] ?? ""): string[] {
  const args = [...argv, ...options.split(/\s+/).filter(Boolean)];
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const m = /^(?:--conditions|-C)=(.+)$/.exec(a);
    if (m) out.push(m[1]!);
    else if ((a === "--conditions" || a === "-C") && i + 1 < args.length) out.push(args[++i]!);
  }
  return out;
}

/**
 * compileModule bundles file (a TypeScript module) and the files it imports
 * by relative path into one ES module, resolving packages with conditions
 * (Node's own, by default). A compile error is thrown with
 * esbuild's words (file, line, column and what is wrong).
 */
export async function compileModule(file: string, conditions = nodeConditions(), opts: { worker?: WorkerScript } = {}): Promise<Compiled> {
  const { build } = await import("esbuild");
  let needsTypeScript = false;
  const entryDir = dirname(file);
  const entryUrl = pathToFileURL(file).href;
  const worker = opts.worker;
  const result = await build({
    entryPoints: [file],
    absWorkingDir: entryDir,
    bundle: true,
    write: false,
    platform: "node",
    format: "esm",
    target: `node${process.versions.node}`,
    conditions,
    sourcemap: "external",
    sourcesContent: false,
    outfile: `${file}.xfn.mjs`,
    logLevel: "silent",
    // require, from the module's folder, for what esbuild leaves as require() calls.
    banner: {
      js: `import { createRequire as __xfnRequire } from "node:module"; const require = __xfnRequire(${JSON.stringify(entryUrl)});`,
    },
    plugins: [
      {
        name: "xfn-packages",
        setup(b) {
          // Packages (bare specifiers, node: builtins) stay imports, pinned to the file Node would load.
          b.onResolve({ filter: /^[^./]/ }, async (args) => {
            if (args.pluginData === "xfn-inner" || isAbsolute(args.path)) return undefined;
            if (args.path.startsWith("node:") || args.path.startsWith("file:")) return { path: args.path, external: true };
            const r = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: "xfn-inner" });
            if (r.errors.length > 0) return { errors: r.errors };
            if (r.external || !isAbsolute(r.path)) return { path: args.path, external: true };
            // This very xfn-runtime, for a worker: the runtime bundle, the one copy the worker loads.
            if (worker && worker.index.includes(r.path)) return { path: worker.runtime, external: true };
            if (isTypeScript(r.path)) needsTypeScript = true;
            return { path: pathToFileURL(r.path).href, external: true };
          });
          // Each source file keeps its own name and folder.
          b.onLoad({ filter: /\.(c|m)?[jt]sx?$/ }, async (args) => {
            if (args.path.includes("/node_modules/")) return undefined;
            const text = await readFile(args.path, "utf8");
            const contents = OWN_NAMES.reduce((t, [name, value]) => t.replace(name, value(args.path)), text);
            return { contents, loader: loaderFor(args.path), resolveDir: dirname(args.path) };
          });
        },
      },
    ],
  }).catch((err: unknown) => {
    const errors = (err as { errors?: { text: string; location?: { file: string; line: number; column: number } | null }[] }).errors;
    if (!errors?.length) throw err;
    const e = errors[0]!;
    const at = e.location ? `${resolve(entryDir, e.location.file)}:${e.location.line}:${e.location.column + 1}: ` : "";
    throw new Error(`${at}${e.text}${errors.length > 1 ? ` (and ${errors.length - 1} more)` : ""}`);
  });
  const js = result.outputFiles.find((f) => f.path.endsWith(".mjs"))!.text;
  const mapFile = result.outputFiles.find((f) => f.path.endsWith(".map"));
  let code = js.replace(/\n\/\/# sourceMappingURL=.*\n?$/, "\n");
  if (mapFile) {
    // The map's sources are relative to the bundle's (virtual) path beside the entry: the file is written elsewhere, so make them absolute.
    const map = JSON.parse(mapFile.text) as { sources: string[] };
    map.sources = map.sources.map((s) => new URL(s, pathToFileURL(`${entryDir}/`)).href);
    code += `//# sourceMappingURL=data:application/json;base64,${Buffer.from(JSON.stringify(map)).toString("base64")}\n`;
  }
  sweepCompiled();
  const folder = mkdtempSync(join(tmpdir(), COMPILED_PREFIX));
  // Whose it is: a server ended by SIGKILL cannot remove its folder, and the next compile sweeps it (sweepCompiled).
  writeFileSync(join(folder, OWNER_FILE), String(process.pid));
  const out = join(folder, `${basename(file)}.mjs`);
  writeFileSync(out, code);
  const url = pathToFileURL(out).href;
  let script: string | undefined;
  if (worker) {
    // The workers' script: source maps on before anything loads, then the runtime starts the worker and imports the module.
    script = join(folder, "worker.mjs");
    writeFileSync(
      script,
      [
        "process.setSourceMapsEnabled(true);",
        `const { startWorker, loadImported } = await import(${JSON.stringify(worker.runtime)});`,
        `await startWorker(() => loadImported(${JSON.stringify(worker.label)}, () => import(${JSON.stringify(url)})));`,
        "",
      ].join("\n"),
    );
  }
  return {
    url,
    needsTypeScript,
    ...(script ? { script: pathToFileURL(script).href } : {}),
    dispose: () => rmSync(folder, { recursive: true, force: true }),
  };
}

const COMPILED_PREFIX = "xfn-compiled-";
const OWNER_FILE = "owner.pid";

/**
 * sweepCompiled removes the compiled folders (in the system's temporary
 * folder) of servers no longer running: those whose owner.pid names no
 * process. A folder without one, or whose process lives (or belongs to
 * another user: EPERM), is left alone.
 */
export function sweepCompiled(dir = tmpdir()): void {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.startsWith(COMPILED_PREFIX));
  } catch {
    return;
  }
  for (const n of names) {
    let pid: number;
    try {
      pid = Number(readFileSync(join(dir, n, OWNER_FILE), "utf8"));
    } catch {
      continue;
    }
    if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ESRCH") rmSync(join(dir, n), { recursive: true, force: true });
    }
  }
}

/**
 * WorkerScript asks compileModule for a pool worker's script too: runtime is
 * the worker runtime bundle's URL (lib/worker-runtime.mjs, see
 * server/worker-runtime.ts), index the files of the xfn-runtime it was built
 * from (lib/index.js, src/index.ts): an import of xfn-runtime that resolves to
 * one of them is the bundle; one that resolves to another copy of xfn stays
 * as it is. label names the module in errors.
 */
export interface WorkerScript {
  runtime: string;
  index: readonly string[];
  label: string;
}

/** workerScript is the WorkerScript of the xfn this code belongs to, or undefined when its worker runtime was not built. */
export function workerScript(label: string): WorkerScript | undefined {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
  const runtime = join(root, "lib", "worker-runtime.mjs");
  if (!existsSync(runtime)) return undefined;
  return { runtime: pathToFileURL(runtime).href, index: [join(root, "lib", "index.js"), join(root, "src", "index.ts")], label };
}

function loaderFor(path: string): "ts" | "tsx" | "js" | "jsx" {
  const ext = extname(path);
  if (ext === ".tsx") return "tsx";
  if (ext === ".jsx") return "jsx";
  return /\.(c|m)?ts$/.test(ext) ? "ts" : "js";
}
