#!/usr/bin/env node
// Runs every *.test.ts file under test/ and functions/ with uvu (through the
// tsx loader), then prints the closing line "N passed, N failed".
// Usage: node scripts/test.mjs [regex over file paths]
//
// Files run in lanes, one uvu process each, side by side (XFN_TEST_JOBS, by
// default as many as the machine has cores, at most 3). Files are dealt to the
// lanes longest first, by the durations in scripts/test-durations.json (a file
// not in it counts as an average one), so the lanes end together. Files that
// write the same parts of the repository (docs pages and the packages test
// both build dist/ and add to functions/) share a lane. Files that measure how
// the CPU is shared run last, alone.
//
// A test file that forgets `.run()` runs nothing and uvu says nothing; the
// runner therefore counts suites that ran no test and fails if any file
// contributed none (see test/support/README). A lane that does not exit soon
// after uvu's summary has leaked a handle (a server left listening): that is a
// failure too, never a hang. A run past its limit is stopped, and the closing
// line still counts every test that passed and failed before it was.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const filter = new RegExp(process.argv[2] ?? "");
const EXIT_GRACE_MS = 5_000;
const LIMIT_MS = Number(process.env.XFN_TEST_LIMIT_MINUTES || 45) * 60_000;
const JOBS = Math.max(1, Number(process.env.XFN_TEST_JOBS) || Math.min(availableParallelism(), 3));

/** Files that write the same parts of the repository: they run one after the other, in one lane. */
const TOGETHER = [/^test\/docs\.test\.ts$/, /^test\/packages\.test\.ts$/];
/** Files that measure how work shares the CPU: they run last, with no other lane beside them. */
const ALONE = [/^test\/server\/pool\.test\.ts$/, /^test\/server\/cpus\.test\.ts$/];

const files = ["test", "functions"]
  .flatMap((d) => readdirSync(join(root, d), { recursive: true }).map((f) => `${d}/${String(f).split("\\").join("/")}`))
  .filter((f) => f.endsWith(".test.ts") && !f.includes("node_modules/") && filter.test(f))
  .sort();

let durations = {};
try {
  durations = JSON.parse(readFileSync(join(root, "scripts/test-durations.json"), "utf8"));
} catch {
  // no record: every file weighs the same
}
const known = Object.values(durations).filter((v) => typeof v === "number");
const average = known.length ? known.reduce((a, b) => a + b, 0) / known.length : 1;
const weight = (f) => (typeof durations[f] === "number" ? durations[f] : average);

/** lanesOf deals files to n lanes, longest first, each to the lane that ends soonest; files that go together are one item. */
function lanesOf(list, n) {
  const together = list.filter((f) => TOGETHER.some((r) => r.test(f)));
  const items = [...(together.length ? [together] : []), ...list.filter((f) => !together.includes(f)).map((f) => [f])];
  const cost = (item) => item.reduce((a, f) => a + weight(f), 0);
  items.sort((a, b) => cost(b) - cost(a));
  const lanes = Array.from({ length: Math.min(n, items.length) }, () => ({ files: [], cost: 0 }));
  for (const item of items) {
    const lane = lanes.reduce((a, b) => (b.cost < a.cost ? b : a));
    lane.files.push(...item);
    lane.cost += cost(item);
  }
  return lanes.map((l) => l.files);
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
const running = new Set();

/** runLane runs uvu over files; it resolves with what the lane printed and how it ended. */
function runLane(name, laneFiles) {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        "--conditions=xfn-source",
        "--import",
        "tsx",
        "--import",
        join(root, "test/support/handles.mjs"),
        join(root, "node_modules/uvu/bin.js"),
        ".",
        `^(${laneFiles.map(escape).join("|")})$`,
        "-i",
        "node_modules",
        "--color",
        "false",
      ],
      { cwd: root, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NO_COLOR: "1" } },
    );
    running.add(child);
    // What the lane printed, in order, to show; and uvu's own output (stdout) alone, to count.
    let shown = "";
    let out = "";
    let leaked = false;
    let exitTimer;
    child.stderr.on("data", (chunk) => (shown += chunk.toString()));
    child.stdout.on("data", (chunk) => {
      shown += chunk.toString();
      out += chunk.toString();
      if (!exitTimer && /Duration:/.test(out)) {
        exitTimer = setTimeout(() => {
          leaked = true;
          // Ask the lane what it still holds (test/support/handles.mjs), then end it.
          child.kill("SIGUSR2");
          setTimeout(() => child.kill("SIGKILL"), 1_000);
        }, EXIT_GRACE_MS);
      }
    });
    child.on("exit", (code, signal) => {
      clearTimeout(exitTimer);
      running.delete(child);
      resolve({ name, files: laneFiles, out, shown, code, signal, leaked });
    });
  });
}

/** counts reads a lane's output: its summary when it printed one, else the suites that finished ("(passed / total)"). */
function counts(lane) {
  // eslint-disable-next-line no-control-regex -- ANSI colour codes start with ESC
  const plain = lane.out.replace(/\x1b\[[0-9;]*m/g, "");
  const num = (label) => Number((new RegExp(`${label}:\\s+(\\d+)`).exec(plain) ?? [])[1] ?? NaN);
  const lines = plain.split("\n").map((l) => l.trim());
  // uvu prints each file's path, then one line per suite ending in "(n / m)".
  // A file with no suite line after it never called .run() (or never finished).
  const silent = lines.filter((l, i) => /^[\w./-]+\.test\.ts$/.test(l) && !/\(\d+ \/ \d+\)$/.test(lines[i + 1] ?? ""));
  let passed = num("Passed");
  let total = num("Total");
  const skipped = num("Skipped") || 0;
  const summarised = !Number.isNaN(passed) && !Number.isNaN(total);
  if (!summarised) {
    // Stopped: each finished suite's "(passed / total)", and the marks of one cut short ("•" passed, "✘" failed).
    passed = 0;
    total = 0;
    for (const l of lines) {
      const m = /\((\d+) \/ (\d+)\)$/.exec(l);
      if (m) {
        passed += Number(m[1]);
        total += Number(m[2]);
      } else if (/^\S.*\s[•✘](\s[•✘])*$/.test(l)) {
        passed += (l.match(/•/g) ?? []).length;
        total += (l.match(/[•✘]/g) ?? []).length;
      }
    }
  }
  return { passed, failed: total - passed - skipped, skipped, silent, summarised };
}

const started = Date.now();
let stopped = false;
const limit = setTimeout(() => {
  stopped = true;
  console.error(`\nthe test run passed its limit of ${LIMIT_MS / 60_000} minutes; stopping it`);
  for (const c of running) c.kill("SIGKILL");
}, LIMIT_MS);

const alone = files.filter((f) => ALONE.some((r) => r.test(f)));
const shared = files.filter((f) => !alone.includes(f));
const results = [];
const print = (lane) => {
  process.stdout.write(`\n=== ${lane.name}: ${lane.files.length} file${lane.files.length === 1 ? "" : "s"} ===\n${lane.shown}`);
  results.push(lane);
};
const plan = lanesOf(shared, JOBS);
await Promise.all(plan.map((laneFiles, i) => runLane(`lane ${i + 1} of ${plan.length}`, laneFiles).then(print)));
if (alone.length && !stopped) print(await runLane("alone", alone));
clearTimeout(limit);

let passed = 0;
let failed = 0;
let bad = stopped;
for (const lane of results) {
  const c = counts(lane);
  passed += c.passed;
  failed += c.failed + c.silent.length;
  for (const f of c.silent)
    console.error(`${f} ${stopped ? "had not finished when the run was stopped" : "ran no test: does it call .run() on its suites?"}`);
  if (c.skipped > 0) console.error(`${lane.name}: ${c.skipped} tests were skipped; skipped tests are not allowed`);
  if (lane.leaked)
    console.error(`${lane.name}: the tests finished but the process did not exit: a test left a handle open (server, socket, timer)`);
  else if (!c.summarised && !stopped)
    console.error(`${lane.name}: no uvu summary was printed: the test process crashed before it finished`);
  bad ||= c.failed > 0 || c.silent.length > 0 || c.skipped > 0 || lane.code !== 0 || lane.signal !== null;
}
const seconds = Math.round((Date.now() - started) / 1000);
console.log(
  `\n${passed} passed, ${Math.max(failed, bad ? 1 : 0)} failed${stopped ? " (stopped at the limit; counts are of what finished)" : ""}`,
);
console.error(
  `${files.length} files in ${seconds} s, ${plan.length} lane${plan.length === 1 ? "" : "s"} side by side${alone.length ? ", then one alone" : ""}`,
);
process.exit(bad ? 1 : 0);
