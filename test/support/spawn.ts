// Runs the real `xfn` command as a user would, for CLI tests.
import { spawn, type ChildProcess } from "node:child_process";
import { createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { deadline } from "./budget.js";

export const ROOT = join(import.meta.dirname, "../..");
export const XFN = join(ROOT, "bin/xfn.js");

export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** run runs xfn to completion (killing it after timeoutMs). */
export function run(args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {}): Promise<Finished> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [XFN, ...args], { cwd: opts.cwd ?? ROOT, env: { ...process.env, ...opts.env } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const cancel = deadline(opts.timeoutMs ?? 20_000, () => child.kill("SIGKILL"));
    // "close", not "exit": at exit the child's output may not all be read yet,
    // and a test matching stderr then saw part of it (a flake under load).
    child.on("close", (code, signal) => {
      cancel();
      resolve({ code, signal, stdout, stderr });
    });
  });
}

export interface Serving {
  child: ChildProcess;
  port: number;
  output(): string;
  /** stop sends a signal and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * startServe runs `xfn serve ...` and resolves with the bound port. It listens
 * on 127.0.0.1 with a free port unless defaultAddress asks for xfn's default.
 */
export function startServe(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  opts: { defaultAddress?: boolean; cwd?: string } = {},
): Promise<Serving> {
  return new Promise((resolve, reject) => {
    const address = opts.defaultAddress ? [] : ["--address", "127.0.0.1:0"];
    const child = spawn(process.execPath, [XFN, "serve", ...args, ...address], {
      cwd: opts.cwd ?? ROOT,
      env: { ...process.env, ...env },
    });
    let out = "";
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
      child.on("close", (code, signal) => r({ code, signal })),
    );
    const cancel = deadline(20_000, () => {
      child.kill("SIGKILL");
      reject(new Error(`xfn serve did not start within 20 s (counted as the machine gives CPU time):\n${out}`));
    });
    const onData = (d: Buffer) => {
      out += d;
      const m = /"port":(\d+)/.exec(out);
      if (m) {
        cancel();
        resolve({
          child,
          port: Number(m[1]),
          output: () => out,
          stop: (signal = "SIGTERM") => (child.kill(signal), exited),
        });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", (d: Buffer) => (out += d));
    void exited.then(({ code }) => {
      cancel();
      reject(new Error(`xfn serve exited with ${code} before listening:\n${out}`));
    });
  });
}

/** freePort returns a port nothing listens on just now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}
