// Crossplane's Go stack for tests: test/support/gopeer, built from Debian's
// grpc-go and protobuf sources. Its client calls a function as Crossplane does
// (grpc-go dialled as Crossplane dials; Go's protobuf runtime encoding requests
// and decoding answers), with folders laid out as Crossplane's client Secret;
// its function serves as a function-sdk-go function does.
import { create, toBinary, type JsonObject } from "@bufbuild/protobuf";
import {
  FileDescriptorSetSchema,
  file_google_protobuf_duration,
  file_google_protobuf_struct,
  file_google_protobuf_timestamp,
} from "@bufbuild/protobuf/wkt";
import { execFile, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { file_crossplane_pipeline_v1alpha1_pipeline_inspector } from "../../src/gen/crossplane/pipeline/v1alpha1/pipeline_inspector_pb.js";
import { file_fn_v1_run_function } from "../../src/gen/fn/v1/run_function_pb.js";
import { file_fn_v1beta1_zz_generated_run_function } from "../../src/gen/fn/v1beta1/zz_generated_run_function_pb.js";
import type { TestPki } from "./certs.js";
import { deadline } from "./budget.js";
import { GOPATH } from "./needs.js";
import { ROOT } from "./spawn.js";

/** GoResult is one call as the Go client reports it. */
export interface GoResult {
  i: number;
  /** grpc-go's name of the status code: OK, DeadlineExceeded, ResourceExhausted, ... */
  code: string;
  message?: string;
  ms: number;
  bytes?: number;
  /** The answer as Go's protojson prints it. */
  response?: JsonObject;
  decodeError?: string;
  /** Where the answer held fields Go's descriptors do not name. */
  unknown?: string[];
  health?: string;
}

/** GoFunction is a running `gopeer function`. */
export interface GoFunction {
  port: number;
  output(): string;
  stop(): Promise<void>;
}

export interface GoClient {
  /** dir holds the client's files; -out answers may be written there. */
  dir: string;
  /**
   * call runs the client against 127.0.0.1:port with Crossplane's client
   * certificate (certs "stranger": one from another CA); one result per call,
   * in call order.
   */
  call(port: number, args: string[], opts?: { certs?: "crossplane" | "stranger" }): Promise<GoResult[]>;
  /** requestFile writes a request as protojson, for the client to encode as Crossplane would. */
  requestFile(json: JsonObject): string;
  /**
   * inspect emits steps to the Pipeline Inspector at socket as Crossplane's socket inspector does;
   * one result per emit (EmitRequest then EmitResponse for each step).
   */
  inspect(socket: string, steps: JsonObject[]): Promise<Array<{ i: number; method: string; code: string; ms: number }>>;
  /** startFunction serves a Go function on 127.0.0.1: mTLS with the server certificate of pki (client certificates required), or plaintext. */
  startFunction(opts: { insecure?: boolean; v1beta1Only?: boolean }): Promise<GoFunction>;
  cleanup(): void;
}

/** buildGoClient builds the client and lays out its certificate folders from pki. It throws, saying what to install, without Go. */
export function buildGoClient(pki: TestPki): GoClient {
  let go = "";
  try {
    go = execFileSync("go", ["version"], { encoding: "utf8" });
  } catch {
    // Not a skip: a test that needs Crossplane's client cannot check what it is for without it.
  }
  if (!go || !existsSync(join(GOPATH, "src/google.golang.org/grpc"))) {
    throw new Error(
      `these tests need Go and grpc-go's sources in ${GOPATH} ` +
        "(Debian: apt-get install golang-go golang-google-grpc-dev golang-google-protobuf-dev; .ci/run installs them)",
    );
  }
  const dir = mkdtempSync(join(tmpdir(), "xfn-go-"));
  const peer = join(dir, "gopeer");
  execFileSync("go", ["build", "-o", peer, "./test/support/gopeer"], {
    cwd: ROOT,
    // GOPATH mode: the packages come from Debian, nothing is downloaded. The build cache outlives the run.
    env: {
      ...process.env,
      GOPATH,
      GO111MODULE: "off",
      GOFLAGS: "",
      GOCACHE: process.env["GOCACHE"] ?? join(tmpdir(), "xfn-go-build-cache"),
    },
    stdio: "pipe",
  });
  // Crossplane's client Secret (crossplane-tls-client) as files: ca.crt, tls.crt, tls.key.
  const secret = (name: string, pem: { cert: Buffer; key: Buffer }) => {
    mkdirSync(join(dir, name));
    writeFileSync(join(dir, name, "ca.crt"), pki.ca);
    writeFileSync(join(dir, name, "tls.crt"), pem.cert);
    writeFileSync(join(dir, name, "tls.key"), pem.key);
  };
  secret("crossplane", pki.client);
  secret("stranger", pki.strangerClient);
  const files = [
    file_google_protobuf_duration,
    file_google_protobuf_struct,
    file_google_protobuf_timestamp,
    file_fn_v1_run_function,
    file_fn_v1beta1_zz_generated_run_function,
    file_crossplane_pipeline_v1alpha1_pipeline_inspector,
  ];
  writeFileSync(
    join(dir, "fds.bin"),
    toBinary(FileDescriptorSetSchema, create(FileDescriptorSetSchema, { file: files.map((f) => f.proto) })),
  );

  let requests = 0;
  return {
    dir,
    call(port, args, opts = {}) {
      const argv = [
        "client",
        "-addr",
        `127.0.0.1:${port}`,
        "-certs",
        join(dir, opts.certs ?? "crossplane"),
        "-fds",
        join(dir, "fds.bin"),
        "-timeout",
        "20s",
        ...args,
      ];
      return new Promise((resolve, reject) => {
        execFile(peer, argv, { maxBuffer: 256 << 20, timeout: 60_000 }, (err, stdout, stderr) => {
          if (err) return reject(new Error(`gopeer ${argv.join(" ")}: ${err.message}\n${stderr}`));
          const rows = stdout
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l) as GoResult);
          resolve(rows.sort((a, b) => a.i - b.i));
        });
      });
    },
    inspect(socket, steps) {
      const stepsFile = join(dir, `steps-${++requests}.json`);
      writeFileSync(stepsFile, JSON.stringify(steps));
      const argv = ["inspect", "-socket", socket, "-fds", join(dir, "fds.bin"), "-steps", stepsFile];
      return new Promise((resolve, reject) => {
        execFile(peer, argv, { maxBuffer: 64 << 20, timeout: 60_000 }, (err, stdout, stderr) => {
          if (err) return reject(new Error(`gopeer ${argv.join(" ")}: ${err.message}\n${stderr}`));
          resolve(
            stdout
              .trim()
              .split("\n")
              .map((l) => JSON.parse(l) as { i: number; method: string; code: string; ms: number }),
          );
        });
      });
    },
    requestFile(json) {
      const path = join(dir, `req-${++requests}.json`);
      writeFileSync(path, JSON.stringify(json));
      return path;
    },
    startFunction({ insecure = false, v1beta1Only = false }) {
      const argv = [
        "function",
        "-fds",
        join(dir, "fds.bin"),
        ...(insecure ? [] : ["-certs", pki.serverDir]),
        ...(v1beta1Only ? ["-v1beta1-only"] : []),
      ];
      const child = spawn(peer, argv, { stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      child.stderr.on("data", (d: Buffer) => (out += d));
      const exited = new Promise<void>((r) => child.on("close", () => r()));
      return new Promise((resolve, reject) => {
        const cancel = deadline(10_000, () => (child.kill(), reject(new Error(`gopeer function did not start:\n${out}`))));
        child.stdout.on("data", (d: Buffer) => {
          out += d;
          const m = /listening (\d+)/.exec(out);
          if (!m) return;
          cancel();
          resolve({ port: Number(m[1]), output: () => out, stop: () => (child.kill(), exited) });
        });
        void exited.then(() => reject(new Error(`gopeer function exited:\n${out}`)));
      });
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
