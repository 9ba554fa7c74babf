#!/usr/bin/env node
// Builds the real anchors xfn is checked against from Go modules, with the
// ordinary go command: kube-apiserver, kube-controller-manager and kubectl
// (k8s.io/kubernetes), etcd (go.etcd.io/etcd/server/v3), Crossplane core
// (github.com/crossplane/crossplane/v2), the crossplane CLI
// (github.com/crossplane/cli/v2) and crane (go-containerregistry). Versions are
// pinned in test/anchors/versions.json. Each Go module gets a wrapper module of
// its own (their dependency trees do not mix), written under the cache folder,
// never in the repository; binaries land in a folder keyed by the module, its
// version and the Go version, so a second run builds nothing.
//
//   node scripts/anchors.mjs [anchor ...]   build (default: every anchor the tests use); prints where each binary is
//   node scripts/anchors.mjs --where TOOL   the path TOOL's binary has (built or not)
//
// The cache is $XFN_ANCHORS_CACHE, else ~/.cache/xfn-anchors. Go is
// $XFN_ANCHORS_GO, else taken from /usr/local/go/bin before the PATH
// (Debian's golang-go is older); one older than 1.26 is refused by name.
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const VERSIONS = JSON.parse(readFileSync(join(ROOT, "test/anchors/versions.json"), "utf8"));
export const CACHE = process.env.XFN_ANCHORS_CACHE || join(homedir(), ".cache", "xfn-anchors");

/** The Kubernetes version's parts, for the version ldflags its own build (hack/lib/version.sh) sets. */
const kube = /^v(\d+)\.(\d+)\.(\d+)$/.exec(VERSIONS.kubernetes);
const KUBE_LDFLAGS = kube
  ? [
      `-X k8s.io/component-base/version.gitVersion=${VERSIONS.kubernetes}`,
      `-X k8s.io/component-base/version.gitMajor=${kube[1]}`,
      `-X k8s.io/component-base/version.gitMinor=${kube[2]}`,
      "-X k8s.io/component-base/version.gitTreeState=clean",
      `-X k8s.io/client-go/pkg/version.gitVersion=${VERSIONS.kubernetes}`,
      `-X k8s.io/client-go/pkg/version.gitMajor=${kube[1]}`,
      `-X k8s.io/client-go/pkg/version.gitMinor=${kube[2]}`,
    ].join(" ")
  : "";

/**
 * MODULES are the wrapper modules: the Go module each requires at its pinned
 * version, the binaries built from it (tool name: package), and what its build
 * needs beside (a main of its own, ldflags, Kubernetes' staging replaces).
 */
export const MODULES = {
  kubernetes: {
    module: "k8s.io/kubernetes",
    version: VERSIONS.kubernetes,
    staging: true,
    ldflags: KUBE_LDFLAGS,
    tools: {
      "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
      "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
      kubectl: "k8s.io/kubernetes/cmd/kubectl",
    },
  },
  etcd: {
    module: "go.etcd.io/etcd/server/v3",
    version: VERSIONS.etcd,
    // etcd's own main is in the go.etcd.io/etcd/v3 module, which the server module forbids as a dependency.
    main: 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n',
    tools: { etcd: "." },
  },
  crossplane: {
    module: "github.com/crossplane/crossplane/v2",
    version: VERSIONS.crossplane,
    // Its go.mod builds its own ./apis; as a dependency that would be an older apis release.
    siblings: true,
    // The version packages' spec.crossplane.version is checked against (Crossplane's own build sets it).
    ldflags: `-X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=${VERSIONS.crossplane}`,
    tools: { crossplane: "github.com/crossplane/crossplane/v2/cmd/crossplane" },
  },
  "crossplane-cli": {
    module: "github.com/crossplane/cli/v2",
    version: VERSIONS.crossplaneCli,
    ldflags: `-X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=${VERSIONS.crossplaneCli}`,
    tools: { "crossplane-cli": "github.com/crossplane/cli/v2/cmd/crossplane" },
  },
  containerregistry: {
    module: "github.com/google/go-containerregistry",
    version: VERSIONS.containerregistry,
    tools: { crane: "github.com/google/go-containerregistry/cmd/crane" },
  },
  // The tier's test provider: our own Go source (test/crossplane/provider) on crossplane-runtime's
  // managed reconciler. Its cache key carries a hash of that source, so an edit rebuilds it.
  provider: {
    module: "github.com/crossplane/crossplane-runtime/v2",
    version: VERSIONS.crossplaneRuntime,
    source: "test/crossplane/provider",
    tools: { provider: "." },
  },
  // The bench's Go row: the bench function written with function-sdk-go (bench/gosdk, our
  // source), as a function author builds one.
  gosdkbench: {
    module: "github.com/crossplane/function-sdk-go",
    version: VERSIONS.functionSdkGo,
    source: "bench/gosdk",
    tools: { gosdkbench: "." },
    onDemand: true, // built by the bench, not by a plain `npm run anchors`
  },
  // YAML as Kubernetes reads it (test/support/kubeyaml, our source): sigs.k8s.io/yaml's YAMLToJSON at the
  // version the pinned Kubernetes and Crossplane require, the oracle of xfn's YAML reading.
  kubeyaml: {
    module: "sigs.k8s.io/yaml",
    version: VERSIONS.sigsYaml,
    source: "test/support/kubeyaml",
    tools: { kubeyaml: "." },
    onDemand: true, // built by the test that uses it
  },
  // Kubernetes' own CEL for CRD rules and its CRD validation (test/crossplane/kubecel, our
  // source) compiled to WebAssembly, at the staging version of the pinned Kubernetes: the
  // oracle of the rule engine's tests, and an engine bench/cel-engines.ts measures.
  // wasm_exec.js, Go's loader for it, is copied beside.
  kubecel: {
    module: "k8s.io/apiextensions-apiserver",
    version: VERSIONS.kubernetes.replace(/^v1\./, "v0."),
    source: "test/crossplane/kubecel",
    goenv: { GOOS: "js", GOARCH: "wasm" },
    tools: { "kubecel.wasm": "." },
    beside: ["lib/wasm/wasm_exec.js"],
    onDemand: true, // built by the test or bench that loads it, not by a plain `npm run anchors`
  },
};

/** sourceFiles are the .go files of a module built from our own source, by name. */
function sourceFiles(m) {
  const dir = join(ROOT, m.source);
  return readdirSync(dir)
    .filter((f) => f.endsWith(".go"))
    .sort()
    .map((f) => [f, readFileSync(join(dir, f), "utf8")]);
}

/** key is a module's cache key: its version, and for our own source a hash of that source. */
function key(name) {
  const m = MODULES[name];
  if (!m.source) return `${name}@${m.version}`;
  const h = createHash("sha256");
  for (const [f, text] of sourceFiles(m)) h.update(`${f}\0${text}\0`);
  return `${name}@${m.version}-${h.digest("hex").slice(0, 12)}`;
}

/** stagingReplaces turns a Kubernetes go.mod's `k8s.io/x => ./staging/src/k8s.io/x` lines into replaces at the matching v0 version. */
export function stagingReplaces(goMod, version) {
  const m = /^v1\.(\d+\.\d+)$/.exec(version);
  if (!m) throw new Error(`cannot derive the staging modules' version from Kubernetes ${version}`);
  const out = [];
  for (const line of goMod.split("\n")) {
    const r = /^\s*(?:replace\s+)?(k8s\.io\/[^\s]+)\s+=>\s+\.\/staging\/src\/\1\s*$/.exec(line);
    if (r) out.push(`replace ${r[1]} => ${r[1]} v0.${m[1]}`);
  }
  if (out.length === 0) throw new Error(`Kubernetes ${version}'s go.mod names no staging modules`);
  return out;
}

/**
 * siblingReplaces turns a go.mod's `M => ./dir` lines (a module of the same repository, which its own
 * build takes from its folder and a dependant would take at an older release) into replaces at the
 * same release.
 */
export function siblingReplaces(goMod, version) {
  const out = [];
  for (const line of goMod.split("\n")) {
    const r = /^\s*(?:replace\s+)?([^\s]+)\s+=>\s+\.\/[^\s]+\s*$/.exec(line);
    if (r) out.push(`replace ${r[1]} => ${r[1]} ${version}`);
  }
  return out;
}

/** The go command: $XFN_ANCHORS_GO, else `go` with /usr/local/go/bin first on the PATH. */
const GO = process.env.XFN_ANCHORS_GO || "go";
const INSTALL_GO = "install Go 1.26 or newer at /usr/local/go (Debian's golang-go is older)";

/** go runs the go command, throwing its output's tail on failure. */
export function go(args, cwd, what, goenv = {}) {
  const env = { ...process.env, PATH: `/usr/local/go/bin:${process.env.PATH ?? ""}`, GOFLAGS: "-mod=mod", CGO_ENABLED: "0", ...goenv };
  const r = spawnSync(GO, args, { cwd, env, encoding: "utf8", maxBuffer: 64 << 20 });
  if (r.error) throw new Error(`${what}: cannot run ${GO} (${r.error.code ?? r.error.message}); ${INSTALL_GO}`);
  if (r.status !== 0) {
    const tail = `${r.stdout}${r.stderr}`.trim().split("\n").slice(-30).join("\n");
    throw new Error(`${what}: go ${args.join(" ")} failed (exit ${r.status}):\n${tail}`);
  }
  return r.stdout;
}

/** goVersion is the go command's version (go1.26.8), refused when older than 1.26: the wrapper modules say `go 1.26`. */
function goVersion(what = "the Go version") {
  const v = go(["env", "GOVERSION"], ROOT, what).trim();
  const m = /^go(\d+)\.(\d+)/.exec(v);
  if (!m || Number(m[1]) < 1 || (Number(m[1]) === 1 && Number(m[2]) < 26))
    throw new Error(`${what}: the anchors need Go 1.26 or newer and ${GO} is ${v || "of no version"}; ${INSTALL_GO}`);
  return v;
}

/** moduleSource is the folder where the go command keeps a pinned anchor's module source (Crossplane's cluster/crds). */
export function moduleSource(name) {
  const m = MODULES[name];
  if (!m) throw new Error(`no anchor named ${name}; the anchors are ${Object.keys(MODULES).join(", ")}`);
  return JSON.parse(go(["mod", "download", "-json", `${m.module}@${m.version}`], ROOT, `${name}'s source`)).Dir;
}

/** goModuleDir is where the go command keeps module@version's source (downloaded first if need be): tests read kube's test tables there. */
export function goModuleDir(module, version) {
  return JSON.parse(go(["mod", "download", "-json", `${module}@${version}`], ROOT, `${module}'s source`)).Dir;
}

/** binDir is where a module's binaries go: keyed by its name, version and the Go that built them. */
export const binDir = (name, gover = goVersion()) => join(CACHE, "bin", `${key(name)}-${gover}`);

/** wrapper writes the wrapper module for name and resolves its dependencies; answers its folder. */
function wrapper(name) {
  const m = MODULES[name];
  const dir = join(CACHE, "modules", key(name));
  if (existsSync(join(dir, "go.sum"))) return dir;
  mkdirSync(dir, { recursive: true });
  let replaces = [];
  if (m.staging || m.siblings) {
    const info = JSON.parse(go(["mod", "download", "-json", `${m.module}@${m.version}`], dir, name));
    const goMod = readFileSync(info.GoMod, "utf8");
    replaces = m.staging ? stagingReplaces(goMod, m.version) : siblingReplaces(goMod, m.version);
  }
  writeFileSync(
    join(dir, "go.mod"),
    `// Written by scripts/anchors.mjs: builds ${m.module} ${m.version}.\nmodule xfn.dev/anchors/${name}\n\ngo 1.26\n\nrequire ${m.module} ${m.version}\n\n${replaces.join("\n")}\n`,
  );
  if (m.source) for (const [f, text] of sourceFiles(m)) writeFileSync(join(dir, f), text);
  else if (m.main) writeFileSync(join(dir, "main.go"), m.main);
  else
    writeFileSync(
      join(dir, "tools.go"),
      `//go:build tools\n\npackage tools\n\nimport (\n${Object.values(m.tools)
        .map((p) => `\t_ "${p}"`)
        .join("\n")}\n)\n`,
    );
  go(["mod", "tidy"], dir, `${name}: resolving its modules`);
  return dir;
}

/** build builds name's binaries unless they are there; answers { tool: path }. */
export function build(name, log = (s) => process.stderr.write(`${s}\n`)) {
  const m = MODULES[name];
  if (!m) throw new Error(`no anchor named ${name}; the anchors are ${Object.keys(MODULES).join(", ")}`);
  const gover = goVersion(`building ${name}`);
  const bin = binDir(name, gover);
  const out = Object.fromEntries(Object.keys(m.tools).map((t) => [t, join(bin, t)]));
  if (Object.values(out).every((p) => existsSync(p))) return out;
  return locked(name, log, () => {
    // Another process may have built it while this one waited for the lock.
    if (Object.values(out).every((p) => existsSync(p))) return out;
    const started = Date.now();
    log(`anchors: building ${name} ${m.version} with ${gover} (cold: minutes)`);
    const dir = wrapper(name);
    mkdirSync(bin, { recursive: true });
    for (const [tool, pkg] of Object.entries(m.tools)) {
      const tmp = `${out[tool]}.tmp`;
      go(["build", "-trimpath", "-ldflags", `-s -w ${m.ldflags ?? ""}`.trim(), "-o", tmp, pkg], dir, `${name}: building ${tool}`, m.goenv);
      renameSync(tmp, out[tool]); // whole or absent: an interrupted build leaves no binary to be taken as built
    }
    const goroot = m.beside ? go(["env", "GOROOT"], dir, `${name}: GOROOT`).trim() : "";
    for (const f of m.beside ?? []) copyFileSync(join(goroot, f), join(bin, basename(f)));
    log(`anchors: built ${name} in ${Math.round((Date.now() - started) / 1000)} s`);
    // A build of our own source is keyed by its hash: each edit made another (42 MB for the provider); only this one is kept.
    if (m.source) prune(name, key(name));
    return out;
  });
}

/** prune removes name's other builds and wrapper modules than keep's (a key: name@version[-hash]) from cache. */
export function prune(name, keep, cache = CACHE) {
  for (const sub of ["bin", "modules"]) {
    const d = join(cache, sub);
    if (!existsSync(d)) continue;
    for (const e of readdirSync(d))
      if (e.startsWith(`${name}@`) && e !== keep && !e.startsWith(`${keep}-`)) rmSync(join(d, e), { recursive: true, force: true });
  }
}

/**
 * locked runs fn holding name's build lock (a file naming its holder's pid), so that two test files
 * starting at once do not build one module into the same folder; a lock whose holder is gone is taken over.
 */
function locked(name, log, fn) {
  const lock = join(CACHE, "locks", `${name}.lock`);
  mkdirSync(dirname(lock), { recursive: true });
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let said = false; ;) {
    try {
      writeFileSync(lock, String(process.pid), { flag: "wx" });
      break;
    } catch (err) {
      if (err.code !== "EEXIST") throw err;
      const holder = Number(readFileSync(lock, "utf8")) || 0;
      if (holder && !alive(holder)) {
        rmSync(lock, { force: true });
        continue;
      }
      if (!said) log(`anchors: waiting for process ${holder} building ${name}`);
      said = true;
      Atomics.wait(pause, 0, 0, 1000);
    }
  }
  try {
    return fn();
  } finally {
    rmSync(lock, { force: true });
  }
}

/** alive is whether a process of that pid runs. */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === "EPERM";
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2);
  try {
    if (args[0] === "--where") {
      const name = Object.keys(MODULES).find((n) => Object.hasOwn(MODULES[n].tools, args[1] ?? ""));
      if (!name) throw new Error(`no anchor tool named ${args[1]}`);
      process.stdout.write(`${join(binDir(name), args[1])}\n`);
    } else {
      for (const name of args.length ? args : Object.keys(MODULES).filter((n) => !MODULES[n].onDemand))
        for (const [tool, path] of Object.entries(build(name)))
          process.stdout.write(`${tool}\t${path}\t${execFileSync("du", ["-h", path]).toString().split("\t")[0]}\n`);
    }
  } catch (err) {
    process.stderr.write(`anchors: ${err.message}\n`);
    process.exit(1);
  }
}
