#!/usr/bin/env node
// Bundles each function in functions/ (or the ones named) with xfn's server
// into dist/functions/<name>/function.mjs, through `xfn package`: one file
// that runs on plain Node 20, with no node_modules and no TypeScript loader.
// The Dockerfile copies it, together with the package/ metadata, into the
// runtime image.
//
//   npm run package                 every function
//   npm run package -- hello        just functions/hello
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
if (!existsSync(join(root, "lib/cli/package.js"))) {
  console.error("package: lib/ is missing; run `npm run build` first");
  process.exit(1);
}
const { packageFunction } = await import("../lib/cli/package.js");
const all = readdirSync(join(root, "functions"))
  .filter((n) => statSync(join(root, "functions", n)).isDirectory())
  .sort();
const wanted = process.argv.slice(2);
for (const n of wanted) {
  if (!all.includes(n)) {
    console.error(`package: no function ${JSON.stringify(n)} in functions/ (have: ${all.join(", ")})`);
    process.exit(1);
  }
}

for (const name of wanted.length ? wanted : all) {
  try {
    const r = await packageFunction({
      dir: join(root, "functions", name),
      out: join(root, "dist/functions", name),
      name: `function-${name}`,
    });
    console.log(
      `packaged functions/${name} -> dist/functions/${name}/function.mjs${r.generatedMetadata ? " (no package/crossplane.yaml: wrote a minimal one)" : ""}`,
    );
  } catch (err) {
    console.error(`package: functions/${name}: ${err.message}`);
    process.exit(1);
  }
}
