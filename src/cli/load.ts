// Loads a function module for `xfn serve <module>`.
//
// <module> is a file, or a directory holding package.json#main or an index
// file. The module exports its function as the default export or as a named
// export `runFunction`. TypeScript modules load directly through tsx, also a
// lone .ts file with no package.json (which tsx treats as CommonJS: its
// exports then arrive wrapped in `default`, and pickFunction unwraps them).
import { existsSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { tsImport } from "tsx/esm/api";
import type { RunFunction } from "../function.js";

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

/** loadFunction imports the module and returns its function. */
export async function loadFunction(spec: string, cwd = process.cwd()): Promise<RunFunction> {
  const file = resolveModule(spec, cwd);
  let mod: Record<string, unknown>;
  try {
    mod = (await tsImport(pathToFileURL(file).href, import.meta.url)) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`cannot load function module ${spec}: ${(err as Error).message}`, { cause: err });
  }
  const fn = pickFunction(mod);
  if (!fn) {
    throw new Error(`cannot load function module ${spec}: it exports no function (export one as default or as runFunction)`);
  }
  return fn;
}

/** pickFunction finds the exported function in an ES module or CommonJS namespace. */
function pickFunction(mod: Record<string, unknown>): RunFunction | undefined {
  const candidates = [mod["default"], mod["runFunction"]];
  const d = mod["default"];
  if (d && typeof d === "object") candidates.push((d as Record<string, unknown>)["default"], (d as Record<string, unknown>)["runFunction"]);
  return candidates.find((c): c is RunFunction => typeof c === "function");
}
