// xfn's clients (xfn call, xfn render's Development runtime) against a
// function served by grpc-go, as every function written with function-sdk-go
// is: `gopeer function` (test/support/gopeer) decodes each request with Go's
// protobuf runtime, strictly, refuses one holding fields it does not know, and
// answers with bytes Go encodes.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse, parseAllDocuments } from "yaml";
import { Metadata, status as Code } from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import { tooLarge } from "../../src/client/client.js";
import type { Doc } from "../../src/engine/docs.js";
import { createRunner } from "../../src/engine/runner.js";
import { RunFunctionRequestSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { makePki, type TestPki } from "../support/certs.js";
import { buildGoClient, type GoClient, type GoFunction } from "../support/go.js";
import { run } from "../support/spawn.js";
import { needs } from "../support/needs.js";

const G = needs(suite("cli: xfn call and xfn render against a grpc-go function"), "go");
let pki: TestPki;
let go: GoClient;
let mtls: GoFunction;
let plain: GoFunction;
let dir: string;

G.before(async () => {
  pki = await makePki();
  go = buildGoClient(pki);
  dir = join(go.dir, "files");
  mkdirSync(dir);
  mtls = await go.startFunction({});
  plain = await go.startFunction({ insecure: true });
});

G.after(async () => {
  await mtls?.stop();
  await plain?.stop();
  go?.cleanup();
  pki?.cleanup();
});

const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

// As Crossplane's client Secret: this client's tls.crt and tls.key, and the CA of the server's certificate.
const mtlsArgs = () => ["--tls-certs-dir", join(go.dir, "crossplane"), "--server-name", "function-hello.crossplane-system"];

const spec = { text: "é 日本 🚀 \u2028", big: 1e300, tiny: 5e-324, negative: -12.75, none: null, list: [[], {}, [1, { deep: true }]] };

G("xfn call over mTLS, v1 and v1beta1: Go decodes the request strictly and xfn prints what Go answered", async () => {
  const req = file(
    "req.yaml",
    JSON.stringify({
      meta: { tag: "from-xfn" },
      input: { apiVersion: "example.org/v1", kind: "Input", mode: "compose" },
      observed: { composite: { resource: { apiVersion: "example.org/v1", kind: "XR", metadata: { name: "x" }, spec } } },
      desired: { resources: { earlier: { resource: { apiVersion: "v1", kind: "ConfigMap", data: { k: "v" } }, ready: "READY_TRUE" } } },
      context: { "apiextensions.crossplane.io/environment": { region: "eu" } },
      credentials: { creds: { credentialData: { data: { password: Buffer.from("pa55").toString("base64") } } } },
    }),
  );
  for (const api of ["v1", "v1beta1"]) {
    const r = await run(["call", `127.0.0.1:${mtls.port}`, req, ...mtlsArgs(), "--api", api]);
    assert.is(r.code, 0, r.stderr);
    const rsp = parse(r.stdout) as Record<string, any>;
    assert.is(rsp["meta"].tag, "from-xfn", api);
    assert.is(rsp["meta"].ttl, "30s");
    assert.equal(rsp["desired"].resources["from-go"].resource.spec.echo, spec, `${api}: the XR's spec as Go decoded it`);
    assert.is(rsp["desired"].resources["from-go"].ready, "READY_TRUE");
    assert.equal(rsp["desired"].resources["earlier"].resource.data, { k: "v" });
    assert.equal(rsp["results"], [{ severity: "SEVERITY_NORMAL", message: "composed by grpc-go", reason: "Composed" }]);
  }
});

G("xfn call falls back to v1beta1 when a grpc-go function built for Crossplane 1.14-1.16 answers v1 Unimplemented", async () => {
  const old = await go.startFunction({ insecure: true, v1beta1Only: true });
  try {
    const req = file("old.yaml", "meta: {tag: old-function}\n");
    const r = await run(["call", `127.0.0.1:${old.port}`, req, "--insecure"]);
    assert.is(r.code, 0, r.stderr);
    assert.is((parse(r.stdout) as Record<string, any>)["meta"].tag, "old-function");
    // Asked for v1 only, the function's own answer comes through.
    const v1 = await run(["call", `127.0.0.1:${old.port}`, req, "--insecure", "--api", "v1"]);
    assert.is(v1.code, 1);
    assert.match(v1.stderr, /UNIMPLEMENTED: unknown service apiextensions\.fn\.proto\.v1\.FunctionRunnerService/);
  } finally {
    await old.stop();
  }
});

G("xfn call: a Go function's response over 4 MiB is refused as Crossplane refuses it, in words that say so", async () => {
  const req = file("big.yaml", "input: {mode: big, bytes: 5000000}\n");
  const r = await run(["call", `127.0.0.1:${plain.port}`, req, "--insecure"]);
  assert.is(r.code, 1);
  // Before: "Received message larger than max (5000064 vs 4194304)".
  assert.match(
    r.stderr,
    /RESOURCE_EXHAUSTED: the function's response is 50000\d\d bytes, larger than the 4194304-byte limit Crossplane accepts \(grpc-go's default\): Crossplane would fail this call too/,
  );
  // Just under the limit is answered.
  const fits = await run(["call", `127.0.0.1:${plain.port}`, file("fits.yaml", "input: {mode: big, bytes: 4000000}\n"), "--insecure"]);
  assert.is(fits.code, 0, fits.stderr);
  assert.is((parse(fits.stdout) as Record<string, any>)["desired"].composite.resource.status.pad.length, 4_000_000);
});

G("xfn render, Development runtime: a Go function composes, and asks for a required resource that -e answers", async () => {
  const xr = file("xr.yaml", "apiVersion: example.org/v1\nkind: XThing\nmetadata: {name: thing}\nspec: {size: 3, name: é}\n");
  const fns = file(
    "functions.yaml",
    "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-go\n  annotations:\n" +
      `    render.crossplane.io/runtime: Development\n    render.crossplane.io/runtime-development-target: 127.0.0.1:${plain.port}\n`,
  );
  const comp = (mode: string) =>
    file(
      `comp-${mode}.yaml`,
      "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: {name: c}\nspec:\n" +
        "  compositeTypeRef: {apiVersion: example.org/v1, kind: XThing}\n  mode: Pipeline\n  pipeline:\n" +
        `    - step: go\n      functionRef: {name: function-go}\n      input: {apiVersion: example.org/v1, kind: Input, mode: ${mode}}\n`,
    );
  const composed = (stdout: string) =>
    parseAllDocuments(stdout)
      .map((d) => d.toJS() as Record<string, any>)
      .filter((d) => d["kind"] === "GoThing");

  const r = await run(["render", xr, comp("compose"), fns]);
  assert.is(r.code, 0, r.stderr);
  const [thing] = composed(r.stdout);
  assert.ok(thing, r.stdout);
  // The XR as Crossplane's reconcile hands it over: with the Composition it chose.
  assert.equal(thing!["spec"].echo, { size: 3, name: "é", crossplane: { compositionRef: { name: "c" } } });
  assert.is(thing!["metadata"].annotations["crossplane.io/composition-resource-name"], "from-go");

  const required = file(
    "required.yaml",
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: default}\ndata: {colour: teal}\n",
  );
  const asked = await run(["render", xr, comp("require"), fns, "-e", required]);
  assert.is(asked.code, 0, asked.stderr);
  assert.equal(composed(asked.stdout)[0]?.["spec"].fromConfigMap, { colour: "teal" }, asked.stdout);
  // Without the resource, the function keeps asking and composes nothing.
  const unanswered = await run(["render", xr, comp("require"), fns]);
  assert.is(unanswered.code, 0, unanswered.stderr);
  assert.equal(composed(unanswered.stdout), []);
});

G(
  "the Go function refuses a request with a field it does not know or a string that is not UTF-8 (so the calls above prove xfn's bytes clean)",
  async () => {
    const unknown = file("unknown.bin", "");
    writeFileSync(unknown, Buffer.from([0x98, 0x06, 0x01])); // field 99, varint 1
    const notUtf8 = file("not-utf8.bin", "");
    writeFileSync(notUtf8, Buffer.from([0x0a, 0x05, 0x0a, 0x03, 0xff, 0xfe, 0xfd])); // meta.tag: three bytes that are not UTF-8
    const [u, b] = await go.call(mtls.port, [unknown, notUtf8]);
    assert.is(u!.code, "InvalidArgument");
    assert.is(u!.message, "go-function: the request holds unknown fields at request");
    assert.is(b!.code, "InvalidArgument");
    assert.match(b!.message!, /RequestMeta\.tag contains invalid UTF-8/);
  },
);

G(
  "xfn host's runner calls a Development-runtime function with mTLS as Crossplane does (--function-tls-certs-dir), or in plaintext and says so",
  async () => {
    const fn = (port: number): Doc => ({
      source: "functions.yaml",
      obj: {
        apiVersion: "pkg.crossplane.io/v1",
        kind: "Function",
        // The name the test PKI's server certificate carries: function-hello.crossplane-system.
        metadata: {
          name: "function-hello",
          annotations: {
            "render.crossplane.io/runtime": "Development",
            "render.crossplane.io/runtime-development-target": `127.0.0.1:${port}`,
          },
        },
      },
    });
    const req = create(RunFunctionRequestSchema, {
      meta: { tag: "host" },
      observed: { composite: { resource: { apiVersion: "example.org/v1", kind: "XR", spec } } },
    } as never);
    const now = () => new Date(0);
    const certsDir = join(go.dir, "crossplane");

    const secure = await createRunner([fn(mtls.port)], "functions.yaml", now, { certsDir });
    try {
      assert.equal(secure.plaintext(), []);
      const rsp = await secure.run("function-hello", req, Date.now() + 10_000);
      assert.is(rsp.meta?.tag, "host");
      assert.equal(rsp.desired?.resources["from-go"]?.resource?.["spec"], { echo: spec });
    } finally {
      secure.close();
    }

    // A certificate for another name: Crossplane would refuse it too, and the error says what was expected.
    const elsewhere = await createRunner([fn(mtls.port)], "functions.yaml", now, { certsDir, namespace: "elsewhere" });
    try {
      const err = await elsewhere.run("function-hello", req, Date.now() + 3000).then(
        () => undefined,
        (e: Error) => e,
      );
      assert.instance(err, Error);
      assert.match(err!.message, /serving mTLS with a certificate for function-hello\.elsewhere from the CA in the client's ca\.crt/);
    } finally {
      elsewhere.close();
    }

    const plaintext = await createRunner([fn(plain.port)], "functions.yaml", now);
    try {
      assert.equal(plaintext.plaintext(), [{ name: "function-hello", target: `127.0.0.1:${plain.port}` }]);
      assert.is((await plaintext.run("function-hello", req, Date.now() + 10_000)).meta?.tag, "host");
    } finally {
      plaintext.close();
    }
  },
);

G("tooLarge: grpc-js's words for an oversized response become xfn's; other errors pass unchanged", () => {
  const err = (code: number, details: string) =>
    Object.assign(new Error(`${code} X: ${details}`), { code, details, metadata: new Metadata() });
  const over = err(Code.RESOURCE_EXHAUSTED, "Received message larger than max (5000064 vs 4194304)");
  assert.is(
    tooLarge(over).details,
    "the function's response is 5000064 bytes, larger than the 4194304-byte limit Crossplane accepts (grpc-go's default): " +
      "Crossplane would fail this call too",
  );
  assert.is(tooLarge(over).code, Code.RESOURCE_EXHAUSTED);
  assert.is(tooLarge(over).message, `8 RESOURCE_EXHAUSTED: ${tooLarge(over).details}`);
  const own = err(Code.RESOURCE_EXHAUSTED, "Received message larger than max (2000 vs 1024)");
  assert.is(tooLarge(own, 1024).details, "the function's response is 2000 bytes, larger than the 1024-byte limit this client accepts");
  for (const other of [
    err(Code.RESOURCE_EXHAUSTED, "server busy: 144 requests running"),
    err(Code.UNAVAILABLE, "Received message larger than max (1 vs 0)"),
  ]) {
    assert.is(tooLarge(other), other);
  }
});

G.run();
