// The `yaml` package, loaded the first time it is used, for the modules of a
// command that reads and writes YAML through it only sometimes (xfn validate:
// a document its fast reader leaves to it, -o yaml), so that its start does
// not pay the package's load (a third of it). Every other module imports
// the package as usual. In an esbuild bundle (a function's image, the
// inspector sidecar), whose banner defines require, the package is the
// bundled one: esbuild sees the require("yaml") below and bundles it.
import { createRequire } from "node:module";
import type * as Yaml from "yaml";

let loaded: typeof Yaml | undefined;

/** yamlLib is the `yaml` package. */
export function yamlLib(): typeof Yaml {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a bundle's require (see above); lib/ has none
  loaded ??= (typeof require === "function" ? require("yaml") : createRequire(import.meta.url)("yaml")) as typeof Yaml;
  return loaded;
}
