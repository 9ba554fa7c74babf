// xfn serve against the client stack Crossplane calls functions with: grpc-go,
// dialled as Crossplane dials (mTLS from its client Secret's files, the server
// name from the authority <fn>.<ns>:9443, round_robin with waitForReady), with
// requests encoded and answers decoded by Go's protobuf runtime. The client is
// `gopeer client` (test/support/gopeer; test/support/go.ts builds it from Debian's grpc-go
// and protobuf packages; .ci/run installs them); the other server tests use grpc-js.
import { fromBinary, toJson, type JsonObject } from "@bufbuild/protobuf";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { request as benchRequest } from "../../bench/workload.js";
import { RunFunctionRequestSchema, RunFunctionResponseSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { RunFunctionResponseSchema as RunFunctionResponseSchemaV1beta1 } from "../../src/gen/fn/v1beta1/zz_generated_run_function_pb.js";
import { DEFAULT_MAX_RESPONSE_BYTES } from "../../src/server/handler.js";
import { makePki, type TestPki } from "../support/certs.js";
import { buildGoClient, type GoClient } from "../support/go.js";
import { until } from "../support/cluster.js";
import { freePort, startServe, type Serving } from "../support/spawn.js";
import { needs } from "../support/needs.js";

const FIXTURE = "test/fixtures/go-client/index.ts";

const T = needs(suite("server: Crossplane's client (grpc-go and Go's protobuf)"), "go");
let pki: TestPki;
let go: GoClient;
let scratch: string;
let server: Serving;

T.before(async () => {
  pki = await makePki();
  go = buildGoClient(pki);
  scratch = go.dir;
  // As Crossplane runs a function: the certificates' folder from TLS_SERVER_CERTS_DIR, no flag.
  server = await startServe([FIXTURE, "--workers", "2"], { TLS_SERVER_CERTS_DIR: pki.serverDir });
});

T.after(async () => {
  await server?.stop();
  pki?.cleanup();
  go?.cleanup();
});

const goCall = (port: number, args: string[], opts: { certs?: "crossplane" | "stranger" } = {}) => go.call(port, args, opts);
const requestFile = (json: JsonObject) => go.requestFile(json);

const xrWith = (spec: JsonObject) => ({ apiVersion: "example.org/v1", kind: "XThing", metadata: { name: "thing" }, spec });

const awkward: JsonObject = {
  text: 'é 日本 🚀 \u0000 \u2028 "quoted" \\',
  big: 1e300,
  tiny: 5e-324,
  negative: -12.75,
  integer: 9007199254740991,
  none: null,
  yes: true,
  nested: [[], {}, [1, [2, [3, { deep: "x".repeat(300) }]]]],
  "key with spaces and ünïcode": "v",
};

T("every field of a response, as Crossplane's Go runtime decodes it (v1 and v1beta1), from a request Go encoded", async () => {
  const req = {
    meta: { tag: "go-tag", capabilities: ["CAPABILITY_CAPABILITIES", "CAPABILITY_CONDITIONS"] },
    observed: {
      composite: { resource: xrWith(awkward) },
      resources: {
        "bucket-ready": { resource: { apiVersion: "s3.example.org/v1", kind: "Bucket", metadata: { name: "b" }, spec: awkward } },
      },
    },
    desired: {
      composite: { resource: { status: { earlier: "function" } } },
      resources: { "from-earlier": { resource: { apiVersion: "v1", kind: "ConfigMap", data: { k: "v" } }, ready: "READY_TRUE" } },
    },
    input: { apiVersion: "example.org/v1", kind: "Input", value: 3 },
    context: { "apiextensions.crossplane.io/environment": { region: "eu" } },
    requiredResources: { cms: { items: [{ resource: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cm" } } }] } },
    credentials: { creds: { credentialData: { data: { password: Buffer.from("pa55").toString("base64") } } } },
  };
  for (const api of ["v1", "v1beta1"] as const) {
    const [got] = await goCall(server.port, ["-api", api, "-out", scratch, requestFile(req as JsonObject)]);
    assert.is(got!.code, "OK", `${api}: ${got!.message}`);
    assert.is(got!.decodeError, undefined, api);
    assert.is(got!.unknown, undefined, `${api}: fields Go does not know: ${got!.unknown}`);
    // The same bytes, decoded by protobuf-es: the two runtimes agree on every field.
    const schema = api === "v1" ? RunFunctionResponseSchema : RunFunctionResponseSchemaV1beta1;
    const es = toJson(schema, fromBinary(schema, readFileSync(join(scratch, "0.bin"))));
    assert.equal(got!.response, es as JsonObject, api);

    const rsp = got!.response as Record<string, any>;
    assert.is(rsp["meta"].tag, "go-tag");
    assert.is(rsp["meta"].ttl, "42.500s");
    const status = rsp["desired"].composite.resource.status;
    assert.equal(status.echo, awkward, `${api}: the XR's spec came back as Go sent it`);
    assert.is(status.earlier, "function", "an earlier function's desired XR is kept");
    assert.is(status.tag, "go-tag");
    assert.equal(status.input, req.input);
    assert.equal(Object.keys(status.required), ["cms"]);
    assert.is(status.credential, "pa55");
    assert.equal(status.capabilities, api === "v1" ? [1, 4] : [1, 4]);
    assert.equal(rsp["desired"].composite.connectionDetails, { password: "czNjcjN0", binary: "AAEC/f7/" });
    assert.is(rsp["desired"].composite.ready, "READY_FALSE");
    assert.equal(rsp["desired"].resources["bucket-ready"].resource.spec, awkward);
    assert.is(rsp["desired"].resources["bucket-ready"].ready, "READY_TRUE");
    assert.equal(rsp["desired"].resources["from-earlier"], req.desired.resources["from-earlier"], "copied through unread");
    assert.equal(rsp["context"], { ...req.context, "example.org/echo": { from: "go-client test", n: 1e21 } });
    assert.equal(
      rsp["results"].map((r: Record<string, string>) => [r["severity"], r["reason"], r["target"]]),
      [
        ["SEVERITY_NORMAL", "Echoed", "TARGET_COMPOSITE_AND_CLAIM"],
        ["SEVERITY_WARNING", "Careful", "TARGET_COMPOSITE"],
        ["SEVERITY_FATAL", "OnPurpose", "TARGET_COMPOSITE"],
      ],
    );
    assert.is(rsp["results"][0].message, "normal result é 日本 🚀");
    assert.equal(Object.keys(rsp["requirements"].resources).sort(), ["by-labels", "by-name"]);
    assert.equal(rsp["requirements"].extraResources.all.matchLabels, {});
    assert.equal(rsp["requirements"].schemas.schema, { apiVersion: "example.org/v1", kind: "Thing" });
    assert.equal(
      rsp["conditions"].map((c: Record<string, string>) => c["status"]),
      ["STATUS_CONDITION_TRUE", "STATUS_CONDITION_FALSE", "STATUS_CONDITION_UNKNOWN"],
    );
    assert.equal(rsp["output"], { out: [1, 2.5, "x"], empty: {} });
  }
});

T(
  "1000 observed resources (a 3.5 MiB request), four calls at once: Go encodes them, the pool answers, Go decodes the answers",
  async () => {
    const s = await startServe(["bench/fn.ts"], { TLS_SERVER_CERTS_DIR: pki.serverDir });
    try {
      const req = toJson(RunFunctionRequestSchema, fromBinary(RunFunctionRequestSchema, benchRequest(1000))) as JsonObject;
      const got = await goCall(s.port, ["-n", "4", "-out", scratch, requestFile(req)]);
      assert.is(got.length, 4);
      for (const r of got) {
        assert.is(r.code, "OK", r.message);
        assert.is(r.decodeError, undefined);
        assert.is(r.unknown, undefined);
        const desired = (r.response as Record<string, any>)["desired"];
        assert.is(Object.keys(desired.resources).length, 1000);
        assert.is(desired.composite.resource.status.drifted, 0, "every observed spec decoded from Go's bytes holds what was composed");
      }
      const es = toJson(RunFunctionResponseSchema, fromBinary(RunFunctionResponseSchema, readFileSync(join(scratch, "3.bin"))));
      assert.equal(got[3]!.response, es as JsonObject);
    } finally {
      await s.stop();
    }
  },
);

T("a response of exactly 4 MiB reaches Go, whose limit it is; one byte more is refused by xfn, naming the limit", async () => {
  const at = (bytes: number) => requestFile({ observed: { composite: { resource: xrWith({ mode: "size", bytes }) } } });
  const [fits, over] = await goCall(server.port, [at(DEFAULT_MAX_RESPONSE_BYTES), at(DEFAULT_MAX_RESPONSE_BYTES + 1)]);
  assert.is(fits!.code, "OK", fits!.message);
  assert.is(fits!.bytes, 4 * 1024 * 1024);
  assert.is(fits!.decodeError, undefined);
  assert.is(over!.code, "ResourceExhausted");
  assert.match(
    over!.message ?? "",
    /^response is 4194305 bytes, larger than the 4194304-byte limit Crossplane accepts; largest: the composite resource 4\.00 MiB \(\d+ bytes\)$/,
  );
});

T("a request over --max-recv-message-size: Go is told the size, the limit and the flag; the server logs it and serves on", async () => {
  const big = requestFile({ observed: { composite: { resource: xrWith({ blob: "x".repeat(4_500_000) }) } } });
  const [refused] = await goCall(server.port, [big]);
  assert.is(refused!.code, "ResourceExhausted");
  assert.match(
    refused!.message!,
    /^request is 45\d{5} bytes, larger than this function's limit of 4194304 bytes \(xfn serve --max-recv-message-size 4, in MB\)$/,
  );
  const [next] = await goCall(server.port, [requestFile({ observed: { composite: { resource: xrWith({}) } } })]);
  assert.is(next!.code, "OK", next!.message);
  // Logged with the peer: Go's address on loopback.
  const logged = (l: string) => l.includes(`"msg":"refused a request from 127.0.0.1:`) && l.includes(`: ${refused!.message}"`);
  await until("the refusal logged", () => server.output().split("\n").some(logged));
});

T("Go's deadline ends a call DEADLINE_EXCEEDED; the server logs it and answers the next call", async () => {
  const slow = requestFile({ meta: { tag: "slow-one" }, observed: { composite: { resource: xrWith({ mode: "sleep", ms: 5000 }) } } });
  const [late] = await goCall(server.port, ["-timeout", "500ms", slow]);
  assert.is(late!.code, "DeadlineExceeded");
  assert.ok(late!.ms < 4000, `the deadline ended the call, after ${late!.ms} ms`);
  const [next] = await goCall(server.port, [requestFile({ observed: { composite: { resource: xrWith({}) } } })]);
  assert.is(next!.code, "OK", next!.message);
  await until("the deadline logged with the call's tag", () => /"tag":"slow-one".*before the client's deadline/.test(server.output()));
});

T("grpc-go's health client: SERVING", async () => {
  const [h] = await goCall(server.port, ["-health"]);
  assert.is(h!.code, "OK", h!.message);
  assert.is(h!.health, "SERVING");
});

T(
  "Go with a client certificate from another CA is refused, with a reason that fits what Go sends; the server keeps serving Crossplane",
  async () => {
    const req = requestFile({ observed: { composite: { resource: xrWith({}) } } });
    const [refused] = await goCall(server.port, ["-timeout", "2s", req], { certs: "stranger" });
    // waitForReady retries a refused connection, so the call ends at its deadline, with the connection's error.
    assert.is(refused!.code, "DeadlineExceeded");
    assert.match(refused!.message!, /connection/);
    const [ok] = await goCall(server.port, [req]);
    assert.is(ok!.code, "OK", ok!.message);
    // Go withholds a certificate that no CA named by the server signed (OpenSSL sends it,
    // and is refused as UNABLE_TO_VERIFY_LEAF_SIGNATURE): the server sees none.
    const line = server
      .output()
      .split("\n")
      .find((l) => l.includes("refused a TLS handshake"));
    assert.ok(line, server.output());
    const logged = JSON.parse(line!) as Record<string, string>;
    assert.is(logged["reason"], "ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE");
    assert.match(logged["msg"]!, /none signed by this server's ca\.crt, which Go clients such as Crossplane's then withhold/);
  },
);

T("a call made before the server listens waits for it (waitForReady, as Crossplane sets) and is answered", async () => {
  const port = await freePort();
  const call = goCall(port, [requestFile({ observed: { composite: { resource: xrWith({}) } } })]);
  await new Promise((r) => setTimeout(r, 1000));
  const s = await startServe(
    [FIXTURE, "--address", `127.0.0.1:${port}`],
    { TLS_SERVER_CERTS_DIR: pki.serverDir },
    { defaultAddress: true },
  );
  try {
    const [got] = await call;
    assert.is(got!.code, "OK", got!.message);
    assert.ok(got!.ms >= 1000, `answered after ${got!.ms} ms, once the server was up`);
  } finally {
    await s.stop();
  }
});

T("SIGTERM while a Go call runs: the call is answered, then the server exits 0", async () => {
  const s = await startServe([FIXTURE], { TLS_SERVER_CERTS_DIR: pki.serverDir });
  const call = goCall(s.port, [requestFile({ observed: { composite: { resource: xrWith({ mode: "sleep", ms: 1500 }) } } })]);
  await new Promise((r) => setTimeout(r, 500));
  const exit = await s.stop("SIGTERM");
  const [got] = await call;
  assert.is(got!.code, "OK", `${got!.message}\n${s.output()}`);
  assert.ok(got!.ms >= 1400, `the call ran its 1.5 s across the signal (${got!.ms} ms)`);
  assert.is(exit.code, 0, s.output());
});

T.run();
