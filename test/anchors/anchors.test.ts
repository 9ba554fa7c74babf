// scripts/anchors.mjs, the builder of the real anchors (issue 58): what it pins
// and the wrapper modules it would write, checked without Go. The builds
// themselves run in the real-Crossplane tier.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
// @ts-expect-error -- a plain .mjs script without types
import { binDir, build, MODULES, prune, siblingReplaces, stagingReplaces, VERSIONS } from "../../scripts/anchors.mjs";
import { needs } from "../support/needs.js";
import { ROOT } from "../support/spawn.js";

const A = suite("anchors: the real control plane's versions and wrapper modules");

A("every tool issue 58 names is built, from the module it names, at a pinned version", () => {
  const tools: Record<string, string> = {};
  for (const [name, m] of Object.entries(MODULES as Record<string, { module: string; version: string; tools: object }>)) {
    assert.match(m.version, /^v\d+\.\d+\.\d+$/, `${name} is pinned to a release`);
    // kubecel is built on a Kubernetes staging module: v0.<minor>.<patch> of the pinned Kubernetes.
    const pinned = [...Object.values(VERSIONS), (VERSIONS.kubernetes as string).replace(/^v1\./, "v0.")];
    assert.ok(pinned.includes(m.version), `${name}'s version comes from versions.json`);
    for (const t of Object.keys(m.tools)) tools[t] = m.module;
  }
  assert.equal(tools, {
    "kube-apiserver": "k8s.io/kubernetes",
    "kube-controller-manager": "k8s.io/kubernetes",
    kubectl: "k8s.io/kubernetes",
    etcd: "go.etcd.io/etcd/server/v3",
    crossplane: "github.com/crossplane/crossplane/v2",
    "crossplane-cli": "github.com/crossplane/cli/v2",
    crane: "github.com/google/go-containerregistry",
    provider: "github.com/crossplane/crossplane-runtime/v2",
    "kubecel.wasm": "k8s.io/apiextensions-apiserver",
    gosdkbench: "github.com/crossplane/function-sdk-go",
    kubeyaml: "sigs.k8s.io/yaml",
  });
  // The version string Crossplane checks packages' spec.crossplane.version against is set as its own build sets it.
  assert.ok((MODULES.crossplane.ldflags as string).includes(`crossplane-runtime/v2/pkg/version.version=${VERSIONS.crossplane}`));
  assert.ok((MODULES.kubernetes.ldflags as string).includes(`version.gitVersion=${VERSIONS.kubernetes}`));
});

A("Kubernetes' staging modules are replaced at the matching v0 version, read from its own go.mod", () => {
  // The shape of k8s.io/kubernetes v1.36.3's go.mod (its replace block), shortened.
  const goMod = [
    "module k8s.io/kubernetes",
    "replace (",
    "\tk8s.io/api => ./staging/src/k8s.io/api",
    "\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver",
    "\tk8s.io/cri-api => ./staging/src/k8s.io/cri-api",
    ")",
    "replace k8s.io/kubectl => ./staging/src/k8s.io/kubectl",
    "\tgithub.com/x/y => ./elsewhere",
  ].join("\n");
  assert.equal(stagingReplaces(goMod, "v1.36.3"), [
    "replace k8s.io/api => k8s.io/api v0.36.3",
    "replace k8s.io/apiserver => k8s.io/apiserver v0.36.3",
    "replace k8s.io/cri-api => k8s.io/cri-api v0.36.3",
    "replace k8s.io/kubectl => k8s.io/kubectl v0.36.3",
  ]);
  assert.throws(() => stagingReplaces("module k8s.io/kubernetes\n", "v1.36.3"), /names no staging modules/);
  assert.throws(() => stagingReplaces(goMod, "v1.36.3-beta.0"), /cannot derive the staging modules' version/);
});

A("a module of the same repository that the module's own build takes from its folder is taken at the same release", () => {
  // Crossplane v2.4.0's go.mod: `replace github.com/crossplane/crossplane/apis/v2 => ./apis`, while it requires
  // apis v2.3.4, which lacks v2.4.0's runtime conditions (its build failed on v1.RuntimeActive).
  const goMod =
    "module github.com/crossplane/crossplane/v2\n\nreplace github.com/crossplane/crossplane/apis/v2 => ./apis\n\nrequire (\n)\n";
  assert.equal(siblingReplaces(goMod, "v2.4.0"), [
    "replace github.com/crossplane/crossplane/apis/v2 => github.com/crossplane/crossplane/apis/v2 v2.4.0",
  ]);
  assert.equal(siblingReplaces("module x\nreplace a => b v1.0.0\n", "v1.0.0"), []);
});

A("binaries are kept in a folder keyed by the module, its version and the Go that built them", () => {
  assert.match(binDir("etcd", "go1.26.8"), new RegExp(`/bin/etcd@${VERSIONS.etcd.replace(/\./g, "\\.")}-go1\\.26\\.8$`));
  assert.is.not(binDir("etcd", "go1.26.8"), binDir("etcd", "go1.27.0"));
});

A("the test provider, built from our own source, is keyed by a hash of that source too: an edit rebuilds it", () => {
  const m = MODULES.provider as { source: string };
  const saved = m.source;
  const dir = mkdtempSync(join(tmpdir(), "xfn-anchors-src-"));
  try {
    m.source = relative(ROOT, dir);
    writeFileSync(join(dir, "main.go"), "package main\n\nfunc main() {}\n");
    writeFileSync(join(dir, "notes.txt"), "not Go: not part of the key\n");
    const first = binDir("provider", "go1.26.8");
    assert.match(first, new RegExp(`/bin/provider@${VERSIONS.crossplaneRuntime.replace(/\./g, "\\.")}-[0-9a-f]{12}-go1\\.26\\.8$`));
    writeFileSync(join(dir, "notes.txt"), "changed\n");
    assert.is(binDir("provider", "go1.26.8"), first);
    writeFileSync(join(dir, "main.go"), "package main\n\nfunc main() { println() }\n");
    assert.is.not(binDir("provider", "go1.26.8"), first);
  } finally {
    m.source = saved;
    rmSync(dir, { recursive: true, force: true });
  }
});

A("a new build of our own source removes the older ones (each was 42 MB), and nothing of another module", () => {
  const cache = mkdtempSync(join(tmpdir(), "xfn-anchors-cache-"));
  try {
    const made = [
      "bin/provider@v2.4.0-aaaaaaaaaaaa-go1.26.8",
      "bin/provider@v2.4.0-bbbbbbbbbbbb-go1.26.8",
      "bin/provider@v2.4.0-bbbbbbbbbbbb-go1.27.0",
      "bin/etcd@v3.6.16-go1.26.8",
      "modules/provider@v2.4.0-aaaaaaaaaaaa",
      "modules/provider@v2.4.0-bbbbbbbbbbbb",
      "modules/etcd@v3.6.16",
    ];
    for (const d of made) mkdirSync(join(cache, d), { recursive: true });
    prune("provider", "provider@v2.4.0-bbbbbbbbbbbb", cache);
    assert.equal(readdirSync(join(cache, "bin")).sort(), [
      "etcd@v3.6.16-go1.26.8",
      "provider@v2.4.0-bbbbbbbbbbbb-go1.26.8",
      "provider@v2.4.0-bbbbbbbbbbbb-go1.27.0",
    ]);
    assert.equal(readdirSync(join(cache, "modules")).sort(), ["etcd@v3.6.16", "provider@v2.4.0-bbbbbbbbbbbb"]);
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});

/** child runs node with args (scripts/anchors.mjs, up.ts) and env, answering its exit code and output. */
function child(args: string[], env: NodeJS.ProcessEnv): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, encoding: "utf8", timeout: 120_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** noStack says err has no line of a JavaScript stack: a user meets one line naming the cause. */
const noStack = (err: string) => assert.not.match(err, /^\s+at /m, `a stack trace:\n${err}`);

A("without Go, building an anchor fails in one line naming the go command it tried and what to install", () => {
  const cache = mkdtempSync(join(tmpdir(), "xfn-anchors-cache-"));
  try {
    const r = child(["scripts/anchors.mjs", "etcd"], { XFN_ANCHORS_GO: "/nonexistent/go", XFN_ANCHORS_CACHE: cache });
    assert.is(r.code, 1);
    assert.is(
      r.err.trim(),
      "anchors: building etcd: cannot run /nonexistent/go (ENOENT); install Go 1.26 or newer at /usr/local/go (Debian's golang-go is older)",
    );
    noStack(r.err);
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});

A("a Go older than 1.26 (Debian's golang-go) is refused by its version before anything is written", () => {
  const cache = mkdtempSync(join(tmpdir(), "xfn-anchors-cache-"));
  const old = join(cache, "old-go");
  writeFileSync(old, "#!/bin/sh\necho go1.22.2\n", { mode: 0o755 });
  try {
    const r = child(["scripts/anchors.mjs", "kubernetes"], { XFN_ANCHORS_GO: old, XFN_ANCHORS_CACHE: cache });
    assert.is(r.code, 1);
    assert.match(r.err, `anchors: building kubernetes: the anchors need Go 1.26 or newer and ${old} is go1.22.2; install Go 1.26`);
    noStack(r.err);
    assert.equal(readdirSync(cache), ["old-go"]);
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});

A("npm run crossplane:up without Go ends with exit 1 and a line saying why, printing no KUBECONFIG", () => {
  const cache = mkdtempSync(join(tmpdir(), "xfn-anchors-cache-"));
  try {
    const r = child(["--import", "tsx", "test/crossplane/up.ts"], { XFN_ANCHORS_GO: "/nonexistent/go", XFN_ANCHORS_CACHE: cache });
    assert.is(r.code, 1);
    assert.is(r.out, "");
    assert.match(r.err, /^crossplane:up: cannot start the control plane: building etcd: cannot run \/nonexistent\/go \(ENOENT\)/m);
    noStack(r.err);
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});

const B = needs(suite("anchors: a build that fails"), "go1.26");

B("a module version the proxy does not serve fails naming the anchor, the go command and go's own words", () => {
  const cache = mkdtempSync(join(tmpdir(), "xfn-anchors-cache-"));
  try {
    const script = `import { build, MODULES } from "./scripts/anchors.mjs";
MODULES.etcd.version = "v3.99.98";
try { build("etcd", () => {}); } catch (err) { process.stderr.write(err.message); process.exit(1); }`;
    const r = child(["--input-type=module", "-e", script], { XFN_ANCHORS_CACHE: cache });
    assert.is(r.code, 1);
    assert.match(r.err, /^etcd: resolving its modules: go mod tidy failed \(exit 1\):\n/);
    assert.match(r.err, /go\.etcd\.io\/etcd\/server\/v3@v3\.99\.98/);
    // Nothing built is left to be taken as built.
    assert.not.ok(existsSync(join(cache, "bin")), readdirSync(cache).join(" "));
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});

A("a tool it does not know is refused, naming the ones it builds", () => {
  assert.throws(() => build("kube-nope"), /no anchor named kube-nope; the anchors are kubernetes, etcd, crossplane/);
});

A.run();
B.run();
