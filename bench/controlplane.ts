// Warm start of the real-Crossplane tier's control plane (issue 58: at most
// 60 s on two cores), with every binary already in the anchors cache: etcd,
// kube-apiserver and kube-controller-manager until the API server answers
// (test/crossplane/controlplane.ts), then Crossplane's `core init` and `core
// start` until its readiness probe passes (test/crossplane/crossplane.ts), then
// the test provider until both its controllers run (test/crossplane/provider.ts).
// Each stage is timed on its own; runs one after another, medians reported.
// Writes the "Real control plane, warm start" section of bench/RESULTS.md.
//
//   node --import tsx bench/controlplane.ts [--runs 3]
//
// Needs Go 1.26 at /usr/local/go (the anchors are built, once, if they are not cached).
import { cpus } from "node:os";
// @ts-expect-error -- a plain .mjs script without types
import { build } from "../scripts/anchors.mjs";
import { startControlPlane } from "../test/crossplane/controlplane.js";
import { startCrossplane } from "../test/crossplane/crossplane.js";
import { installProviderCrds, startProvider } from "../test/crossplane/provider.js";
import { installHint, whyMissing } from "../test/support/needs.js";
import { flag, writeSection } from "./results.js";

const RUNS = flag("--runs", 3);
const why = whyMissing("go1.26");
if (why) {
  process.stderr.write(`bench/controlplane.ts needs go1.26 (${why}): ${installHint(["go1.26"])}\n`);
  process.exit(2);
}
// Cold builds are not what is measured: build (or find) every binary first.
const log = (s: string) => process.stderr.write(`${s}\n`);
for (const name of ["etcd", "kubernetes", "crossplane", "provider"]) build(name, log);

const stages = [
  "control plane (etcd, kube-apiserver, kube-controller-manager)",
  "Crossplane (core init, core start)",
  "test provider (its CRDs, both controllers)",
  "the whole",
] as const;
const samples: number[][] = stages.map(() => []);
for (let i = 0; i < RUNS; i++) {
  const t0 = performance.now();
  const cp = await startControlPlane({ log: () => {} });
  const t1 = performance.now();
  const xp = await startCrossplane(cp, () => true);
  const t2 = performance.now();
  await installProviderCrds(cp);
  const provider = await startProvider(cp, { log: () => {} });
  const t3 = performance.now();
  await provider.stop();
  await xp.stop();
  await cp.stop();
  for (const [k, ms] of [t1 - t0, t2 - t1, t3 - t2, t3 - t0].entries()) samples[k]!.push(ms);
  process.stderr.write(`run ${i + 1}/${RUNS}: ${((t3 - t0) / 1000).toFixed(1)} s\n`);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const s = (ms: number) => (ms / 1000).toFixed(1);
const rows = stages.map(
  (name, k) => `| ${name} | ${s(median(samples[k]!))} | ${s(Math.min(...samples[k]!))} | ${s(Math.max(...samples[k]!))} |`,
);
const section = `## Real control plane, warm start (\`npm run bench:controlplane\`)

The real-Crossplane tier's control plane started from the anchors cache, ${RUNS} runs one after another; seconds, on ${cpus().length} cores (${cpus()[0]?.model.trim()}), ${new Date().toISOString().slice(0, 10)}. Each stage starts when the one before is ready; the goal (issue 58) is the whole within 60 s.

| stage | median s | min | max |
|---|---:|---:|---:|
${rows.join("\n")}
`;
writeSection("Real control plane, warm start (`npm run bench:controlplane`)", section);
process.stdout.write(section);
