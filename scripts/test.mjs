#!/usr/bin/env node
// Runs the *.test.ts files of one tier with uvu (through the tsx loader), then
// prints the closing line "N passed, N failed".
// Usage: node scripts/test.mjs [--e2e | --crossplane] [--dir DIR ...] [regex over file paths]
//
// Three tiers. The default one (npm test) is every test file under test/ and
// functions/ but test/e2e/ and test/crossplane/; --e2e (npm run test:e2e) runs
// test/e2e/: what packs and installs the runtime, builds Go, drives a browser
// or kills whole processes, which costs minutes of CPU; --crossplane (npm run
// test:crossplane) runs test/crossplane/: the real control plane, built from
// Go modules (scripts/anchors.mjs), cold in tens of minutes.
//
// Files run in lanes, one uvu process each, side by side (XFN_TEST_JOBS, by
// default one more than the machine has cores, at most 4: many tests wait on
// child processes and timers, and on two cores three lanes end the default
// tier 20% sooner than two). Files are dealt to the
// lanes longest first, by the durations in scripts/test-durations.json (a file
// not in it counts as an average one), so the lanes end together. Files that
// write the same parts of the repository (docs pages and the packages test
// both build dist/ and add to functions/) share a lane.
//
// A test that needs a tool beside Node (test/support/needs.ts) is skipped
// where the tool is missing, and the run closes with one line per tool naming
// what was skipped and the Debian packages that bring it. Any other skip is a
// failure, as is any skip at all under XFN_TEST_REQUIRE_TOOLS=1 (.ci/run).
//
// A test file that forgets `.run()` runs nothing and uvu says nothing; the
// runner therefore counts suites that ran no test and fails if any file
// contributed none (docs/internals.md, Development). A lane that does not exit soon
// after uvu's summary has leaked a handle (a server left listening): that is a
// failure too, never a hang. A run past its limit is stopped, and the closing
// line still counts every test that passed and failed before it was.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
let parsed;
try {
  parsed = parseArgs({
    options: {
      e2e: { type: "boolean", default: false },
      crossplane: { type: "boolean", default: false },
      dir: { type: "string", multiple: true },
    },
    allowPositionals: true,
  });
} catch (err) {
  console.error(`${err.message}\nusage: node scripts/test.mjs [--e2e | --crossplane] [--dir DIR ...] [regex over file paths]`);
  process.exit(2);
}
const { values: opts, positionals } = parsed;
const e2e = opts.e2e;
const tier = opts.crossplane ? "crossplane" : e2e ? "e2e" : "default";
/** tierOf is the tier a test file belongs to, by its folder. */
const tierOf = (f) => (f.startsWith("test/e2e/") ? "e2e" : f.startsWith("test/crossplane/") ? "crossplane" : "default");
const filter = new RegExp(positionals[0] ?? "");
// Where test files are found, relative to the repository (--dir: for the runner's own tests).
const dirs = opts.dir ?? ["test", "functions"];
const requireTools = process.env.XFN_TEST_REQUIRE_TOOLS === "1";
const EXIT_GRACE_MS = 5_000;
const LIMIT_MS = Number(process.env.XFN_TEST_LIMIT_MINUTES || 45) * 60_000;
const JOBS = Math.max(1, Number(process.env.XFN_TEST_JOBS) || Math.min(availableParallelism() + 1, 4));

/** Files that write the same parts of the repository: they run one after the other, in one lane. */
const TOGETHER = [/^test\/e2e\/docs\.test\.ts$/, /^test\/e2e\/packages\.test\.ts$/];

const files = dirs
  .flatMap((d) => readdirSync(join(root, d), { recursive: true }).map((f) => `${d}/${String(f).split("\\").join("/")}`))
  .filter((f) => f.endsWith(".test.ts") && !f.includes("node_modules/") && tierOf(f) === tier && filter.test(f))
  .sort();
if (files.length === 0) {
  console.error(`no test file of the ${tier} tier matches ${filter}`);
  process.exit(1);
}
const skipDir = mkdtempSync(join(tmpdir(), "xfn-test-skips-"));

let durations = {};
try {
  durations = JSON.parse(readFileSync(join(root, "scripts/test-durations.json"), "utf8"));
} catch {
  // no record: every file weighs the same
}
// A file not in the record weighs as the average one of its own tier (the real-Crossplane tier's take minutes).
const known = Object.entries(durations)
  .filter(([f, v]) => typeof v === "number" && tierOf(f) === tier)
  .map(([, v]) => v);
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

/** killGroup sends signal to a lane and every process in its group. */
function killGroup(child, signal) {
  try {
    process.kill(-child.pid, signal);
  } catch {
    // the group is gone
  }
}

/** groupMembers lists the processes still in process group pgid, as "pid command" (Linux's /proc; elsewhere none). */
function groupMembers(pgid) {
  const found = [];
  let pids = [];
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {
    return found;
  }
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      // The fields after the command name (which may hold spaces and parentheses): state, ppid, pgrp, ...
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(pgrp) !== pgid || Number(pid) === pgid || state === "Z") continue;
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).slice(0, 4).join(" ");
      found.push(`${pid} ${cmd}`);
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

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
      {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, NO_COLOR: "1", XFN_TEST_SKIP_LOG: join(skipDir, `${name.replace(/\W+/g, "-")}.jsonl`) },
        // A process group of its own: ending the lane ends whatever its tests started.
        detached: true,
      },
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
          setTimeout(() => killGroup(child, "SIGKILL"), 1_000);
        }, EXIT_GRACE_MS);
      }
    });
    child.on("exit", async (code, signal) => {
      clearTimeout(exitTimer);
      running.delete(child);
      // What the lane's tests started and left running is ended with it, and named. A process that ends on its own
      // once the lane's pipes close (tsx's esbuild service reads its stdin) is given a moment first: not an orphan.
      if (groupMembers(child.pid).length > 0) await new Promise((r) => setTimeout(r, 500));
      const orphans = groupMembers(child.pid);
      killGroup(child, "SIGKILL");
      const log = join(skipDir, `${name.replace(/\W+/g, "-")}.jsonl`);
      const skips = existsSync(log)
        ? readFileSync(log, "utf8")
            .split("\n")
            .filter(Boolean)
            .map((l) => JSON.parse(l))
        : [];
      resolve({ name, files: laneFiles, out, shown, code, signal, leaked, skips, orphans });
    });
  });
}

/** counts reads a lane's output: its summary when it printed one, else the suites that finished ("(passed / total)"). */
function counts(lane) {
  // eslint-disable-next-line no-control-regex -- ANSI colour codes start with ESC
  const plain = lane.out.replace(/\x1b\[[0-9;]*m/g, "");
  // uvu's summary is the last "Total:", "Passed:", "Skipped:" (a failure's message may quote another run's).
  const num = (label) => Number([...plain.matchAll(new RegExp(`^\\s*${label}:\\s+(\\d+)$`, "gm"))].at(-1)?.[1] ?? NaN);
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
  // uvu's Total leaves skipped tests out.
  return { passed, failed: total - passed, skipped, silent, summarised };
}

const started = Date.now();
let stopped = false;
const limit = setTimeout(() => {
  stopped = true;
  console.error(`\nthe test run passed its limit of ${LIMIT_MS / 60_000} minutes; stopping it`);
  for (const c of running) killGroup(c, "SIGKILL");
}, LIMIT_MS);
// Stopped from outside (Ctrl-C, a CI timeout): the lanes, in groups of their own, are ended too.
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => {
    for (const c of running) killGroup(c, "SIGKILL");
    process.exit(1);
  });
}

const results = [];
const print = (lane) => {
  process.stdout.write(`\n=== ${lane.name}: ${lane.files.length} file${lane.files.length === 1 ? "" : "s"} ===\n${lane.shown}`);
  results.push(lane);
};
const plan = lanesOf(files, JOBS);
await Promise.all(plan.map((laneFiles, i) => runLane(`lane ${i + 1} of ${plan.length}`, laneFiles).then(print)));
clearTimeout(limit);

let passed = 0;
let failed = 0;
let bad = stopped;
const skips = [];
for (const lane of results) {
  const c = counts(lane);
  passed += c.passed;
  failed += c.failed + c.silent.length;
  for (const f of c.silent)
    console.error(`${f} ${stopped ? "had not finished when the run was stopped" : "ran no test: does it call .run() on its suites?"}`);
  const unexplained = c.skipped - lane.skips.length;
  if (unexplained > 0)
    console.error(`${lane.name}: ${unexplained} tests were skipped with .skip; only a test whose tool is missing may skip`);
  skips.push(...lane.skips);
  if (lane.leaked)
    console.error(`${lane.name}: the tests finished but the process did not exit: a test left a handle open (server, socket, timer)`);
  if (lane.orphans.length && !stopped)
    console.error(`${lane.name}: its tests left processes running (ended now): ${lane.orphans.join("; ")}`);
  else if (!c.summarised && !stopped)
    console.error(`${lane.name}: no uvu summary was printed: the test process crashed before it finished`);
  bad ||=
    c.failed > 0 ||
    c.silent.length > 0 ||
    unexplained > 0 ||
    (lane.orphans.length > 0 && !stopped) ||
    lane.code !== 0 ||
    lane.signal !== null;
}
rmSync(skipDir, { recursive: true, force: true });

// One line per missing tool: the tests that need it (a test that needs two missing tools counts on both lines).
const byTool = new Map();
skips.forEach((s) =>
  s.tools.forEach((tool, i) => {
    const entry = byTool.get(tool) ?? { hint: s.hints?.[i] ?? `apt-get install ${s.packages[i]}`, tests: [] };
    entry.tests.push(`${s.file}: ${s.test}`);
    byTool.set(tool, entry);
  }),
);
const skipLines = [];
for (const [tool, { hint, tests }] of byTool) {
  skipLines.push(`skipped ${tests.length} test${tests.length === 1 ? "" : "s"}: needs ${tool} (${hint})`);
  if (process.env.XFN_TEST_VERBOSE_SKIPS === "1") skipLines.push(...tests.map((t) => `  ${t}`));
}
if (skips.length && requireTools) {
  console.error(`XFN_TEST_REQUIRE_TOOLS=1: ${skips.length} tests skipped for want of a tool; install what the lines below name`);
  bad = true;
}
const seconds = Math.round((Date.now() - started) / 1000);
console.log(
  `\n${passed} passed, ${Math.max(failed, bad ? 1 : 0)} failed${stopped ? " (stopped at the limit; counts are of what finished)" : ""}`,
);
// The run ends with what it skipped, a line per missing tool (XFN_TEST_VERBOSE_SKIPS=1 lists the tests).
for (const l of skipLines) console.log(l);
console.error(
  `${tier !== "default" ? `${tier} tier: ` : ""}${files.length} files in ${seconds} s, ${plan.length} lane${plan.length === 1 ? "" : "s"} side by side`,
);
process.exit(bad ? 1 : 0);
