// xfn package: what it refuses, with a clear error and exit code 1 (a bundle
// that starts and answers is test/e2e/packages.test.ts and test/e2e/adopt.test.ts).
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ROOT, run } from "../support/spawn.js";

const K = suite("cli: xfn package");
let scratch: string;
K.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-package-"));
  mkdirSync(join(scratch, "fn"));
  writeFileSync(join(scratch, "fn", "index.mjs"), "export default (req) => req;\n");
  writeFileSync(join(scratch, "fn", "keep.txt"), "mine\n");
  mkdirSync(join(scratch, "empty"));
  mkdirSync(join(scratch, "badmeta", "package"), { recursive: true });
  writeFileSync(join(scratch, "badmeta", "index.mjs"), "export default (req) => req;\n");
  writeFileSync(join(scratch, "badmeta", "package", "crossplane.yaml"), "metadata: [unclosed\n");
  // Functions whose package/ holds links: out of the folder, nowhere, in a loop; or the whole package/ a link out.
  const linked = (name: string, links: Record<string, string>) => {
    mkdirSync(join(scratch, name, "package", "examples"), { recursive: true });
    writeFileSync(join(scratch, name, "index.mjs"), "export default (req) => req;\n");
    writeFileSync(
      join(scratch, name, "package", "crossplane.yaml"),
      `apiVersion: meta.pkg.crossplane.io/v1\nkind: Function\nmetadata: {name: ${name}}\n`,
    );
    for (const [at, to] of Object.entries(links)) symlinkSync(to, join(scratch, name, at));
  };
  writeFileSync(join(scratch, "secret.txt"), "s3cr3t\n");
  linked("leak", { "package/examples/hostname": "/etc/hostname" });
  linked("leakup", { "package/examples/secret.yaml": "../../../secret.txt" });
  linked("dangling", { "package/examples/gone.yaml": "nowhere.yaml" });
  linked("loop", { "package/examples/a": "b", "package/examples/b": "a" });
  mkdirSync(join(scratch, "wholelink"));
  writeFileSync(join(scratch, "wholelink", "index.mjs"), "export default (req) => req;\n");
  symlinkSync(join(scratch, "badmeta", "package"), join(scratch, "wholelink", "package"));
  // A link that stays inside the folder is fine: the package holds the file it leads to.
  linked("inside", { "package/examples/xr.yaml": "../../xr.yaml" });
  writeFileSync(join(scratch, "inside", "xr.yaml"), "kind: XR\n");
  // The examples --xpkg adds: a link out of examples/ is refused as one out of package/ is.
  linked("exleak", {});
  mkdirSync(join(scratch, "exleak", "examples"));
  writeFileSync(join(scratch, "exleak", "examples", "xr.yaml"), "apiVersion: x/v1\nkind: XR\n");
  symlinkSync(join(scratch, "secret.txt"), join(scratch, "exleak", "examples", "secret.yaml"));
  linked("exroot", {});
  mkdirSync(join(scratch, "outside-examples"));
  symlinkSync(join(scratch, "secret.txt"), join(scratch, "outside-examples", "leak.yaml"));
});
K.after(() => rmSync(scratch, { recursive: true, force: true }));

const cases: Record<string, { args: string[]; want: RegExp }> = {
  NoSuchFolder: { args: ["nope"], want: /xfn package: cannot load function module .*nope: no such file or directory/ },
  NoModule: { args: ["empty"], want: /xfn package: cannot load function module .*empty: the directory has no package\.json main/ },
  OutIsTheFunction: { args: ["fn", "--out", "fn"], want: /xfn package: cannot package into fn: it would empty the function's own folder/ },
  OutHoldsTheFunction: {
    args: ["fn", "--out", "."],
    want: /xfn package: cannot package into \.: it would empty the function's own folder/,
  },
  BrokenMetadata: { args: ["badmeta", "--out", "out"], want: /xfn package: cannot read .*badmeta\/package\/crossplane\.yaml/ },
  LinkOutOfTheFolder: {
    args: ["leak", "--out", "out"],
    want: /xfn package: refusing to package package\/examples\/hostname: a symbolic link to \/etc\/hostname, outside the function's folder/,
  },
  LinkUpAndOut: {
    args: ["leakup", "--out", "out"],
    want: /xfn package: refusing to package package\/examples\/secret\.yaml: a symbolic link to \S*\/secret\.txt, outside/,
  },
  LinkToNothing: {
    args: ["dangling", "--out", "out"],
    want: /xfn package: refusing to package package\/examples\/gone\.yaml: a symbolic link to nowhere\.yaml, which does not exist/,
  },
  LinksInALoop: {
    args: ["loop", "--out", "out"],
    want: /xfn package: refusing to package package\/examples\/a: a symbolic link to b, which loops/,
  },
  ExamplesLinkedOut: {
    args: ["exleak", "--out", "out-exleak", "--xpkg", "exleak.xpkg"],
    want: /xfn package: refusing to package secret\.yaml: a symbolic link to \S*\/secret\.txt, outside \S*exleak\/examples/,
  },
  ExamplesRootLinkedOut: {
    args: ["exroot", "--out", "out-exroot", "--xpkg", "exroot.xpkg", "--examples-root", "outside-examples"],
    want: /xfn package: refusing to package leak\.yaml: a symbolic link to \S*\/secret\.txt, outside \S*outside-examples/,
  },
  PackageFolderLinkedOut: {
    args: ["wholelink", "--out", "out"],
    want: /xfn package: refusing to package package: a symbolic link to \S*\/badmeta\/package, outside/,
  },
};
for (const [name, tc] of Object.entries(cases)) {
  K(`refused, exit code 1: ${name}`, async () => {
    const r = await run(["package", ...tc.args], { cwd: scratch });
    assert.is(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, tc.want);
    assert.ok(existsSync(join(scratch, "fn", "keep.txt")), "nothing of the function's folder was removed");
    assert.not.match(r.stdout + r.stderr, /s3cr3t/);
  });
}

K("a link inside the function's folder is packaged as the file it leads to", async () => {
  const out = join(scratch, "inside-out");
  const r = await run(["package", "inside", "--out", out], { cwd: scratch });
  assert.is(r.code, 0, r.stderr);
  const copied = join(out, "package", "examples", "xr.yaml");
  assert.not.ok(lstatSync(copied).isSymbolicLink(), "a file, not a link");
  assert.is(readFileSync(copied, "utf8"), "kind: XR\n");
});

K("a bundle holds what its function uses: no CEL library for a function without CEL steps, no esbuild", async () => {
  const out = join(scratch, "hello-out");
  const r = await run(["package", join(ROOT, "functions/hello"), "--out", out]);
  assert.is(r.code, 0, r.stderr);
  const text = readFileSync(join(out, "server.mjs"), "utf8");
  assert.ok(text.includes("// node_modules/@grpc/grpc-js/"), "the server is in the bundle");
  // The entry only starts the first worker and loads the server: it must not parse the server's megabytes itself.
  const entry = readFileSync(join(out, "function.mjs"), "utf8");
  assert.ok(entry.length < 20_000, `function.mjs is ${entry.length} characters`);
  assert.not.ok(entry.includes("// node_modules/"), "function.mjs bundles packages");
  // Left in by every module's top-level code until package.json said "sideEffects": false.
  assert.not.ok(text.includes("// node_modules/@marcbachmann/cel-js/"), "cel-js is bundled, though hello uses no CEL");
  assert.not.ok(text.includes("// node_modules/esbuild/"), "esbuild's JavaScript is bundled, though a bundle never compiles");
  // OpenTelemetry is otel.mjs beside it, loaded only when the OTEL_ variables ask for traces (test/telemetry/otel.test.ts runs it).
  assert.not.ok(text.includes("// node_modules/@opentelemetry/sdk-trace-base/"), "the OpenTelemetry SDK is in server.mjs");
  assert.ok(readFileSync(join(out, "otel.mjs"), "utf8").includes("// node_modules/@opentelemetry/sdk-trace-base/"));
});

K.run();
