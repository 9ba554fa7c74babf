// `npm run bench [-- --quick] [--json FILE]`: every benchmark in turn, each in
// its own process, with the command line's flags (npm appends them to the last
// command of a script only, so a chain of commands would lose them).
import { spawnSync } from "node:child_process";
import { join } from "node:path";

const args = process.argv.slice(2);
const quick = args.includes("--quick") ? ["--quick"] : [];
const scripts: Array<[string, string[]]> = [
  ["run.ts", args],
  ["startup.ts", []],
  ["pool.ts", []],
  ["memory.ts", []],
  ["host.ts", quick],
  ["validate.ts", quick.length ? ["--sizes", "5000", "--runs", "1"] : []],
];
for (const [script, flags] of scripts) {
  process.stdout.write(`\n== bench/${script} ${flags.join(" ")}\n`);
  const r = spawnSync(process.execPath, ["--import", "tsx", join(import.meta.dirname, script), ...flags], { stdio: "inherit" });
  if (r.status !== 0) {
    process.stderr.write(`bench/${script} failed (exit ${r.status ?? r.signal})\n`);
    process.exit(1);
  }
}
