#!/usr/bin/env node
// Entry point of the `xfn` command. xfn and the function modules it serves are
// TypeScript; tsx's loader compiles them on import, so no build step is needed
// after `npm ci`.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
