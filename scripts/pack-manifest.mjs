#!/usr/bin/env node
// Around `npm pack`/`npm publish` (prepack, postpack): the package ships no
// scripts. A user's install then runs none of this repository's (npm warned
// of `prepare` on every install, and listed it under its install scripts),
// and the pack itself runs no `prepare` build (prepack's clean build is the
// one). `strip` keeps package.json aside and writes it without "scripts";
// `restore` puts it back. A pack that died between the two leaves the copy:
// the next strip or restore puts it back first.
//
//   node scripts/pack-manifest.mjs strip|restore
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const manifest = join(root, "package.json");
const kept = join(root, "package.json.before-pack");

const restore = () => {
  if (existsSync(kept)) renameSync(kept, manifest);
};

const mode = process.argv[2];
if (mode === "restore") restore();
else if (mode === "strip") {
  restore();
  const text = readFileSync(manifest, "utf8");
  const pkg = JSON.parse(text);
  delete pkg.scripts;
  writeFileSync(kept, text);
  // Swapped in whole: a test or command reading package.json meanwhile never sees half of it.
  const next = `${manifest}.next-${process.pid}`;
  writeFileSync(next, `${JSON.stringify(pkg, null, 2)}\n`);
  renameSync(next, manifest);
} else {
  console.error("usage: node scripts/pack-manifest.mjs strip|restore");
  process.exit(2);
}
