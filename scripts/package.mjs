#!/usr/bin/env node
// Bundles each function in functions/ (or the ones named) with xfn's server
// into dist/functions/<name>/function.mjs: one file that runs on plain Node 20,
// with no node_modules and no TypeScript loader. The Dockerfile copies it,
// together with the package/ metadata, into the runtime image.
//
//   npm run package                 every function
//   npm run package -- hello        just functions/hello
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const all = readdirSync(join(root, "functions")).filter((n) => statSync(join(root, "functions", n)).isDirectory()).sort();
const wanted = process.argv.slice(2);
for (const n of wanted) {
  if (!all.includes(n)) {
    console.error(`package: no function ${JSON.stringify(n)} in functions/ (have: ${all.join(", ")})`);
    process.exit(1);
  }
}

for (const name of wanted.length ? wanted : all) {
  const src = join(root, "functions", name);
  const out = join(root, "dist/functions", name);
  for (const need of ["index.ts", "package/crossplane.yaml"]) {
    if (!existsSync(join(src, need))) {
      console.error(`package: functions/${name} has no ${need}; every function folder is a Crossplane package`);
      process.exit(1);
    }
  }
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  await build({
    stdin: {
      contents: [
        `import fn from ${JSON.stringify(join(src, "index.ts"))};`,
        `import { main } from ${JSON.stringify(join(root, "src/cli/bundled.ts"))};`,
        `await main(fn, ${JSON.stringify(`function-${name}`)}, process.argv.slice(2));`,
      ].join("\n"),
      resolveDir: src,
      loader: "ts",
      sourcefile: `function-${name}-entry.ts`,
    },
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile: join(out, "function.mjs"),
    // CommonJS dependencies (grpc-js, pino) call require() for Node built-ins.
    banner: { js: "import { createRequire as __xfnCreateRequire } from 'node:module'; const require = __xfnCreateRequire(import.meta.url);" },
    legalComments: "linked",
    logLevel: "warning",
  });
  cpSync(join(src, "package"), join(out, "package"), { recursive: true });
  console.log(`packaged functions/${name} -> ${join("dist/functions", name)}/function.mjs`);
}
