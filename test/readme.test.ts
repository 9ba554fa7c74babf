// The README's tutorial function must work as written.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { loadFunction } from "../src/cli/load.js";
import { Severity } from "../src/gen/fn/v1/run_function_pb.js";
import { memoryLog } from "./support/log.js";
import { request } from "./support/requests.js";
import { run } from "./support/spawn.js";

const root = join(import.meta.dirname, "..");
const Readme = suite("README");

Readme("the tutorial's greeter function runs as written", async () => {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const code = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(code, "README has a ts code block");
  // Inside the repository, so that `from "xfn-runtime"` resolves as the README says.
  const dir = join(root, ".tmp", `readme-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  try {
    writeFileSync(join(dir, "index.ts"), code);
    const fn = await loadFunction(dir);
    const ctx = { signal: new AbortController().signal, log: memoryLog().log, now: () => new Date() };

    const ok = await fn(request({ observed: { composite: { resource: { kind: "X", spec: { name: "ada" } } } } }), ctx);
    assert.equal(ok.desired?.resources["greeting"]?.resource?.["data"], { greeting: "hello, ada" });
    assert.equal(ok.desired?.composite?.resource, { status: { greeted: "ada" } });

    const bad = await fn(request({ observed: { composite: { resource: { kind: "X", spec: {} } } } }), ctx);
    assert.is(bad.results[0]?.severity, Severity.FATAL);
    assert.is(bad.results[0]?.message, "spec.name is required");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

Readme("the pipeline example runs as written: the subnet waits for the VPC's ID", async () => {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const code = /```ts pipeline\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(code, "README has the pipeline example");
  const dir = join(root, ".tmp", `readme-pipeline-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  try {
    writeFileSync(join(dir, "index.ts"), code);
    const fn = await loadFunction(dir);
    const ctx = { signal: new AbortController().signal, log: memoryLog().log, now: () => new Date("2026-01-01T00:00:00Z") };
    const first = await fn(request(), ctx);
    assert.equal(Object.keys(first.desired!.resources), ["vpc"]);
    assert.ok(
      first.results.some((r) => r.message === "subnet: waiting for vpc to be ready, vpc.status.atProvider.id; not creating it yet"),
    );
    const vpc = { kind: "VPC", status: { atProvider: { id: "vpc-1" }, conditions: [{ type: "Ready", status: "True" }] } };
    const later = await fn(request({ observed: { composite: { resource: { kind: "X" } }, resources: { vpc: { resource: vpc } } } }), ctx);
    assert.equal(Object.keys(later.desired!.resources).sort(), ["subnet", "vpc"]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

Readme("every xfn render and xfn test command the README shows succeeds", async () => {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const commands = [...readme.matchAll(/^npx xfn (render|test) (.*)$/gm)].map((m) => [m[1]!, ...m[2]!.split(/\s+/)]);
  assert.ok(commands.length >= 3, `found ${commands.length} commands`);
  for (const args of commands) {
    const r = await run(args);
    assert.is(r.code, 0, `xfn ${args.join(" ")}: ${r.stderr}`);
    if (args[0] === "render") assert.match(r.stdout, /crossplane\.io\/composition-resource-name: bucket-assets/);
    else assert.match(r.stdout, /^\d+ passed, 0 failed$/m);
  }
});

Readme("the first lines give the two commands, and .ci/run runs the same test command", () => {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const block = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
  const [setup, tests] = block
    .trim()
    .split("\n")
    .map((l) => l.split("#")[0]!.trim());
  assert.is(setup, "npm ci && npx xfn serve functions/hello --insecure");
  assert.is(tests, "npm test");
  const ci = readFileSync(join(root, ".ci/run"), "utf8");
  assert.match(ci, /^npm ci/m);
  assert.match(ci, /^npm test$/m);
});

Readme.run();
