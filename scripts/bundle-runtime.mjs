#!/usr/bin/env node
// Part of the build: bundles lib/server/worker-runtime.js (xfn-runtime's API
// and a pool worker's start) with the packages it uses into one file,
// <lib>/worker-runtime.mjs, that `xfn serve <module.ts>`'s workers load
// (src/server/worker-runtime.ts says why).
//
//   node scripts/bundle-runtime.mjs [lib folder]   (default: lib)
import { build } from "esbuild";
import { dirname, join, resolve } from "node:path";

const lib = resolve(process.argv[2] ?? "lib");
await build({
  entryPoints: [join(lib, "server/worker-runtime.js")],
  outfile: join(lib, "worker-runtime.mjs"),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  // Only loading a module through tsx, or compiling one, would use these: never in a worker running this file.
  external: ["tsx", "tsx/*", "esbuild"],
  // CommonJS packages (grpc-js, pino) call require() for Node's own modules.
  banner: { js: "import { createRequire as __xfnRequire } from 'node:module'; const require = __xfnRequire(import.meta.url);" },
  legalComments: "none",
  logLevel: "warning",
  // The OpenTelemetry SDK stays out (lib/telemetry/sdk.js, imported only when the OTEL_ variables ask for traces).
  plugins: [
    {
      name: "otel-apart",
      setup(b) {
        b.onResolve({ filter: /sdk\.js$/ }, (a) =>
          /[\\/]telemetry[\\/]sdk\.js$/.test(join(dirname(a.importer), a.path))
            ? { path: "./telemetry/sdk.js", external: true }
            : undefined,
        );
      },
    },
  ],
});
