// How many cores the server may use, for its default number of workers.
//
// Node's availableParallelism counts the cores the process may be scheduled
// on, and ignores a container's CPU limit (the cgroup's CPU quota; seen with
// Node 20: 2 under a quota of half a core). A pod limited to one CPU on a
// 64-core node would so start 65 workers, each loading the function and
// holding its heap, for one core's worth of time. xfn reads the quota itself,
// as Go's runtime does for GOMAXPROCS: cgroup v2's cpu.max, or v1's
// cpu.cfs_quota_us over cpu.cfs_period_us, in the process's own cgroup and
// every cgroup above it, and takes the smallest.
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { posix } from "node:path";

/** Reads a file's text, or undefined when it cannot. */
export type ReadFile = (path: string) => string | undefined;

const readOrUndefined: ReadFile = (path) => {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
};

/**
 * cpuLimit is the CPU quota of the process's cgroups in cores (1.5 for
 * "150000 100000"), or undefined when there is none (or no cgroups: not
 * Linux, or /proc not mounted).
 */
export function cpuLimit(read: ReadFile = readOrUndefined): number | undefined {
  const cgroups = read("/proc/self/cgroup");
  const mounts = read("/proc/self/mountinfo");
  if (cgroups === undefined || mounts === undefined) return undefined;
  // hierarchy-ID:controllers:path, one line per hierarchy; v2's is "0::path".
  const paths = cgroups
    .split("\n")
    .filter(Boolean)
    .map((l) => {
      const [id, controllers, ...rest] = l.split(":");
      return { v2: id === "0" && controllers === "", controllers: (controllers ?? "").split(","), path: rest.join(":") };
    });
  let limit: number | undefined;
  for (const line of mounts.split("\n")) {
    // ID parent major:minor root mount-point options [optional...] - fstype source super-options
    const f = line.split(" ");
    const sep = f.indexOf("-");
    if (sep < 0) continue;
    const fsType = f[sep + 1];
    const root = unescapeMount(f[3] ?? "/");
    const mountPoint = unescapeMount(f[4] ?? "");
    let quota: (dir: string) => number | undefined;
    let path: string | undefined;
    if (fsType === "cgroup2") {
      path = paths.find((p) => p.v2)?.path;
      quota = (dir) => v2Quota(read(posix.join(dir, "cpu.max")));
    } else if (fsType === "cgroup" && (f[sep + 3] ?? "").split(",").includes("cpu")) {
      path = paths.find((p) => !p.v2 && p.controllers.includes("cpu"))?.path;
      quota = (dir) => v1Quota(read(posix.join(dir, "cpu.cfs_quota_us")), read(posix.join(dir, "cpu.cfs_period_us")));
    } else continue;
    if (path === undefined) continue;
    // The process's cgroup as seen under this mount, then each one above it up to the mount's root.
    const rel = root !== "/" && (path === root || path.startsWith(`${root}/`)) ? path.slice(root.length) : path;
    for (let dir = posix.join(mountPoint, rel); ; dir = posix.dirname(dir)) {
      const q = quota(dir);
      if (q !== undefined) limit = limit === undefined ? q : Math.min(limit, q);
      if (dir === mountPoint || !dir.startsWith(mountPoint)) break;
    }
  }
  return limit;
}

/** v2Quota reads cpu.max: "max 100000" (no limit) or "150000 100000". */
function v2Quota(text: string | undefined): number | undefined {
  const [quota, period] = (text ?? "").trim().split(/\s+/);
  const q = Number(quota);
  const p = Number(period ?? 100000);
  return quota !== "max" && q > 0 && p > 0 ? q / p : undefined;
}

/** v1Quota reads cpu.cfs_quota_us (-1: no limit) over cpu.cfs_period_us. */
function v1Quota(quota: string | undefined, period: string | undefined): number | undefined {
  const q = Number(quota?.trim());
  const p = Number(period?.trim());
  return q > 0 && p > 0 ? q / p : undefined;
}

/** unescapeMount undoes mountinfo's octal escapes (a space is \040). */
function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/** usableCores is the cores the process may be scheduled on, fewer when a CPU quota says so (at least 1). */
export function usableCores(cores: number = availableParallelism(), limit: number | undefined = cpuLimit()): number {
  const n = Math.max(1, cores);
  return limit === undefined ? n : Math.max(1, Math.min(n, Math.ceil(limit)));
}
