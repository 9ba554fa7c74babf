// `xfn inspect` as Crossplane meets it: the real command, emitted to by
// `gopeer inspect` (test/support/gopeer/inspect.go), made the way Crossplane's
// SocketPipelineInspector is from Debian's grpc-go and Go's protobuf runtime:
// unix:// dialled without TLS, requests redacted and printed by Go's protojson,
// StepMeta as step.BuildMetadata makes it, 100 ms per emit. Every emit is
// answered OK within that; the cases it writes replay with `xfn test`; SIGTERM
// stops it and removes its socket.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { makePki, type TestPki } from "../support/certs.js";
import { buildGoClient, type GoClient } from "../support/go.js";
import { until } from "../support/cluster.js";
import { needs } from "../support/needs.js";
import { respond } from "../support/respond.js";
import { ROOT, run, XFN } from "../support/spawn.js";

const T = needs(suite("xfn inspect: emitted to by Crossplane's Go stack"), "go");
let pki: TestPki;
let go: GoClient;
let scratch: string;

T.before(async () => {
  pki = await makePki();
  go = buildGoClient(pki);
  scratch = mkdtempSync(join(tmpdir(), "xfn-inspect-go-"));
});
T.after(() => {
  go?.cleanup();
  pki?.cleanup();
  rmSync(scratch, { recursive: true, force: true });
});

const XR = {
  apiVersion: "example.xfn.dev/v1alpha1",
  kind: "XBuckets",
  metadata: { name: "team-a", uid: "u-9" },
  spec: { buckets: [{ name: "logs" }] },
};

T("the Go client's emits are all answered OK within 100 ms; the cases replay with xfn test; SIGTERM stops the sidecar", async () => {
  const socket = join(scratch, "socket");
  const dir = join(scratch, "cases");
  const child = spawn(
    process.execPath,
    [
      XFN,
      "inspect",
      "--socket",
      socket,
      "--dir",
      dir,
      "--follow",
      "--function",
      `function-hello=${join(ROOT, "functions/hello/index.ts")}`,
    ],
    {
      cwd: scratch,
    },
  );
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  try {
    await until("the sidecar listens", () => /pipeline inspector listening/.test(out) && existsSync(socket), 15_000);
    const request: JsonObject = {
      meta: { tag: "go-1" },
      observed: {
        composite: { resource: XR, connectionDetails: { url: Buffer.from("sekrit-url").toString("base64") } },
        resources: {
          s: {
            resource: {
              apiVersion: "v1",
              kind: "Secret",
              metadata: { name: "s" },
              data: { k: Buffer.from("sekrit-data").toString("base64") },
            },
          },
        },
      },
      credentials: { c: { credentialData: { data: { key: Buffer.from("sekrit-cred").toString("base64") } } } },
    };
    const expected = await respond(join(ROOT, "functions/hello/index.ts"), request, "function-hello");
    const step = (i: number, extra: JsonObject = {}) => ({
      request,
      response: expected,
      error: "",
      meta: {
        traceId: "7f1d0c1e-0000-4000-8000-000000000001",
        spanId: `span-${i}`,
        stepIndex: i,
        stepName: i === 0 ? "hello" : "again",
        functionName: "function-hello",
        compositionName: "buckets",
        xr: { apiVersion: XR.apiVersion, kind: XR.kind, name: "team-a", namespace: "", uid: "u-9" },
      },
      ...extra,
    });
    const emits = await go.inspect(socket, [step(0), step(1, { response: null, error: "rpc error: code = DeadlineExceeded" })]);
    assert.equal(
      emits.map((e) => `${e.method} ${e.code}`),
      ["EmitRequest OK", "EmitResponse OK", "EmitRequest OK", "EmitResponse OK"],
    );
    await until("two steps followed", () => (out.match(/ step \d /g) ?? []).length >= 2, 10_000);
    child.kill("SIGTERM");
    assert.is(await exited, 0);
    assert.not.ok(existsSync(socket), "the socket is removed");
    const written = readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => relative(dir, join(e.parentPath, e.name)))
      .sort();
    const trace = "XBuckets._.team-a";
    assert.ok(
      written.every((f) => f.startsWith(`${trace}/`)),
      written.join("\n"),
    );
    assert.ok(written.some((f) => f.endsWith("/00-hello/expected.yaml")) && written.some((f) => f.endsWith("/01-again/request.yaml")));
    const text = written.map((f) => readFileSync(join(dir, f), "utf8")).join("\n");
    for (const secret of ["sekrit-url", "sekrit-data", "sekrit-cred"])
      assert.not.ok(text.includes(Buffer.from(secret).toString("base64")), secret);
    assert.match(out, "error: rpc error: code = DeadlineExceeded");
    // The step that answered is a case `xfn test` replays against functions/hello; the failed one has nothing to expect.
    const replay = await run(["test", dir]);
    assert.is(replay.code, 0, replay.stdout + replay.stderr);
    assert.match(replay.stdout, "1 passed, 0 failed");
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
});

T.run();
