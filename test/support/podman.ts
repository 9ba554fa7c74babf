// Containers for the end-to-end tests, with Debian's podman and runc as these
// machines run them (docs/packaging.md, "Containers on a machine like ours"):
// a containers.conf with no default ulimits, the cgroupfs manager and runc,
// named by CONTAINERS_CONF. No registry is reachable, so the base image is
// made here, from this machine's own Node and the libraries it links.
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";

/** CONTAINERS_CONF_TEXT is the containers.conf these machines need (crun fails on their cgroup layout; rlimits cannot be raised). */
export const CONTAINERS_CONF_TEXT = `[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
`;

let conf: string | undefined;
/** OWNER labels every container this process starts detached, so that its exit removes them, whatever the path. */
const OWNER = `xfn.test.owner=${process.pid}`;
let detachedAny = false;
let cleanupSet = false;

/**
 * atExit removes, when the process exits (a test run interrupted by a signal
 * included), the containers it started detached, those whose `podman run` was
 * cut short before it answered an id too (left "Created"), and then the
 * containers.conf it wrote.
 */
function atExit(): void {
  if (cleanupSet) return;
  cleanupSet = true;
  // A signal ends the process without its exit event unless someone handles it: handled here, the exit runs.
  for (const [signal, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
  ] as const)
    process.once(signal, () => process.exit(code));
  process.once("exit", () => {
    if (detachedAny)
      spawnSync("podman", ["rm", "--force", "--time", "0", "--filter", `label=${OWNER}`], { env: podmanEnv(), stdio: "ignore" });
    if (conf) rmSync(dirname(conf), { recursive: true, force: true });
  });
}

/** podmanEnv is the environment podman runs in: CONTAINERS_CONF as given, else one written with CONTAINERS_CONF_TEXT. */
export function podmanEnv(): NodeJS.ProcessEnv {
  if (process.env["CONTAINERS_CONF"]) return process.env;
  if (!conf) {
    const dir = mkdtempSync(join(tmpdir(), "xfn-containers-"));
    conf = join(dir, "containers.conf");
    writeFileSync(conf, CONTAINERS_CONF_TEXT);
    atExit();
  }
  return { ...process.env, CONTAINERS_CONF: conf };
}

/** podman runs podman to completion and returns its standard output; it throws with its standard error. */
export async function podman(args: string[], opts: { timeoutMs?: number } = {}): Promise<string> {
  try {
    const r = await promisify(execFile)("podman", args, {
      env: podmanEnv(),
      maxBuffer: 64 << 20,
      timeout: opts.timeoutMs ?? 600_000,
      encoding: "utf8",
    });
    return r.stdout;
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new Error(`podman ${args.join(" ")}: ${e.message}\n${e.stderr ?? ""}`, { cause: err });
  }
}

/** BASE_IMAGE is the test base image: this machine's Node, by its version. */
export const BASE_IMAGE = `localhost/xfn-test-node:${process.versions.node}`;

/**
 * baseImage makes BASE_IMAGE once per machine: a root file system holding
 * this machine's node binary and the shared libraries it links (from ldd),
 * imported as an image. It stands in for a public Node image, offline.
 */
export async function baseImage(): Promise<string> {
  try {
    await podman(["image", "exists", BASE_IMAGE]);
    return BASE_IMAGE;
  } catch {
    // not made yet
  }
  const root = mkdtempSync(join(tmpdir(), "xfn-base-"));
  try {
    const node = process.execPath;
    const files = [node, ...execFileSync("ldd", [node], { encoding: "utf8" }).matchAll(/(\/\S+) \(0x/g)].map((m) =>
      typeof m === "string" ? m : m[1]!,
    );
    for (const f of files) {
      const to = join(root, f === node ? "usr/bin/node" : f);
      mkdirSync(dirname(to), { recursive: true });
      copyFileSync(f, to);
    }
    // A writable /tmp would be a volume in a pod; the image itself holds an empty one.
    mkdirSync(join(root, "tmp"), { mode: 0o1777 });
    const tarball = join(root, "..", `${root.split("/").pop()}.tar`);
    execFileSync("tar", ["-C", root, "-cf", tarball, "."]);
    try {
      await podman(["import", "--change", 'ENTRYPOINT ["/usr/bin/node"]', tarball, BASE_IMAGE]);
    } finally {
      rmSync(tarball, { force: true });
    }
    return BASE_IMAGE;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** Container is a container started detached. */
export interface Container {
  id: string;
  logs(): Promise<string>;
  /** stop sends SIGTERM (podman stop, then SIGKILL after graceSeconds) and resolves with the exit code and how long it took. */
  stop(graceSeconds?: number): Promise<{ code: number; ms: number }>;
  remove(): Promise<void>;
}

/** RESTRICTED are the flags of a container as Crossplane's chart and runtime run theirs: a user of its own, nothing to gain. */
const RESTRICTED = ["--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"];

/** detached runs `podman run --detach` with args and returns the container. */
async function detached(args: string[]): Promise<Container> {
  detachedAny = true;
  atExit();
  const id = (await podman(["run", "--detach", "--label", OWNER, ...args])).trim();
  return {
    id,
    logs: () => podman(["logs", id]),
    async stop(graceSeconds = 30) {
      const started = performance.now();
      await podman(["stop", "--time", String(graceSeconds), id]);
      const ms = Math.round(performance.now() - started);
      return { code: Number((await podman(["inspect", "--format", "{{.State.ExitCode}}", id])).trim()), ms };
    },
    async remove() {
      await podman(["rm", "--force", id]).catch(() => {});
    },
  };
}

/**
 * runAsSidecar runs command in image as a sidecar of Crossplane's pod is run
 * (the securityContext docs/inspect.md gives it: user 2000, read-only root,
 * no privilege escalation), with volumes (host folder to container path)
 * mounted as the pod's emptyDirs.
 */
export function runAsSidecar(image: string, command: string[], volumes: Record<string, string>, user = "2000:2000"): Promise<Container> {
  return detached([
    "--user",
    user,
    ...RESTRICTED,
    ...Object.entries(volumes).flatMap(([from, to]) => ["--volume", `${from}:${to}`]),
    "--entrypoint",
    command[0]!,
    image,
    ...command.slice(1),
  ]);
}

/** RunAsCrossplane is how Crossplane's package runtime runs a function's container (see runAsCrossplane). */
export interface Running extends Container {
  grpcPort: number;
  metricsPort: number;
}

/**
 * runAsCrossplane runs image as Crossplane's package runtime runs a function
 * (crossplane 2d040d2, internal/controller/pkg/runtime: runtime.go,
 * runtime_function.go, runtime_override_options.go): user and group 2000, no
 * privilege escalation, not privileged; and, as Pod Security's restricted
 * profile asks and many runtime configs set, every capability dropped and a
 * read-only root file system. The server certificates are mounted read-only
 * at /tls/server and named by TLS_SERVER_CERTS_DIR; no arguments; gRPC on 9443
 * and metrics on 8080, published on loopback ports.
 */
export async function runAsCrossplane(image: string, serverCerts: string, grpcPort: number, metricsPort: number): Promise<Running> {
  const c = await detached([
    "--user",
    "2000:2000",
    ...RESTRICTED,
    "--volume",
    `${serverCerts}:/tls/server:ro`,
    "--env",
    "TLS_SERVER_CERTS_DIR=/tls/server",
    "--publish",
    `127.0.0.1:${grpcPort}:9443`,
    "--publish",
    `127.0.0.1:${metricsPort}:8080`,
    image,
  ]);
  return { ...c, grpcPort, metricsPort };
}
