// The tier's test provider (test/crossplane/provider/main.go), built by
// scripts/anchors.mjs on crossplane-runtime's managed reconciler and run as a
// process against a real control plane, over a fake cloud kept in a folder that
// outlives it: killed, restarted, made slow or failing by the tests.
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
// @ts-expect-error -- a plain .mjs script without types
import { build } from "../../scripts/anchors.mjs";
import { ROOT } from "../support/spawn.js";
import { startProcess, stopProcess, tail, waitFor, type ControlPlane } from "./controlplane.js";
import { kubectl } from "./functions.js";

/** The provider's managed resource kinds, as kubectl names them. */
export const BUCKETS = "buckets.s3.aws.upbound.io";
export const INSTANCES = "instances.rds.aws.upbound.io";
export const CRDS = join(ROOT, "test/crossplane/provider/crds.yaml");

/** A cloud call, one line of the fake cloud's ops.log. */
export interface CloudOp {
  op: "create" | "update" | "delete";
  kind: string;
  id: string;
  /** The managed resource's uid. */
  token: string;
}

/** A resource of the fake cloud. */
export interface CloudObject {
  id: string;
  token: string;
  params: Record<string, unknown>;
  createdAt: string;
  /** An Instance's password, published with its endpoint as its connection details. */
  password?: string;
}

/** The switches of the fake cloud (see main.go): present while set. */
export type Switch = "slow" | "fail-observe" | "fail-create" | "fail-update" | "fail-delete" | "crash-after-create";

export interface Provider {
  /** The fake cloud's folder. */
  state: string;
  /** The cloud calls made so far. */
  ops(): CloudOp[];
  /** The cloud's resources of a kind (Bucket, Instance). */
  objects(kind: string): CloudObject[];
  /** set turns a switch on with its text, or off with undefined. */
  set(s: Switch, text: string | undefined): void;
  /** Whether the process runs. */
  running(): boolean;
  /** Resolves with the exit code once the process has ended; rejects, with its log tail, if it runs ms longer. */
  exited(ms: number): Promise<number | null>;
  /** kill ends the process at once (SIGKILL), as a crash or an evicted pod would. */
  kill(): Promise<void>;
  /** start starts it again on the same cloud, with a fresh memory. */
  start(): Promise<void>;
  logTail(lines?: number): string;
  stop(): Promise<void>;
}

/** installProviderCrds applies the provider's CRDs and waits until they are served. */
export async function installProviderCrds(cp: ControlPlane): Promise<void> {
  await kubectl(cp, "apply", "-f", CRDS);
  await kubectl(cp, "wait", "--for=condition=Established", "--timeout=60s", `crd/${BUCKETS}`, `crd/${INSTANCES}`);
}

/**
 * startProvider builds (or takes from the cache) the test provider and runs it
 * against cp, its cloud in cp.dir/cloud-NAME. poll is how often it observes an
 * up-to-date resource; readyAfter how long a new cloud resource stays creating;
 * creationGracePeriod how long after a create the reconciler takes "not there"
 * for the cloud's lag rather than a fact (crossplane-runtime's default is 30 s,
 * which each delete or re-create of a young resource then waits out).
 */
export async function startProvider(
  cp: ControlPlane,
  opts: { name?: string; poll?: string; readyAfter?: string; creationGracePeriod?: string; log?: (s: string) => void } = {},
): Promise<Provider> {
  const bin = (build("provider", opts.log ?? ((s: string) => process.stderr.write(`${s}\n`))) as { provider: string }).provider;
  const name = opts.name ?? "provider";
  const state = join(cp.dir, `cloud-${name}`);
  const args = [
    `--kubeconfig=${cp.kubeconfig}`,
    `--state=${state}`,
    `--poll=${opts.poll ?? "2s"}`,
    `--ready-after=${opts.readyAfter ?? "0s"}`,
    ...(opts.creationGracePeriod ? [`--creation-grace-period=${opts.creationGracePeriod}`] : []),
  ];
  let p: ReturnType<typeof startProcess> | undefined;
  let exit: Promise<number | null> = Promise.resolve(null);

  const start = async () => {
    const logFile = join(cp.dir, `${name}.log`);
    const from = existsSync(logFile) ? statSync(logFile).size : 0;
    const proc = startProcess(cp.dir, name, bin, [...args, "--debug"]);
    p = proc;
    exit = new Promise((resolve) => proc.child.once("exit", (code) => resolve(code)));
    // Ready once both controllers have started their workers (controller-runtime logs it).
    await waitFor(
      name,
      proc,
      async () =>
        (
          readFileSync(proc.log, "utf8")
            .slice(from)
            .match(/Starting workers/g) ?? []
        ).length >= 2,
      60_000,
    );
  };
  await start();

  const running = () => p !== undefined && p.child.exitCode === null && p.child.signalCode === null;
  return {
    state,
    ops: () => {
      const file = join(state, "ops.log");
      if (!existsSync(file)) return [];
      return readFileSync(file, "utf8")
        .trim()
        .split("\n")
        .filter(Boolean)
        .map((line) => {
          const [op, kind, id, token] = line.split(" ");
          return { op, kind, id, token } as CloudOp;
        });
    },
    objects: (kind) => {
      const dir = join(state, "objects", kind);
      if (!existsSync(dir)) return [];
      return readdirSync(dir)
        .filter((f) => f.endsWith(".json"))
        .map((f) => JSON.parse(readFileSync(join(dir, f), "utf8")) as CloudObject);
    },
    set: (s, text) => {
      if (text === undefined) rmSync(join(state, s), { force: true });
      else writeFileSync(join(state, s), text);
    },
    running,
    exited: (ms) => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`${name} still runs after ${ms / 1000} s; its log ends:\n${tail(join(cp.dir, `${name}.log`))}`)),
          ms,
        );
      });
      return Promise.race([exit, late]).finally(() => clearTimeout(timer));
    },
    kill: async () => {
      if (!running()) return;
      p!.child.kill("SIGKILL");
      await exit;
    },
    start: async () => {
      if (running()) throw new Error(`${name} is already running`);
      await start();
    },
    logTail: (lines) => tail(join(cp.dir, `${name}.log`), lines),
    stop: async () => {
      if (p) await stopProcess(p);
    },
  };
}
