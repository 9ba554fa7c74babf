#!/usr/bin/env node
// Runs every *.test.ts file under test/ and functions/ with uvu (through the
// tsx loader) in one child process, then prints the closing line
// "N passed, N failed". Usage: node scripts/test.mjs [regex over file paths]
//
// A test file that forgets `.run()` runs nothing and uvu says nothing; the
// runner therefore counts suites that ran no test and fails if any file
// contributed none (see test/support/README). A child that does not exit soon
// after uvu's summary has leaked a handle (a server left listening): that is a
// failure too, never a hang.
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const filter = process.argv[2] ?? "";
const pattern = `^(test|functions)/.*${filter ? `${filter}.*` : ""}\\.test\\.ts$`;
const EXIT_GRACE_MS = 5_000;
const TOTAL_TIMEOUT_MS = 15 * 60_000;

const child = spawn(
  process.execPath,
  [
    "--conditions=xfn-source",
    "--import",
    "tsx",
    join(root, "node_modules/uvu/bin.js"),
    ".",
    pattern,
    "-i",
    "node_modules",
    "--color",
    "false",
  ],
  { cwd: root, stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, NO_COLOR: "1" } },
);

let out = "";
let exitTimer;
const total = setTimeout(() => {
  console.error(`\ntest run exceeded ${TOTAL_TIMEOUT_MS / 60_000} minutes; killing it`);
  child.kill("SIGKILL");
}, TOTAL_TIMEOUT_MS);

child.stdout.on("data", (chunk) => {
  process.stdout.write(chunk);
  out += chunk.toString();
  if (!exitTimer && /Duration:/.test(out)) {
    exitTimer = setTimeout(() => {
      console.error("\nthe tests finished but the process did not exit: a test left a handle open (server, socket, timer)");
      child.kill("SIGKILL");
    }, EXIT_GRACE_MS);
  }
});

child.on("exit", (code, signal) => {
  clearTimeout(total);
  clearTimeout(exitTimer);
  // eslint-disable-next-line no-control-regex -- ANSI colour codes start with ESC
  const plain = out.replace(/\x1b\[[0-9;]*m/g, "");
  const num = (label) => Number((new RegExp(`${label}:\\s+(\\d+)`).exec(plain) ?? [])[1] ?? NaN);
  const ran = num("Total");
  const passed = num("Passed");
  const skipped = num("Skipped");
  if (Number.isNaN(ran) || Number.isNaN(passed)) {
    console.log("\n0 passed, 1 failed");
    console.error("no uvu summary was printed: the test process crashed before it finished");
    process.exit(1);
  }
  // uvu prints each file's path, then one line per suite ending in "(n / m)".
  // A file with no suite line after it never called .run().
  const lines = plain.split("\n").map((l) => l.trim());
  const silent = lines.filter((l, i) => /^[\w./-]+\.test\.ts$/.test(l) && !/\(\d+ \/ \d+\)/.test(lines[i + 1] ?? ""));
  for (const f of silent) console.error(`${f} ran no test: does it call .run() on its suites?`);
  const failed = ran - passed - (skipped || 0) + silent.length;
  const bad = failed > 0 || code !== 0 || signal !== null || skipped > 0;
  if (skipped > 0) console.error(`${skipped} tests were skipped; skipped tests are not allowed`);
  console.log(`\n${passed} passed, ${Math.max(failed, bad ? 1 : 0)} failed`);
  process.exit(bad ? 1 : 0);
});
