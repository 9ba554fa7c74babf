// The CRD rule engine (cel-js with our Kubernetes libraries, src/schema/cel.ts)
// held to Kubernetes' own CEL: every case of test/apiserver/kubecel-answers.json
// (CEL's conformance cases in the suites kube's environment has, and the
// expressions of kube's CEL library tests), whose answers were taken from kube's
// CEL built from its module and are checked to still be its answers by
// test/crossplane/kubecel.test.ts in the Go tier. A case we answer otherwise
// must be listed in celconformance-known.json with its reason ("kept: ..." or
// "open: ..."); a new difference fails, and so does a listed case that now
// agrees (take it out of the list). XFN_CEL_CONFORMANCE_WRITE=1 rewrites the
// list, keeping the reasons written.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ourAnswer, readRecording } from "../support/celspec.js";

const T = suite("CRD rules held to Kubernetes' CEL: its recorded answers to conformance cases and its library tests");
const KNOWN_FILE = join(import.meta.dirname, "celconformance-known.json");
const KNOWN = JSON.parse(readFileSync(KNOWN_FILE, "utf8")) as Record<string, string>;
const recording = readRecording();
const results = Object.entries(recording.cases).map(([key, c]) => ({ key, c, ours: ourAnswer(c.expr, c.bindings) }));
const differing = results.filter((r) => r.ours !== r.c.kube);

/** kind is how a difference matters to a user: a rule kube takes refused (worst), one it refuses taken, or a value. */
const kind = (kube: string, ours: string) =>
  ours === "refused" ? "false refusal" : kube === "refused" ? "false acceptance" : ours === "error" || kube === "error" ? "error" : "value";

T("the recording holds kube's answers to over a thousand conformance cases and its library tests", () => {
  assert.ok(results.length > 1400, `only ${results.length} cases recorded`);
  assert.ok(results.filter((r) => r.key.startsWith("library/")).length > 150, "kube's library tests are missing from the recording");
  for (const k of ["value", "error", "refused"])
    assert.ok(
      results.some((r) => (k === "value" ? !["error", "refused"].includes(r.c.kube) : r.c.kube === k)),
      `no case kube answers with ${k}`,
    );
});

T("every case is answered as kube answers it, or is listed with its reason", () => {
  const counts = new Map<string, number>();
  for (const r of differing) counts.set(kind(r.c.kube, r.ours), (counts.get(kind(r.c.kube, r.ours)) ?? 0) + 1);
  process.stderr.write(
    `cel vs kube ${recording.kubernetes}: ${results.length - differing.length} of ${results.length} alike; ${[...counts].map(([k, n]) => `${n} ${k}`).join(", ")}\n`,
  );
  if (process.env["XFN_CEL_CONFORMANCE_WRITE"] === "1") {
    const next = Object.fromEntries(differing.map((r) => [r.key, KNOWN[r.key] ?? `open: ${kind(r.c.kube, r.ours)}`]));
    writeFileSync(KNOWN_FILE, `${JSON.stringify(next, null, 1)}\n`);
  }
  const unknown = differing.filter((r) => KNOWN[r.key] === undefined);
  assert.equal(
    unknown.map((r) => `${r.key}: ${r.c.expr}\n    kube: ${r.c.kube}\n    ours: ${r.ours}`),
    [],
    "differences not in celconformance-known.json",
  );
});

T("every listed case still differs (one fixed leaves the list), each with a reason", () => {
  const now = new Set(differing.map((r) => r.key));
  assert.equal(
    Object.keys(KNOWN).filter((k) => !now.has(k)),
    [],
    "listed in celconformance-known.json but answered as kube does",
  );
  for (const [k, why] of Object.entries(KNOWN)) assert.ok(/^(kept|open): \S/.test(why), `${k}: reason "${why}" is neither kept: nor open:`);
});

T.run();
