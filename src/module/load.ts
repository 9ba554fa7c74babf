// Loads a function module for `xfn serve <module>`.
//
// <module> is a file, or a directory holding package.json#main or an index
// file. The module exports its function as the default export or as a named
// export `runFunction`. JavaScript modules are imported as they are. For a
// TypeScript module, tsx's loader is registered once, for the whole process
// (not namespaced): the module's own `import ... from "xfn-runtime"` must
// then load the very modules the CLI runs, not a second copy of them. A .ts
// file outside any package that says `"type": "module"` is CommonJS to tsx,
// and Node refuses to load such a file written with `import`/`export` through
// the global loader ("Cannot require() ES Module ... in a cycle"); it is
// compiled once with esbuild instead, as for the workers (compile.ts): an ES
// module of its own files, its packages imports of what Node would load, with
// a source map, so an error names its file and line.
import { existsSync, readFileSync, statSync, writeSync } from "node:fs";
import { dirname, extname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { isMainThread } from "node:worker_threads";
import type { RunFunction } from "../function.js";
import { pickFunction } from "./pick.js";
import { messageOf } from "../sdk/errors.js";

const TS_EXTENSIONS = new Set([".ts", ".mts", ".cts", ".tsx"]);
let tsxRegistered: Promise<void> | undefined;

/** registerTypeScript lets import() load TypeScript, once per process. */
export function registerTypeScript(): Promise<void> {
  tsxRegistered ??= import("tsx/esm/api").then(({ register }) => {
    // Under `node --import tsx` (the repository's own tests) it is already there,
    // on the main thread only: a worker thread starts without it.
    if (!isMainThread || !process.execArgv.some((a) => a === "tsx" || a.includes("/tsx/"))) register();
  });
  return tsxRegistered;
}

const INDEX_FILES = ["index.ts", "index.mts", "index.js", "index.mjs"];

/** resolveModule turns a user-given path into the file to import. */
export function resolveModule(spec: string, cwd = process.cwd()): string {
  const p = resolve(cwd, spec);
  if (!existsSync(p)) throw new Error(`cannot load function module ${spec}: no such file or directory`);
  if (statSync(p).isFile()) return p;
  const pkgPath = join(p, "package.json");
  if (existsSync(pkgPath)) {
    let main: unknown;
    try {
      main = (JSON.parse(readFileSync(pkgPath, "utf8")) as { main?: unknown }).main;
    } catch (err) {
      throw new Error(`cannot load function module ${spec}: package.json: ${messageOf(err)}`);
    }
    if (typeof main === "string") {
      const m = join(p, main);
      if (!existsSync(m)) throw new Error(`cannot load function module ${spec}: package.json main ${main} does not exist`);
      return m;
    }
  }
  for (const name of INDEX_FILES) {
    const f = join(p, name);
    if (existsSync(f)) return f;
  }
  throw new Error(`cannot load function module ${spec}: the directory has no package.json main and none of ${INDEX_FILES.join(", ")}`);
}

/** UNSETTLED_EXIT_CODE is Node's exit code when the event loop empties with a top-level await still pending. */
export const UNSETTLED_EXIT_CODE = 13;

/** unsettledMessage says why loading spec ended the process (or a worker) with UNSETTLED_EXIT_CODE. */
export function unsettledMessage(spec: string): string {
  return (
    `cannot load function module ${spec}: its top-level code awaits something that can never settle ` +
    `(nothing is left running that could settle it), so Node ended with exit code ${UNSETTLED_EXIT_CODE}`
  );
}

/**
 * loadFunction imports the module and returns its function. Errors name it
 * as name: the path as the user typed it (a pool worker is given the
 * resolved file, and the name typed).
 */
export async function loadFunction(spec: string, cwd = process.cwd(), name = spec): Promise<RunFunction> {
  const file = resolveModule(spec, cwd);
  return settle(name, async () => {
    const url = pathToFileURL(file).href;
    if (!TS_EXTENSIONS.has(extname(file))) return (await import(url)) as Record<string, unknown>;
    if (extname(file) === ".mts" || packageType(file) === "module") {
      await registerTypeScript();
      return (await import(url)) as Record<string, unknown>;
    }
    const { compileModule } = await import("./compile.js");
    const compiled = await compileModule(file);
    process.once("exit", compiled.dispose);
    process.setSourceMapsEnabled(true);
    if (compiled.needsTypeScript) await registerTypeScript();
    return (await import(compiled.url)) as Record<string, unknown>;
  });
}

/** isTypeScript tells whether file is loaded through tsx (or compiled once for workers: compile.ts). */
export const isTypeScript = (file: string): boolean => TS_EXTENSIONS.has(extname(file));

/**
 * loadCompiled imports a module compileModule made (a pool worker's load), with
 * loadFunction's errors, naming it as name. Stack traces map to its sources.
 */
export async function loadCompiled(compiled: { url: string; needsTypeScript: boolean }, name: string): Promise<RunFunction> {
  process.setSourceMapsEnabled(true);
  return settle(name, async () => {
    if (compiled.needsTypeScript) await registerTypeScript();
    return (await import(compiled.url)) as Record<string, unknown>;
  });
}

/**
 * loadImported is loadFunction for a module imported by load (a worker
 * script compiled with the module in it imports it this way), with
 * loadFunction's errors, naming it as name. Stack traces map to its sources.
 */
export function loadImported(name: string, load: () => Promise<Record<string, unknown>>): Promise<RunFunction> {
  process.setSourceMapsEnabled(true);
  return settle(name, load);
}

/** settle runs load (an import), explaining a top-level await that never settles, and picks the function it exports. */
async function settle(name: string, load: () => Promise<Record<string, unknown>>): Promise<RunFunction> {
  let mod: Record<string, unknown>;
  // A module whose top-level await can never settle leaves nothing to run:
  // Node then ends the process with code 13 and says nothing of why. The
  // "exit" event still fires while the import is pending, with
  // process.exitCode already 13. (A worker's exit is explained by the pool.)
  const onExit = () => {
    if (process.exitCode === UNSETTLED_EXIT_CODE) writeSync(2, `xfn: ${unsettledMessage(name)}\n`);
  };
  if (isMainThread) process.on("exit", onExit);
  try {
    mod = await load();
  } catch (err) {
    const at = throwSite(err);
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot load function module ${name}: ${message}${at ? ` (at ${at})` : ""}`, { cause: err });
  } finally {
    process.off("exit", onExit);
  }
  const fn = pickFunction(mod);
  if (!fn) {
    throw new Error(`cannot load function module ${name}: it exports no function (export one as default or as runFunction)`);
  }
  return fn;
}

/** packageType is the "type" of the nearest package.json above file, as Node reads it. */
function packageType(file: string): string | undefined {
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const pkg = join(dir, "package.json");
    if (existsSync(pkg)) {
      try {
        const type = (JSON.parse(readFileSync(pkg, "utf8")) as { type?: unknown }).type;
        return typeof type === "string" ? type : undefined;
      } catch {
        return undefined;
      }
    }
    if (dirname(dir) === dir) return undefined;
  }
}

/**
 * XFN_CODE are the folders of xfn's own code (lib/ and src/ of the xfn-runtime
 * this file is part of, found from its own path: lib/module/load.js, or
 * lib/worker-runtime.mjs in a worker): a frame there is xfn's, not the
 * function's. In a function's bundle xfn and the function share one file, and
 * only packages and Node are told apart.
 */
const XFN_CODE = ((): string[] => {
  const m = /^(.*)[\\/](?:lib|src)[\\/]/.exec(fileURLToPath(import.meta.url));
  return m ? ["lib", "src"].map((d) => join(m[1]!, d) + sep) : [];
})();

/**
 * throwSite is where in the function's own code err was thrown, as
 * path:line:column (relative to the working directory, source-mapped where
 * the stack is): the first frame of its stack that is not Node's, a
 * package's or xfn's. A throw inside xfn called from the module (a step given
 * bad options) so names the module's line that called it.
 */
export function throwSite(err: unknown): string | undefined {
  const stack = err instanceof Error && typeof err.stack === "string" ? err.stack : "";
  for (const line of stack.split("\n").slice(1)) {
    const m = /^\s*at (?:.*? \()?((?:file:\/\/)?\/[^()]+?):(\d+):(\d+)\)?$/.exec(line);
    if (!m) continue;
    const file = m[1]!.startsWith("file://") ? fileURLToPath(m[1]!) : m[1]!;
    if (file.includes("/node_modules/") || XFN_CODE.some((d) => file.startsWith(d))) continue;
    const shown = relative(process.cwd(), file);
    return `${shown.startsWith("..") ? file : shown}:${m[2]}:${m[3]}`;
  }
  return undefined;
}
