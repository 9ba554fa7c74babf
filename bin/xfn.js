#!/usr/bin/env node
// Entry point of the `xfn` command: xfn's compiled JavaScript in lib/, run by
// plain Node. Only a function module written in TypeScript brings in a
// TypeScript loader (see lib/module/load.js).
import { existsSync } from "node:fs";

const main = new URL("../lib/cli/main.js", import.meta.url);
if (!existsSync(main)) {
  process.stderr.write("xfn: lib/ is missing: in a checkout of xfn, run `npm run build` (npm ci does it)\n");
  process.exit(1);
}
await import(main.href);
