// Adopting xfn from outside this repository, as a platform team would: pack
// the runtime, scaffold a project with `xfn init` in an empty temp folder,
// install, and use every command the scaffold's README names. Slow (npm
// installs, from the npm cache when warm), so everything shares one project.
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { rawClient } from "../support/client.js";
import { until } from "../support/cluster.js";
import { request } from "../support/requests.js";
import { makePki } from "../support/certs.js";
import { buildGoClient } from "../support/go.js";
import { needs } from "../support/needs.js";
import { kubeFetch } from "../support/kubefetch.js";
import { inGroup } from "../support/procs.js";
import { baseImage, podman, runAsCrossplane } from "../support/podman.js";
import { freePort, ROOT } from "../support/spawn.js";

const A = suite("adopt: xfn-runtime from an empty folder outside the repository");
/** The test that builds the project's image and runs it as Crossplane does, calling it with Crossplane's Go client. */
const AP = needs(A, "podman", "go");
const NPM = process.platform === "win32" ? "npm.cmd" : "npm";
const quiet = { npm_config_audit: "false", npm_config_fund: "false", npm_config_update_notifier: "false" };

let work: string;
let tarball: string;
let project: string;
let manifestBefore: string;

interface Ran {
  code: number | null;
  /** out is stdout and stderr together, for messages; stdout alone, for output to parse. */
  out: string;
  stdout: string;
}

/** sh runs a command to completion with a generous limit (installs). */
function sh(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}, timeoutMs = 240_000): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd, env: { ...process.env, ...quiet, ...env } });
    let out = "";
    let stdout = "";
    child.stdout.on("data", (d) => ((out += d), (stdout += d)));
    child.stderr.on("data", (d) => (out += d));
    const t = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", (err) => {
      clearTimeout(t);
      resolve({ code: -1, out: `${out}\ncannot run ${cmd}: ${err.message}`, stdout });
    });
    child.on("close", (code) => {
      clearTimeout(t);
      resolve({ code, out, stdout });
    });
  });
}

// After the installs, nothing may reach the network.
const offline = { npm_config_offline: "true" };

/** serveFrom starts a server command and resolves with its port once it logs it. */
function serveFrom(cmd: string, args: string[], cwd: string): Promise<{ port: number; stop(): Promise<number | null>; output(): string }> {
  // npx runs xfn in a child of its own: signals go to the whole group.
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env: { ...process.env, ...quiet, ...offline }, detached: true });
    let out = "";
    // How it ended is kept in its output, for a failed assertion to show.
    const exited = new Promise<number | null>((r) =>
      child.on("exit", (code, signal) => {
        out += `\n[exited: code ${code}, signal ${signal}]`;
        r(code);
      }),
    );
    const t = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${args.join(" ")} did not start:\n${out}`));
    }, 30_000);
    child.stdout.on("data", (d) => {
      out += d;
      const m = /"port":(\d+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve({ port: Number(m[1]), output: () => out, stop: () => (process.kill(-child.pid!, "SIGTERM"), exited) });
      }
    });
    child.stderr.on("data", (d) => (out += d));
    void exited.then((code) => {
      clearTimeout(t);
      reject(new Error(`${args.join(" ")} exited with ${code} before listening:\n${out}`));
    });
  });
}

A.before(() => {
  work = mkdtempSync(join(tmpdir(), "xfn-adopt-"));
  // As a maintainer packs it, scripts and all: prepack rebuilds lib/ beside the old one and swaps it in whole
  // (other tests keep finding a whole lib/), and takes the scripts out of the packed package.json for the while.
  manifestBefore = readFileSync(join(ROOT, "package.json"), "utf8");
  const name = execFileSync(NPM, ["pack", "--pack-destination", work], {
    cwd: ROOT,
    encoding: "utf8",
    env: { ...process.env, ...quiet },
  })
    .trim()
    .split("\n")
    .pop()!;
  tarball = join(work, name);
  project = join(work, "function-storage");
});
A.after(() => rmSync(work, { recursive: true, force: true }));

A("the tarball ships compiled JavaScript, type declarations, the bin and the template; no TypeScript sources", () => {
  const files = execFileSync("tar", ["tzf", tarball], { encoding: "utf8" }).split("\n");
  for (const f of [
    "package/bin/xfn.js",
    "package/lib/index.js",
    "package/lib/index.d.ts",
    "package/lib/cli/main.js",
    "package/templates/function/gitignore",
  ]) {
    assert.ok(files.includes(f), `${f} missing from the tarball`);
  }
  assert.not.ok(
    files.some((f) => f.startsWith("package/src/")),
    "src/ is not shipped",
  );
  assert.not.ok(
    files.some((f) => f.endsWith(".tsbuildinfo")),
    "the build's bookkeeping is not shipped",
  );
  const pkg = JSON.parse(execFileSync("tar", ["xzOf", tarball, "package/package.json"], { encoding: "utf8" }));
  assert.is(pkg.name, "xfn-runtime");
  // No lifecycle script ships: a user's install runs none of this repository's (npm listed prepare on every install).
  assert.is(pkg.scripts, undefined, JSON.stringify(pkg.scripts));
  assert.is(readFileSync(join(ROOT, "package.json"), "utf8"), manifestBefore, "packing put package.json back as it was");
  assert.not.ok(existsSync(join(ROOT, "package.json.before-pack")));
  assert.is(pkg.exports["."].types, "./lib/index.d.ts");
  assert.is(pkg.exports["."].default, "./lib/index.js");
});

A("xfn init from the packed runtime writes a project (npm exec, as with a published package)", async () => {
  const r = await sh(NPM, ["exec", "--yes", "--prefer-offline", `--package=${tarball}`, "--", "xfn", "init", "function-storage"], work);
  assert.is(r.code, 0, r.out);
  for (const f of [
    "package.json",
    "tsconfig.json",
    "src/index.ts",
    "src/generated/types.ts",
    "testdata/request.yaml",
    "testdata/cases/two-buckets/expected.yaml",
    "test/function.test.ts",
    "package/crossplane.yaml",
    "package/input/storage.fn.example.org_inputs.yaml",
    "Dockerfile",
    ".dockerignore",
    ".gitignore",
    "README.md",
  ]) {
    assert.ok(existsSync(join(project, f)), `${f} not written`);
  }
  const pkg = JSON.parse(readFileSync(join(project, "package.json"), "utf8"));
  const own = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  assert.is(pkg.dependencies["xfn-runtime"], `^${own.version}`);
  const again = await sh(NPM, ["exec", "--yes", "--offline", `--package=${tarball}`, "--", "xfn", "init", "function-storage"], work);
  assert.is(again.code, 1);
  assert.match(again.out, /cannot create a project in function-storage: it exists and is not an empty folder/);
});

A("npm install of the tarball, then npm install", async () => {
  const a = await sh(NPM, ["install", "--prefer-offline", tarball], project);
  assert.is(a.code, 0, a.out);
  assert.not.match(a.out, /xfn-runtime@[^\n]*\((?:pre|post)?(?:install|prepare)/, "npm lists no script of xfn-runtime's");
  const b = await sh(NPM, ["install", "--prefer-offline"], project);
  assert.is(b.code, 0, b.out);
});

A("offline: npm test typechecks, replays the recorded case and runs the unit tests", async () => {
  const r = await sh(NPM, ["test"], project, offline);
  assert.is(r.code, 0, r.out);
  assert.match(r.out, /^1 passed, 0 failed$/m);
  assert.match(r.out, /^# pass 3$/m);
  assert.match(r.out, /^# fail 0$/m);
});

A("offline: a broken function fails npm test, naming the difference", async () => {
  const file = join(project, "src/index.ts");
  const original = readFileSync(file, "utf8");
  try {
    writeFileSync(file, original.replace("`bucket-${b.name}`", "`bkt-${b.name}`"));
    assert.ok(readFileSync(file, "utf8") !== original, "the function was changed");
    const r = await sh(NPM, ["test"], project, offline);
    assert.is(r.code, 1, r.out);
    assert.match(r.out, /^FAIL +cases\/two-buckets$/m);
    assert.match(r.out, /bkt-logs/);
  } finally {
    writeFileSync(file, original);
  }
});

A("offline: npx xfn serve . --insecure answers npx xfn call with the example request", async () => {
  const s = await serveFrom("npx", ["xfn", "serve", ".", "--insecure", "--address", "127.0.0.1:0"], project);
  try {
    const r = await sh("npx", ["xfn", "call", `127.0.0.1:${s.port}`, "testdata/request.yaml", "--insecure"], project, offline);
    assert.is(r.code, 0, r.out);
    const rsp = JSON.parse(r.stdout);
    assert.equal(Object.keys(rsp.desired.resources).sort(), ["bucket-assets", "bucket-logs"]);
    assert.is(rsp.desired.composite.resource.status.externalNames["bucket-logs"], "team-a-logs-x7k2p");
  } finally {
    // npm exec itself ends by the signal; the server under it exits 0 (seen in the bundle's test below).
    await s.stop();
  }
  // npm exec ends at once; the server under it finishes its own graceful stop.
  await until("the server's graceful stop", () => /"msg":"stopped"/.test(s.output()), 10_000);
});

A("offline: in a script, `npx xfn serve &` then `kill %1` (which ends only npx) leaves nothing running: xfn stops on its own", async () => {
  const script = [
    "set -eu",
    "npx xfn serve . --insecure --address 127.0.0.1:0 > serve.log 2>&1 &",
    "for i in $(seq 100); do grep -q '\"port\"' serve.log && break; sleep 0.2; done",
    "kill %1",
  ].join("\n");
  // A user's shell: not under npm (this suite runs under `npm run`, whose variables xfn would inherit).
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("npm_")));
  const child = spawn("bash", ["-c", script], { cwd: project, env: { ...env, ...quiet, ...offline }, detached: true });
  const code = await new Promise<number | null>((r) => child.on("exit", (c) => r(c)));
  assert.is(code, 0);
  const left = () => inGroup(child.pid!).length > 0;
  try {
    await until("nothing left running from the script", () => !left(), 5_000).catch((err) => {
      throw new Error(`${(err as Error).message}\n${readFileSync(join(project, "serve.log"), "utf8")}`);
    });
    const log = readFileSync(join(project, "serve.log"), "utf8");
    assert.match(log, /"msg":"the npm process that started this one ended \(npx passes on no signal\); stopping"/);
    assert.match(log, /"msg":"stopped"/);
  } finally {
    if (left()) process.kill(-child.pid!, "SIGKILL");
    rmSync(join(project, "serve.log"), { force: true });
  }
});

A("offline: npx xfn render renders the example like crossplane render", async () => {
  const r = await sh(
    "npx",
    ["xfn", "render", "examples/xr.yaml", "examples/composition.yaml", "examples/functions.yaml"],
    project,
    offline,
  );
  assert.is(r.code, 0, r.out);
  assert.is((r.out.match(/^kind: Bucket$/gm) ?? []).length, 2, r.out);
  assert.match(r.out, /bucketCount: 2/);
});

A(
  "offline: npx xfn host runs the example as a Crossplane v2 cluster would: namespaced buckets (.m. group) in the XR's namespace",
  async () => {
    const kubeconfig = join(work, "host-kubeconfig");
    const child = spawn(
      "npx",
      [
        "xfn",
        "host",
        "--embedded",
        "--embedded-kubeconfig",
        kubeconfig,
        "--metrics-address",
        "off",
        "--functions",
        "examples/functions.yaml",
        "--manifests",
        "crds",
        "--manifests",
        "examples/composition.yaml",
        "--manifests",
        "examples/xr.yaml",
      ],
      { cwd: project, env: { ...process.env, ...quiet, ...offline }, detached: true },
    );
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    // How it ended is kept in its output, for a failed assertion to show.
    const exited = new Promise<number | null>((r) =>
      child.on("exit", (code, signal) => {
        out += `\n[exited: code ${code}, signal ${signal}]`;
        r(code);
      }),
    );
    try {
      await until("the host's kubeconfig", () => existsSync(kubeconfig) && /server: /.test(readFileSync(kubeconfig, "utf8")), 60_000);
      // As its kubeconfig says: TLS with its CA, and its token.
      const api = kubeFetch(kubeconfig);
      // Until the host serves a kind, its path is the plain-text "404 page not found" (as on kube-apiserver): not yet.
      const get = async (path: string) => {
        const r = await api(path);
        return (r.status === 404 ? {} : await r.json()) as any;
      };
      await until(
        "the XR Synced with two buckets",
        async () => {
          const xr = await get("/apis/example.org/v1alpha1/namespaces/default/xbuckets/team-a");
          const synced = (xr.status?.conditions ?? []).find((c: any) => c.type === "Synced");
          return (
            synced?.status === "True" && (await get("/apis/s3.aws.m.upbound.io/v1beta1/namespaces/default/buckets")).items?.length === 2
          );
        },
        60_000,
      ).catch((err: Error) => {
        throw new Error(`${err.message}\n${out}`);
      });
      const buckets = (await get("/apis/s3.aws.m.upbound.io/v1beta1/namespaces/default/buckets")).items as any[];
      assert.equal(
        buckets.map((b) => b.metadata.namespace),
        ["default", "default"],
      );
      assert.is((await get("/apis/example.org/v1alpha1/namespaces/default/xbuckets/team-a")).status.bucketCount, 2);
    } finally {
      process.kill(-child.pid!, "SIGTERM");
      await exited;
    }
  },
);

A("offline: npx xfn generate types reproduces the committed types", async () => {
  const r = await sh("npx", ["xfn", "generate", "types", "crds"], project, offline);
  assert.is(r.code, 0, r.out);
  assert.is(r.stdout, readFileSync(join(project, "src/generated/types.ts"), "utf8"));
});

A("offline: npm run package bundles a function that starts on plain node away from node_modules", async () => {
  const r = await sh(NPM, ["run", "package"], project, offline);
  assert.is(r.code, 0, r.out);
  const away = join(work, "image");
  cpSync(join(project, "dist"), away, { recursive: true });
  assert.ok(existsSync(join(away, "package/crossplane.yaml")));
  assert.equal(readdirSync(join(away, "package/input")), ["storage.fn.example.org_inputs.yaml"]);
  const s = await serveFrom(process.execPath, [join(away, "function.mjs"), "--insecure", "--address", "127.0.0.1:0"], away);
  const c = rawClient(s.port);
  try {
    const rsp = await c.run(
      request({
        observed: { composite: { resource: { apiVersion: "example.org/v1alpha1", kind: "XBuckets", spec: { buckets: [{ name: "a" }] } } } },
      }),
    );
    assert.equal(Object.keys(rsp.desired?.resources ?? {}), ["bucket-a"]);
    assert.match(s.output(), /"module":"function-storage"/);
  } finally {
    c.close();
    assert.is(await s.stop(), 0, s.output());
  }
});

AP(
  "offline: the project's image builds with podman on a local base, runs as Crossplane runs it, and its .xpkg loads and runs",
  async () => {
    const pki = await makePki();
    const go = buildGoClient(pki);
    const image = `localhost/xfn-e2e-function-storage:${process.pid}`;
    const certs = join(work, "tls-server");
    cpSync(pki.serverDir, certs, { recursive: true });
    for (const f of ["tls.crt", "tls.key", "ca.crt"]) chmodSync(join(certs, f), 0o644);
    chmodSync(work, 0o755);
    const ids: string[] = [];
    try {
      // As the project's Dockerfile says: npm run package (done above), then podman build in the project.
      await podman(["build", "--build-arg", `BASE_IMAGE=${await baseImage()}`, "--tag", image, project]);
      const req = go.requestFile({
        observed: { composite: { resource: { apiVersion: "example.org/v1alpha1", kind: "XBuckets", spec: { buckets: [{ name: "a" }] } } } },
      } as never);
      const check = async (ref: string) => {
        const c = await runAsCrossplane(ref, certs, await freePort(), await freePort());
        try {
          await until(
            "the function to answer its health check",
            async () => (await go.call(c.grpcPort, ["-health"]))[0]?.health === "SERVING",
            30_000,
          );
          const [r] = await go.call(c.grpcPort, [req]);
          assert.is(r!.code, "OK", `${r!.message}\n${await c.logs()}`);
          assert.equal(Object.keys((r!.response as any).desired.resources), ["bucket-a"]);
          assert.is((await c.stop(30)).code, 0, await c.logs());
        } finally {
          await c.remove();
        }
      };
      await check(image);
      // The Crossplane package, as the Dockerfile's comment says: the image saved, then xfn package --xpkg on it.
      await podman(["save", "--format", "docker-archive", "--output", join(work, "runtime.tar"), image]);
      const x = await sh(
        "npx",
        ["xfn", "package", "--xpkg", "function-storage.xpkg", "--embed-runtime-image-tarball", join(work, "runtime.tar")],
        project,
        offline,
      );
      assert.is(x.code, 0, x.out);
      assert.match(x.out, /wrote function-storage\.xpkg: .* \(examples too\)/, "the scaffold's examples/ are in the package");
      const id = /sha256:([0-9a-f]{64})/.exec(await podman(["load", "--input", join(project, "function-storage.xpkg")]))?.[1];
      assert.ok(id);
      ids.push(id!);
      await check(id!);
    } finally {
      for (const ref of [image, ...ids]) await podman(["rmi", "--force", ref]).catch(() => {});
      go.cleanup();
      pki.cleanup();
    }
  },
);

A.run();
