// The Crossplane package file, written and read as crossplane writes and
// reads it: cases ported from crossplane-runtime 4e7ed235565d24a6f6ad255aeacb82f09973b875
// (pkg/xpkg/build_test.go TestBuildExamples, lint_test.go TestOneMeta,
// TestIsFunction, TestPackageValidSemver, TestIsCRD; client.go
// ExtractPackageYAML), and the image tarball format of go-containerregistry
// 3f4ff3ca60f51c876ac4bd89e9a787157aaa4f15 (pkg/v1/tarball/write.go).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { gunzipSync } from "node:zlib";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parseAllDocuments } from "yaml";
import { appendLayers, emptyImage, layerOf, readImageTarball, tarOf, writeImageTarball } from "../../src/xpkg/image.js";
import { readPackage } from "../../src/xpkg/package.js";
import { readXpkg, writeXpkg } from "../../src/xpkg/xpkg.js";

const X = suite("xpkg: the Crossplane package file");

let dir: string;
X.before.each(() => {
  dir = mkdtempSync(join(tmpdir(), "xfn-xpkg-"));
});
X.after.each(() => rmSync(dir, { recursive: true, force: true }));

/** write writes files (path: text) under dir. */
function write(files: Record<string, string>): void {
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, p)), { recursive: true });
    writeFileSync(join(dir, p), text);
  }
}

const META =
  "apiVersion: meta.pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-test\nspec:\n  crossplane:\n    version: '>=v1.17.0-0'\n";
const CRD =
  "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: inputs.test.example.org\n" +
  "spec:\n  group: test.example.org\n  names: {kind: Input, plural: inputs}\n  scope: Namespaced\n  versions: []\n";
const EX1 = "apiVersion: example.org/v1\nkind: XR\nmetadata:\n  name: one\n";
const EX2 = "apiVersion: example.org/v1\nkind: XR\nmetadata:\n  name: two\n";

/** contents reads what a written .xpkg holds: its config labels by value, and package.yaml and the examples file from its layers. */
async function contents(file: string) {
  const img = await readImageTarball(file);
  const labels = (img.config["config"] as any)?.Labels ?? {};
  const files = new Map<string, string>();
  const { default: tar } = await import("tar-stream");
  for (const l of img.layers) {
    const extract = tar.extract();
    const done = new Promise<void>((r) => extract.on("finish", () => r()));
    extract.on("entry", (h, s, next) => {
      const chunks: Buffer[] = [];
      s.on("data", (c: unknown) => chunks.push(c as Buffer));
      s.on("end", () => (files.set(h.name, Buffer.concat(chunks).toString()), next()));
    });
    extract.end(gunzipSync(l.compressed));
    await done;
  }
  return { img, labels, files };
}

// TestBuildExamples: the package layer always, the examples layer when there are examples, each labelled.
const examplesCases: Record<string, { files: Record<string, string>; examples: string; wantExamples: boolean }> = {
  SuccessNoExamples: {
    files: { "package/crossplane.yaml": META, "package/crds/crd.yaml": CRD },
    examples: "examples",
    wantExamples: false,
  },
  SuccessExamplesAtRoot: {
    files: { "package/crossplane.yaml": META, "package/crds/crd.yaml": CRD, "examples/a/one.yaml": EX1, "examples/two.yaml": EX2 },
    examples: "examples",
    wantExamples: true,
  },
  SuccessExamplesAtCustomDir: {
    files: { "package/crossplane.yaml": META, "package/crds/crd.yaml": CRD, "other/examples/one.yml": EX1 },
    examples: "other/examples",
    wantExamples: true,
  },
};
for (const [name, tc] of Object.entries(examplesCases)) {
  X(`build: ${name}`, async () => {
    write(tc.files);
    const out = join(dir, "p.xpkg");
    const w = await writeXpkg({ packageRoot: join(dir, "package"), examplesRoot: join(dir, tc.examples), out });
    assert.equal([w.name, w.layers, w.examples], ["function-test", tc.wantExamples ? 2 : 1, tc.wantExamples]);
    const { img, labels, files } = await contents(out);
    assert.equal(Object.values(labels).sort(), tc.wantExamples ? ["base", "upbound"] : ["base"]);
    for (const l of img.layers) assert.ok(labels[`io.crossplane.xpkg:${l.digest}`], `layer ${l.digest} is labelled`);
    assert.ok(files.get("package.yaml")!.length > 0);
    assert.is(files.has(".up/examples.yaml"), tc.wantExamples);
    if (name === "SuccessExamplesAtRoot") {
      // The files in lexical order, each ended and separated as crossplane's file reader streams them.
      assert.is(files.get(".up/examples.yaml"), `${EX1}\n...\n\n---\n${EX2}\n...\n\n---\n`);
    }
  });
}

X("package.yaml: a separator, the meta, then each object followed by a separator; keys sorted", async () => {
  write({ "package/crossplane.yaml": META, "package/input/crd.yaml": CRD });
  const out = join(dir, "p.xpkg");
  await writeXpkg({ packageRoot: join(dir, "package"), out });
  const yaml = (await contents(out)).files.get("package.yaml")!;
  assert.ok(yaml.startsWith("---\napiVersion: meta.pkg.crossplane.io/v1\nkind: Function\n"), yaml);
  assert.ok(yaml.endsWith("---\n"));
  const docs = parseAllDocuments(yaml)
    .map((d) => d.toJS())
    .filter((d) => d !== null);
  assert.equal(
    docs.map((d: any) => d.kind),
    ["Function", "CustomResourceDefinition"],
  );
  assert.equal(Object.keys(docs[1].spec), ["group", "names", "scope", "versions"]);
});

X("the same package, the same bytes", async () => {
  write({ "package/crossplane.yaml": META, "package/input/crd.yaml": CRD });
  await writeXpkg({ packageRoot: join(dir, "package"), out: join(dir, "a.xpkg") });
  await writeXpkg({ packageRoot: join(dir, "package"), out: join(dir, "b.xpkg") });
  assert.ok(readFileSync(join(dir, "a.xpkg")).equals(readFileSync(join(dir, "b.xpkg"))));
});

// TestOneMeta, TestIsFunction, TestPackageValidSemver, TestIsCRD: a Function package and what its linter refuses.
const lintCases: Record<string, { files: Record<string, string>; want?: RegExp }> = {
  Successful: { files: { "crossplane.yaml": META, "crd.yaml": CRD } },
  SuccessfulV1beta1Function: { files: { "crossplane.yaml": META.replace("meta.pkg.crossplane.io/v1", "meta.pkg.crossplane.io/v1beta1") } },
  ErrNoMeta: { files: { "crd.yaml": CRD }, want: /^not exactly one package meta type \(found 0\)$/ },
  ErrMultiMeta: {
    files: { "crossplane.yaml": META, "again.yaml": META.replace("function-test", "function-again") },
    want: /^not exactly one package meta type \(found 2\)$/,
  },
  ErrNotFunction: {
    files: { "crossplane.yaml": "apiVersion: meta.pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-x\n" },
    want: /^package meta type is not Function \(it is a Provider\)$/,
  },
  ErrInvalidConstraints: {
    files: { "crossplane.yaml": META.replace(">=v1.17.0-0", ">a0.13.0") },
    want: /^package version constraints are poorly formatted: spec\.crossplane\.version ">a0\.13\.0"$/,
  },
  ValidConstraints: { files: { "crossplane.yaml": META.replace(">=v1.17.0-0", ">v0.13.0, <v3") } },
  ErrNotCRD: {
    files: {
      "crossplane.yaml": META,
      "xrd.yaml": "apiVersion: apiextensions.crossplane.io/v1\nkind: CompositeResourceDefinition\nmetadata:\n  name: xs.example.org\n",
    },
    want: /^object is not a CRD: CompositeResourceDefinition xs\.example\.org \(apiextensions\.crossplane\.io\/v1\)$/,
  },
  ErrKindNotRegistered: {
    files: { "crossplane.yaml": META, "cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n" },
    want: /^cm\.yaml: no kind "ConfigMap" is registered for version "v1" in the package scheme$/,
  },
  ErrNoKind: { files: { "crossplane.yaml": META, "bad.yaml": "just: a map\n" }, want: /^bad\.yaml: Object 'Kind' is missing/ },
  ErrNotYAML: { files: { "crossplane.yaml": META, "bad.yaml": "a: [unclosed\n" }, want: /^bad\.yaml: / },
};
for (const [name, tc] of Object.entries(lintCases)) {
  X(`lint: ${name}`, () => {
    write(Object.fromEntries(Object.entries(tc.files).map(([k, v]) => [`package/${k}`, v])));
    try {
      const p = readPackage(join(dir, "package"));
      assert.not.ok(tc.want, `accepted; wanted ${tc.want}`);
      assert.is(p.meta["kind"], "Function");
    } catch (err) {
      if (!tc.want) throw err;
      assert.match((err as Error).message, tc.want);
    }
  });
}

X("files other than YAML, empty files and the examples folder inside the package root are not read", () => {
  write({
    "package/crossplane.yaml": META,
    "package/README.md": "not yaml",
    "package/empty.yaml": "",
    "package/examples/xr.yaml": EX1,
  });
  const p = readPackage(join(dir, "package"), join(dir, "package", "examples"));
  assert.equal(p.objects, []);
  assert.is(p.examplesYaml, `${EX1}\n...\n\n---\n`);
});

X("embedded runtime: its layers and config first, its labels kept, the package layer on top, checked against its diff IDs", async () => {
  const base = await layerOf(await tarOf([{ name: "usr/bin/hello", mode: 0o755, content: "#!/bin/sh\n" }]));
  const runtime = appendLayers(
    {
      config: {
        architecture: "amd64",
        os: "linux",
        rootfs: { type: "layers", diff_ids: [] },
        config: { Labels: { a: "b" }, User: "2000:2000" },
      },
      layers: [],
    },
    [base],
    {},
  );
  await writeImageTarball(runtime, join(dir, "runtime.tar"));
  write({ "package/crossplane.yaml": META });
  const out = join(dir, "p.xpkg");
  const w = await writeXpkg({ packageRoot: join(dir, "package"), runtimeTarball: join(dir, "runtime.tar"), out });
  assert.is(w.layers, 2);
  const { img, labels, files } = await contents(out);
  assert.is(img.layers[0]!.digest, base.digest, "the runtime's layer first, as it was");
  assert.equal([img.config["os"], (img.config["config"] as any).User, labels["a"]], ["linux", "2000:2000", "b"]);
  assert.is(labels[`io.crossplane.xpkg:${img.layers[1]!.digest}`], "base");
  assert.equal([...files.keys()].sort(), ["package.yaml", "usr/bin/hello"]);
  // Read back as Crossplane reads it.
  const back = await readXpkg(out);
  assert.is((back.meta["metadata"] as any).name, "function-test");
});

X("an uncompressed docker-archive layer (podman save) is compressed; its diff ID is its own digest", async () => {
  const tarBytes = await tarOf([{ name: "f", mode: 0o644, content: "x" }]);
  const layer = layerOf(tarBytes);
  assert.is(layer.diffId, layerOf(layer.compressed).diffId);
  assert.is.not(layer.digest, layer.diffId);
  assert.ok(gunzipSync(layer.compressed).equals(tarBytes));
});

// What a runtime tarball must be, each refused naming why.
const badTarballs: Record<string, { make: () => Promise<Buffer>; want: RegExp }> = {
  NotATar: { make: async () => Buffer.from("hello, not a tar file"), want: /is not (a tar file|an image tarball)/ },
  NoManifest: { make: () => tarOf([{ name: "x", mode: 0o644, content: "y" }]), want: /is not an image tarball: it has no manifest\.json/ },
  TwoImages: {
    make: () => tarOf([{ name: "manifest.json", mode: 0o644, content: JSON.stringify([{}, {}]) }]),
    want: /must describe exactly one image \(it describes 2\)/,
  },
  MissingLayer: {
    make: () =>
      tarOf([
        { name: "c.json", mode: 0o644, content: "{}" },
        { name: "manifest.json", mode: 0o644, content: JSON.stringify([{ Config: "c.json", Layers: ["l.tar"] }]) },
      ]),
    want: /manifest\.json names l\.tar, which the tarball does not hold/,
  },
  DiffIdMismatch: {
    make: async () =>
      tarOf([
        { name: "c.json", mode: 0o644, content: JSON.stringify({ rootfs: { type: "layers", diff_ids: ["sha256:00"] } }) },
        { name: "l.tar", mode: 0o644, content: await tarOf([{ name: "f", mode: 0o644, content: "x" }]) },
        { name: "manifest.json", mode: 0o644, content: JSON.stringify([{ Config: "c.json", Layers: ["l.tar"] }]) },
      ]),
    want: /the layers' contents do not match the image config's rootfs\.diff_ids/,
  },
};
for (const [name, tc] of Object.entries(badTarballs)) {
  X(`runtime tarball refused: ${name}`, async () => {
    writeFileSync(join(dir, "runtime.tar"), await tc.make());
    write({ "package/crossplane.yaml": META });
    try {
      await writeXpkg({ packageRoot: join(dir, "package"), runtimeTarball: join(dir, "runtime.tar"), out: join(dir, "p.xpkg") });
      assert.unreachable("accepted");
    } catch (err) {
      assert.match((err as Error).message, tc.want);
    }
  });
}

// ExtractPackageYAML: the layer labelled base, else every layer flattened; no package.yaml is an error.
X("read: without a labelled layer the layers are flattened; without package.yaml anywhere, refused", async () => {
  const pkgYaml = `---\n${META}---\n`;
  const unlabelled = appendLayers(emptyImage(), [layerOf(await tarOf([{ name: "pkg/package.yaml", mode: 0o644, content: pkgYaml }]))], {});
  await writeImageTarball(unlabelled, join(dir, "flat.xpkg"));
  assert.is(((await readXpkg(join(dir, "flat.xpkg"))).meta["metadata"] as any).name, "function-test");
  const none = appendLayers(emptyImage(), [layerOf(await tarOf([{ name: "other.yaml", mode: 0o644, content: pkgYaml }]))], {});
  await writeImageTarball(none, join(dir, "none.xpkg"));
  try {
    await readXpkg(join(dir, "none.xpkg"));
    assert.unreachable("read");
  } catch (err) {
    assert.match((err as Error).message, /none\.xpkg: package\.yaml not found in package$/);
  }
  const provider = appendLayers(
    emptyImage(),
    [
      layerOf(
        await tarOf([
          { name: "package.yaml", mode: 0o644, content: "apiVersion: meta.pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p}\n" },
        ]),
      ),
    ],
    {},
  );
  await writeImageTarball(provider, join(dir, "provider.xpkg"));
  try {
    await readXpkg(join(dir, "provider.xpkg"));
    assert.unreachable("read");
  } catch (err) {
    assert.match((err as Error).message, /package meta type is not Function/);
  }
});

X("the tarball as go-containerregistry writes it: config sha256:<hex>, layers <hex>.tar.gz, manifest.json last, no tag", async () => {
  write({ "package/crossplane.yaml": META });
  const out = join(dir, "p.xpkg");
  const w = await writeXpkg({ packageRoot: join(dir, "package"), out });
  const { default: tar } = await import("tar-stream");
  const names: string[] = [];
  let manifest = "";
  const extract = tar.extract();
  const done = new Promise<void>((r) => extract.on("finish", () => r()));
  extract.on("entry", (h, s, next) => {
    names.push(h.name);
    const chunks: Buffer[] = [];
    s.on("data", (c: unknown) => chunks.push(c as Buffer));
    s.on("end", () => {
      if (h.name === "manifest.json") manifest = Buffer.concat(chunks).toString();
      next();
    });
  });
  extract.end(readFileSync(out));
  await done;
  assert.is(names.length, 3);
  assert.is(names[0], w.configDigest);
  assert.match(names[1]!, /^[0-9a-f]{64}\.tar\.gz$/);
  assert.is(names[2], "manifest.json");
  assert.equal(JSON.parse(manifest), [{ Config: w.configDigest, RepoTags: null, Layers: [names[1]] }]);
});

X.run();
