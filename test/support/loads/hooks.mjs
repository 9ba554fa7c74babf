// Module hooks for preload.mjs: each module loaded is appended to the file,
// before it is handed to the thread that asked for it.
import { appendFileSync } from "node:fs";

let out;

export function initialize(data) {
  out = data.out;
}

export async function load(url, context, next) {
  appendFileSync(out, `${url}\n`);
  return next(url, context);
}
