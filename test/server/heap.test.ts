// tuneHeap: xfn serve fixes V8's heap growing factor unless node was told one.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { HEAP_GROWING_PERCENT, tuneHeap } from "../../src/server/heap.js";

const H = suite("server: V8 heap growing factor");

const cases: Record<string, { execArgv: string[]; sets: boolean }> = {
  "node started without V8 flags": { execArgv: [], sets: true },
  "other flags only": { execArgv: ["--enable-source-maps", "--max-old-space-size=512"], sets: true },
  "a flag that only starts the same": { execArgv: ["--heap-growing-percentage=5"], sets: true },
  "the user's value, with =": { execArgv: ["--heap-growing-percent=50"], sets: false },
  "the user's value, as the next argument": { execArgv: ["--heap-growing-percent", "50"], sets: false },
  "the user's value, with underscores": { execArgv: ["--heap_growing_percent=0"], sets: false },
};
for (const [name, tc] of Object.entries(cases)) {
  H(`sets the flag or leaves the user's: ${name}`, () => {
    const set: string[] = [];
    const got = tuneHeap(tc.execArgv, (f) => set.push(f));
    if (tc.sets) {
      assert.is(got, `--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
      assert.equal(set, [got]);
    } else {
      assert.is(got, undefined);
      assert.equal(set, []);
    }
  });
}

// In a real node process: what it reads from its own arguments, and that V8
// takes the flag (setFlagsFromString throws nothing, but V8 would print an
// error for a flag it does not know).
H("in a node process: sets the flag unless node was started with one", () => {
  const mod = pathToFileURL(join(import.meta.dirname, "../../src/server/heap.ts")).href;
  const script = `const { tuneHeap } = await import(${JSON.stringify(mod)}); console.log(String(tuneHeap()));`;
  const runNode = (flags: string[]) =>
    spawnSync(process.execPath, [...flags, "--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8", timeout: 20_000 });
  const plain = runNode([]);
  assert.is(plain.status, 0, plain.stderr);
  assert.is(plain.stdout.trim(), `--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  assert.not.match(plain.stderr, /unknown|Error/i);
  const own = runNode(["--heap-growing-percent=50"]);
  assert.is(own.status, 0, own.stderr);
  assert.is(own.stdout.trim(), "undefined");
});

H.run();
