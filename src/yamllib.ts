// The `yaml` package, loaded the first time it is used: a command that reads
// and writes no YAML through it (xfn validate's fast path, src/validate/
// yaml.ts, with text output) does not pay its load, a third of its start.
import { createRequire } from "node:module";
import type * as Yaml from "yaml";

let loaded: typeof Yaml | undefined;

/** yamlLib is the `yaml` package (its CommonJS build, the same module its ESM entry gives Node). */
export const yamlLib = (): typeof Yaml => (loaded ??= createRequire(import.meta.url)("yaml") as typeof Yaml);
