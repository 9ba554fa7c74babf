// The embedded API server beside the real kube-apiserver (issue 59, item 1):
// every sequence of test/crossplane/differential/ sent to both, the real
// server's answer taken as the expected one, in the same run. Each difference
// must be in differential/known.json with its reason (docs/dev-cluster.md
// lists them for users); a new one fails the test, and so does a known one
// that no longer happens (fixed: take it out of the list).
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster, type DevCluster } from "../../src/apiserver/server.js";
import { kubeFetch } from "../support/kubefetch.js";
import { needs } from "../support/needs.js";
import { startControlPlane, type ControlPlane } from "./controlplane.js";
import { key, KINDS, run, type Difference, type Fetch, type Sequence } from "./differential.js";
import { SEQUENCES as CEL } from "./differential/cel.js";
import { SEQUENCES as KUBECTL } from "./differential/kubectl.js";
import { SEQUENCES as VALIDATION } from "./differential/validation.js";
import { COUNT, SEED, sequences as generated } from "./differential/generated.js";
import { sequences as expressions } from "./differential/expressions.js";
import { compileSequences, ratchetingSequences } from "./differential/kubetables.js";

const D = suite("the embedded API server beside kube-apiserver: the same requests, the answers compared");
const G = needs(D, "go1.26");
let cp: ControlPlane | undefined;
let dev: DevCluster | undefined;
let work: string;
let real: Fetch;
let ours: Fetch;

const KNOWN_FILE = join(import.meta.dirname, "differential/known.json");
/** Known differences: key (place, kind, path) to the reason it is kept, or "open" while not yet looked at. */
const KNOWN = JSON.parse(readFileSync(KNOWN_FILE, "utf8")) as Record<string, string>;

G.before(async () => {
  work = mkdtempSync(join(tmpdir(), "xfn-differential-"));
  [cp, dev] = await Promise.all([startControlPlane(), startDevCluster({ token: "differential" })]);
  writeFileSync(join(work, "dev.kubeconfig"), dev.kubeconfig());
  real = kubeFetch(cp.kubeconfig);
  ours = kubeFetch(join(work, "dev.kubeconfig"));
});
G.after(async () => {
  await Promise.all([cp?.stop(), dev?.stop()]);
  if (work) rmSync(work, { recursive: true, force: true });
});

/**
 * Kinds of difference generated sequences may show, by what they are (their places change with the
 * seed); the same kinds are kept, or open, for the hand-written sequences in known.json.
 */
const KNOWN_GENERATED: { why: string; test: (d: Difference) => boolean }[] = [
  {
    why: "kept: a CRD is established in the request that creates it; kube-apiserver answers before its controllers accept the names",
    test: (d) =>
      /create the generated CRD|create a CRD whose spec|create the CRD of runTests/.test(d.where) &&
      d.kind === "value" &&
      /^\.status\.(acceptedNames|conditions)/.test(d.at),
  },
  {
    why: "kept: the same, seen in a CRD update's answer: kube-apiserver's own status write (manager kube-apiserver, subresource status) is an entry of the CRD's managedFields; here the server writes the status within the create, owned by no one",
    test: (d) => d.where.includes("update the CRD's schema") && d.kind === "value" && /^\.(metadata\.managedFields|status\.)/.test(d.at),
  },
  {
    why: "open: a set or map list is owned here as one field; kube owns the list itself and each element (v:, k:), as structured-merge-diff does",
    test: (d) => d.kind === "value" && /^\.metadata\.managedFields\.\d+\.fieldsV1\./.test(d.at),
  },
];

const seen: Difference[] = [];

/**
 * check runs a source's sequences and fails on a difference not known, naming
 * each; byKind: the source's differences of a kind in KNOWN_GENERATED are
 * known by that kind (counted), not each in known.json.
 */
async function check(source: string, sequences: Sequence[], byKind = false): Promise<void> {
  const all: Difference[] = [];
  for (const seq of sequences) all.push(...(await run(seq, real, ours)));
  const ofKind = byKind ? all.filter((d) => KNOWN_GENERATED.some((k) => k.test(d))) : [];
  const found = all.filter((d) => !ofKind.includes(d));
  if (ofKind.length) process.stderr.write(`differential ${source}: ${ofKind.length} differences of a kind known (KNOWN_GENERATED)\n`);
  seen.push(...found);
  // XFN_DIFFERENTIAL_DUMP=folder: every difference a source found, as JSON, for reading them whole.
  if (process.env["XFN_DIFFERENTIAL_DUMP"])
    writeFileSync(join(process.env["XFN_DIFFERENTIAL_DUMP"], `${source}.json`), `${JSON.stringify(found, null, 1)}\n`);
  const counts = KINDS.map((k) => `${found.filter((d) => d.kind === k).length} ${k}`).join(", ");
  process.stderr.write(`differential ${source}: ${sequences.length} sequences; ${counts}\n`);
  const unknown = found.filter((d) => KNOWN[key(d)] === undefined);
  assert.equal(
    unknown.map((d) => `${key(d)}\n    real: ${JSON.stringify(d.real)}\n    ours: ${JSON.stringify(d.ours)}`),
    [],
    "differences not in differential/known.json",
  );
}

G("CRD validation rules: accepted, refused and evaluated alike", async () => {
  await check("cel", CEL);
});

G("tables of kube's CEL validation test (validation_test.go): the same verdicts and words", async () => {
  await check("validation", VALIDATION);
});

G("kube's integration test of CRD rules (crd_validation_expressions_test.go, its schemas read from the module)", async () => {
  await check("expressions", expressions());
});

G(
  "kube's CEL compilation and cost tables (compilation_test.go, read by running kube's tests): CRDs accepted or refused alike",
  async () => {
    await check("compilation", compileSequences(), true);
  },
);

G("kube's ratcheting integration test (ratcheting_test.go, read by running kube's tests): schema updates and applies alike", async () => {
  await check("ratcheting", ratchetingSequences(), true);
});

G("the requests of the kubectl commands users run: answered alike", async () => {
  await check("kubectl", KUBECTL);
});

G("generated CRDs and objects (schemagen.ts): answered alike but for the kinds of difference listed", async () => {
  process.stderr.write(`differential generated: seed ${SEED} (XFN_SCHEMAGEN_SEED), ${COUNT} CRDs (XFN_SCHEMAGEN_RUNS)\n`);
  const found: Difference[] = [];
  for (const seq of generated()) found.push(...(await run(seq, real, ours)));
  const counts = KINDS.map((k) => `${found.filter((d) => d.kind === k).length} ${k}`).join(", ");
  const byWhy = KNOWN_GENERATED.map((k) => `${found.filter((d) => k.test(d)).length} × ${k.why.slice(0, 40)}...`).join("; ");
  process.stderr.write(`differential generated: ${counts}; ${byWhy}\n`);
  const unknown = found.filter((d) => !KNOWN_GENERATED.some((k) => k.test(d)));
  assert.equal(
    unknown.map((d) => `${key(d)}\n    real: ${JSON.stringify(d.real)}\n    ours: ${JSON.stringify(d.ours)}`),
    [],
    `differences of no known kind (replay with XFN_SCHEMAGEN_SEED=${SEED})`,
  );
});

G("every known difference still happens (one fixed comes out of known.json)", () => {
  const now = new Set(seen.map(key));
  if (process.env["XFN_DIFFERENTIAL_WRITE"])
    writeFileSync(KNOWN_FILE, `${JSON.stringify(Object.fromEntries([...now].sort().map((k) => [k, KNOWN[k] ?? "open"])), null, 2)}\n`);
  assert.equal(
    Object.keys(KNOWN).filter((k) => !now.has(k)),
    [],
  );
});

D.run();
