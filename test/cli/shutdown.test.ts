// How every long-running command ends (src/cli/shutdown.ts): SIGTERM is
// logged, what runs is stopped and the exit code is 0; and a command npm
// started (npx) stops once npm is gone, since npx passes no signal on: in a
// script, `kill %1` of `npx xfn host &` left the host running, orphaned.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { until } from "../support/cluster.js";
import { alive } from "../support/procs.js";
import { ROOT, XFN } from "../support/spawn.js";

const S = suite("cli: long-running commands stop alike");

let scratch: string;
S.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-shutdown-"));
});
S.after(() => rmSync(scratch, { recursive: true, force: true }));

interface Command {
  args: (dir: string) => string[];
  /** A line that says it is up. */
  up: RegExp;
  /** The line it logs once stopped. */
  stopped: RegExp;
}

const COMMANDS: Record<string, Command> = {
  serve: {
    args: () => ["serve", "functions/hello", "--insecure", "--address", "127.0.0.1:0"],
    up: /"msg":"function workers? ready/,
    stopped: /"msg":"stopped"/,
  },
  host: {
    args: (d) => ["host", "--embedded", "--embedded-kubeconfig", join(d, "kubeconfig"), "--metrics-address", "off"],
    up: /"msg":"host started: watching CompositeResourceDefinitions"/,
    stopped: /"msg":"host stopped"/,
  },
  "dev-cluster": {
    args: (d) => ["dev-cluster", "--kubeconfig", join(d, "kubeconfig")],
    up: /"msg":"dev-cluster serving"/,
    stopped: /"msg":"dev-cluster stopped"/,
  },
  inspect: {
    args: (d) => ["inspect", "--socket", join(d, "socket"), "--dir", join(d, "cases")],
    up: /"msg":"pipeline inspector listening"/,
    stopped: /"msg":"pipeline inspector stopped"/,
  },
};

let n = 0;
for (const [name, c] of Object.entries(COMMANDS)) {
  S(`xfn ${name}: SIGTERM is logged, it stops, exit code 0`, async () => {
    const dir = join(scratch, `${name}-${++n}`);
    mkdirSync(dir);
    const child = spawn(process.execPath, [XFN, ...c.args(dir)], { cwd: ROOT });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const exited = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
    try {
      await until(`xfn ${name} up`, () => c.up.test(out), 20_000);
      child.kill("SIGTERM");
      assert.is(await exited, 0, out);
      assert.match(out, /"signal":"SIGTERM"[^\n]*"msg":"signal received"|"msg":"signal received"[^\n]*"signal":"SIGTERM"/);
      assert.match(out, c.stopped);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  S(`xfn ${name} started by npm (npx) stops when npm is gone: the parent killed, it logs why and exits 0`, async () => {
    const dir = join(scratch, `${name}-${++n}`);
    mkdirSync(dir);
    // The shell stands in for npx: it starts xfn and is killed, as `kill %1` kills npx.
    const quoted = [process.execPath, XFN, ...c.args(dir)].map((a) => `'${a}'`).join(" ");
    const parent = spawn("bash", ["-c", `${quoted} & echo "xfn-pid $!"; wait`], {
      cwd: ROOT,
      env: { ...process.env, npm_command: "exec" },
    });
    let out = "";
    parent.stdout.on("data", (d) => (out += d));
    parent.stderr.on("data", (d) => (out += d));
    let pid = 0;
    try {
      await until(`xfn ${name} up`, () => c.up.test(out), 20_000);
      pid = Number(/xfn-pid (\d+)/.exec(out)![1]);
      parent.kill("SIGKILL");
      await until(`xfn ${name} to end after its parent`, () => !alive(pid), 10_000);
      assert.match(out, /"msg":"the npm process that started this one ended \(npx passes on no signal\); stopping"/);
      assert.match(out, c.stopped);
      if (name === "inspect") assert.not.ok(existsSync(join(dir, "socket")), "the socket is removed");
    } finally {
      if (pid && alive(pid)) process.kill(pid, "SIGKILL");
    }
  });
}

S("a command not started by npm keeps running when its parent ends (nohup, a shell that exits)", async () => {
  const dir = join(scratch, `kept-${++n}`);
  mkdirSync(dir);
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env["npm_command"];
  const quoted = [process.execPath, XFN, ...COMMANDS["dev-cluster"]!.args(dir)].map((a) => `'${a}'`).join(" ");
  const parent = spawn("bash", ["-c", `${quoted} & echo "xfn-pid $!"; wait`], { cwd: ROOT, env });
  let out = "";
  parent.stdout.on("data", (d) => (out += d));
  let pid = 0;
  try {
    await until("dev-cluster up", () => /dev-cluster serving/.test(out), 20_000);
    pid = Number(/xfn-pid (\d+)/.exec(out)![1]);
    parent.kill("SIGKILL");
    await new Promise((r) => setTimeout(r, 1500));
    assert.ok(alive(pid), "still serving");
  } finally {
    if (pid && alive(pid)) process.kill(pid, "SIGKILL");
  }
});

S.run();
