// Traces from `xfn serve`: a span per call, the caller's traceparent as its
// parent, a child per pipeline step; exported over OTLP (HTTP protobuf, HTTP
// JSON, gRPC) to a receiver in the test when the OTEL_ variables ask, and
// nothing when they do not.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { RunFunctionResponseSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { connectInspector } from "../../src/inspect/emitter.js";
import { startInspector } from "../../src/inspect/sidecar.js";
import { tracingWanted } from "../../src/telemetry/otel.js";
import { memoryLog } from "../support/log.js";
import { rawClient } from "../support/client.js";
import { startReceiver, type Receiver, type Span } from "../support/otlp.js";
import { request } from "../support/requests.js";
import { ROOT, run, startServe, XFN } from "../support/spawn.js";

const O = suite("telemetry: OpenTelemetry traces of xfn serve");

O("tracingWanted reads the standard variables: an endpoint turns traces on; disabled, none or no endpoint, off", () => {
  const cases: [NodeJS.ProcessEnv, string | undefined][] = [
    [{}, undefined],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }, "http/protobuf"],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:4318/v1/traces" }, "http/protobuf"],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4317", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }, "grpc"],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: "x", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json" },
      "http/json",
    ],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "x", OTEL_SDK_DISABLED: "TRUE" }, undefined],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "x", OTEL_TRACES_EXPORTER: "none" }, undefined],
  ];
  for (const [env, want] of cases) assert.is(tracingWanted(env), want, JSON.stringify(env));
  assert.throws(
    () => tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: "x", OTEL_EXPORTER_OTLP_PROTOCOL: "thrift" }),
    /OTEL_EXPORTER_OTLP_PROTOCOL "thrift": xfn exports traces over http\/protobuf, http\/json, grpc/,
  );
});

// A request for function-lifecycle with a summary: its steps are a pipeline.
const req = request({
  meta: { tag: "traced" },
  input: { apiVersion: "lifecycle.xfn.dev/v1alpha1", kind: "Lifecycle", summary: {}, schemaCheck: false },
  observed: {
    composite: { resource: { apiVersion: "example.xfn.dev/v1alpha1", kind: "XBuckets", metadata: { name: "team-a" } } },
    resources: {
      logs: {
        resource: { apiVersion: "s3/v1", kind: "Bucket", metadata: { name: "l", annotations: { "crossplane.io/external-name": "l" } } },
      },
    },
  },
  desired: { resources: { logs: { resource: { apiVersion: "s3/v1", kind: "Bucket" } } } },
} as never);

/** startBundle runs a packaged function as its image does (node function.mjs), insecure on a kernel-picked port. */
function startBundle(entry: string, env: NodeJS.ProcessEnv): Promise<{ port: number; output(): string; stop(): Promise<unknown> }> {
  const child = spawn(process.execPath, [entry, "--insecure", "--address", "127.0.0.1:0", "--metrics-address", "127.0.0.1:0"], {
    env: { ...process.env, ...env },
  });
  let out = "";
  const exited = new Promise((r) => child.on("close", r));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => (child.kill("SIGKILL"), reject(new Error(`the bundle did not start:\n${out}`))), 20_000);
    const onData = (d: Buffer) => {
      out += d;
      // The line saying where it serves (the metrics server logs a port too).
      const port = /"port":(\d+)[^\n]*"msg":"serving insecure gRPC|"msg":"serving insecure gRPC[^\n]*"port":(\d+)/.exec(out);
      if (port) {
        clearTimeout(timer);
        resolve({ port: Number(port[1] ?? port[2]), output: () => out, stop: () => (child.kill("SIGTERM"), exited) });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
  });
}

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";

async function tracedCall(
  rx: Receiver,
  env: NodeJS.ProcessEnv,
  args: string[] = [],
  bundle?: string,
): Promise<{ call: Span; steps: Span[]; log: string }> {
  const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: rx.endpoint, OTEL_BSP_SCHEDULE_DELAY: "50", OTEL_SERVICE_NAME: "", ...env };
  const srv = bundle ? await startBundle(bundle, otel) : await startServe(["functions/lifecycle", "--insecure", ...args], otel);
  const client = rawClient(srv.port);
  try {
    const rsp = await client.run(req, { metadata: { traceparent: `00-${TRACE}-${PARENT}-01` } });
    assert.is(rsp.meta?.tag, "traced");
    const spans = await rx.until((s) => s.some((x) => x.name.endsWith("/RunFunction")) && s.some((x) => x.name === "step summary"));
    const call = spans.find((x) => x.name.endsWith("/RunFunction"))!;
    return { call, steps: spans.filter((x) => x.parentSpanId === call.spanId), log: srv.output() };
  } finally {
    client.close();
    await srv.stop();
  }
}

function checkCall({ call, steps }: { call: Span; steps: Span[] }, service = "functions/lifecycle"): void {
  assert.is(call.name, "apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction");
  // The caller's traceparent is its parent.
  assert.is(call.traceId, TRACE);
  assert.is(call.parentSpanId, PARENT);
  assert.is(call.service, service);
  assert.equal(
    {
      tag: call.attributes["xfn.tag"],
      xr: call.attributes["crossplane.composite"],
      method: call.attributes["rpc.method"],
      code: call.attributes["rpc.grpc.status_code"],
      observed: call.attributes["xfn.resources.observed"],
      desiredIn: call.attributes["xfn.resources.desired.in"],
      desiredOut: call.attributes["xfn.resources.desired.out"],
    },
    { tag: "traced", xr: "XBuckets/team-a", method: "RunFunction", code: 0, observed: 1, desiredIn: 1, desiredOut: 1 },
  );
  assert.ok(
    Number(call.attributes["xfn.request.bytes"]) > 100 && Number(call.attributes["xfn.response.bytes"]) > 100,
    JSON.stringify(call.attributes),
  );
  assert.is(call.attributes["xfn.result.severity"], "Normal");
  // One child per step, in order, inside the call's time, with what each left.
  assert.equal(
    steps.sort((a, b) => a.startMs - b.startMs).map((s) => s.name),
    ["step externalName", "step deletion", "step summary"],
  );
  for (const s of steps) {
    assert.is(s.traceId, TRACE);
    assert.ok(
      s.startMs >= call.startMs - 1 && s.endMs <= call.endMs + 1,
      `${s.name} ${s.startMs}-${s.endMs} outside ${call.startMs}-${call.endMs}`,
    );
    assert.is(s.attributes["xfn.step.resources"], 1);
  }
  assert.is(steps.find((s) => s.name === "step summary")!.attributes["xfn.step.severity"], "Normal");
}

O("xfn serve (worker threads) over OTLP HTTP protobuf, the default: the call's span and its steps'", async () => {
  const rx = await startReceiver();
  try {
    const got = await tracedCall(rx, {});
    checkCall(got);
    assert.equal([...rx.protocols], ["http/protobuf"]);
    assert.match(got.log, /"msg":"exporting traces over OTLP"/);
  } finally {
    await rx.close();
  }
});

O("--workers 1 over OTLP HTTP JSON, and over gRPC", async () => {
  const rx = await startReceiver();
  try {
    checkCall(await tracedCall(rx, { OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }, ["--workers", "1"]));
    assert.equal([...rx.protocols], ["http/json"]);
  } finally {
    await rx.close();
  }
  const g = await startReceiver({ grpc: true });
  try {
    checkCall(await tracedCall(g, { OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }));
    assert.equal([...g.protocols], ["grpc"]);
  } finally {
    await g.close();
  }
});

O("a packaged function (xfn package: server.mjs loads otel.mjs beside it) exports the same spans", async () => {
  const out = mkdtempSync(join(tmpdir(), "xfn-otel-pkg-"));
  const rx = await startReceiver();
  try {
    const built = await run(["package", "functions/lifecycle", "--out", out], { timeoutMs: 120_000 });
    assert.is(built.code, 0, built.stderr);
    // Named as its package (OTEL_SERVICE_NAME would win).
    checkCall(await tracedCall(rx, {}, [], join(out, "function.mjs")), "function-lifecycle");
    assert.equal([...rx.protocols], ["http/protobuf"]);
  } finally {
    await rx.close();
    rmSync(out, { recursive: true, force: true });
  }
});

O("xfn host: a span per reconcile; each function call its child; a served function's span the call's child, across processes", async () => {
  const rx = await startReceiver();
  const dir = mkdtempSync(join(tmpdir(), "xfn-otel-host-"));
  const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: rx.endpoint, OTEL_BSP_SCHEDULE_DELAY: "50", OTEL_SERVICE_NAME: "" };
  // hello served on its own (its spans come from its server); lifecycle run by the host itself, on its workers.
  const hello = await startServe(["functions/hello", "--insecure"], otel);
  writeFileSync(
    join(dir, "functions.yaml"),
    [
      "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-hello\n  annotations:\n" +
        `    render.crossplane.io/runtime: Development\n    render.crossplane.io/runtime-development-target: 127.0.0.1:${hello.port}\n`,
      "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: function-lifecycle\n  annotations:\n" +
        `    render.xfn.dev/module: ${join(ROOT, "functions/lifecycle")}\n`,
    ].join("---\n"),
  );
  const host = spawn(
    process.execPath,
    [
      XFN,
      "host",
      "--embedded",
      "--metrics-address",
      "off",
      "--functions",
      join(dir, "functions.yaml"),
      ...["examples/host", "examples/composition.yaml", "examples/xr.yaml"].flatMap((m) => ["--manifests", m]),
    ],
    { cwd: ROOT, env: { ...process.env, ...otel } },
  );
  let out = "";
  host.stdout.on("data", (d) => (out += d));
  host.stderr.on("data", (d) => (out += d));
  const exited = new Promise((r) => host.on("close", r));
  try {
    const spans = await rx
      .until((all) => {
        const rec = all.find((x) => x.name === "reconcile XBuckets");
        return (
          !!rec &&
          all.some((x) => x.name === "step dependencies" && all.some((c) => c.spanId === x.parentSpanId && c.parentSpanId === rec.spanId))
        );
      }, 30_000)
      .catch((err: Error) => {
        throw new Error(`${err.message}\nxfn host said:\n${out.slice(-3000)}`);
      });
    const rec = spans.find((x) => x.name === "reconcile XBuckets")!;
    assert.is(rec.service, "xfn-host");
    assert.is(rec.attributes["crossplane.composite"], "XBuckets/team-a");
    assert.is(rec.parentSpanId, "");
    const calls = spans.filter((x) => x.parentSpanId === rec.spanId);
    // lifecycle twice: it asks for the XR's schema, and is called again with it (as Crossplane calls it).
    assert.equal(calls.map((c) => c.name).sort(), [
      "RunFunction function-hello",
      "RunFunction function-lifecycle",
      "RunFunction function-lifecycle",
    ]);
    // lifecycle ran on the host's workers: its steps are children of the host's call, timed where they ran.
    const lc = calls.find((c) => c.name === "RunFunction function-lifecycle")!;
    const steps = spans.filter((x) => x.parentSpanId === lc.spanId).map((x) => x.name);
    assert.ok(steps.includes("step externalName") && steps.includes("step dependencies"), steps.join(", "));
    assert.is(lc.attributes["crossplane.composite"], "XBuckets/team-a");
    // hello was called over gRPC with the call's traceparent: its own server span is the call's child, in the same trace.
    const hc = calls.find((c) => c.name === "RunFunction function-hello")!;
    const served = await rx.until((all) => all.some((x) => x.parentSpanId === hc.spanId));
    const remote = served.find((x) => x.parentSpanId === hc.spanId)!;
    assert.is(remote.name, "apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction");
    assert.is(remote.traceId, rec.traceId);
    assert.is(remote.service, "functions/hello");
  } finally {
    host.kill("SIGTERM");
    await exited;
    await hello.stop();
    await rx.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

O("xfn inspect: a span per step Crossplane emits, with Crossplane's trace ID and span ID; the steps of a reconcile one trace", async () => {
  const rx = await startReceiver();
  const dir = mkdtempSync(join(tmpdir(), "xfn-otel-inspect-"));
  // The writer thread reads the environment it starts with.
  const saved = { ...process.env };
  Object.assign(process.env, { OTEL_EXPORTER_OTLP_ENDPOINT: rx.endpoint, OTEL_BSP_SCHEDULE_DELAY: "50", OTEL_SERVICE_NAME: "" });
  let sidecar: Awaited<ReturnType<typeof startInspector>> | undefined;
  try {
    sidecar = await startInspector({ socket: join(dir, "socket"), dir: join(dir, "cases"), log: memoryLog().log });
  } finally {
    for (const k of ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_BSP_SCHEDULE_DELAY", "OTEL_SERVICE_NAME"]) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  }
  // Emitted as Crossplane's socket inspector does (inspect/emitter.ts): two steps of one reconcile.
  const emitter = connectInspector(join(dir, "socket"), memoryLog().log);
  const trace = randomUUID();
  const xr = { apiVersion: "example.xfn.dev/v1alpha1", kind: "XBuckets", name: "team-a", namespace: "", uid: "u-1" };
  try {
    for (const [i, step] of ["compose", "lifecycle"].entries()) {
      const done = await emitter.begin(
        { traceId: trace, stepIndex: i, stepName: step, functionName: `function-${step}`, composition: { name: "xbuckets", xr } },
        req,
      );
      await done(create(RunFunctionResponseSchema, { meta: { tag: `t${i}` } }), undefined);
    }
    await sidecar.flush();
  } finally {
    emitter.close();
    await sidecar.stop(); // the writer exports its last spans before it ends
  }
  try {
    const spans = await rx.until((x) => x.length >= 2);
    assert.equal(
      spans.map((x) => x.name),
      ["step compose", "step lifecycle"],
    );
    const hex = trace.replace(/-/g, "");
    for (const x of spans) {
      assert.is(x.traceId, hex);
      assert.is(x.parentSpanId, "");
      assert.is(x.spanId, String(x.attributes["crossplane.span_id"]).replace(/-/g, "").slice(0, 16));
      assert.is(x.attributes["crossplane.trace_id"], trace);
      assert.is(x.attributes["crossplane.composite"], "XBuckets/team-a");
      assert.is(x.attributes["crossplane.composition"], "xbuckets");
      assert.is(x.service, "xfn-inspect");
    }
    assert.equal(
      spans.map((x) => x.attributes["crossplane.step_index"]),
      [0, 1],
    );
  } finally {
    await rx.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

O("a failed call's span says so; an unknown protocol stops the server from starting, naming the variable", async () => {
  const rx = await startReceiver();
  const srv = await startServe(["functions/lifecycle", "--insecure"], {
    OTEL_EXPORTER_OTLP_ENDPOINT: rx.endpoint,
    OTEL_BSP_SCHEDULE_DELAY: "50",
  });
  const client = rawClient(srv.port);
  try {
    await client.call(new Uint8Array([0xff, 0xff, 0xff])).catch(() => undefined);
    const [bad] = await rx.until((s) => s.length > 0);
    assert.is(bad!.status.code, 2);
    assert.match(bad!.status.message, /^INVALID_ARGUMENT: cannot decode RunFunctionRequest/);
    assert.is(bad!.attributes["rpc.grpc.status_code"], 3);
  } finally {
    client.close();
    await srv.stop();
    await rx.close();
  }
  const refused = await startServe(["functions/lifecycle", "--insecure"], {
    OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9",
    OTEL_EXPORTER_OTLP_PROTOCOL: "thrift",
  }).then(
    async (s) => (await s.stop(), "started"),
    (e: Error) => e.message,
  );
  assert.match(refused, /OTEL_EXPORTER_OTLP_PROTOCOL "thrift"/);
});

O.run();
