// Builds bench/go/main.go, the bench function in Go, as function-sdk-go
// builds a function: types generated from proto/fn/v1/run_function.proto by
// protoc-gen-go and protoc-gen-go-grpc (built from Debian's protobuf and
// grpc-go sources, run by buf from npm as a local plugin), served by grpc-go.
// Nothing is downloaded: GOPATH mode over /usr/share/gocode, as the tests'
// Go peer (test/support/go.ts). The binary is kept in .tmp/bench-go/.
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

const ROOT = join(import.meta.dirname, "..");
const GOSRC = process.env["XFN_TEST_GOPATH"] ?? "/usr/share/gocode";

/** buildGoFunction builds (once per source change) and returns the path of the Go bench function. */
export function buildGoFunction(): string {
  const dir = join(ROOT, ".tmp", "bench-go");
  const bin = join(dir, "bin");
  const gopath = join(dir, "gopath");
  const out = join(bin, "gofunction");
  const main = join(ROOT, "bench/go/main.go");
  const proto = join(ROOT, "proto/fn/v1/run_function.proto");
  const stamp = join(dir, "built-from");
  const sources = readFileSync(main, "utf8") + readFileSync(proto, "utf8");
  if (existsSync(out) && existsSync(stamp) && readFileSync(stamp, "utf8") === sources) return out;
  if (!existsSync(join(GOSRC, "src/google.golang.org/grpc/cmd/protoc-gen-go-grpc"))) {
    throw new Error(
      `the Go bench function needs Go and grpc-go's and protobuf's sources in ${GOSRC} ` +
        "(Debian: apt-get install golang-go golang-google-grpc-dev golang-google-protobuf-dev)",
    );
  }
  mkdirSync(bin, { recursive: true });
  mkdirSync(join(gopath, "src/xfnbench/gofunction"), { recursive: true });
  const env = {
    ...process.env,
    GO111MODULE: "off",
    GOFLAGS: "",
    GOCACHE: process.env["GOCACHE"] ?? join(tmpdir(), "xfn-go-build-cache"),
  };
  const go = (args: string[], path: string) => execFileSync("go", args, { cwd: dir, env: { ...env, GOPATH: path }, stdio: "pipe" });
  go(["build", "-o", join(bin, "protoc-gen-go"), "google.golang.org/protobuf/cmd/protoc-gen-go"], GOSRC);
  go(["build", "-o", join(bin, "protoc-gen-go-grpc"), "google.golang.org/grpc/cmd/protoc-gen-go-grpc"], GOSRC);
  // The generated package is xfnbench/fnv1 (function-sdk-go's is proto/v1 of crossplane's module).
  const template = join(dir, "buf.gen.yaml");
  const mapping = "Mfn/v1/run_function.proto=xfnbench/fnv1";
  writeFileSync(
    template,
    [
      "version: v2",
      "inputs:",
      `  - directory: ${JSON.stringify(join(ROOT, "proto"))}`,
      `    paths: [${JSON.stringify(proto)}]`,
      "plugins:",
      ...["protoc-gen-go", "protoc-gen-go-grpc"].flatMap((p) => [
        `  - local: ${JSON.stringify(join(bin, p))}`,
        `    out: ${JSON.stringify(join(gopath, "src"))}`,
        `    opt: [${mapping}]`,
      ]),
      "",
    ].join("\n"),
  );
  execFileSync(process.execPath, [join(ROOT, "node_modules/@bufbuild/buf/bin/buf"), "generate", "--template", template], {
    cwd: ROOT,
    stdio: "pipe",
  });
  copyFileSync(main, join(gopath, "src/xfnbench/gofunction/main.go"));
  go(["build", "-o", out, "xfnbench/gofunction"], `${gopath}:${GOSRC}`);
  // The same, linked statically (no cgo), as a function image ships it (bench/image-startup.ts).
  execFileSync("go", ["build", "-o", join(bin, "gofunction-static"), "xfnbench/gofunction"], {
    cwd: dir,
    env: { ...env, GOPATH: `${gopath}:${GOSRC}`, CGO_ENABLED: "0" },
    stdio: "pipe",
  });
  writeFileSync(stamp, sources);
  return out;
}

/** buildStaticGoFunction builds (once per source change) and returns the Go bench function linked statically, for an image. */
export function buildStaticGoFunction(): string {
  const out = join(dirname(buildGoFunction()), "gofunction-static");
  // Built before the static one was: build again.
  if (!existsSync(out)) {
    rmSync(join(ROOT, ".tmp", "bench-go", "built-from"), { force: true });
    buildGoFunction();
  }
  return out;
}

const TICKS_PER_SECOND = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

/** procUsage reads a process's CPU (user + system, in microseconds) and peak resident set from /proc. */
export function procUsage(pid: number): { cpuMicros: number; maxRssKiB: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The fields after the command name (which may hold spaces), from the third: utime is the 14th, stime the 15th.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return { cpuMicros: (ticks / TICKS_PER_SECOND) * 1e6, maxRssKiB: hwm ? Number(hwm[1]) : 0 };
}
