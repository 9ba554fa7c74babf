// Every folder in functions/ is a deployable Crossplane Function package:
// metadata, input CRDs, a Dockerfile, and a bundle that starts on plain Node
// and answers a request. (No container engine runs here; everything up to the
// image build is checked.)
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse, parseAllDocuments } from "yaml";
import { toJson, type JsonObject } from "@bufbuild/protobuf";
import { RunFunctionRequestSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { makePki, type TestPki } from "../support/certs.js";
import { rawClient } from "../support/client.js";
import { until } from "../support/cluster.js";
import { buildGoClient, type GoClient } from "../support/go.js";
import { needs } from "../support/needs.js";
import { request } from "../support/requests.js";
import { ROOT } from "../support/spawn.js";

const functions = readdirSync(join(ROOT, "functions"))
  .filter((n) => statSync(join(ROOT, "functions", n)).isDirectory())
  .sort();
const P = suite("function packages");
/** The tests that call a bundle with Crossplane's Go client. */
const PG = needs(P, "go");

let bundles: string;
let serverCerts: string;
let pki: TestPki;
let goClient: GoClient | undefined;
/** The Go client is built by the first test that calls with it (only where Go is installed). */
const go = () => (goClient ??= buildGoClient(pki));
P.before(async () => {
  pki = await makePki();
  execFileSync(process.execPath, [join(ROOT, "scripts/package.mjs")], { cwd: ROOT, stdio: "pipe" });
  // Copied away from the repository: the bundle must need no node_modules.
  bundles = mkdtempSync(join(tmpdir(), "xfn-bundles-"));
  cpSync(join(ROOT, "dist/functions"), bundles, { recursive: true });
  // The server Secret as Kubernetes mounts it: readable by the container's user, written by nobody it runs as.
  serverCerts = join(bundles, "tls-server");
  cpSync(pki.serverDir, serverCerts, { recursive: true });
  chmodSync(bundles, 0o755);
});
P.after(() => {
  // Guarded, as the rest: a set-up that failed part-way must report its own error, not this one's.
  if (bundles) rmSync(bundles, { recursive: true, force: true });
  pki?.cleanup();
  goClient?.cleanup();
});

// Crossplane runs a function's container as user and group 2000 (RunAsUser in its
// package runtime), not as the image's USER, and with no HOME of its own.
const CROSSPLANE_UID = 2000;
const asRoot = process.getuid?.() === 0;

/**
 * startBundle starts a function's bundle on plain Node, on a free port of
 * 127.0.0.1, as its image runs it plus args. With crossplane, as Crossplane
 * runs the container: as uid and gid 2000 (when the tests run as root; else as
 * the user they run as) with an environment of PATH and env alone.
 */
async function startBundle(name: string, args: string[], env: NodeJS.ProcessEnv = {}, crossplane = false, file = "function.mjs") {
  const argv = [join(bundles, name, file), ...args, "--address", "127.0.0.1:0"];
  const [cmd, cmdArgs] =
    crossplane && asRoot
      ? ["setpriv", ["--reuid", `${CROSSPLANE_UID}`, "--regid", `${CROSSPLANE_UID}`, "--clear-groups", process.execPath, ...argv]]
      : [process.execPath, argv];
  const child = spawn(cmd, cmdArgs, {
    cwd: crossplane ? "/" : bundles,
    env: crossplane ? { PATH: process.env["PATH"], ...env } : { ...process.env, ...env },
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  const port = await new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => (child.kill("SIGKILL"), reject(new Error(`bundle did not start:\n${out}`))), 15_000);
    child.stdout.on("data", () => {
      const m = /"port":(\d+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(Number(m[1]));
      }
    });
  });
  /** stop sends SIGTERM and resolves with the exit code. */
  const stop = () => (child.kill("SIGTERM"), exited);
  return { port, pid: child.pid!, output: () => out, stop };
}

// The packages this repository ships must be complete; a folder a user adds
// (the README's tutorial does) is checked for what it has, and must bundle.
const SHIPPED = ["hello", "lifecycle"];

P("functions/ holds the shipped packages", () => {
  for (const name of SHIPPED) assert.ok(functions.includes(name), `functions/${name} is missing`);
});

for (const name of functions) {
  const dir = join(ROOT, "functions", name);
  const has = (f: string) => SHIPPED.includes(name) || existsSync(join(dir, f));

  P(`${name}: package/crossplane.yaml is a meta.pkg.crossplane.io/v1 Function`, () => {
    // Without one of its own, xfn package writes a minimal one beside the bundle.
    const file = has("package/crossplane.yaml") ? join(dir, "package/crossplane.yaml") : join(bundles, name, "package/crossplane.yaml");
    const meta = parse(readFileSync(file, "utf8"));
    assert.is(meta.apiVersion, "meta.pkg.crossplane.io/v1");
    assert.is(meta.kind, "Function");
    assert.is(meta.metadata.name, `function-${name}`);
  });

  if (has("package/input"))
    P(`${name}: every file in package/input is a valid input CRD`, () => {
      const files = readdirSync(join(dir, "package/input"));
      assert.ok(files.length > 0, "an input CRD");
      for (const f of files) {
        const docs = parseAllDocuments(readFileSync(join(dir, "package/input", f), "utf8"));
        assert.is(docs.length, 1, f);
        assert.equal(docs[0]!.errors, [], f);
        const crd = docs[0]!.toJS();
        assert.is(crd.apiVersion, "apiextensions.k8s.io/v1", f);
        assert.is(crd.kind, "CustomResourceDefinition", f);
        assert.is(crd.metadata.name, `${crd.spec.names.plural}.${crd.spec.group}`, `${f}: name must be <plural>.<group>`);
        assert.ok(
          crd.spec.versions.some((v: any) => v.served && v.storage && v.schema?.openAPIV3Schema?.type === "object"),
          `${f}: a served storage version with a schema`,
        );
        assert.not.ok(JSON.stringify(crd).includes("$ref"), `${f}: structural schemas cannot use $ref`);
      }
    });

  if (has("Dockerfile"))
    P(`${name}: the Dockerfile copies the bundle onto BASE_IMAGE, installing nothing, and runs it as user 2000 on 9443 and 8080`, () => {
      const text = readFileSync(join(dir, "Dockerfile"), "utf8");
      assert.match(text, /^ARG BASE_IMAGE=\S+$/m);
      assert.match(text, /^FROM \$\{BASE_IMAGE\}$/m);
      assert.is((text.match(/^FROM /gm) ?? []).length, 1);
      assert.not.match(text, /^RUN /m, "nothing runs in the build: it needs no network");
      assert.match(text, new RegExp(`^COPY dist/functions/${name}/ /function/$`, "m"));
      assert.match(text, /^USER 2000:2000$/m);
      assert.match(text, /^EXPOSE 9443 8080$/m);
      assert.match(text, /^ENTRYPOINT \["node", "\/function\/function\.mjs", "--metrics-address", "0\.0\.0\.0:8080"\]$/m);
    });
  P(`${name}: the bundle starts on plain Node, answers a request, and stops on SIGTERM`, async () => {
    const { port, output, stop } = await startBundle(name, ["--insecure"]);
    try {
      const out = output();
      assert.match(out, new RegExp(`"module":"function-${name}"`));
      // xfn's message framing is in place (src/server/frames.ts), in the one copy of grpc-js's decoder the bundle holds.
      assert.not.match(out, /cannot install xfn's message framing/);
      const bundled = readFileSync(join(bundles, name, "server.mjs"), "utf8");
      assert.is(bundled.match(/^\/\/ .*@grpc\/grpc-js\/build\/src\/stream-decoder\.js$/gm)?.length, 1);
      // What the workers load holds none of the server: no grpc-js (nor the protobufjs it requires), no commander.
      const worker = readFileSync(join(bundles, name, "worker.mjs"), "utf8");
      assert.not.match(worker, /^\/\/ node_modules\/(@grpc\/grpc-js|protobufjs|commander|prom-client)\//m);
      assert.match(worker, /^\/\/ (lib|src)\/server\/worker\.(js|ts)$/m, "the worker's side of the pool is in it");
      const c = rawClient(port);
      try {
        const rsp = await c.run(request({ desired: { resources: { kept: { resource: { kind: "K" } } } } }));
        assert.is(rsp.meta?.tag, "tag-1");
        assert.ok(rsp.desired?.resources["kept"], "desired state passed through");
      } finally {
        c.close();
      }
    } finally {
      assert.is(await stop(), 0);
    }
  });

  if (name === "hello")
    P(`${name}: function.mjs starts the first worker before the server loads; server.mjs alone and --workers 1 serve too`, async () => {
      const EARLY = /"msg":"the first worker was started before the server loaded"/;
      for (const [file, args, early] of [
        ["function.mjs", ["--insecure", "--debug"], true],
        ["server.mjs", ["--insecure", "--debug"], false],
        ["function.mjs", ["--insecure", "--debug", "--workers", "1"], false],
      ] as const) {
        const { port, output, stop } = await startBundle(name, [...args], {}, false, file);
        try {
          const c = rawClient(port);
          try {
            assert.is((await c.run(request({ meta: { tag: "t" } }))).meta?.tag, "t");
          } finally {
            c.close();
          }
          if ((args as readonly string[]).includes("--workers")) assert.match(output(), /"msg":"serving insecure gRPC/);
          else await until("the warm workers", () => /"msg":"function workers? ready/.test(output()));
          assert.is(EARLY.test(output()), early, `${file} ${args.join(" ")}:\n${output()}`);
        } finally {
          assert.is(await stop(), 0, `${file} ${args.join(" ")}`);
        }
      }
    });

  PG(
    `${name}: the bundle serves Crossplane's Go client over mTLS from TLS_SERVER_CERTS_DIR, run as Crossplane runs it (uid 2000, no HOME)`,
    async () => {
      const { port, pid, output, stop } = await startBundle(name, [], { TLS_SERVER_CERTS_DIR: serverCerts }, true);
      try {
        const out = output();
        assert.match(out, /"mtls":true/);
        if (asRoot) {
          // setpriv execs node: the child's pid is the server's.
          assert.match(readFileSync(`/proc/${pid}/status`, "utf8"), new RegExp(`^Uid:\\t${CROSSPLANE_UID}\\t`, "m"));
        }
        const req = toJson(RunFunctionRequestSchema, request({ desired: { resources: { kept: { resource: { kind: "K" } } } } }));
        const [got] = await go().call(port, [go().requestFile(req as JsonObject)]);
        assert.is(got!.code, "OK", `${got!.message}\n${out}`);
        assert.is(got!.decodeError, undefined);
        assert.is(got!.unknown, undefined);
        const rsp = got!.response as { meta: { tag: string }; desired: { resources: Record<string, unknown> } };
        assert.is(rsp.meta.tag, "tag-1");
        assert.ok(rsp.desired.resources["kept"], "desired state passed through");
      } finally {
        assert.is(await stop(), 0);
      }
    },
  );

  P(`${name}: the bundle refuses to start without TLS or --insecure`, () => {
    try {
      execFileSync(process.execPath, [join(bundles, name, "function.mjs")], {
        cwd: bundles,
        stdio: "pipe",
        env: { ...process.env, TLS_SERVER_CERTS_DIR: "" },
      });
      assert.unreachable("started without TLS");
    } catch (err) {
      const e = err as { status: number; stderr: Buffer };
      assert.is(e.status, 1);
      assert.match(e.stderr.toString(), /refusing to serve without TLS/);
    }
  });
}

P("npm run package names an unknown function clearly", () => {
  try {
    execFileSync(process.execPath, [join(ROOT, "scripts/package.mjs"), "nope"], { cwd: ROOT, stdio: "pipe" });
    assert.unreachable();
  } catch (err) {
    assert.match(
      (err as { stderr: Buffer }).stderr.toString(),
      new RegExp(`no function "nope" in functions/ \\(have: ${functions.join(", ")}\\)`),
    );
  }
});

P.run();
