// Same-process A/B of the in-process stages: this tree against a git revision.
//   node --import tsx bench/ab.ts <rev> [N] [iterations] [--modules]
// Builds both trees' codec and bench function into bundles (with --modules:
// loads their modules as they are, through tsx, as `xfn serve` loads lib/, so
// that calls between modules cost what they cost there), loads both into
// this process and times them alternately, request by request, so the
// machine's drift (a third either way within minutes here) hits both alike.
// Prints the medians of decode, function, encode and their sum, and the ratio
// this tree / rev. Not part of npm run bench.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";

const modules = process.argv.includes("--modules");
const [rev, nArg, itersArg] = process.argv.slice(2).filter((a) => a !== "--modules");
if (!rev) throw new Error("usage: bench/ab.ts <git revision> [N] [iterations]");
const n = Number(nArg ?? 1000);
const iters = Number(itersArg ?? Math.max(30, Math.round(60_000 / n)));
const here = resolve(import.meta.dirname, "..");
const work = mkdtempSync(join(tmpdir(), "xfn-ab-"));

type Run = () => number[];

async function load(root: string, name: string): Promise<(n: number) => Run> {
  const entry = join(work, `${name}-entry.ts`);
  writeFileSync(
    entry,
    `import { decodeRequest, encodeResponse } from ${JSON.stringify(join(root, "src/wire/codec.ts"))};
import { request, xfnFunction } from ${JSON.stringify(join(root, "bench/workload.ts"))};
export function make(n: number) {
  const bytes = request(n);
  const fn = xfnFunction();
  return () => {
    const a = performance.now();
    const req = decodeRequest(bytes);
    const b = performance.now();
    const rsp = fn(req, { now: () => new Date(0) } as never) as never;
    const c = performance.now();
    encodeResponse(rsp);
    const d = performance.now();
    return [b - a, c - b, d - c];
  };
}
`,
  );
  if (modules) return ((await import(pathToFileURL(entry).href)) as { make: (n: number) => Run }).make;
  const out = join(work, `${name}.mjs`);
  await build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    outfile: out,
    nodePaths: [join(here, "node_modules")],
    banner: {
      js: `import { createRequire } from "node:module"; const require = createRequire(${JSON.stringify(join(here, "package.json"))});`,
    },
    logLevel: "error",
  });
  return ((await import(pathToFileURL(out).href)) as { make: (n: number) => Run }).make;
}

try {
  const base = join(work, "base");
  execFileSync("git", ["-C", here, "worktree", "add", "--detach", "-q", base, rev]);
  symlinkSync(join(here, "node_modules"), join(base, "node_modules"));
  const runs = { base: (await load(base, "base"))(n), here: (await load(here, "here"))(n) };
  const t = { base: [[], [], [], []] as number[][], here: [[], [], [], []] as number[][] };
  for (let i = 0; i < iters + 10; i++) {
    for (const k of i % 2 ? (["base", "here"] as const) : (["here", "base"] as const)) {
      const s = runs[k]();
      if (i < 10) continue;
      s.forEach((x, j) => t[k][j]!.push(x));
      t[k][3]!.push(s[0]! + s[1]! + s[2]!);
    }
  }
  const med = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1]!;
  const parts = ["decode", "function", "encode", "total"].map((name, j) => {
    const b = med(t.base[j]!);
    const h = med(t.here[j]!);
    return `${name} ${b.toFixed(2)} -> ${h.toFixed(2)} ms (${(h / b).toFixed(2)})`;
  });
  console.log(`N=${n}, ${iters} requests each${modules ? ", as modules" : ""}, ${rev} -> this tree: ${parts.join(", ")}`);
} finally {
  execFileSync("git", ["-C", here, "worktree", "remove", "--force", join(work, "base")], { stdio: "ignore" });
  rmSync(work, { recursive: true, force: true });
}
