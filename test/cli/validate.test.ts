// `xfn validate` as a process: its exit status, where its words go, an output
// format it does not know refused naming the ones it does (crossplane's
// TestParseRejectsUnknownOutputFormat), and its help.
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { run } from "../support/spawn.js";

const C = suite("cli: xfn validate");
const F = "test/fixtures/validate";

C("valid: exit 0, the report on stdout, nothing on stderr; invalid: exit 1, the reason on stderr", async () => {
  const ok = await run(["validate", join(F, "schemas"), join(F, "valid.yaml")]);
  assert.is(ok.code, 0, ok.stderr);
  assert.is(ok.stderr, "");
  assert.match(ok.stdout, "Total 2 resources: 0 missing schemas, 2 success cases, 0 failure cases");
  const bad = await run(["validate", join(F, "schemas"), `${join(F, "valid.yaml")},${join(F, "invalid.yaml")}`, "-o", "json"]);
  assert.is(bad.code, 1);
  assert.is(bad.stderr, "xfn validate: could not validate all resources\n");
  assert.equal(JSON.parse(bad.stdout).summary, { total: 5, valid: 2, invalid: 3, missingSchemas: 0 });
});

C("--output xml is refused before anything is read; a missing argument names itself", async () => {
  const xml = await run(["validate", join(F, "schemas"), join(F, "valid.yaml"), "--output=xml"]);
  assert.is(xml.code, 1);
  assert.match(xml.stderr, 'unknown output format: "xml" (text, json or yaml)');
  assert.is(xml.stdout, "");
  const one = await run(["validate", join(F, "schemas")]);
  assert.is(one.code, 1);
  assert.match(one.stderr, "missing required argument 'resources'");
});

C("stdin: more than 256 MiB (yes piped in) is refused with a clear error, not read to the end", async () => {
  const { spawn } = await import("node:child_process");
  const started = Date.now();
  const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = spawn("bash", ["-c", `yes | ${JSON.stringify(process.execPath)} bin/xfn.js validate ${join(F, "schemas")} -`]);
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ code, stderr }));
  });
  assert.ok(Date.now() - started < 60_000, `took ${Date.now() - started} ms`);
  assert.is(r.code, 1);
  assert.match(
    r.stderr,
    `xfn validate: cannot load resources from "-": cannot read standard input: it holds more than 256 MiB, the most read from it`,
  );
});

C("xfn --help lists validate", async () => {
  const h = await run(["--help"]);
  assert.match(h.stdout, /validate \[options\] <extensions> <resources>/);
});

C.run();
