// xfn test and xfn serve --record-dir, as users run them.
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import type { JsonObject } from "@bufbuild/protobuf";
import { parse, parseAllDocuments, stringify } from "yaml";
import { runTests } from "../../src/cli/test.js";
import { RunFunctionRequestSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { decodeResponse, encodeRequest } from "../../src/wire/codec.js";
import { messageFromJson } from "../../src/wire/protojson.js";
import { rawClient } from "../support/client.js";
import { nest, request } from "../support/requests.js";
import { crd } from "../support/cluster.js";
import { sink } from "../support/sink.js";
import { ROOT, run, startServe } from "../support/spawn.js";

async function xfnTest(dir: string, update = false) {
  const out = sink();
  const code = await runTests(dir, update, out.stream);
  return { code, out: out.text() };
}

let scratch: string;
const T = suite("cli: xfn test");
T.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-test-"));
});
T.after(() => rmSync(scratch, { recursive: true, force: true }));

const parseAllDocs = (text: string) => parseAllDocuments(text).map((d) => d.toJS() as JsonObject);

const copyCase = (from: string, name: string) => {
  const to = join(scratch, name);
  cpSync(join(ROOT, from), to, { recursive: true });
  return to;
};

T("the committed cases of every function and the examples pass", async () => {
  const fns = await xfnTest(join(ROOT, "functions"));
  assert.is(fns.code, 0, fns.out);
  assert.match(fns.out, /^ok {7}hello\/testdata\/cases\/bad-bucket-name$/m);
  assert.match(fns.out, /^3 passed, 0 failed$/m);
  const ex = await xfnTest(join(ROOT, "examples"));
  assert.is(ex.code, 0, ex.out);
  assert.match(ex.out, /^ok {7}cases\/xrd-missing-status$/m, "a case with an xrd.yaml: pruned fields and the lifecycle's warnings");
  assert.match(ex.out, /^ok {7}cases\/converged$/m, "a case rendered until it converges");
  assert.match(ex.out, /^3 passed, 0 failed$/m);
});

T("a request case whose response nears Crossplane's 4 MiB passes with a warning naming its size and largest parts", async () => {
  const dir = join(scratch, "req-big");
  mkdirSync(dir);
  writeFileSync(
    join(dir, "fn.ts"),
    `import { defineFunction, response } from ${JSON.stringify(join(ROOT, "src/index.ts"))};\n` +
      `export default defineFunction((req) => {\n  const rsp = response.to(req);\n` +
      `  response.setDesiredComposedResource(rsp, "big", { kind: "K", data: "x".repeat(3600 * 1024) });\n  return rsp;\n});\n`,
  );
  writeFileSync(join(dir, "request.yaml"), "meta: {tag: t}\n");
  writeFileSync(join(dir, "case.yaml"), `function: ${join(dir, "fn.ts")}\n`);
  writeFileSync(join(dir, "expected.yaml"), "meta: {tag: t}\n");
  const r = await xfnTest(dir);
  assert.is(r.code, 0, r.out);
  assert.match(r.out, /^ok {7}\.$/m);
  assert.match(
    r.out,
    /^ {2}warning: response is 3\.\d+ MiB \(\d+ bytes\), 8\d% of the 4194304-byte limit Crossplane accepts; largest: "big" 3\.\d+ MiB/m,
  );
});

T("a failing request case: FAIL line, the path, a unified diff, exit 1", async () => {
  const dir = join(scratch, "req-fail");
  mkdirSync(dir);
  writeFileSync(join(dir, "request.yaml"), readFileSync(join(ROOT, "functions/hello/example/request.yaml")));
  writeFileSync(join(dir, "case.yaml"), `function: ${join(ROOT, "functions/hello")}\n`);
  writeFileSync(join(dir, "expected.yaml"), "desired:\n  composite:\n    resource:\n      status:\n        bucketCount: 3\n");
  const r = await xfnTest(dir);
  assert.is(r.code, 1);
  assert.match(r.out, /^FAIL {5}\.$/m);
  assert.match(r.out, /\$\.desired\.composite\.resource\.status\.bucketCount: expected 3, got 2/);
  assert.match(r.out, /^--- \.\/expected\.yaml$/m);
  assert.match(r.out, /^- {8}bucketCount: 3$/m);
  assert.match(r.out, /^\+ {8}bucketCount: 2$/m);
  assert.match(r.out, /^0 passed, 1 failed$/m);
});

T("a case file that does not parse fails its case naming the file; a pipeline expectation is never read in part", async () => {
  const root = join(scratch, "unparsed");
  const requestCase = (name: string) => {
    const dir = copyCase("functions/hello/testdata/cases/two-buckets-one-ready", `unparsed/${name}`);
    writeFileSync(join(dir, "case.yaml"), `function: ${join(ROOT, "functions/hello")}\n`);
    return dir;
  };
  writeFileSync(join(requestCase("bad-case"), "case.yaml"), "function: [unclosed\n");
  writeFileSync(join(requestCase("bad-expected"), "expected.yaml"), "meta: {tag: [unclosed\n");
  let deep = "leaf";
  for (let i = 0; i < 2000; i++) deep = `{"a": ${deep}}`;
  writeFileSync(join(requestCase("deep-request"), "request.yaml"), `context: ${deep}\n`);
  requestCase("fine");
  // A pipeline case whose expectation is broken in its second document: the
  // parser would read `name: [unclosed` as a list and go on.
  const pipeline = copyCase("examples/cases/logs-exists", "unparsed/pipeline");
  const docs = readFileSync(join(pipeline, "expected.yaml"), "utf8").split(/^---$/m);
  docs[1] = docs[1]!.replace(/name: .*/, "name: [unclosed");
  writeFileSync(join(pipeline, "expected.yaml"), docs.join("---"));
  const r = await xfnTest(root);
  assert.is(r.code, 1);
  assert.match(r.out, /^FAIL {5}bad-case\n {2}cannot parse \S*bad-case\/case\.yaml: .* at line 2, column 1$/m);
  assert.match(r.out, /^FAIL {5}bad-expected\n {2}cannot parse \S*bad-expected\/expected\.yaml: .* at line 2, column 1$/m);
  assert.match(
    r.out,
    /^FAIL {5}deep-request\n {2}cannot parse \S*deep-request\/request\.yaml: nested too deeply for the YAML parser at line 1, column \d+ \(xfn reads at most 500 levels\)$/m,
  );
  assert.match(r.out, /^FAIL {5}pipeline\n {2}cannot parse \S*pipeline\/expected\.yaml \(document 2\): /m);
  assert.match(r.out, /^ok {7}fine$/m);
  assert.match(r.out, /^1 passed, 4 failed$/m);
});

T("--update rewrites expectations from the actual results, which then pass", async () => {
  const dir = copyCase("functions/hello/testdata/cases/two-buckets-one-ready", "upd/case");
  writeFileSync(join(dir, "case.yaml"), `function: ${join(ROOT, "functions/hello")}\n`);
  writeFileSync(join(dir, "expected.yaml"), "meta: {tag: wrong}\n");
  assert.is((await xfnTest(join(scratch, "upd"))).code, 1);
  const u = await xfnTest(join(scratch, "upd"), true);
  assert.is(u.code, 0);
  assert.match(u.out, /^UPDATED {2}case$/m);
  assert.match(readFileSync(join(dir, "expected.yaml"), "utf8"), /tag: example-1/);
  assert.is((await xfnTest(join(scratch, "upd"))).code, 0);
});

T("--update keeps an expectation's shape: $absent and the keys chosen stay; a passing case is left as written", async () => {
  const dir = copyCase("functions/hello/testdata/cases/two-buckets-one-ready", "upd-shape/case");
  writeFileSync(join(dir, "case.yaml"), `function: ${join(ROOT, "functions/hello")}\n`);
  const expected = [
    "# Only the status and the assets bucket's readiness matter here.",
    "meta: {tag: wrong}",
    "desired:",
    "  composite:",
    "    resource:",
    "      status: {bucketCount: 2, unknownField: $absent}",
    "  resources:",
    "    bucket-assets: {ready: READY_TRUE}",
    "    bucket-media: $absent",
    "",
  ].join("\n");
  writeFileSync(join(dir, "expected.yaml"), expected);
  const before = await xfnTest(join(scratch, "upd-shape"));
  assert.is(before.code, 1);
  assert.match(before.out, /\$\.meta\.tag: expected "wrong", got "example-1"/);
  const u = await xfnTest(join(scratch, "upd-shape"), true);
  assert.is(u.code, 0, u.out);
  assert.match(u.out, /^UPDATED {2}case$/m);
  // Before: the whole response, every $absent gone, so a bucket-media that later appeared passed.
  assert.equal(parse(readFileSync(join(dir, "expected.yaml"), "utf8")), {
    meta: { tag: "example-1" },
    desired: {
      composite: { resource: { status: { bucketCount: 2, unknownField: "$absent" } } },
      resources: { "bucket-assets": { ready: "READY_FALSE" }, "bucket-media": "$absent" },
    },
  });
  // Rewritten through its YAML: the comment, the flow maps and the order of keys stay; only values changed.
  assert.is(
    readFileSync(join(dir, "expected.yaml"), "utf8"),
    expected.replace("{tag: wrong}", "{tag: example-1}").replace("{ready: READY_TRUE}", "{ready: READY_FALSE}"),
  );
  assert.is((await xfnTest(join(scratch, "upd-shape"))).code, 0);
  // A passing case is not rewritten: its comments and layout stay.
  const passing = readFileSync(join(dir, "expected.yaml"), "utf8").replace(/^/, "# kept\n");
  writeFileSync(join(dir, "expected.yaml"), passing);
  const again = await xfnTest(join(scratch, "upd-shape"), true);
  assert.match(again.out, /^ok {7}case$/m);
  assert.is(readFileSync(join(dir, "expected.yaml"), "utf8"), passing);
  // An empty expected.yaml, or one that does not parse, gets the whole result.
  for (const text of ["", "meta: [unclosed\n"]) {
    writeFileSync(join(dir, "expected.yaml"), text);
    assert.match((await xfnTest(join(scratch, "upd-shape"), true)).out, /^UPDATED {2}case$/m);
    const whole = parse(readFileSync(join(dir, "expected.yaml"), "utf8")) as JsonObject;
    assert.equal(Object.keys((whole["desired"] as JsonObject)["resources"] as JsonObject).sort(), ["bucket-assets", "bucket-logs"]);
  }
});

T("--update of a pipeline case: documents in their expected shape, a new resource whole, a gone one dropped", async () => {
  const dir = copyCase("examples/cases/logs-exists", "upd-pipe");
  writeFileSync(
    join(dir, "functions.yaml"),
    readFileSync(join(dir, "functions.yaml"), "utf8").replaceAll("../../../functions/", `${ROOT}/functions/`),
  );
  writeFileSync(
    join(dir, "expected.yaml"),
    [
      "# The XR: only its count matters.",
      "apiVersion: example.xfn.dev/v1alpha1",
      "kind: XBuckets",
      "metadata: {name: team-a}",
      "status: {bucketCount: 3, missing: $absent} # was 3 before the assets bucket",
      "---",
      "apiVersion: s3.aws.upbound.io/v1beta1",
      "kind: Bucket",
      "metadata:",
      "  annotations: {crossplane.io/composition-resource-name: bucket-logs}",
      "# The region the logs bucket gets.",
      "spec: {forProvider: {region: mars-1}}",
      "---",
      "apiVersion: s3.aws.upbound.io/v1beta1",
      "kind: Bucket",
      "metadata:",
      "  annotations: {crossplane.io/composition-resource-name: bucket-gone}",
      "",
    ].join("\n"),
  );
  assert.is((await xfnTest(dir)).code, 1);
  assert.match((await xfnTest(dir, true)).out, /^UPDATED {2}\.$/m);
  const docs = parseAllDocs(readFileSync(join(dir, "expected.yaml"), "utf8"));
  assert.equal(docs[0], {
    apiVersion: "example.xfn.dev/v1alpha1",
    kind: "XBuckets",
    metadata: { name: "team-a" },
    status: { bucketCount: 2, missing: "$absent" },
  });
  assert.equal(docs[1], {
    apiVersion: "s3.aws.upbound.io/v1beta1",
    kind: "Bucket",
    metadata: { annotations: { "crossplane.io/composition-resource-name": "bucket-logs" } },
    spec: { forProvider: { region: "eu-west-1" } },
  });
  const names = docs.map(
    (d) => ((d["metadata"] as JsonObject)["annotations"] as JsonObject | undefined)?.["crossplane.io/composition-resource-name"],
  );
  assert.ok(names.includes("bucket-assets"), "the resource rendered but not expected is written whole");
  assert.not.ok(names.includes("bucket-gone"));
  // The documents that stay keep their comments and flow style; only the values changed.
  const text = readFileSync(join(dir, "expected.yaml"), "utf8");
  assert.ok(
    text.startsWith(
      [
        "# The XR: only its count matters.",
        "apiVersion: example.xfn.dev/v1alpha1",
        "kind: XBuckets",
        "metadata: {name: team-a}",
        "status: {bucketCount: 2, missing: $absent} # was 3 before the assets bucket",
        "---",
        "apiVersion: s3.aws.upbound.io/v1beta1",
        "kind: Bucket",
        "metadata:",
        "  annotations: {crossplane.io/composition-resource-name: bucket-logs}",
        "# The region the logs bucket gets.",
        "spec: {forProvider: {region: eu-west-1}}",
        "---",
        "",
      ].join("\n"),
    ),
    text,
  );
  assert.is((await xfnTest(dir)).code, 0);
});

T("a pipeline case pairs documents by identity and catches a missing or extra resource", async () => {
  const dir = copyCase("examples/cases/logs-exists", "pipe");
  // Paths in functions.yaml are relative to the case; point them at the repo.
  writeFileSync(
    join(dir, "functions.yaml"),
    readFileSync(join(dir, "functions.yaml"), "utf8").replaceAll("../../../functions/", `${ROOT}/functions/`),
  );
  assert.is((await xfnTest(dir)).code, 0);
  const expected = readFileSync(join(dir, "expected.yaml"), "utf8");
  writeFileSync(join(dir, "expected.yaml"), expected.replace(/---\napiVersion: s3[\s\S]*?bucket-assets[\s\S]*?(?=---)/, ""));
  const extra = await xfnTest(dir);
  assert.is(extra.code, 1);
  assert.match(extra.out, /resource bucket-assets: rendered, but not expected/);
  writeFileSync(
    join(dir, "expected.yaml"),
    `${expected}---\napiVersion: s3.aws.upbound.io/v1beta1\nkind: Bucket\nmetadata:\n  annotations: {crossplane.io/composition-resource-name: bucket-media}\n`,
  );
  const missing = await xfnTest(dir);
  assert.match(missing.out, /resource bucket-media: expected, but not rendered/);
});

T("a converge case: its expectation is the final state; one that never settles fails naming what still changed", async () => {
  const dir = copyCase("examples/cases/converged", "converged");
  const fns = join(dir, "functions.yaml");
  writeFileSync(fns, readFileSync(fns, "utf8").replaceAll("../../../functions/", `${ROOT}/functions/`));
  const first = await xfnTest(dir);
  assert.is(first.code, 0, first.out);
  // Not ready until three rounds after: the same rounds, one more each; the final state is the same.
  writeFileSync(join(dir, "case.yaml"), "converge: {readyAfter: 3}\n");
  assert.is((await xfnTest(dir)).code, 0);
  // A rule that keeps bucket-logs from ever being ready: it settles with assets never composed, and the case says so.
  writeFileSync(join(dir, "case.yaml"), "converge: {ready: {bucket-logs: 'false'}}\n");
  const held = await xfnTest(dir);
  assert.is(held.code, 1);
  assert.match(held.out, /resource bucket-assets: expected, but not rendered/);
  // Too few rounds to settle.
  writeFileSync(join(dir, "case.yaml"), "converge: {maxRounds: 2}\n");
  const short = await xfnTest(dir);
  assert.is(short.code, 1);
  assert.match(
    short.out,
    /did not converge in 2 rounds \(converge\.maxRounds\): the next round's input would still differ: the XR's spec\.crossplane, status\.conditions, and status\.externalNames; composed bucket-assets; changed bucket-logs/,
  );
});

const broken: Record<string, { files: Record<string, string>; want: RegExp }> = {
  NoFunction: {
    files: { "request.yaml": "meta: {tag: t}\n", "expected.yaml": "{}\n" },
    want: /no function for this request: set function: in case\.yaml/,
  },
  BadRequest: {
    files: { "request.yaml": "meta: {tagg: t}\n", "expected.yaml": "{}\n", "case.yaml": `function: ${ROOT}/functions/hello\n` },
    want: /cannot read .*request\.yaml as a RunFunctionRequest: .*tagg/,
  },
  UnknownCaseKey: {
    files: { "request.yaml": "{}\n", "expected.yaml": "{}\n", "case.yaml": "fn: x\n" },
    want: /case\.yaml: unknown key "fn"; allowed: function, project, projectPath, now, until, context/,
  },
  BadNow: {
    files: { "request.yaml": "{}\n", "expected.yaml": "{}\n", "case.yaml": "now: yesterday\n" },
    want: /now "yesterday" is not an RFC 3339 time/,
  },
  // Its request does not parse and its module does not load: the module's failure went unhandled and ended xfn test.
  NeitherParsesNorImports: {
    files: {
      "request.yaml": "meta: [unclosed\n",
      "expected.yaml": "{}\n",
      "case.yaml": "function: fn.mjs\n",
      "fn.mjs": "import 'no-such-package-anywhere';\nexport default () => ({});\n",
    },
    want: /cannot parse \S*request\.yaml/,
  },
  ConvergeOnARequest: {
    files: { "request.yaml": "{}\n", "expected.yaml": "{}\n", "case.yaml": `function: ${ROOT}/functions/hello\nconverge: {}\n` },
    want: /case\.yaml: converge goes with a pipeline case \(xr\.yaml and composition\.yaml\), not request\.yaml/,
  },
  ConvergeUnknownKey: {
    files: { "xr.yaml": "kind: X\n", "composition.yaml": "kind: C\n", "expected.yaml": "{}\n", "case.yaml": "converge: {rounds: 3}\n" },
    want: /case\.yaml: converge: unknown key "rounds"; allowed: maxRounds, readyAfter, ready, readyStatus/,
  },
  ConvergeBadExpression: {
    files: {
      "xr.yaml": "kind: X\n",
      "composition.yaml": "kind: C\n",
      "expected.yaml": "{}\n",
      "case.yaml": "converge: {ready: {db: 'self.('}}\n",
    },
    want: /case\.yaml: converge: ready db: cannot parse "self\.\("/,
  },
  PipelineWithoutFunctions: {
    files: { "xr.yaml": "kind: X\n", "composition.yaml": "kind: C\n", "expected.yaml": "{}\n" },
    want: /a pipeline case needs functions\.yaml beside xr\.yaml/,
  },
};
T("a case folder named with ESC or a bidi override is printed escaped, never raw", async () => {
  const root = join(scratch, "hostile-names");
  copyCase("functions/hello/testdata/cases/bad-bucket-name", "hostile-names/x\u001b[2Jy\u202ez");
  writeFileSync(join(root, "x\u001b[2Jy\u202ez", "case.yaml"), `function: ${ROOT}/functions/hello\n`);
  const r = await xfnTest(root);
  assert.is(r.code, 0, r.out);
  assert.match(r.out, "ok       x^[[2Jy\\u202ez");
  // eslint-disable-next-line no-control-regex -- the controls are what is looked for
  assert.not.match(r.out, /[\u001b\u202e]/);
});

T("a link out of the folder (to /) is noted and not followed; the cases inside run", async () => {
  const root = join(scratch, "link-out");
  copyCase("functions/hello/testdata/cases/bad-bucket-name", "link-out/good");
  writeFileSync(join(root, "good", "case.yaml"), `function: ${ROOT}/functions/hello\n`);
  symlinkSync("/", join(root, "everything"));
  const r = await xfnTest(root);
  assert.is(r.code, 0, r.out);
  assert.match(r.out, /^note: everything is a link out of \S*link-out; not followed$/m);
  assert.match(r.out, /^1 passed, 0 failed$/m);
});

for (const [name, tc] of Object.entries(broken)) {
  T(`a broken case fails with the reason, and the others still run: ${name}`, async () => {
    const root = join(scratch, `broken-${name}`);
    const bad = join(root, "a-bad");
    mkdirSync(bad, { recursive: true });
    for (const [f, text] of Object.entries(tc.files)) writeFileSync(join(bad, f), text);
    copyCase("functions/hello/testdata/cases/bad-bucket-name", `broken-${name}/b-good`);
    writeFileSync(join(root, "b-good", "case.yaml"), `function: ${ROOT}/functions/hello\n`);
    const r = await xfnTest(root);
    assert.is(r.code, 1);
    assert.match(r.out, tc.want);
    assert.match(r.out, /^1 passed, 1 failed$/m);
  });
}

T("a function calling process.exit, or process.kill of its own process, fails its own case; the run goes on to its summary", async () => {
  const dir = join(scratch, "exits");
  for (const name of ["a-exits", "b-fine", "c-kills"]) mkdirSync(join(dir, name), { recursive: true });
  writeFileSync(
    join(dir, "fn.mjs"),
    `import { response } from ${JSON.stringify(join(ROOT, "lib/index.js"))};\n` +
      `export default (req) => {\n` +
      `  if (req.meta.tag === "exit") process.exit(2);\n` +
      `  if (req.meta.tag === "kill") process.kill(process.pid, "SIGTERM");\n` +
      `  return response.to(req);\n};\n`,
  );
  for (const [name, tag] of [
    ["a-exits", "exit"],
    ["b-fine", "fine"],
    ["c-kills", "kill"],
  ] as const) {
    writeFileSync(join(dir, name, "case.yaml"), "function: ../fn.mjs\n");
    writeFileSync(join(dir, name, "request.yaml"), `meta: {tag: ${tag}}\n`);
    // Empty: --update writes the whole result.
    writeFileSync(join(dir, name, "expected.yaml"), name === "b-fine" ? "meta: {tag: to-be-updated}\n" : "");
  }
  // Before: the run ended at the first case with exit code 2, no summary, the second case never run.
  const updated = await run(["test", dir, "--update"]);
  assert.is(updated.code, 0, updated.stdout + updated.stderr);
  assert.match(updated.stdout, /^UPDATED {2}a-exits$/m);
  assert.match(updated.stdout, /^UPDATED {2}b-fine$/m);
  assert.match(
    readFileSync(join(dir, "a-exits", "expected.yaml"), "utf8"),
    /function failed: process\.exit\(2\) was called by the function: it would end the process the function runs in/,
  );
  // Named without this process's pid, so that the case replays in the next run's process.
  assert.match(
    readFileSync(join(dir, "c-kills", "expected.yaml"), "utf8"),
    /function failed: process\.kill\(process\.pid, "SIGTERM"\) was called/,
  );
  const again = await run(["test", dir]);
  assert.is(again.code, 0, again.stdout);
  assert.match(again.stdout, /^3 passed, 0 failed$/m);
});

T("no cases, or no such folder, is an error, not a silent pass", async () => {
  mkdirSync(join(scratch, "empty"));
  const e = await xfnTest(join(scratch, "empty"));
  assert.is(e.code, 1);
  assert.match(e.out, /no cases under/);
  assert.match((await xfnTest(join(scratch, "nope"))).out, /not a directory/);
});

T("links in a loop, or to nothing, are each one failure naming the folder; every case beside them still runs", async () => {
  const dir = join(scratch, "links");
  mkdirSync(dir);
  cpSync(join(ROOT, "functions/hello/testdata/cases"), join(dir, "cases"), { recursive: true });
  for (const c of readdirSync(join(dir, "cases")))
    writeFileSync(join(dir, "cases", c, "case.yaml"), `function: ${JSON.stringify(join(ROOT, "functions/hello"))}\n`);
  mkdirSync(join(dir, "loop"));
  symlinkSync("b", join(dir, "loop", "a"));
  symlinkSync("a", join(dir, "loop", "b"));
  symlinkSync("nowhere", join(dir, "dangling"));
  // A link back up is walked once, not forever.
  symlinkSync("..", join(dir, "cases", "up"));
  const r = await xfnTest(dir);
  assert.is(r.code, 1, r.out);
  assert.match(r.out, /^FAIL {5}loop\/a\n {2}cannot read it: a symbolic link in a loop$/m);
  assert.match(r.out, /^FAIL {5}dangling\n {2}cannot read it: a symbolic link to nothing$/m);
  const cases = readdirSync(join(ROOT, "functions/hello/testdata/cases")).length;
  assert.is((r.out.match(/^ok {7}cases\//gm) ?? []).length, cases, r.out);
  assert.match(r.out, /^FAIL {5}loop\/b\n {2}cannot read it: a symbolic link in a loop$/m);
  assert.match(r.out, new RegExp(`^${cases} passed, 3 failed$`, "m"));
});

T("a recorded session replays unchanged, with secrets redacted", async () => {
  const dir = join(scratch, "recorded");
  const s = await startServe(["functions/hello", "--insecure", "--record-dir", dir]);
  const c = rawClient(s.port);
  try {
    const secret = Buffer.from("s3cr3t").toString("base64");
    for (const tag of ["one", "two"]) {
      await c.run(
        request({
          meta: { tag },
          observed: {
            composite: {
              resource: { kind: "XBuckets", metadata: { name: "x" }, spec: { buckets: [{ name: "a" }] } },
              connectionDetails: { pw: secret },
            },
          },
          desired: { resources: { kept: { resource: { kind: "K" }, connectionDetails: { pw: secret } } } },
          credentials: { aws: { credentialData: { data: { key: secret } } } },
        }),
      );
    }
  } finally {
    c.close();
    await s.stop();
  }
  const cases = readdirSync(dir).sort();
  assert.is(cases.length, 2);
  assert.match(cases[0]!, /-0001-one$/);
  for (const name of cases) {
    for (const f of ["request.yaml", "expected.yaml", "case.yaml"]) assert.ok(existsSync(join(dir, name, f)), `${name}/${f}`);
    const text = readFileSync(join(dir, name, "request.yaml"), "utf8") + readFileSync(join(dir, name, "expected.yaml"), "utf8");
    assert.not.ok(text.includes(Buffer.from("s3cr3t").toString("base64")), "a secret was recorded");
    assert.ok(text.includes(Buffer.from("[REDACTED]").toString("base64")));
    assert.match(readFileSync(join(dir, name, "expected.yaml"), "utf8"), /ttl: 60s/);
  }
  const replay = await run(["test", dir]);
  assert.is(replay.code, 0, replay.stdout + replay.stderr);
  assert.match(replay.stdout, /^2 passed, 0 failed$/m);
});

T("a recorded function that sets connection details replays unchanged; --update writes no secret", async () => {
  const dir = join(scratch, "recorded-secrets");
  const fn = join(scratch, "sets-secrets.mjs");
  // As functions do: the XR's connection details from a composed resource's, and one made here.
  writeFileSync(
    fn,
    `import { request, response } from ${JSON.stringify(join(ROOT, "lib/index.js"))};\n` +
      "export default (req) => {\n" +
      "  const rsp = response.to(req);\n" +
      '  const db = request.getObservedComposedResources(req)["db"];\n' +
      '  response.setConnectionDetails(rsp, { password: db.connectionDetails["password"], url: "postgres://db:5432" });\n' +
      "  return rsp;\n};\n",
  );
  const s = await startServe([fn, "--insecure", "--record-dir", dir]);
  const c = rawClient(s.port);
  const secret = Buffer.from("hunter2").toString("base64");
  try {
    await c.run(
      request({
        meta: { tag: "one" },
        observed: { resources: { db: { resource: { kind: "DB" }, connectionDetails: { password: secret } } } },
      }),
    );
  } finally {
    c.close();
    await s.stop();
  }
  const [name] = readdirSync(dir);
  const expectedPath = join(dir, name!, "expected.yaml");
  const marker = Buffer.from("[REDACTED]").toString("base64");
  assert.match(readFileSync(expectedPath, "utf8"), new RegExp(`password: ${marker.replace(/[+=/]/g, "\\$&")}`));
  // Before: "$.desired.composite.connectionDetails.password: expected "W1JFREFDVEVEXQ==", got ...": every such case failed at once.
  const replay = await run(["test", dir]);
  assert.is(replay.code, 0, replay.stdout + replay.stderr);
  assert.match(replay.stdout, /^1 passed, 0 failed$/m);
  // A value written out in expected.yaml is still compared: a changed one fails.
  writeFileSync(
    expectedPath,
    readFileSync(expectedPath, "utf8").replace(/url: \S+/, `url: ${Buffer.from("postgres://other").toString("base64")}`),
  );
  const changed = await run(["test", dir]);
  assert.is(changed.code, 1);
  assert.match(changed.stdout, /connectionDetails\.url: expected/);
  // --update writes them redacted, as the recording did: the secret never lands in the case folder.
  const updated = await run(["test", dir, "--update"]);
  assert.is(updated.code, 0, updated.stdout);
  const text = readFileSync(expectedPath, "utf8");
  assert.not.ok(text.includes(secret), "the secret was written");
  assert.not.ok(text.includes(Buffer.from("hunter2").toString("base64")));
  assert.match((await run(["test", dir])).stdout, /^1 passed, 0 failed$/m);
});

T("a case recorded inside the project names its function from the project's root, and replays after a move into testdata", async () => {
  // A scaffolded project of its own: package.json, src/index.ts importing xfn by its path (this checkout's lib).
  mkdirSync(join(ROOT, ".tmp"), { recursive: true });
  const project = mkdtempSync(join(ROOT, ".tmp", "xfn-record-move-"));
  try {
    mkdirSync(join(project, "src"));
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "fn", type: "module", main: "src/index.ts" }));
    writeFileSync(
      join(project, "src", "index.ts"),
      `import { response } from ${JSON.stringify(join(ROOT, "lib/index.js"))};\nexport default (req: never) => response.to(req);\n`,
    );
    const s = await startServe([".", "--insecure", "--record-dir", "recordings"], {}, { cwd: project });
    const c = rawClient(s.port);
    try {
      await c.run(request({ meta: { tag: "moved" } }));
    } finally {
      c.close();
      await s.stop();
    }
    const [recorded] = readdirSync(join(project, "recordings"));
    const caseYaml = readFileSync(join(project, "recordings", recorded!, "case.yaml"), "utf8");
    assert.match(caseYaml, /^function: src\/index\.ts$/m);
    assert.match(caseYaml, /^project: fn$/m);
    assert.match(caseYaml, new RegExp(`^projectPath: ${project.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`, "m"));
    // Moved, as a user keeps it: deeper, beside the committed cases.
    mkdirSync(join(project, "testdata", "cases"), { recursive: true });
    renameSync(join(project, "recordings", recorded!), join(project, "testdata", "cases", "first-call"));
    const replay = await run(["test", "testdata"], { cwd: project });
    assert.is(replay.code, 0, replay.stdout + replay.stderr);
    assert.match(replay.stdout, /^ok {7}cases\/first-call$/m);
    // Out of the project, on this machine: it runs its own module, where it was recorded.
    const away = join(scratch, "away");
    cpSync(join(project, "testdata"), away, { recursive: true });
    const found = await run(["test", away]);
    assert.is(found.code, 0, found.stdout + found.stderr);
    // Handed on (no projectPath to go by, as on another machine): it says what it looked for.
    const caseFile = join(away, "cases", "first-call", "case.yaml");
    writeFileSync(caseFile, readFileSync(caseFile, "utf8").replace(/^projectPath: .*\n/m, ""));
    const lost = await run(["test", away]);
    assert.is(lost.code, 1);
    assert.match(
      lost.stdout,
      /case\.yaml's function src\/index\.ts of project fn is not found: no folder from the case's up is that project/,
    );
    // Copied into another project with a src/index.ts of its own: refused, not run against that project's code.
    const other = mkdtempSync(join(ROOT, ".tmp", "xfn-record-other-"));
    try {
      mkdirSync(join(other, "src"));
      writeFileSync(join(other, "package.json"), JSON.stringify({ name: "other", type: "module", main: "src/index.ts" }));
      writeFileSync(join(other, "src", "index.ts"), "export default () => { throw new Error('the other project ran'); };\n");
      cpSync(away, join(other, "testdata"), { recursive: true });
      const elsewhere = await run(["test", "testdata"], { cwd: other });
      assert.is(elsewhere.code, 1);
      assert.not.match(elsewhere.stdout, /the other project ran/);
      assert.match(
        elsewhere.stdout,
        /of project fn is not found: no folder from the case's up is that project \(a package\.json named fn\)/,
      );
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  } finally {
    rmSync(project, { recursive: true, force: true });
  }
});

T("a recorded session keeps every name __proto__, and replays unchanged", async () => {
  const dir = join(scratch, "recorded-proto");
  const s = await startServe(["functions/hello", "--insecure", "--record-dir", dir]);
  const c = rawClient(s.port);
  try {
    const req = messageFromJson(
      RunFunctionRequestSchema,
      JSON.parse(`{
        "meta": {"tag": "proto"},
        "observed": {"composite": {"resource": {"kind": "XBuckets", "metadata": {"name": "x"}, "spec": {"buckets": [{"name": "a"}]}}},
                     "resources": {"__proto__": {"resource": {"kind": "K", "metadata": {"labels": {"__proto__": "l"}}}}}},
        "desired": {"resources": {"__proto__": {"resource": {"kind": "K"}, "connectionDetails": {"__proto__": "${Buffer.from("pw").toString("base64")}"}}}},
        "context": {"__proto__": "c"}
      }`),
    );
    await c.call(encodeRequest(req));
  } finally {
    c.close();
    await s.stop();
  }
  const [name] = readdirSync(dir);
  const request = parse(readFileSync(join(dir, name!, "request.yaml"), "utf8"));
  const expected = parse(readFileSync(join(dir, name!, "expected.yaml"), "utf8"));
  assert.ok(Object.hasOwn(request.observed.resources, "__proto__"), "observed resource __proto__ not recorded");
  assert.is(request.observed.resources["__proto__"].resource.metadata.labels["__proto__"], "l");
  assert.ok(Object.hasOwn(request.desired.resources["__proto__"].connectionDetails, "__proto__"));
  assert.ok(Object.hasOwn(request.context, "__proto__"));
  assert.ok(Object.hasOwn(expected.desired.resources, "__proto__"), "desired resource __proto__ not recorded");
  assert.is(expected.desired.resources["__proto__"].connectionDetails["__proto__"], Buffer.from("[REDACTED]").toString("base64"));
  assert.is(expected.context["__proto__"], "c");
  const replay = await run(["test", dir]);
  assert.is(replay.code, 0, replay.stdout + replay.stderr);
  assert.match(replay.stdout, /^1 passed, 0 failed$/m);
  // xfn test compares what is under the name: a changed expectation fails, naming it.
  expected.desired.resources["__proto__"].resource.kind = "Other";
  writeFileSync(join(dir, name!, "expected.yaml"), stringify(expected));
  const failed = await run(["test", dir]);
  assert.is(failed.code, 1, failed.stdout + failed.stderr);
  assert.match(failed.stdout, /\$\.desired\.resources\.__proto__\.resource\.kind: expected "Other", got "K"/);
});

for (const mode of [["--workers", "1"], []]) {
  const how = mode.length ? "in process" : "on the worker pool";
  T(`recording ${how}: a request 150 levels deep replays; ones too deep for a case file are answered, logged, not recorded`, async () => {
    const dir = join(scratch, `recorded-deep-${mode.length}`);
    const s = await startServe(["functions/hello", "--insecure", "--record-dir", dir, ...mode]);
    const c = rawClient(s.port);
    const xr = { kind: "XBuckets", metadata: { name: "x" }, spec: { buckets: [{ name: "a" }] } };
    try {
      // 600 is past the limit; 2,000 is past where YAML runs out of stack (it threw inside the recorder).
      for (const [tag, levels] of [
        ["deep", 150],
        ["deeper", 600],
        ["deepest", 2000],
      ] as const) {
        const req = messageFromJson(RunFunctionRequestSchema, { meta: { tag }, observed: { composite: { resource: xr } } });
        req.context = { schema: nest(levels) } as JsonObject;
        // Answered in time, whether or not it could be recorded (a throwing recorder once left the call hanging).
        const rsp = decodeResponse(await c.call(encodeRequest(req), { timeoutMs: 5000 }));
        assert.is(rsp.results[0]?.message, "composed 1 bucket");
      }
    } finally {
      c.close();
      await s.stop();
    }
    const cases = readdirSync(dir);
    assert.equal(
      cases.map((n) => n.replace(/^.*-/, "")),
      ["deep"],
    );
    const logged = s
      .output()
      .split("\n")
      .filter((l) => l.includes("cannot record test case"));
    assert.is(logged.length, 2, s.output());
    for (const l of logged) assert.match(l, /nests more than 500 levels deep/);
    const replay = await run(["test", dir]);
    assert.is(replay.code, 0, replay.stdout + replay.stderr);
    assert.match(replay.stdout, /^1 passed, 0 failed$/m);
  });
}

T(
  "a request case whose function asks for resources and a schema: answered from the case's required and schemas, or the flags",
  async () => {
    const dir = join(scratch, "requirements");
    const kase = join(dir, "cases/step");
    mkdirSync(kase, { recursive: true });
    writeFileSync(
      join(dir, "index.ts"),
      `import { defineFunction, request, response } from ${JSON.stringify(join(ROOT, "src/index.ts"))};\n` +
        `export default defineFunction((req) => {\n` +
        `  const rsp = response.to(req);\n` +
        `  response.requireSchema(rsp, "bucket", { apiVersion: "s3.aws.upbound.io/v1beta1", kind: "Bucket" });\n` +
        `  response.requireResources(rsp, "config", { apiVersion: "v1", kind: "ConfigMap", matchName: "settings" });\n` +
        `  const schema = request.getRequiredSchema(req, "bucket") as any;\n` +
        `  const config = request.getRequiredResources(req, "config");\n` +
        `  response.setDesiredCompositeStatus(rsp, {\n` +
        `    schema: schema === undefined ? "unanswered" : schema === null ? "not found" : Object.keys(schema.properties ?? {}).sort().join(","),\n` +
        `    region: config === undefined ? "unanswered" : String((config[0] as any)?.data?.region ?? "none"),\n` +
        `  });\n` +
        `  return rsp;\n});\n`,
    );
    writeFileSync(join(kase, "case.yaml"), `function: ${join(dir, "index.ts")}\n`);
    writeFileSync(
      join(kase, "request.yaml"),
      stringify({ observed: { composite: { resource: { apiVersion: "x.io/v1", kind: "X", metadata: { name: "x" } } } } }),
    );
    // As Crossplane answered it in the cluster: the response after the requirements were fetched.
    writeFileSync(
      join(kase, "expected.yaml"),
      stringify({ desired: { composite: { resource: { status: { schema: "spec,status", region: "eu-west-1" } } } } }),
    );
    const settings = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "settings" }, data: { region: "eu-west-1" } };
    writeFileSync(join(dir, "required.yaml"), stringify(settings));
    const crds = join(dir, "crds.yaml");
    writeFileSync(
      crds,
      stringify(
        crd("s3.aws.upbound.io", "Bucket", "buckets", "Cluster", [
          {
            name: "v1beta1",
            served: true,
            storage: true,
            schema: { openAPIV3Schema: { type: "object", properties: { spec: { type: "object" }, status: { type: "object" } } } },
          },
        ]),
      ),
    );

    // Nothing to answer with: one call, compared as it is, and the failure says what the request lacks and how to give it.
    const bare = await xfnTest(join(dir, "cases"));
    assert.is(bare.code, 1);
    assert.match(
      bare.out,
      "the function asked for resources config (v1 ConfigMap), the schema bucket (s3.aws.upbound.io/v1beta1 Bucket), which this case's request does not hold",
      bare.out,
    );
    assert.match(bare.out, "xfn test --required-resources and --required-schemas");
    // Given by the flags: called again with the answers, as Crossplane does, and the final answer compared.
    const out = sink();
    const flagged = await runTests(join(dir, "cases"), false, out.stream, {
      requiredResources: [join(dir, "required.yaml")],
      requiredSchemas: [crds],
    });
    assert.is(flagged, 0, out.text());
    // Only one of the two: the other is answered "not found", as Crossplane answers, and the case fails on it.
    const half = sink();
    assert.is(await runTests(join(dir, "cases"), false, half.stream, { requiredSchemas: [crds] }), 1);
    assert.match(half.text(), "region: none");
    // Beside request.yaml, as a pipeline case holds them.
    cpSync(join(dir, "required.yaml"), join(kase, "required.yaml"));
    cpSync(crds, join(kase, "schemas.yaml"));
    const beside = await xfnTest(join(dir, "cases"));
    assert.is(beside.code, 0, beside.out);
    // A path that is not there is refused before any case runs.
    const missing = sink();
    assert.is(await runTests(join(dir, "cases"), false, missing.stream, { requiredSchemas: [join(dir, "nope.yaml")] }), 1);
    assert.match(missing.text(), /^xfn test: .*nope\.yaml/);
  },
);

T(
  "an inspected step's clock: a time the function wrote between case.yaml's now and until matches the replay's, and only then",
  async () => {
    const dir = join(scratch, "clock");
    mkdirSync(join(dir, "cases/step"), { recursive: true });
    writeFileSync(
      join(dir, "index.ts"),
      `import { defineFunction, response } from ${JSON.stringify(join(ROOT, "src/index.ts"))};\n` +
        `export default defineFunction((req, ctx) => {\n` +
        `  const rsp = response.to(req);\n` +
        `  const t = ctx.now().toISOString();\n` +
        `  response.setDesiredCompositeStatus(rsp, { at: t, second: t.replace(/\\.\\d+Z$/, "Z"), label: "fixed" });\n` +
        `  return rsp;\n});\n`,
    );
    const kase = join(dir, "cases/step");
    writeFileSync(join(kase, "request.yaml"), "{}\n");
    const check = async (caseYaml: object, status: object) => {
      writeFileSync(join(kase, "case.yaml"), stringify({ function: join(dir, "index.ts"), ...caseYaml }));
      writeFileSync(join(kase, "expected.yaml"), stringify({ desired: { composite: { resource: { status } } } }));
      return xfnTest(join(dir, "cases"));
    };
    const window = { now: "2026-11-27T10:00:00.900Z", until: "2026-11-27T10:00:01.100Z" };
    // Read 62 ms after the step began, in the cluster: matches. So does a time written to the second, at 10:00:01.
    assert.is((await check(window, { at: "2026-11-27T10:00:00.962Z", second: "2026-11-27T10:00:01Z" })).code, 0);
    // Outside the window, either side: a failure naming the field.
    for (const at of ["2026-11-27T10:00:01.101Z", "2026-11-27T10:00:00.899Z"]) {
      const r = await check(window, { at });
      assert.is(r.code, 1, at);
      assert.match(r.out, `$.desired.composite.resource.status.at: expected "${at}", got "2026-11-27T10:00:00.900Z"`);
    }
    // Only times: another value is compared as it is.
    assert.is((await check(window, { label: "2026-11-27T10:00:00.950Z" })).code, 1);
    // Without until (a case written by hand, or by --record-dir, whose clock is exact): no window.
    assert.is((await check({ now: window.now }, { at: "2026-11-27T10:00:00.962Z" })).code, 1);
    // Bad windows are refused, naming the key.
    const noNow = await check({ until: window.until }, {});
    assert.match(noNow.out, "until goes with now, and is not before it");
    const backwards = await check({ now: window.until, until: window.now }, {});
    assert.match(backwards.out, "until goes with now, and is not before it");
    assert.match((await check({ now: window.now, until: "soon" }, {})).out, 'until "soon" is not an RFC 3339 time');
  },
);
T.run();
