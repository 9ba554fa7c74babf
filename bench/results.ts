// Shared by the bench scripts: their flags, starting `xfn serve` in its own
// process, and writing one section of bench/RESULTS.md without touching the others.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** flag reads `--name value` from the command line, or returns d. */
export function flag(name: string, d: string): string;
export function flag(name: string, d: number): number;
export function flag(name: string, d: string | number): string | number {
  const args = process.argv.slice(2);
  const i = args.indexOf(name);
  if (i < 0 || args[i + 1] === undefined) return d;
  return typeof d === "number" ? Number(args[i + 1]) : args[i + 1]!;
}

/** writeSection replaces (or appends) the section headed `## title` in bench/RESULTS.md. */
export function writeSection(title: string, section: string): void {
  const file = join(import.meta.dirname, "RESULTS.md");
  const current = existsSync(file) ? readFileSync(file, "utf8") : "# Benchmark results\n\n";
  const at = current.indexOf(`## ${title}`);
  const rest = at >= 0 ? current.slice(at + 1).search(/\n## /) : -1;
  const next = at >= 0 && rest >= 0 ? current.slice(at + 1 + rest + 1) : "";
  writeFileSync(file, `${at >= 0 ? current.slice(0, at) : `${current.trimEnd()}\n\n`}${section}${next ? `\n${next}` : ""}`);
}

/** startServe runs `xfn serve <args> --insecure --address 127.0.0.1:0` and resolves with its port once it listens. */
export async function startServe(args: string[]): Promise<{ child: ChildProcess; port: number }> {
  const root = join(import.meta.dirname, "..");
  const child = spawn(process.execPath, [join(root, "bin/xfn.js"), "serve", ...args, "--insecure", "--address", "127.0.0.1:0"], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stderr!.on("data", (d) => (out += d));
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /"port":(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.on("exit", () => reject(new Error(`xfn serve exited:\n${out}`)));
  });
  return { child, port };
}
