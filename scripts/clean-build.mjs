#!/usr/bin/env node
// Before `npm pack`/`npm publish`: rebuild lib/ from nothing, so that no output
// of a source file since deleted or renamed ships in the package.
//
// The new lib/ is built beside the old one and swapped in with two renames, so
// an `xfn` started meanwhile (a test beside a packing one, a shell in another
// window) finds a whole lib/, never a half-built one.
import { execFileSync } from "node:child_process";
import { existsSync, renameSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const next = join(root, `lib.next-${process.pid}`);
const old = join(root, `lib.old-${process.pid}`);
rmSync(next, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [
    join(root, "node_modules/typescript/bin/tsc"),
    "-p",
    "tsconfig.build.json",
    "--outDir",
    next,
    "--tsBuildInfoFile",
    join(next, ".tsbuildinfo"),
  ],
  { cwd: root, stdio: "inherit" },
);
execFileSync(process.execPath, [join(root, "scripts/bundle-runtime.mjs"), next], { cwd: root, stdio: "inherit" });
const lib = join(root, "lib");
if (existsSync(lib)) renameSync(lib, old);
renameSync(next, lib);
rmSync(old, { recursive: true, force: true });
