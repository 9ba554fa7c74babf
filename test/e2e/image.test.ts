// functions/hello as Crossplane runs it: its image built offline from the
// bundle on a local base (test/support/podman.ts), started as Crossplane's
// package runtime starts a function (user 2000, read-only root, no
// capabilities, certificates at /tls/server, no arguments), called over mTLS
// with Crossplane's Go client, and stopped with SIGTERM; then its .xpkg,
// written by `xfn package --xpkg` on that image, checked with skopeo and umoci,
// loaded with `podman load` and run the same way.
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { toJson, type JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import { parse as parseYaml } from "yaml";
import * as assert from "uvu/assert";
import { RunFunctionRequestSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { readXpkg } from "../../src/xpkg/xpkg.js";
import { makePki, type TestPki } from "../support/certs.js";
import { until } from "../support/cluster.js";
import { buildGoClient, type GoClient } from "../support/go.js";
import { needs } from "../support/needs.js";
import { baseImage, podman, runAsCrossplane, type Running } from "../support/podman.js";
import { request } from "../support/requests.js";
import { freePort, ROOT, run, startServe } from "../support/spawn.js";

const S = suite("function image and package, run as Crossplane runs them");
const I = needs(S, "podman", "go");
const K = needs(S, "podman", "go", "skopeo", "umoci");

const IMAGE = `localhost/xfn-e2e-function-hello:${process.pid}`;
let work: string;
let pki: TestPki;
let go: GoClient;
let certs: string;
/** What `xfn serve functions/hello` answers to the request, as Crossplane's client decodes it. */
let served: JsonObject;
const req = toJson(
  RunFunctionRequestSchema,
  request({ observed: { composite: { resource: { kind: "XBuckets", spec: { buckets: [{ name: "a" }] } } } } }),
);

I.before(async () => {
  work = mkdtempSync(join(tmpdir(), "xfn-image-"));
  pki = await makePki();
  go = buildGoClient(pki);
  // The server Secret as Kubernetes mounts it: readable by the container's user.
  certs = join(work, "tls-server");
  cpSync(pki.serverDir, certs, { recursive: true });
  chmodSync(work, 0o755);
  for (const f of ["tls.crt", "tls.key", "ca.crt"]) chmodSync(join(certs, f), 0o644);
  // The answer to compare with: xfn serve, as a developer runs it.
  const s = await startServe(["functions/hello"], { TLS_SERVER_CERTS_DIR: pki.serverDir });
  try {
    const [r] = await go.call(s.port, [go.requestFile(req as JsonObject)]);
    assert.is(r!.code, "OK", r!.message);
    served = r!.response!;
  } finally {
    await s.stop();
  }
  // The build context as `npm run package -- hello` leaves it: dist/functions/hello, and the repository's .dockerignore.
  const context = join(work, "context");
  const r = await run(["package", "functions/hello", "--out", join(context, "dist/functions/hello")], { timeoutMs: 120_000 });
  assert.is(r.code, 0, r.stderr);
  cpSync(join(ROOT, ".dockerignore"), join(context, ".dockerignore"));
  const base = await baseImage();
  await podman(["build", "--file", join(ROOT, "functions/hello/Dockerfile"), "--build-arg", `BASE_IMAGE=${base}`, "--tag", IMAGE, context]);
});
I.after(async () => {
  await podman(["rmi", "--force", IMAGE]).catch(() => {});
  go?.cleanup();
  pki?.cleanup();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** callAsCrossplane calls the running container with Crossplane's Go client and checks the answer equals xfn serve's. */
async function answersAsServed(c: Running): Promise<void> {
  // Listening, it says NOT_SERVING until its workers are ready (as a readiness probe sees it); then SERVING. Beside
  // two other lanes in CI the first answer came before the workers were (79 ms after the start).
  let last = "";
  await until(
    "the function to listen and say SERVING",
    async () => {
      const [health] = await go.call(c.grpcPort, ["-health"]);
      last = JSON.stringify(health);
      return health?.code === "OK" && health.health === "SERVING";
    },
    30_000,
  ).catch(async (err) => {
    throw new Error(`${(err as Error).message} (last: ${last})\n${await c.logs()}`);
  });
  const [r] = await go.call(c.grpcPort, [go.requestFile(req as JsonObject)]);
  assert.is(r!.code, "OK", `${r!.message}\n${await c.logs()}`);
  assert.equal(r!.response, served, "the image answers as xfn serve does");
  assert.is(r!.decodeError, undefined);
  assert.is(r!.unknown, undefined);
  const metrics = await fetch(`http://127.0.0.1:${c.metricsPort}/metrics`);
  assert.is(metrics.status, 200);
  assert.match(
    await metrics.text(),
    /^xfn_function_requests_total\{code="OK"\} 1$/m,
    "the metrics port Crossplane declares counts the calls",
  );
}

/** asCrossplane checks what the container runs as, by its process on this machine. */
async function asCrossplane(c: Running): Promise<void> {
  const pid = Number((await podman(["inspect", "--format", "{{.State.Pid}}", c.id])).trim());
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  assert.match(status, /^Uid:\t2000\t2000\t2000\t2000$/m);
  assert.match(status, /^Gid:\t2000\t2000\t2000\t2000$/m);
  assert.match(status, /^CapEff:\t0000000000000000$/m, "no capabilities");
  assert.match(status, /^NoNewPrivs:\t1$/m);
  assert.is((await podman(["inspect", "--format", "{{.HostConfig.ReadonlyRootfs}}", c.id])).trim(), "true");
  assert.is(
    (await podman(["inspect", "--format", "{{json .Args}}", c.id])).trim(),
    '["/function/function.mjs","--metrics-address","0.0.0.0:8080"]',
  );
}

I("the image builds offline from the bundle on a local base: user 2000, ports 9443 and 8080, node running function.mjs", async () => {
  const config = JSON.parse(await podman(["image", "inspect", "--format", "{{json .Config}}", IMAGE])) as any;
  assert.is(config.User, "2000:2000");
  assert.equal(Object.keys(config.ExposedPorts).sort(), ["8080/tcp", "9443/tcp"]);
  assert.equal(config.Entrypoint, ["node", "/function/function.mjs", "--metrics-address", "0.0.0.0:8080"]);
});

I(
  "run as Crossplane runs it: mTLS from /tls/server, Crossplane's client answered as by xfn serve, health SERVING; SIGTERM ends it with 0",
  async () => {
    const c = await runAsCrossplane(IMAGE, certs, await freePort(), await freePort());
    try {
      await answersAsServed(c);
      await asCrossplane(c);
      // mTLS is required: a client without Crossplane's certificate is refused.
      const [stranger] = await go.call(c.grpcPort, [go.requestFile(req as JsonObject)], { certs: "stranger" });
      assert.is.not(stranger!.code, "OK");
      const { code, ms } = await c.stop(30);
      assert.is(code, 0, await c.logs());
      assert.ok(ms < 30_000, `stopped within its grace period (${ms} ms)`);
      assert.match(await c.logs(), /"msg":"signal received"[\s\S]*"signal":"SIGTERM"|"signal":"SIGTERM"[\s\S]*"msg":"signal received"/);
    } finally {
      await c.remove();
    }
  },
);

interface Sidecar {
  image: string;
  command: string[];
  args: string[];
  securityContext: { runAsUser: number; runAsGroup: number; readOnlyRootFilesystem: boolean };
  volumeMounts: Array<{ name: string; mountPath: string }>;
}

/** documentedSidecar is the inspector's container as docs/inspect.md's Helm values give it. */
function documentedSidecar(): Sidecar {
  const md = readFileSync(join(ROOT, "docs/inspect.md"), "utf8");
  const block = /```yaml\n((?:(?!```)[\s\S])*sidecarsCrossplane:[\s\S]*?)```/.exec(md);
  assert.ok(block, "docs/inspect.md has Helm values with sidecarsCrossplane");
  const values = parseYaml(block![1]!) as { sidecarsCrossplane: Sidecar[] };
  return values.sidecarsCrossplane[0]!;
}

I(
  "the Pipeline Inspector sidecar as docs/inspect.md's Helm values run it, in the function's image: Crossplane's emits written as cases",
  async () => {
    const side = documentedSidecar();
    assert.match(side.image, /your function's image/, "the values name the function's image, which this test built");
    // The pod's volumes, as folders of this machine the sidecar's user may write.
    const host = new Map<string, string>();
    for (const m of side.volumeMounts) {
      const d = join(work, `volume-${m.name}`);
      mkdirSync(d);
      chmodSync(d, 0o777);
      host.set(m.mountPath, d);
    }
    const onHost = (path: string) => {
      for (const [mount, d] of host) if (path.startsWith(`${mount}/`)) return join(d, path.slice(mount.length + 1));
      throw new Error(`${path} is on no volume of the sidecar`);
    };
    const flag = (name: string) => side.args.find((a) => a.startsWith(`--${name}=`))!.slice(name.length + 3);
    const socket = onHost(flag("socket"));
    const dir = onHost(`${flag("dir")}/`);
    const sc = side.securityContext;
    const id = (
      await podman([
        "run",
        "--detach",
        "--user",
        `${sc.runAsUser}:${sc.runAsGroup}`,
        ...(sc.readOnlyRootFilesystem ? ["--read-only"] : []),
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        ...side.volumeMounts.flatMap((m) => ["--volume", `${host.get(m.mountPath)}:${m.mountPath}`]),
        "--entrypoint",
        JSON.stringify(side.command),
        IMAGE,
        ...side.args,
      ])
    ).trim();
    const logs = () => podman(["logs", id]);
    try {
      await until("the sidecar listens", () => existsSync(socket), 30_000).catch(async (err) => {
        throw new Error(`${(err as Error).message}\n${await logs()}`);
      });
      const step = {
        request: req,
        response: served,
        error: "",
        meta: {
          traceId: "7f1d0c1e-0000-4000-8000-000000000002",
          spanId: "span-0",
          stepIndex: 0,
          stepName: "hello",
          functionName: "function-hello",
          compositionName: "buckets",
          xr: { apiVersion: "example.xfn.dev/v1alpha1", kind: "XBuckets", name: "team-a", namespace: "", uid: "u-1" },
        },
      };
      const emits = await go.inspect(socket, [step as JsonObject]);
      assert.equal(
        emits.map((e) => `${e.method} ${e.code}`),
        ["EmitRequest OK", "EmitResponse OK"],
      );
      const files = () =>
        readdirSync(dir, { recursive: true, withFileTypes: true })
          .filter((e) => e.isFile())
          .map((e) => join(e.parentPath, e.name));
      await until("the step's case written", () => files().some((f) => f.endsWith("/00-hello/expected.yaml")), 15_000);
      const written = files();
      assert.ok(
        written.some((f) => /XBuckets\._\.team-a\/[^/]+\/00-hello\/request\.yaml$/.test(f)),
        written.join("\n"),
      );
      await podman(["stop", "--time", "30", id]);
      assert.is((await podman(["inspect", "--format", "{{.State.ExitCode}}", id])).trim(), "0", await logs());
      assert.match(await logs(), /"msg":"pipeline inspector stopped"/);
      assert.not.ok(existsSync(socket), "the socket is removed");
    } finally {
      await podman(["rm", "--force", id]).catch(() => {});
    }
  },
);

K("xfn package --xpkg on the image: skopeo and umoci see its layers, labels and package.yaml; podman load runs it as above", async () => {
  const runtime = join(work, "runtime.tar");
  await podman(["save", "--format", "docker-archive", "--output", runtime, IMAGE]);
  const xpkg = join(work, "function-hello.xpkg");
  const r = await run(
    ["package", "functions/hello", "--out", join(work, "dist-xpkg"), "--xpkg", xpkg, "--embed-runtime-image-tarball", runtime],
    { timeoutMs: 120_000 },
  );
  assert.is(r.code, 0, r.stderr);
  assert.match(
    r.stdout,
    /wrote .*function-hello\.xpkg: the Crossplane package function-hello on the runtime image .*runtime\.tar, \d+ layers, image ID sha256:[0-9a-f]{64}/,
  );
  // skopeo: the runtime's layers and one more, labelled base; the runtime's config kept.
  const inspect = JSON.parse(execFileSync("skopeo", ["inspect", `docker-archive:${xpkg}`], { encoding: "utf8" }));
  const runtimeLayers = JSON.parse(execFileSync("skopeo", ["inspect", `docker-archive:${runtime}`], { encoding: "utf8" }))
    .Layers as string[];
  assert.is(inspect.Layers.length, runtimeLayers.length + 1);
  const base = Object.entries(inspect.Labels as Record<string, string>).filter(
    ([k, v]) => k.startsWith("io.crossplane.xpkg:sha256:") && v === "base",
  );
  assert.is(base.length, 1, JSON.stringify(inspect.Labels));
  assert.is(inspect.Os, "linux");
  // umoci: unpacked, the image holds the bundle and package.yaml, as Crossplane finds it.
  const oci = join(work, "oci");
  execFileSync("skopeo", ["copy", `docker-archive:${xpkg}`, `oci:${oci}:pkg`], { stdio: "pipe" });
  const bundle = join(work, "bundle");
  execFileSync("umoci", ["unpack", "--rootless", "--image", `${oci}:pkg`, bundle], { stdio: "pipe" });
  assert.ok(existsSync(join(bundle, "rootfs/function/function.mjs")));
  const pkgYaml = readFileSync(join(bundle, "rootfs/package.yaml"), "utf8");
  assert.match(pkgYaml, /^---\napiVersion: meta\.pkg\.crossplane\.io\/v1\nkind: Function\n/);
  assert.is((await readXpkg(xpkg)).packageYaml, pkgYaml);
  // podman load, and run as Crossplane runs it.
  const loaded = await podman(["load", "--input", xpkg]);
  const id = /sha256:([0-9a-f]{64})/.exec(loaded)?.[1];
  assert.ok(id, loaded);
  const c = await runAsCrossplane(id!, certs, await freePort(), await freePort());
  try {
    await answersAsServed(c);
    assert.is((await c.stop(30)).code, 0, await c.logs());
  } finally {
    await c.remove();
    await podman(["rmi", "--force", id!]).catch(() => {});
  }
});

const P = needs(S, "podman");

P("a test process interrupted (SIGTERM, as the runner ends a lane) removes the containers it started detached", async () => {
  await baseImage();
  const script = `import { baseImage, runAsSidecar } from "./test/support/podman.ts";
const c = await runAsSidecar(await baseImage(), ["/usr/bin/node", "-e", "setInterval(() => {}, 1000)"], {});
process.stdout.write("container " + c.id + "\\n");
setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: ROOT });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  try {
    await until("the container started", () => /^container [0-9a-f]{64}$/m.test(out), 60_000);
    const id = /^container ([0-9a-f]{64})$/m.exec(out)![1]!;
    assert.is((await podman(["inspect", "--format", "{{.State.Status}}", id])).trim(), "running");
    child.kill("SIGTERM");
    assert.is(await exited, 143, out);
    const left = (await podman(["ps", "--all", "--quiet", "--no-trunc", "--filter", `label=xfn.test.owner=${child.pid}`])).trim();
    assert.is(left, "", `left behind: ${left}`);
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
});

S.run();
