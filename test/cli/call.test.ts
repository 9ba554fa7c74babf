// `xfn call` as a user runs it, against real servers on loopback.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData } from "@grpc/grpc-js";
import { toBinary } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import hello from "../../functions/hello/index.js";
import { RunFunctionResponseSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import * as response from "../../src/sdk/response.js";
import { rawService, serve, type RunningServer } from "../../src/server/server.js";
import { FUNCTION_HOST, makePki, type TestPki } from "../support/certs.js";
import { memoryLog } from "../support/log.js";
import { freePort, ROOT, run, startServe } from "../support/spawn.js";

const Call = suite("cli: xfn call");

const example = "functions/hello/example/request.yaml";
let srv: RunningServer;
let pki: TestPki;
let scratch: string;
Call.before(async () => {
  srv = await serve(hello, { address: "127.0.0.1:0", insecure: true }, memoryLog().log);
  pki = await makePki();
  scratch = mkdtempSync(join(tmpdir(), "xfn-call-"));
});
Call.after(async () => {
  await srv.stop(1000);
  pki.cleanup();
  rmSync(scratch, { recursive: true, force: true });
});

Call("calls the example function with the example request", async () => {
  const r = await run(["call", `127.0.0.1:${srv.port}`, example, "--insecure"]);
  assert.is(r.code, 0, r.stderr);
  const rsp = JSON.parse(r.stdout);
  assert.is(rsp.meta.tag, "example-1");
  assert.equal(Object.keys(rsp.desired.resources).sort(), ["bucket-assets", "bucket-logs"]);
  assert.is(rsp.desired.resources["bucket-logs"].ready, "READY_TRUE");
  assert.is(rsp.desired.resources["bucket-assets"].resource.spec.forProvider.region, "us-east-1");
});

Call("exit code 3 when the function returns a Fatal result", async () => {
  const f = join(scratch, "bad.yaml");
  writeFileSync(f, "meta: {tag: t}\nobserved: {composite: {resource: {kind: X, spec: {buckets: [{name: Bad_Name}]}}}}\n");
  const r = await run(["call", `127.0.0.1:${srv.port}`, f, "--insecure"]);
  assert.is(r.code, 3, r.stderr);
  assert.match(JSON.parse(r.stdout).results[0].message, /must be a DNS label/);
});

Call("a resource, label and context key named __proto__ reach the function and come back in the output", async () => {
  const f = join(scratch, "proto.yaml");
  writeFileSync(
    f,
    [
      "meta: {tag: t}",
      "observed: {composite: {resource: {kind: XBuckets, metadata: {name: x}, spec: {buckets: [{name: a}]}}}}",
      "desired: {resources: {__proto__: {resource: {kind: K, metadata: {labels: {__proto__: l}}}}}}",
      "context: {__proto__: c}",
      "",
    ].join("\n"),
  );
  const r = await run(["call", `127.0.0.1:${srv.port}`, f, "--insecure"]);
  assert.is(r.code, 0, r.stderr);
  const rsp = JSON.parse(r.stdout);
  assert.ok(Object.hasOwn(rsp.desired.resources, "__proto__"), r.stdout);
  assert.is(rsp.desired.resources["__proto__"].resource.metadata.labels["__proto__"], "l");
  assert.ok(Object.hasOwn(rsp.desired.resources, "bucket-a"));
  assert.is(rsp.context["__proto__"], "c");
});

const bad: Record<string, { file?: string; content?: string; want: RegExp }> = {
  MissingFile: { file: "/nonexistent/request.yaml", want: /cannot read \/nonexistent\/request\.yaml: ENOENT/ },
  NotYaml: { content: "meta: {tag: [unclosed\n", want: /cannot parse .*bad\.yaml/ },
  NotAnObject: { content: "- a\n- b\n", want: /expected a RunFunctionRequest object/ },
  UnknownField: { content: "meta: {tag: t}\nobserverd: {}\n", want: /as a RunFunctionRequest: .*observerd/ },
  WrongFieldType: { content: "meta: {tag: [1, 2]}\n", want: /as a RunFunctionRequest: .*tag/ },
};
for (const [name, tc] of Object.entries(bad)) {
  Call(`bad request file, exit code 1: ${name}`, async () => {
    const f = tc.file ?? join(scratch, "bad.yaml");
    if (tc.content !== undefined) writeFileSync(f, tc.content);
    const r = await run(["call", `127.0.0.1:${srv.port}`, f, "--insecure"]);
    assert.is(r.code, 1, r.stdout);
    assert.match(r.stderr, tc.want);
  });
}

Call("a negative --wait is refused naming the flag, exit code 1", async () => {
  const r = await run(["call", `127.0.0.1:${srv.port}`, example, "--insecure", "--wait", "-1"]);
  assert.is(r.code, 1);
  assert.match(r.stderr, /--wait must be a number of seconds, 0 or more, got "-1"/);
});

Call("an unreachable function is a clear error, exit code 1", async () => {
  const r = await run(["call", "127.0.0.1:1", example, "--insecure", "--wait", "1"]);
  assert.is(r.code, 1);
  assert.match(r.stderr, /xfn call: cannot reach a function at 127\.0\.0\.1:1 within 1 s/);
  const now = await run(["call", "127.0.0.1:1", example, "--insecure", "--wait", "0", "--timeout", "2"]);
  assert.is(now.code, 1);
  assert.match(now.stderr, /xfn call: (14 UNAVAILABLE|4 DEADLINE_EXCEEDED)/);
});

Call("a call started before the server listens waits for it (serve & call, as the README runs them)", async () => {
  const port = await freePort();
  const calling = run(["call", `127.0.0.1:${port}`, example, "--insecure", "--wait", "15"]);
  await new Promise((r) => setTimeout(r, 300));
  const late = await serve(hello, { address: `127.0.0.1:${port}`, insecure: true }, memoryLog().log);
  try {
    const r = await calling;
    assert.is(r.code, 0, r.stderr);
    assert.is(JSON.parse(r.stdout).meta.tag, "example-1");
  } finally {
    await late.stop(1000);
  }
});

Call("mTLS with a client certificates directory and the server name Crossplane verifies", async () => {
  const tls = await serve(hello, { address: "127.0.0.1:0", tlsCertsDir: pki.serverDir }, memoryLog().log);
  const clientDir = join(scratch, "client");
  try {
    mkdirSync(clientDir, { recursive: true });
    writeFileSync(join(clientDir, "tls.crt"), pki.client.cert);
    writeFileSync(join(clientDir, "tls.key"), pki.client.key);
    writeFileSync(join(clientDir, "ca.crt"), pki.ca);
    const r = await run(["call", `127.0.0.1:${tls.port}`, example, "--tls-certs-dir", clientDir, "--server-name", FUNCTION_HOST]);
    assert.is(r.code, 0, r.stderr);
    assert.is(JSON.parse(r.stdout).meta.tag, "example-1");
  } finally {
    await tls.stop(1000);
  }
});

// Crossplane's certificates, both ends: its client certificate and the function's server certificate its package runtime
// makes carry its CA's subject name and no authority key id, which OpenSSL alone refuses (src/server/tls.ts issuedByName).
Call("mTLS with Crossplane's own certificates at both ends: served; a wrong server name or a self-signed server refused", async () => {
  const clientDir = join(scratch, "crossplane-client");
  mkdirSync(clientDir, { recursive: true });
  writeFileSync(join(clientDir, "tls.crt"), pki.crossplane.cert);
  writeFileSync(join(clientDir, "tls.key"), pki.crossplane.key);
  writeFileSync(join(clientDir, "ca.crt"), pki.ca);
  const call = (port: number, name: string) =>
    run(["call", `127.0.0.1:${port}`, example, "--tls-certs-dir", clientDir, "--server-name", name, "--wait", "2"]);
  const ok = await serve(hello, { address: "127.0.0.1:0", tlsCertsDir: pki.crossplaneServerDir }, memoryLog().log);
  try {
    const r = await call(ok.port, FUNCTION_HOST);
    assert.is(r.code, 0, r.stderr);
    assert.is(JSON.parse(r.stdout).meta.tag, "example-1");
    const wrong = await call(ok.port, "function-other.crossplane-system");
    assert.is.not(wrong.code, 0, wrong.stdout);
    assert.match(
      wrong.stderr,
      /cannot reach a function at .* \(refused the function's certificate: ERR_TLS_CERT_ALTNAME_INVALID \(the certificate does not name function-other\.crossplane-system\)\)/,
    );
  } finally {
    await ok.stop(1000);
  }
  const impostor = await serve(hello, { address: "127.0.0.1:0", tlsCertsDir: pki.crossplaneSelfSignedServerDir }, memoryLog().log);
  try {
    const r = await call(impostor.port, FUNCTION_HOST);
    assert.is.not(r.code, 0, r.stdout);
    assert.match(r.stderr, /\(refused the function's certificate: DEPTH_ZERO_SELF_SIGNED_CERT\)/);
  } finally {
    await impostor.stop(1000);
  }
});

Call("falls back to v1beta1 when a server answers UNIMPLEMENTED for v1, as Crossplane does", async () => {
  // A server for Crossplane 1.14-1.16: v1beta1 only.
  const server = new Server();
  server.addService(rawService("apiextensions.fn.proto.v1beta1.FunctionRunnerService"), {
    RunFunction: (_call: ServerUnaryCall<Buffer, Buffer>, cb: sendUnaryData<Buffer>) => {
      const rsp = response.to({ meta: { tag: "beta" } } as never);
      response.normal(rsp, "served by v1beta1");
      cb(null, Buffer.from(toBinary(RunFunctionResponseSchema, rsp)));
    },
  });
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  );
  try {
    const r = await run(["call", `127.0.0.1:${port}`, example, "--insecure"]);
    assert.is(r.code, 0, r.stderr);
    assert.is(JSON.parse(r.stdout).results[0].message, "served by v1beta1");
    const only = await run(["call", `127.0.0.1:${port}`, example, "--insecure", "--api", "v1"]);
    assert.is(only.code, 1);
    assert.match(only.stderr, /12 UNIMPLEMENTED/);
  } finally {
    server.forceShutdown();
  }
});

Call("--debug says which function answered: xfn serve's module, process and start time; another server says it cannot tell", async () => {
  const s = await startServe(["functions/hello", "--insecure"]);
  try {
    const r = await run(["call", `127.0.0.1:${s.port}`, example, "--insecure", "--debug"]);
    assert.is(r.code, 0, r.stderr);
    assert.is(JSON.parse(r.stdout).meta.tag, "example-1", "the response is unchanged on standard output");
    const m = /^xfn call: answered by xfn serve (\S+) \(pid (\d+)\), serving since (\S+) \((\d+) s ago\)$/m.exec(r.stderr);
    assert.ok(m, r.stderr);
    assert.is(m[1], join(ROOT, "functions/hello/index.ts"));
    assert.is(Number(m[2]), s.child.pid);
    assert.ok(Date.now() - Date.parse(m[3]!) < 60_000, m[3]);
    const quiet = await run(["call", `127.0.0.1:${s.port}`, example, "--insecure"]);
    assert.is(quiet.stderr, "", "without --debug, nothing on standard error");
  } finally {
    await s.stop();
  }
  // The in-process server here is served without headers: said so, not guessed.
  const other = await run(["call", `127.0.0.1:${srv.port}`, example, "--insecure", "--debug"]);
  assert.is(other.code, 0, other.stderr);
  assert.match(other.stderr, /^xfn call: the server did not say which function answered: it is not xfn serve/m);
});

Call.run();
