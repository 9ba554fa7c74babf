// A lock shared by every process on this machine, for the few tests that must
// use something only one of them can hold at a time: xfn serve's default port
// (9443), which the README and the tutorial show as written. Two `npm test`
// runs at once, or test files run side by side, take turns for it instead of
// failing on an address in use.
//
// The lock is a listening Unix socket: on Linux in the abstract namespace (no
// file at all); elsewhere a socket file in the temp folder. A process that
// dies lets go of it at once, so a lock can never be left behind.
import { existsSync, unlinkSync } from "node:fs";
import { createConnection, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const address = (name: string) => (process.platform === "linux" ? `\0xfn-tests-${name}` : join(tmpdir(), `xfn-tests-${name}.sock`));

function tryListen(path: string): Promise<Server | undefined> {
  return new Promise((resolve, reject) => {
    const s = createServer((c) => c.destroy());
    s.once("error", (err: NodeJS.ErrnoException) => (err.code === "EADDRINUSE" ? resolve(undefined) : reject(err)));
    s.listen(path, () => resolve(s));
  });
}

/** stale tells whether a socket file no process listens on is left behind (not on Linux, whose lock has no file). */
function stale(path: string): Promise<boolean> {
  if (process.platform === "linux" || !existsSync(path)) return Promise.resolve(false);
  return new Promise((resolve) => {
    const c = createConnection(path);
    c.once("connect", () => (c.destroy(), resolve(false)));
    c.once("error", () => resolve(true));
  });
}

/** withLock runs fn holding the lock name, waiting up to waitMs for another process to release it. */
export async function withLock<T>(name: string, fn: () => Promise<T>, waitMs = 180_000): Promise<T> {
  const path = address(name);
  const end = Date.now() + waitMs;
  let held: Server | undefined;
  while (!(held = await tryListen(path))) {
    if (await stale(path)) unlinkSync(path);
    if (Date.now() > end) throw new Error(`waited ${waitMs / 1000} s for the test lock ${name}, which another process holds`);
    await new Promise((r) => setTimeout(r, 100));
  }
  try {
    return await fn();
  } finally {
    await new Promise<void>((r) => held!.close(() => r()));
  }
}

/** DEFAULT_PORT_LOCK is the lock of xfn serve's default port, 9443. */
export const DEFAULT_PORT_LOCK = "port-9443";
