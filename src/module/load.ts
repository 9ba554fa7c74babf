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
// imported through tsx's own tsImport instead, which copes, at the price of
// its own copy of the modules it imports. Its exports arrive wrapped in
// `default`, and pickFunction unwraps them.
import { existsSync, readFileSync, statSync, writeSync } from "node:fs";
import { dirname, extname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { isMainThread } from "node:worker_threads";
import type { RunFunction } from "../function.js";
import { pickFunction } from "./pick.js";

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
      throw new Error(`cannot load function module ${spec}: package.json: ${(err as Error).message}`);
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
    const { tsImport } = await import("tsx/esm/api");
    return (await tsImport(url, import.meta.url)) as Record<string, unknown>;
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
    throw new Error(`cannot load function module ${name}: ${(err as Error).message}`, { cause: err });
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
