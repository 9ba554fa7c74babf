// bench/validate.ts as `npm run bench` runs it (issue 60 point 5): it builds
// its files, runs xfn validate (lib/, built by the e2e tier) and js-yaml each
// in a process of their own and prints a row per size whose figures are
// numbers and whose ratio is their quotient; it leaves no file behind.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ROOT } from "../support/spawn.js";

const B = suite("bench: validate.ts");

B("prints xfn validate's and js-yaml's CPU, time and peak memory per size, and cleans up", () => {
  const before = readdirSync(tmpdir()).filter((f) => f.startsWith("xfn-bench-validate-"));
  const r = spawnSync(process.execPath, ["--import", "tsx", join(ROOT, "bench/validate.ts"), "--sizes", "200,400", "--runs", "1"], {
    cwd: ROOT,
    encoding: "utf8",
  });
  assert.is(r.status, 0, r.stderr);
  const rows = r.stdout.split("\n").filter((l) => /^\| \d+ \|/.test(l));
  assert.equal(
    rows.map((l) => l.split("|")[1]!.trim()),
    ["200", "400"],
  );
  for (const row of rows) {
    const [, , xfn, yaml, ratio, xms, yms, xmib, ymib] = row.split("|").map((c) => Number(c.trim()));
    for (const v of [xfn, yaml, ratio, xms, yms, xmib, ymib]) assert.ok(Number.isFinite(v) && v! > 0, row);
    // The CPU figures are printed rounded to whole milliseconds and the ratio
    // is taken before rounding (to two places): it lies between the quotients
    // of the figures' bounds.
    const low = (xfn! - 0.5) / (yaml! + 0.5) - 0.005;
    const high = (xfn! + 0.5) / (yaml! - 0.5) + 0.005;
    assert.ok(ratio! >= low && ratio! <= high, `${row}: ratio outside [${low.toFixed(3)}, ${high.toFixed(3)}]`);
  }
  const after = readdirSync(tmpdir()).filter((f) => f.startsWith("xfn-bench-validate-"));
  assert.equal(after, before);
});

B.run();
