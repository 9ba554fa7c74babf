// The cores the server may use: a container's CPU limit (its cgroup's CPU
// quota) counts, which Node's availableParallelism ignores. Table tests over
// the /proc and /sys layouts of cgroup v1, v2, hybrid hosts, with and without
// a cgroup namespace.
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { cpuLimit, usableCores, type ReadFile } from "../../src/server/cpus.js";

const C = suite("server: CPU limit");

const files =
  (fs: Record<string, string>): ReadFile =>
  (path) =>
    fs[path];

// mountinfo lines: ID parent major:minor root mount-point options - fstype source super-options
const v2Mount = (root = "/", at = "/sys/fs/cgroup") => `30 23 0:26 ${root} ${at} rw,nosuid,nodev - cgroup2 cgroup2 rw,nsdelegate`;
const v1CpuMount = (root = "/", at = "/sys/fs/cgroup/cpu,cpuacct") => `33 31 0:29 ${root} ${at} rw,nosuid - cgroup cgroup rw,cpu,cpuacct`;
const v1MemMount = `35 31 0:32 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory`;
const rootMount = `23 1 254:1 / / rw,relatime - ext4 /dev/vda rw`;

const cases: Record<string, { fs: Record<string, string>; want: number | undefined }> = {
  "v2 in a cgroup namespace, a limit of 1.5 cores": {
    fs: {
      "/proc/self/cgroup": "0::/\n",
      "/proc/self/mountinfo": `${rootMount}\n${v2Mount()}\n`,
      "/sys/fs/cgroup/cpu.max": "150000 100000\n",
    },
    want: 1.5,
  },
  "v2 without a limit": {
    fs: { "/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": `${v2Mount()}\n`, "/sys/fs/cgroup/cpu.max": "max 100000\n" },
    want: undefined,
  },
  "v2 without a namespace: the pod's limit, above the container's cgroup, counts": {
    fs: {
      "/proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
      "/proc/self/mountinfo": `${v2Mount()}\n`,
      "/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max": "max 100000\n",
      "/sys/fs/cgroup/kubepods/pod1/cpu.max": "200000 100000\n",
      "/sys/fs/cgroup/kubepods/cpu.max": "max 100000\n",
    },
    want: 2,
  },
  "v2: the smallest limit on the way up wins": {
    fs: {
      "/proc/self/cgroup": "0::/a/b\n",
      "/proc/self/mountinfo": `${v2Mount()}\n`,
      "/sys/fs/cgroup/a/b/cpu.max": "300000 100000\n",
      "/sys/fs/cgroup/a/cpu.max": "50000 100000\n",
    },
    want: 0.5,
  },
  "v1 as Docker mounts it (the container's own cgroup is the mount's root)": {
    fs: {
      "/proc/self/cgroup": "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n",
      "/proc/self/mountinfo": `${v1CpuMount("/docker/abc")}\n${v1MemMount}\n`,
      "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "50000\n",
      "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
    },
    want: 0.5,
  },
  "v1 without a limit (quota -1)": {
    fs: {
      "/proc/self/cgroup": "4:cpu,cpuacct:/\n",
      "/proc/self/mountinfo": `${v1CpuMount()}\n`,
      "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
      "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
    },
    want: undefined,
  },
  "hybrid: v1 holds the cpu controller, v2 is mounted with none": {
    fs: {
      "/proc/self/cgroup": "1:cpu:/\n0::/\n",
      "/proc/self/mountinfo": `${v1CpuMount("/", "/sys/fs/cgroup/cpu")}\n${v2Mount("/", "/sys/fs/cgroup/unified")}\n`,
      "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "100000\n",
      "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
    },
    want: 1,
  },
  "a mount point with a space, escaped in mountinfo": {
    fs: {
      "/proc/self/cgroup": "0::/\n",
      "/proc/self/mountinfo": `${v2Mount("/", "/sys/fs/my\\040cgroup")}\n`,
      "/sys/fs/my cgroup/cpu.max": "400000 100000\n",
    },
    want: 4,
  },
  "files that do not parse are no limit": {
    fs: {
      "/proc/self/cgroup": "garbage\n0::/\n",
      "/proc/self/mountinfo": `not a mount line\n${v2Mount()}\n`,
      "/sys/fs/cgroup/cpu.max": "lots of cores\n",
    },
    want: undefined,
  },
  "no /proc (not Linux)": { fs: {}, want: undefined },
  "no cgroup mounted": { fs: { "/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": `${rootMount}\n` }, want: undefined },
};
for (const [name, tc] of Object.entries(cases)) {
  C(`the CPU quota: ${name}`, () => {
    assert.is(cpuLimit(files(tc.fs)), tc.want);
  });
}

const cores: Array<[cores: number, limit: number | undefined, want: number, name: string]> = [
  [64, 1, 1, "a pod limited to one CPU on a 64-core node"],
  [64, 0.5, 1, "half a core still gets one"],
  [64, 1.5, 2, "a fraction counts up"],
  [2, undefined, 2, "no limit: the cores"],
  [2, 8, 2, "a limit above the cores: the cores"],
];
for (const [n, limit, want, name] of cores) {
  C(`usable cores: ${name}`, () => {
    assert.is(usableCores(n, limit), want);
  });
}

C.run();
