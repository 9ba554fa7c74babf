// The test runner (scripts/test.mjs) on test files written here: a test that
// needs a missing tool is skipped and named in the closing lines with the
// Debian packages that bring it; under XFN_TEST_REQUIRE_TOOLS=1 it fails
// instead; any other skip, or a file that runs no test, fails the run.
import { execFile } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { until } from "./support/cluster.js";
import { ROOT } from "./support/spawn.js";

const R = suite("the test runner");

let dir: string;
/** A PATH with node alone, and one with node and a kubectl that does nothing. */
let bare: string;
let withKubectl: string;
R.before(() => {
  mkdirSync(join(ROOT, ".tmp"), { recursive: true });
  dir = mkdtempSync(join(ROOT, ".tmp", "runner-"));
  bare = join(dir, "bin-bare");
  withKubectl = join(dir, "bin-kubectl");
  for (const bin of [bare, withKubectl]) {
    mkdirSync(bin);
    symlinkSync(process.execPath, join(bin, "node"));
  }
  writeFileSync(join(withKubectl, "kubectl"), "#!/bin/sh\nexit 0\n");
  chmodSync(join(withKubectl, "kubectl"), 0o755);
});
R.after(() => rmSync(dir, { recursive: true, force: true }));

const needsUrl = pathToFileURL(join(ROOT, "test/support/needs.ts")).href;

/** files writes test files into a folder of their own under dir, and returns that folder relative to the repository. */
function files(name: string, contents: Record<string, string>): string {
  const sub = join(dir, name);
  for (const [file, text] of Object.entries(contents)) {
    mkdirSync(dirname(join(sub, file)), { recursive: true });
    writeFileSync(join(sub, file), text);
  }
  return relative(ROOT, sub);
}

function runner(folder: string, env: NodeJS.ProcessEnv): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(ROOT, "scripts/test.mjs"), "--dir", folder],
      { cwd: ROOT, env: { ...process.env, XFN_TEST_REQUIRE_TOOLS: "", XFN_TEST_JOBS: "1", ...env } },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

const gated = `
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { needs } from ${JSON.stringify(needsUrl)};
const S = suite("mixed");
const K = needs(S, "kubectl");
S("needs nothing", () => assert.ok(true));
K("drives kubectl", () => assert.ok(true));
K("drives kubectl again", () => assert.ok(true));
S.run();
`;

R("a test whose tool is missing is skipped, and the run ends with a line naming the tool and its Debian packages", async () => {
  const folder = files("gated", { "a.test.ts": gated });
  const r = await runner(folder, { PATH: bare });
  assert.is(r.code, 0, r.out);
  assert.match(r.out, /^1 passed, 0 failed$/m);
  assert.match(r.out, /^skipped 2 tests: needs kubectl \(apt-get install kubernetes-client\)$/m);
  // And it is the last line of the standard output's summary, after the counts.
  assert.ok(r.out.indexOf("skipped 2 tests") > r.out.indexOf("1 passed, 0 failed"), r.out);
  const verbose = await runner(folder, { PATH: bare, XFN_TEST_VERBOSE_SKIPS: "1" });
  assert.match(verbose.out, /^ {2}\S+a\.test\.ts: drives kubectl again$/m);
});

R("where the tool is installed, the same tests run and nothing is skipped", async () => {
  const r = await runner(files("present", { "a.test.ts": gated }), { PATH: withKubectl });
  assert.is(r.code, 0, r.out);
  assert.match(r.out, /^3 passed, 0 failed$/m);
  assert.not.match(r.out, /skipped/);
});

R("XFN_TEST_REQUIRE_TOOLS=1: a missing tool fails each test that needs it, naming what to install", async () => {
  const r = await runner(files("required", { "a.test.ts": gated }), { PATH: bare, XFN_TEST_REQUIRE_TOOLS: "1" });
  assert.is(r.code, 1, r.out);
  assert.match(r.out, /^1 passed, 2 failed$/m);
  assert.match(r.out, /this test needs kubectl \(no kubectl on PATH\): apt-get install kubernetes-client/);
});

R("a test skipped with .skip fails the run; so does a file that never calls .run()", async () => {
  const skipped = await runner(
    files("skip", {
      "a.test.ts": `import { suite } from "uvu";\nconst S = suite("s");\nS("runs", () => {});\nS.skip("left out", () => {});\nS.run();\n`,
    }),
    { PATH: bare },
  );
  assert.is(skipped.code, 1, skipped.out);
  assert.match(skipped.out, /1 tests were skipped with \.skip; only a test whose tool is missing may skip/);
  const silent = await runner(
    files("silent", {
      "a.test.ts": `import { suite } from "uvu";\nconst S = suite("s");\nS("runs", () => {});\nS.run();\n`,
      "b.test.ts": `import { suite } from "uvu";\nconst S = suite("t");\nS("never run", () => {});\n`,
    }),
    { PATH: bare },
  );
  assert.is(silent.code, 1, silent.out);
  assert.match(silent.out, /b\.test\.ts ran no test: does it call \.run\(\) on its suites\?/);
});

/** A test file that starts a child that would run for minutes and writes its pid to pidFile; then hangs if hang. */
const leaver = (pidFile: string, hang: boolean) => `
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { suite } from "uvu";
const S = suite("leaves");
S("passes", () => {});
S("starts a child and forgets it", async () => {
  const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 600000)"], { stdio: "ignore" });
  child.unref();
  writeFileSync(${JSON.stringify(pidFile)}, String(child.pid));
  ${hang ? "await new Promise(() => setInterval(() => {}, 1000));" : ""}
});
S.run();
`;

/** alive says whether a process runs (a zombie, ended but not yet reaped, does not). */
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
};

R("a process a test started and left running is ended with its lane, named, and fails the run", async () => {
  const pidFile = join(dir, "left.pid");
  const r = await runner(files("left", { "a.test.ts": leaver(pidFile, false) }), { PATH: bare });
  assert.is(r.code, 1, r.out);
  const pid = Number(readFileSync(pidFile, "utf8"));
  assert.match(r.out, new RegExp(`its tests left processes running \\(ended now\\): ${pid} \\S*node -e`));
  // Killed as the runner ends; on a loaded machine it may take a moment to go.
  await until(`process ${pid} gone`, () => !alive(pid), 5_000).catch(() => undefined);
  assert.not.ok(alive(pid), `process ${pid} still runs`);
});

R("a run past its limit is stopped: what finished is counted, and no lane or process of its tests is left running", async () => {
  const pidFile = join(dir, "hung.pid");
  // 0.05 minutes: 3 s.
  const r = await runner(files("hung", { "a.test.ts": leaver(pidFile, true) }), { PATH: bare, XFN_TEST_LIMIT_MINUTES: "0.05" });
  assert.is(r.code, 1, r.out);
  assert.match(r.out, /the test run passed its limit of 0\.05 minutes; stopping it/);
  // One test passed before the second hung; nothing failed, yet the run fails.
  assert.match(r.out, /^1 passed, 1 failed \(stopped at the limit; counts are of what finished\)$/m);
  const pid = Number(readFileSync(pidFile, "utf8"));
  await until("the stopped test's child to be gone", () => !alive(pid));
});

R.run();
