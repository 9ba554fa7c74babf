// Preloaded (node --import) into a process under test, with LOADS_FILE set:
// every module its main thread loads is appended to that file, and the line
// "--- listening" when a server of the process starts listening, so a test
// can tell what was loaded by then. Worker threads are not traced.
import { appendFileSync } from "node:fs";
import { register } from "node:module";
import net from "node:net";
import { isMainThread } from "node:worker_threads";

const out = process.env.LOADS_FILE;
if (isMainThread && out) {
  register(new URL("./hooks.mjs", import.meta.url), { data: { out } });
  const listen = net.Server.prototype.listen;
  net.Server.prototype.listen = function (...args) {
    this.once("listening", () => appendFileSync(out, "--- listening\n"));
    return listen.apply(this, args);
  };
}
