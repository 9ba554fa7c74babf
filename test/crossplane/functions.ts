// xfn's functions as real Crossplane installs and calls them (issue 58, item
// 3). Each function's runtime image is built as docs/packaging.md builds it
// (the bundle on a local Node base, podman), wrapped in its .xpkg by `xfn
// package --xpkg`, and pushed with crane to a local registry (`crane registry
// serve`, 127.0.0.1: go-containerregistry speaks plain HTTP to a loopback
// registry). A pkg.crossplane.io/v1 Function names it there; Crossplane's own
// package manager pulls and unpacks it and makes the FunctionRevision.
//
// What a Deployment runtime would then do, done here (Crossplane runs with
// --package-runtime=External: a process cluster has no kubelet to run a pod
// and no cluster DNS to resolve a Service): the package's own image, pulled
// from the registry, runs under podman as the runtime runs a function's
// container (test/support/podman.ts runAsCrossplane: user 2000, read-only
// root, no capabilities, /tls/server); its server certificate is signed by
// Crossplane's root CA (the crossplane-root-ca Secret `core init` writes), as
// the runtime's own certificate generator signs it; and the revision's
// status.endpoint, which the runtime would set to its Service, names the
// container's published port. Crossplane's function runner reads that
// endpoint and calls the function with its client certificate over mTLS,
// verifying the server's name (an IP endpoint: an IP SAN).
import { execFile, spawn } from "node:child_process";
import { cpSync, chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { createPrivateKey } from "node:crypto";
import { connect as http2Connect } from "node:http2";
import selfsigned from "selfsigned";
// @ts-expect-error -- a plain .mjs script without types
import { build } from "../../scripts/anchors.mjs";
import { CROSSPLANE_ATTRS } from "../support/certs.js";
import { baseImage, podman, runAsCrossplane, type Running } from "../support/podman.js";
import { ROOT, run } from "../support/spawn.js";
import {
  freePort,
  kubectl,
  kubectlApply,
  listening,
  startProcess,
  stopProcess,
  tail,
  type ControlPlane,
  type Proc,
} from "./controlplane.js";

export { kubectl, kubectlApply };

const NAMESPACE = "crossplane-system";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Registry {
  /** host:port, as a package reference starts. */
  host: string;
  logTail(lines?: number): string;
  stop(): Promise<void>;
}

/** crane is the crane binary, built from go-containerregistry at the pinned version. */
function crane(log: (s: string) => void): string {
  return (build("containerregistry", log) as { crane: string }).crane;
}

/** startRegistry serves a registry on a free loopback port (another if the port was taken meanwhile), its blobs under dir. */
export async function startRegistry(dir: string, log = (s: string) => process.stderr.write(`${s}\n`)): Promise<Registry> {
  const bin = crane(log);
  mkdirSync(join(dir, "blobs"), { recursive: true });
  const procs: Proc[] = [];
  const host = await listening(
    "crane registry serve",
    async () => {
      const port = await freePort();
      const p = startProcess(dir, "registry", bin, ["registry", "serve", "--address", `127.0.0.1:${port}`, "--disk", join(dir, "blobs")]);
      return { p, value: `127.0.0.1:${port}`, ready: async () => (await fetch(`http://127.0.0.1:${port}/v2/`)).ok };
    },
    30_000,
    procs,
  );
  return { host, logTail: (n) => tail(join(dir, "registry.log"), n), stop: () => stopProcess(procs.at(-1)!) };
}

/**
 * buildXpkg builds a function's runtime image and writes its .xpkg in work:
 * `xfn package` (the bundle), podman build on the local base with the
 * function's Dockerfile, podman save, `xfn package --xpkg` on that image. The
 * function is functions/<name> unless dir names another folder of the
 * repository (a fixture of the tier).
 */
export async function buildXpkg(name: string, work: string, dir = `functions/${name}`): Promise<string> {
  const context = join(work, `context-${name}`);
  const out = join(context, "dist/functions", name);
  const r = await run(["package", dir, "--out", out], { timeoutMs: 180_000 });
  if (r.code !== 0) throw new Error(`xfn package ${dir}: ${r.stderr}`);
  cpSync(join(ROOT, ".dockerignore"), join(context, ".dockerignore"));
  const tag = `localhost/xfn-crossplane-${name}:${process.pid}`;
  const base = await baseImage();
  await podman(["build", "--file", join(ROOT, dir, "Dockerfile"), "--build-arg", `BASE_IMAGE=${base}`, "--tag", tag, context]);
  const runtime = join(work, `${name}-runtime.tar`);
  try {
    await podman(["save", "--format", "docker-archive", "--output", runtime, tag]);
  } finally {
    await podman(["rmi", "--force", tag]).catch(() => {});
  }
  const xpkg = join(work, `function-${name}.xpkg`);
  const p = await run(["package", dir, "--out", join(work, `dist-${name}`), "--xpkg", xpkg, "--embed-runtime-image-tarball", runtime], {
    timeoutMs: 180_000,
  });
  if (p.code !== 0) throw new Error(`xfn package --xpkg ${dir}: ${p.stderr}`);
  return xpkg;
}

/** push pushes an .xpkg (a docker-style tarball) to ref with crane. */
export async function push(xpkg: string, ref: string, log = (s: string) => process.stderr.write(`${s}\n`)): Promise<void> {
  await promisify(execFile)(crane(log), ["push", xpkg, ref], { timeout: 120_000 }).catch((err: Error & { stderr?: string }) => {
    throw new Error(`crane push ${xpkg} ${ref}: ${err.stderr ?? err.message}`, { cause: err });
  });
}

export interface InstalledFunction {
  name: string;
  /** The package reference the Function names. */
  ref: string;
  revision: string;
  container: Running;
  stop(): Promise<void>;
}

/** serverCertificates writes a function's server Secret as the runtime would mount it, signed by Crossplane's root CA. */
async function serverCertificates(cp: ControlPlane, name: string, dir: string): Promise<Record<string, string>> {
  const secret = JSON.parse(await kubectl(cp, "-n", NAMESPACE, "get", "secret", "crossplane-root-ca", "-o", "json")) as {
    data: Record<string, string>;
  };
  const caCert = Buffer.from(secret.data["tls.crt"] ?? "", "base64").toString();
  // selfsigned reads a PKCS#8 key; core init writes PKCS#1.
  const caKey = createPrivateKey(Buffer.from(secret.data["tls.key"] ?? "", "base64"))
    .export({ type: "pkcs8", format: "pem" })
    .toString();
  const now = Date.now();
  // As the runtime's certificate generator makes it (crossplane v2.4.0 internal/initializer/tls.go, the
  // server certificate): Crossplane's one subject name, the Service's DNS names, for server authentication;
  // and, for the endpoint here, 127.0.0.1.
  const pems = await selfsigned.generate(CROSSPLANE_ATTRS, {
    keySize: 2048,
    algorithm: "sha256",
    notBeforeDate: new Date(now - 60_000),
    notAfterDate: new Date(now + 365 * 86_400_000),
    extensions: [
      {
        name: "subjectAltName",
        altNames: [
          { type: 7, ip: "127.0.0.1" },
          { type: 2, value: name },
          { type: 2, value: `${name}.${NAMESPACE}` },
          { type: 2, value: `${name}.${NAMESPACE}.svc` },
        ],
      },
      { name: "basicConstraints", cA: false, critical: true },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true, dataEncipherment: true },
      { name: "extKeyUsage", serverAuth: true },
    ],
    ca: { key: caKey, cert: caCert },
  });
  mkdirSync(dir, { recursive: true });
  // The Secret as Kubernetes mounts it: readable by the container's user.
  chmodSync(dir, 0o755);
  writeFileSync(join(dir, "tls.crt"), pems.cert, { mode: 0o644 });
  writeFileSync(join(dir, "tls.key"), pems.private, { mode: 0o644 });
  writeFileSync(join(dir, "ca.crt"), caCert, { mode: 0o644 });
  return { "tls.crt": pems.cert, "tls.key": pems.private, "ca.crt": caCert };
}

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
const conditions = (o: { status?: { conditions?: Condition[] } }) => o.status?.conditions ?? [];
/** said is conditions as `kubectl describe` would list them: one line each, type=status (reason): message. */
const said = (cs: Condition[]) =>
  cs.length === 0
    ? "none"
    : cs.map((c) => `\n  ${c.type}=${c.status}${c.reason ? ` (${c.reason})` : ""}${c.message ? `: ${c.message}` : ""}`).join("");

/**
 * answering waits until the function on 127.0.0.1:port admits an HTTP/2
 * connection made with Crossplane's client certificate (its SETTINGS frame
 * comes only once the server has accepted the certificate): what the
 * runtime's Deployment being available stands for here. The server's
 * certificate is left to Crossplane's own client to check.
 */
async function answering(port: number, clientCertsDir: string, deadline: number): Promise<void> {
  const [cert, key, ca] = ["tls.crt", "tls.key", "ca.crt"].map((f) => readFileSync(join(clientCertsDir, f)));
  let last = "";
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const session = http2Connect(`https://127.0.0.1:${port}`, { ca, cert, key, rejectUnauthorized: false });
      const done = (v: boolean) => (clearTimeout(t), session.destroy(), resolve(v));
      const t = setTimeout(() => ((last = "no SETTINGS in 2 s"), done(false)), 2_000);
      session.once("remoteSettings", () => done(true));
      session.once("error", (err) => ((last = err.message), done(false)));
      session.once("close", () => ((last ||= "closed"), done(false)));
    });
    if (ok) return;
    if (Date.now() > deadline)
      throw new Error(`the function on 127.0.0.1:${port} admitted no connection with Crossplane's certificate: ${last}`);
    await sleep(200);
  }
}

/**
 * setRuntimeStatus writes on a FunctionRevision what Crossplane's runtime
 * controller writes once the function's Deployment is available
 * (internal/controller/pkg/runtime, runtime_function.go Pre and
 * reconciler.go): the endpoint, the observed server Secret's name and
 * RuntimeHealthy=True (reason HealthyPackageRevision). The status is read,
 * changed and replaced at that resourceVersion, again on a conflict, so that
 * the revision reconciler's own conditions are kept.
 */
async function setRuntimeStatus(
  cp: ControlPlane,
  revision: string,
  fields: { endpoint: string; tlsServerSecretName: string },
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const rev = JSON.parse(await kubectl(cp, "get", "functionrevision", revision, "-o", "json")) as {
      status?: { conditions?: (Condition & { lastTransitionTime?: string })[] };
    };
    const status = { ...(rev.status ?? {}), ...fields };
    status.conditions = [
      ...(status.conditions ?? []).filter((c) => c.type !== "RuntimeHealthy"),
      {
        type: "RuntimeHealthy",
        status: "True",
        reason: "HealthyPackageRevision",
        lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
      },
    ];
    const p = spawn(cp.kubectl, ["--kubeconfig", cp.kubeconfig, "replace", "--subresource=status", "-f", "-"], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    let err = "";
    p.stderr.on("data", (d) => (err += d));
    p.stdin.end(JSON.stringify({ ...rev, status }));
    const code = await new Promise<number | null>((resolve) => p.once("exit", resolve));
    if (code === 0) return;
    if (attempt >= 10 || !/Conflict|modified/.test(err))
      throw new Error(`cannot set FunctionRevision ${revision}'s runtime status: ${err}`);
  }
}

/**
 * installFunction pushes xpkg to the registry, applies a Function naming it,
 * waits for Crossplane to unpack it into an active FunctionRevision, runs the
 * package's image as the runtime would and sets the revision's endpoint; it
 * resolves once Crossplane says the Function is installed and healthy.
 */
export async function installFunction(
  cp: ControlPlane,
  registry: Registry,
  name: string,
  xpkg: string,
  opts: { work: string; clientCertsDir: string; crossplaneLog: () => string; timeoutMs?: number },
): Promise<InstalledFunction> {
  const ref = `${registry.host}/xfn/${name}:v0.1.0`;
  await push(xpkg, ref);
  await kubectlApply(cp, { apiVersion: "pkg.crossplane.io/v1", kind: "Function", metadata: { name }, spec: { package: ref } });
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  const late = (what: string, detail: string) =>
    new Error(`${what} within ${(opts.timeoutMs ?? 120_000) / 1000} s; ${detail}\nCrossplane's log ends:\n${opts.crossplaneLog()}`);

  let revision = "";
  // Crossplane retries an unpack that failed; one failing the same way for 10 s (no package.yaml, an image it cannot
  // pull) is not waited out to the deadline.
  let failing: { message: string; since: number } | undefined;
  for (;;) {
    const list = JSON.parse(await kubectl(cp, "get", "functionrevisions", "-l", `pkg.crossplane.io/package=${name}`, "-o", "json")) as {
      items: { metadata: { name: string }; spec: { desiredState: string } }[];
    };
    revision = list.items.find((i) => i.spec.desiredState === "Active")?.metadata.name ?? "";
    if (revision) break;
    const fn = JSON.parse(await kubectl(cp, "get", "function", name, "-o", "json")) as { status?: { conditions?: Condition[] } };
    const unpack = conditions(fn).find((c) => c.type === "Installed" && c.status === "False" && /^cannot /.test(c.message ?? ""));
    if (!unpack || unpack.message !== failing?.message) failing = unpack && { message: unpack.message!, since: Date.now() };
    else if (failing && Date.now() - failing.since > 10_000)
      throw new Error(`Crossplane cannot install ${ref} as the Function ${name}; its conditions: ${said(conditions(fn))}`);
    if (Date.now() > deadline)
      throw late(`Crossplane made no active FunctionRevision for ${ref}`, `the Function's conditions: ${said(conditions(fn))}`);
    await sleep(500);
  }

  const certs = join(opts.work, `tls-${name}`);
  const tls = await serverCertificates(cp, name, certs);
  // The runtime's server Secret (<function>-tls-server), which the revision's establisher reads.
  const secretName = `${name}-tls-server`;
  await kubectlApply(cp, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: secretName, namespace: NAMESPACE },
    type: "Opaque",
    data: Object.fromEntries(Object.entries(tls).map(([k, v]) => [k, Buffer.from(v).toString("base64")])),
  });
  await podman(["pull", "--tls-verify=false", ref]);
  const container = await runAsCrossplane(ref, certs, await freePort(), await freePort());
  const stop = async () => {
    await container.stop(10).catch(() => {});
    await container.remove();
    // The image pulled from the registry (the registry's port, so its name, is new each run): not left behind.
    await podman(["rmi", "--force", ref]).catch(() => {});
  };
  try {
    await answering(container.grpcPort, opts.clientCertsDir, deadline);
    await setRuntimeStatus(cp, revision, { endpoint: `127.0.0.1:${container.grpcPort}`, tlsServerSecretName: secretName });
    for (;;) {
      const fn = JSON.parse(await kubectl(cp, "get", "function", name, "-o", "json")) as { status?: { conditions?: Condition[] } };
      const ok = (t: string) => conditions(fn).some((c) => c.type === t && c.status === "True");
      if (ok("Installed") && ok("Healthy")) break;
      if (Date.now() > deadline) {
        const rev = JSON.parse(await kubectl(cp, "get", "functionrevision", revision, "-o", "json")) as {
          status?: { conditions?: Condition[] };
        };
        throw late(
          `the Function ${name} was not installed and healthy`,
          `its conditions: ${said(conditions(fn))}\nits revision ${revision}'s: ${said(conditions(rev))}\n` +
            `its container's log:\n${await container.logs()}`,
        );
      }
      await sleep(500);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { name, ref, revision, container, stop };
}
