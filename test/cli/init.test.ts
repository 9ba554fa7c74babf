// xfn init: the project it writes (the whole install-and-use story is
// test/e2e/adopt.test.ts, from outside the repository).
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parseAllDocuments } from "yaml";
import { initProject, runtimeSpec } from "../../src/cli/init.js";
import { readPackage } from "../../src/xpkg/package.js";
import { run } from "../support/spawn.js";

const I = suite("cli: xfn init");
let scratch: string;
I.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-init-"));
});
I.after(() => rmSync(scratch, { recursive: true, force: true }));

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => (statSync(join(dir, n)).isDirectory() ? walk(join(dir, n)) : [join(dir, n)]));
}

I("fills every placeholder: names from the folder or --name, the runtime version, the image", async () => {
  const dir = join(scratch, "function-db");
  await initProject({ dir, image: "ghcr.io/acme/function-db" });
  for (const f of walk(dir)) assert.not.match(readFileSync(f, "utf8"), /\{\{\w+\}\}/, `${relative(dir, f)} keeps a placeholder`);
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const own = JSON.parse(readFileSync(join(import.meta.dirname, "../../package.json"), "utf8"));
  assert.is(pkg.name, "function-db");
  assert.is(pkg.dependencies["xfn-runtime"], `^${own.version}`);
  assert.is(pkg.devDependencies.typescript, own.devDependencies.typescript);
  assert.match(readFileSync(join(dir, "examples/functions.yaml"), "utf8"), /package: ghcr\.io\/acme\/function-db:v0\.1\.0/);
  assert.ok(existsSync(join(dir, "package/input/db.fn.example.org_inputs.yaml")));
  assert.ok(existsSync(join(dir, ".gitignore")) && existsSync(join(dir, ".dockerignore")));

  const named = join(scratch, "anything");
  // A tarball path is the user's, from where they run xfn init; package.json gets it from the new folder.
  await initProject({ dir: named, name: "net", runtime: "file:../xfn-runtime.tgz" });
  const p2 = JSON.parse(readFileSync(join(named, "package.json"), "utf8"));
  assert.is(p2.name, "function-net");
  assert.is(p2.dependencies["xfn-runtime"], `file:${relative(named, resolve(process.cwd(), "../xfn-runtime.tgz"))}`);
});

I(
  "the package's examples are examples/, where xfn package --xpkg (and crossplane xpkg build) read them: Kubernetes objects only",
  async () => {
    const dir = join(scratch, "function-ex");
    await initProject({ dir });
    const read = readPackage(join(dir, "package"), join(dir, "examples"));
    assert.ok(read.examplesYaml, "the .xpkg would have no examples");
    const kinds = parseAllDocuments(read.examplesYaml!)
      .map((d) => d.toJS() as Record<string, unknown> | null)
      .filter((d) => d !== null);
    assert.equal(kinds.map((k) => k!["kind"]).sort(), ["Composition", "Function", "XBuckets"]);
    assert.ok(existsSync(join(dir, "testdata/request.yaml")), "xfn call's request, outside the package's examples");
    assert.not.ok(existsSync(join(dir, "example")));
    // The scaffold's own commands name the folders it has.
    const text = ["README.md", "package.json", "testdata/request.yaml"].map((f) => readFileSync(join(dir, f), "utf8")).join("\n");
    assert.not.match(text, /\bexample\//);
    assert.match(
      readFileSync(join(dir, "README.md"), "utf8"),
      /npx xfn package --xpkg function-ex\.xpkg --embed-runtime-image-tarball runtime\.tar/,
    );
    assert.not.match(readFileSync(join(dir, "README.md"), "utf8"), /crossplane xpkg build/);
    const ignored = readFileSync(join(dir, ".gitignore"), "utf8").split("\n");
    for (const p of ["*.xpkg", "*.tar", "dist/", "node_modules/"]) assert.ok(ignored.includes(p), `.gitignore lacks ${p}`);
  },
);

I("--runtime: a version range as given; a local path, typed from the current folder, written from the new one", () => {
  const cases: Array<[string, string, string]> = [
    ["^0.2.0", "/w/a/fn", "^0.2.0"],
    ["0.1.x", "/w/a/fn", "0.1.x"],
    ["./xfn-runtime-0.1.0.tgz", "/w/a/fn", "file:../xfn-runtime-0.1.0.tgz"],
    ["xfn-runtime-0.1.0.tgz", "/w/a/fn", "file:../xfn-runtime-0.1.0.tgz"],
    ["file:xfn.tgz", "/w/a/fn", "file:../xfn.tgz"],
    ["../xfn", "/w/a/deep/fn", "file:../../../xfn"],
    ["/opt/xfn.tgz", "/w/a/fn", "file:../../../opt/xfn.tgz"],
    ["./fn/vendor/xfn.tgz", "/w/a/fn", "file:./vendor/xfn.tgz"],
  ];
  for (const [spec, dir, want] of cases) assert.is(runtimeSpec(spec, dir, "/w/a"), want, spec);
});

I("refuses a folder that is not empty, and a name that is not a DNS label, writing nothing", async () => {
  const full = join(scratch, "full");
  await initProject({ dir: full });
  writeFileSync(join(scratch, "file"), "x");
  const cases: Record<string, { args: string[]; want: RegExp }> = {
    NotEmpty: { args: [full], want: /cannot create a project in .*full: it exists and is not an empty folder/ },
    AFile: { args: [join(scratch, "file")], want: /it exists and is not an empty folder/ },
    BadName: { args: [join(scratch, "Bad_Name")], want: /cannot name the function "Bad_Name": use lowercase letters/ },
    BadFlag: { args: [join(scratch, "ok"), "--name", "x.y"], want: /cannot name the function "x\.y"/ },
  };
  for (const [name, tc] of Object.entries(cases)) {
    const r = await run(["init", ...tc.args]);
    assert.is(r.code, 1, name);
    assert.match(r.stderr, tc.want, name);
  }
  assert.not.ok(existsSync(join(scratch, "Bad_Name")));
  assert.not.ok(existsSync(join(scratch, "ok")));
});

I.run();
