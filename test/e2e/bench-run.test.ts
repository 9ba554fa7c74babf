// bench/run.ts as a contributor runs it: on a machine without Go it prints the
// go row as skipped, naming the packages, and finishes; whether it finishes or
// is stopped by a signal mid-way, no server it started is left running.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { until } from "../support/cluster.js";
import { ROOT } from "../support/spawn.js";

const B = suite("bench: run.ts");

/** Every process in process group pgid but zombies, as "pid command". */
function group(pgid: number): string[] {
  const out: string[] = [];
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(pgrp) === pgid && state !== "Z") out.push(`${pid} ${readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ")}`);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

let bin: string;
B.before(() => {
  // This machine's PATH less Go: every command on it linked into one folder, but go.
  bin = mkdtempSync(join(tmpdir(), "xfn-bench-path-"));
  for (const dir of (process.env["PATH"] ?? "").split(":").filter(Boolean)) {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const n of names) if (n !== "go" && !existsSync(join(bin, n))) symlinkSync(join(dir, n), join(bin, n));
  }
});
B.after(() => rmSync(bin, { recursive: true, force: true }));

/** bench starts bench/run.ts in a process group of its own, on a PATH without go. */
function bench(args: string[]) {
  const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "bench/run.ts"), "--quick", "--ns", "1", ...args], {
    cwd: ROOT,
    detached: true,
    // No Go at all: neither Debian's on PATH (the go row) nor Go 1.26 at /usr/local/go (the go-sdk row).
    env: { ...process.env, PATH: bin, XFN_TEST_GO126: "/nonexistent/go" },
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.on("close", (code, signal) => r({ code, signal })),
  );
  return { child, output: () => out, exited };
}

B(
  "without Go: the go and go-sdk rows are skipped naming what brings them, the rest is measured, and no server is left running",
  async () => {
    const b = bench([]);
    const { code } = await b.exited;
    assert.is(code, 0, b.output());
    assert.match(
      b.output(),
      /^go: skipped: needs go, no go on PATH \(apt-get install golang-go golang-google-grpc-dev golang-google-protobuf-dev\)$/m,
    );
    assert.match(b.output(), /^go-sdk: skipped: needs go1\.26, no Go at \/nonexistent\/go \(.*Go 1\.26 at \/usr\/local\/go.*\)$/m);
    assert.match(b.output(), /^\| 1 \| 1 \| xfn \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| true \|$/m);
    assert.match(
      b.output(),
      /^\| 1 \| 1 \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+ \| - \| - \| - \| - \| - \| - \|$/m,
      "go's and go-sdk's ratios blank",
    );
    await until("every server gone", () => group(b.child.pid!).length === 0, 5_000).catch(() => {
      throw new Error(`left running: ${group(b.child.pid!).join("; ")}`);
    });
  },
);

B("stopped by a signal mid-way: every server it started ends with it", async () => {
  const b = bench(["--servers", "xfn,xfn-pool,peer,floor"]);
  await until("the first cell measured", () => /done N=1 c=1/.test(b.output()), 60_000);
  assert.ok(group(b.child.pid!).length >= 4, `the servers run: ${group(b.child.pid!).join("; ")}`);
  process.kill(b.child.pid!, "SIGTERM");
  const { code } = await b.exited;
  assert.is(code, 130, b.output());
  await until("every server gone", () => group(b.child.pid!).length === 0, 5_000).catch(() => {
    throw new Error(`left running: ${group(b.child.pid!).join("; ")}`);
  });
});

B.run();
