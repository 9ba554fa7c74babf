// `xfn inspect`, the Pipeline Inspector sidecar: what Crossplane emits over its
// Unix socket (crossplane internal/xfn/inspected/socket.go at 2d040d2d:
// EmitRequest before a step's call, EmitResponse after, each given 100 ms)
// becomes `xfn test` cases that replay against the local module; secrets are
// redacted again on arrival; bad payloads, a full queue and failed writes are
// dropped and logged, never answered with an error; names from the cluster
// cannot lead a write outside the folder. And `xfn host --inspector-socket`
// emits the same way, so a host run records the same cases.
import { spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { create, isFieldSet, toBinary, type JsonObject } from "@bufbuild/protobuf";
import { FieldDescriptorProtoSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Client, credentials, Metadata, status as Code, type ServiceError } from "@grpc/grpc-js";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse } from "yaml";
import {
  file_crossplane_pipeline_v1alpha1_pipeline_inspector as inspectorFile,
  EmitRequestRequestSchema,
  EmitResponseRequestSchema,
  PipelineInspectorService,
  StepMetaSchema,
  type StepMeta,
} from "../../src/gen/crossplane/pipeline/v1alpha1/pipeline_inspector_pb.js";
import { loadDocs } from "../../src/engine/docs.js";
import { connectInspector } from "../../src/inspect/emitter.js";
import { startInspector, type InspectorOptions } from "../../src/inspect/sidecar.js";
import { CaseWriter, PENDING_BYTES } from "../../src/inspect/writer.js";
import { runCase } from "../../src/testing/cases.js";
import { until } from "../support/cluster.js";
import { hostFor, NESTED, nestedUp } from "../support/host.js";
import { memoryLog } from "../support/log.js";
import { respond } from "../support/respond.js";
import { RunFunctionRequestSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { messageFromJson } from "../../src/wire/protojson.js";
import { ROOT, run } from "../support/spawn.js";

const I = suite("xfn inspect: the Pipeline Inspector sidecar");

let scratch: string;
I.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-inspect-"));
});
I.after(() => rmSync(scratch, { recursive: true, force: true }));

let n = 0;
/** inspector starts a sidecar on a fresh socket and folder. */
async function inspector(opts: Partial<InspectorOptions> = {}) {
  const at = join(scratch, `run-${++n}`);
  mkdirSync(at);
  const mem = memoryLog();
  const lines: string[] = [];
  const i = await startInspector({
    socket: join(at, "socket"),
    dir: join(at, "cases"),
    log: mem.log,
    follow: (l) => lines.push(l),
    ...opts,
  });
  return { i, mem, lines, socket: join(at, "socket"), dir: join(at, "cases") };
}

/**
 * crossplane is a client that emits as Crossplane's SocketPipelineInspector does: raw message bytes, on a
 * connection made first (Crossplane's stays up between reconciles; making one is not the answer's time).
 */
async function crossplane(socket: string) {
  const client = new Client(`unix:${socket}`, credentials.createInsecure());
  await new Promise<void>((resolve, reject) => client.waitForReady(Date.now() + 10_000, (err) => (err ? reject(err) : resolve())));
  // 5 s, not Crossplane's 100 ms: this client shares its process (and, in the suite, the machine) with the sidecar
  // and two other lanes of tests; the 100 ms is checked by the Go client in a process of its own (test/e2e/inspect-go.test.ts).
  const send = (method: string, bytes: Uint8Array, timeoutMs = 5000) =>
    new Promise<number>((resolve) =>
      client.makeUnaryRequest(
        `/${PipelineInspectorService.typeName}/${method}`,
        (b: Uint8Array) => Buffer.from(b),
        (b: Buffer) => b,
        bytes,
        new Metadata(),
        { deadline: Date.now() + timeoutMs },
        (err: ServiceError | null) => resolve(err ? err.code : Code.OK),
      ),
    );
  const json = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
  return {
    send,
    request: (meta: StepMeta, req: JsonObject, timeoutMs?: number) =>
      send("EmitRequest", toBinary(EmitRequestRequestSchema, create(EmitRequestRequestSchema, { request: json(req), meta })), timeoutMs),
    response: (meta: StepMeta, rsp: JsonObject | undefined, error = "", timeoutMs?: number) =>
      send(
        "EmitResponse",
        toBinary(
          EmitResponseRequestSchema,
          create(EmitResponseRequestSchema, { response: rsp ? json(rsp) : new Uint8Array(), error, meta }),
        ),
        timeoutMs,
      ),
    close: () => client.close(),
  };
}

const XR = { apiVersion: "example.xfn.dev/v1alpha1", kind: "XBuckets", metadata: { name: "team-a", uid: "u-1" } };
const meta = (over: Partial<Record<string, unknown>> = {}): StepMeta =>
  create(StepMetaSchema, {
    timestamp: timestampFromDate(new Date("2026-11-27T10:00:00Z")),
    traceId: "trace-0001-aaaa",
    spanId: `span-${Math.random()}`,
    stepIndex: 0,
    stepName: "hello",
    functionName: "function-hello",
    context: {
      case: "compositionMeta",
      value: {
        compositionName: "buckets",
        compositeResourceName: "team-a",
        compositeResourceKind: "XBuckets",
        compositeResourceApiVersion: "example.xfn.dev/v1alpha1",
        compositeResourceUid: "u-1",
      },
    },
    ...over,
  });

/** hello is what functions/hello answers req, as Crossplane would have had it answered. */
const hello = (req: JsonObject) =>
  respond(join(ROOT, "functions/hello/index.ts"), req, "function-hello", () => new Date("2026-11-27T10:00:00Z"));

/** files lists every file under dir, relative to it. */
function files(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

I("the vendored proto says what crossplane-runtime's pipeline_inspector.proto (4e7ed235) says: package, service, fields", () => {
  const f = inspectorFile.proto;
  assert.is(f.package, "crossplane.pipeline.v1alpha1");
  assert.equal(
    f.service.map((sv) => [sv.name, sv.method.map((m) => `${m.name}(${m.inputType}) ${m.outputType}`)]),
    [
      [
        "PipelineInspectorService",
        [
          "EmitRequest(.crossplane.pipeline.v1alpha1.EmitRequestRequest) .crossplane.pipeline.v1alpha1.EmitRequestResponse",
          "EmitResponse(.crossplane.pipeline.v1alpha1.EmitResponseRequest) .crossplane.pipeline.v1alpha1.EmitResponseResponse",
        ],
      ],
    ],
  );
  // [name, number, type (9 string, 12 bytes, 5 int32, 11 message), oneof index] per field.
  const fields = Object.fromEntries(
    f.messageType.map((m) => [
      m.name,
      m.field.map((x) =>
        [x.name, x.number, x.type, isFieldSet(x, FieldDescriptorProtoSchema.field.oneofIndex) ? x.oneofIndex : -1].join(" "),
      ),
    ]),
  );
  assert.equal(fields, {
    EmitRequestRequest: ["request 1 12 -1", "meta 2 11 -1"],
    EmitRequestResponse: [],
    EmitResponseRequest: ["response 1 12 -1", "error 2 9 -1", "meta 3 11 -1"],
    EmitResponseResponse: [],
    StepMeta: [
      "timestamp 1 11 -1",
      "trace_id 2 9 -1",
      "span_id 3 9 -1",
      "step_index 4 5 -1",
      "step_name 5 9 -1",
      "iteration 6 5 -1",
      "function_name 7 9 -1",
      "operation_meta 8 11 0",
      "composition_meta 9 11 0",
    ],
    CompositionMeta: [
      "composition_name 1 9 -1",
      "composite_resource_uid 2 9 -1",
      "composite_resource_name 3 9 -1",
      "composite_resource_namespace 4 9 -1",
      "composite_resource_api_version 5 9 -1",
      "composite_resource_kind 6 9 -1",
    ],
    OperationMeta: ["operation_name 1 9 -1", "operation_uid 2 9 -1"],
  });
});

I("a step Crossplane emits is an xfn test case that replays against the local module, under the XR, trace and step", async () => {
  const s = await inspector({ functions: new Map([["function-hello", join(ROOT, "functions/hello/index.ts")]]) });
  const cp = await crossplane(s.socket);
  try {
    const req = { meta: { tag: "t1" }, observed: { composite: { resource: { ...XR, spec: { buckets: [{ name: "logs" }] } } } } };
    const rsp = await hello(req);
    const m = meta();
    assert.is(await cp.request(m, req), Code.OK);
    assert.is(await cp.response(m, rsp), Code.OK);
    await s.i.flush();
    const step = "XBuckets._.team-a/20261127T100000000Z-trace-00/00-hello";
    assert.equal(files(s.dir), [
      "XBuckets._.team-a/20261127T100000000Z-trace-00/00-hello/case.yaml",
      "XBuckets._.team-a/20261127T100000000Z-trace-00/00-hello/expected.yaml",
      "XBuckets._.team-a/20261127T100000000Z-trace-00/00-hello/inspected.yaml",
      "XBuckets._.team-a/20261127T100000000Z-trace-00/00-hello/request.yaml",
      "XBuckets._.team-a/20261127T100000000Z-trace-00/pipeline/xr.yaml",
    ]);
    assert.equal(parse(readFileSync(join(s.dir, step, "inspected.yaml"), "utf8")), {
      function: "function-hello",
      step: "hello",
      stepIndex: 0,
      iteration: 0,
      traceId: "trace-0001-aaaa",
      spanId: m.spanId,
      composition: "buckets",
    });
    const result = await runCase(join(s.dir, step), s.dir);
    assert.is(result.status, "passed", JSON.stringify(result));
    assert.equal(s.i.stats().dropped, {});
    // The case names its module by project, not by a path from where it was written: copied into another
    // project with a module at the same path, it runs its own module, or, with nowhere to find it, fails naming it.
    const written = parse(readFileSync(join(s.dir, step, "case.yaml"), "utf8")) as Record<string, string>;
    // until: when the response came, here (the step's stamp is a fixed day before): the window of its clock.
    const until = written["until"]!;
    assert.ok(Date.parse(until) > Date.parse("2026-11-28T00:00:00Z") && Date.parse(until) <= Date.now(), until);
    assert.equal(written, {
      function: "functions/hello/index.ts",
      project: "xfn-runtime",
      projectPath: ROOT,
      now: "2026-11-27T10:00:00.000Z",
      until,
    });
    const other = join(scratch, "other-project");
    mkdirSync(join(other, "functions/hello"), { recursive: true });
    writeFileSync(join(other, "package.json"), JSON.stringify({ name: "other", type: "module" }));
    writeFileSync(join(other, "functions/hello/index.ts"), "export default () => { throw new Error('the other project ran'); };\n");
    cpSync(join(s.dir, step), join(other, "testdata/hello"), { recursive: true });
    const own = await runCase(join(other, "testdata/hello"), other);
    assert.is(own.status, "passed", JSON.stringify(own));
    const caseFile = join(other, "testdata/hello/case.yaml");
    writeFileSync(caseFile, readFileSync(caseFile, "utf8").replace(/^projectPath: .*\n/m, ""));
    const lost = await runCase(join(other, "testdata/hello"), other);
    assert.is(lost.status, "failed");
    assert.match(JSON.stringify(lost), /function functions\/hello\/index\.ts of project xfn-runtime is not found/);
    assert.not.match(JSON.stringify(lost), /the other project ran/);
    assert.equal(s.lines[0], "2026-11-27T10:00:00.000Z XBuckets/team-a step 0 hello (function-hello) trace trace-00");
    assert.ok(
      s.lines.some((l) => /^ {2}\+ /.test(l)),
      s.lines.join("\n"),
    );
  } finally {
    cp.close();
    await s.i.stop();
  }
});

I("a sidecar in a cluster knows no local paths: xfn test --function NAME=MODULE replays each step by the Function it called", async () => {
  // No --function on the sidecar, as in a Crossplane pod: the cases name no module.
  const s = await inspector();
  const cp = await crossplane(s.socket);
  try {
    const req = { meta: { tag: "t1" }, observed: { composite: { resource: { ...XR, spec: { buckets: [{ name: "logs" }] } } } } };
    const rsp = await hello(req);
    for (const [i, fn] of [
      [0, "function-hello"],
      [1, "function-greet"],
    ] as const) {
      const m = meta({ stepIndex: i, stepName: `s${i}`, functionName: fn });
      assert.is(await cp.request(m, req), Code.OK);
      assert.is(await cp.response(m, rsp), Code.OK);
    }
    await s.i.flush();
    const trace = "XBuckets._.team-a/20261127T100000000Z-trace-00";
    assert.equal(Object.keys(parse(readFileSync(join(s.dir, trace, "00-s0/case.yaml"), "utf8"))), ["now", "until"]);

    // Without a module, each step fails naming the flag and the Function it needs.
    const bare = await run(["test", s.dir]);
    assert.is(bare.code, 1);
    assert.match(bare.stdout, "0 passed, 2 failed");
    assert.match(bare.stdout, "or run xfn test with --function function-greet=<module> (the Function this step called)");

    // Each Function mapped: both replay; a module that answers otherwise fails the steps of that Function only.
    const helloDir = join(ROOT, "functions/hello");
    const both = await run(["test", s.dir, "--function", `function-hello=${helloDir}`, "--function", `function-greet=${helloDir}`]);
    assert.is(both.code, 0, both.stdout + both.stderr);
    assert.match(both.stdout, "2 passed, 0 failed");
    const other = join(scratch, "greet-other.mjs");
    writeFileSync(other, "export default () => { throw new Error('the greet module ran'); };\n");
    const mixed = await run(["test", s.dir, "--function", `function-hello=${helloDir}`, "--function", `function-greet=${other}`]);
    assert.is(mixed.code, 1);
    assert.match(mixed.stdout, "1 passed, 1 failed");
    assert.match(mixed.stdout, /FAIL {5}\S*01-s1\n[^]*the greet module ran/);

    // What case.yaml names wins over the flag.
    writeFileSync(join(s.dir, trace, "01-s1/case.yaml"), `function: ${join(helloDir, "index.ts")}\n`);
    const named = await run(["test", s.dir, "--function", `function-hello=${helloDir}`, "--function", `function-greet=${other}`]);
    assert.match(named.stdout, "2 passed, 0 failed");

    // Bad values: each refused before any case runs, naming it.
    for (const [flag, why] of [
      ["function-hello", '--function "function-hello": expected NAME=MODULE'],
      ["=x", '--function "=x": expected NAME=MODULE'],
      [
        "function-hello=/nowhere/at/all",
        "--function function-hello: cannot load function module /nowhere/at/all: no such file or directory",
      ],
    ]) {
      const bad = await run(["test", s.dir, "--function", flag!]);
      assert.is(bad.code, 1, flag);
      assert.match(bad.stdout, `xfn test: ${why}`);
      assert.not.match(bad.stdout, "passed");
    }
    const twice = await run(["test", s.dir, "--function", `a=${helloDir}`, "--function", `a=${helloDir}`]);
    assert.match(twice.stdout, "xfn test: --function a is given twice");
  } finally {
    cp.close();
    await s.i.stop();
  }
});

I(
  "Crossplane reaches the socket whatever user each runs as (65532 in Crossplane's chart, the sidecar another): it is open to all",
  async () => {
    const s = await inspector();
    try {
      assert.is(statSync(s.socket).mode & 0o777, 0o666);
      // As root, the real thing: a process of Crossplane's user connects to a socket root made (it was refused with EACCES).
      if (process.getuid?.() === 0) {
        chmodSync(scratch, 0o755);
        chmodSync(join(s.socket, ".."), 0o777);
        const probe = spawnSync(
          process.execPath,
          [
            "-e",
            `require("node:net").connect(${JSON.stringify(s.socket)}).on("connect", () => process.exit(0)).on("error", (e) => { console.log(e.code); process.exit(1); })`,
          ],
          { uid: 65532, gid: 65532, encoding: "utf8", timeout: 10_000 },
        );
        assert.is(probe.status, 0, probe.stdout + probe.stderr);
      }
    } finally {
      await s.i.stop();
    }
  },
);

I("secrets are redacted again on arrival: credentials, connection details, Secrets (nested too, in input and context)", async () => {
  const s = await inspector();
  const cp = await crossplane(s.socket);
  try {
    const secret = (v: string) => ({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "s" },
      data: { password: Buffer.from(v).toString("base64") },
      stringData: { token: v },
    });
    const b64 = (v: string) => Buffer.from(v).toString("base64");
    const req = {
      observed: {
        composite: { resource: XR, connectionDetails: { url: b64("sekrit-01") } },
        resources: { db: { resource: secret("sekrit-02"), connectionDetails: { pw: b64("sekrit-03") } } },
      },
      credentials: { aws: { credentialData: { data: { key: b64("sekrit-04") } } } },
      requiredResources: { s: { items: [{ resource: secret("sekrit-05") }] } },
    };
    // Wrapped: a provider-kubernetes Object's manifest, a List's items, a template in the XR's spec.
    const wrapped = {
      apiVersion: "kubernetes.crossplane.io/v1alpha2",
      kind: "Object",
      metadata: { name: "o" },
      spec: { forProvider: { manifest: secret("sekrit-08") } },
    };
    const list = { apiVersion: "v1", kind: "List", items: [{ apiVersion: "v1", kind: "ConfigMap" }, secret("sekrit-09")] };
    (req.observed.resources as Record<string, unknown>)["wrapped"] = { resource: wrapped };
    (req.observed.resources as Record<string, unknown>)["list"] = { resource: list };
    (req.observed.composite as Record<string, unknown>)["resource"] = {
      ...XR,
      spec: { templates: [{ deep: { deeper: secret("sekrit-10") } }] },
    };
    // A template in the step's input (found by the real tier: Crossplane sends the input as the Composition holds it),
    // and a Secret carried in the context, both ways.
    (req as Record<string, unknown>)["input"] = {
      apiVersion: "x.io/v1",
      kind: "Input",
      resources: { token: { ...wrapped, spec: { forProvider: { manifest: secret("sekrit-12") } } } },
    };
    (req as Record<string, unknown>)["context"] = { "apiextensions.crossplane.io/environment": { secret: secret("sekrit-13") } };
    const rsp = {
      context: { carried: [secret("sekrit-14")] },
      desired: {
        resources: {
          out: { resource: secret("sekrit-06"), connectionDetails: { k: b64("sekrit-07") } },
          object: { resource: { ...wrapped, spec: { forProvider: { manifest: secret("sekrit-11") } } } },
        },
      },
    };
    const m = meta();
    assert.equal([await cp.request(m, req), await cp.response(m, rsp)], [Code.OK, Code.OK]);
    await s.i.flush();
    const all = files(s.dir).map((f) => readFileSync(join(s.dir, f), "utf8"));
    const text = all.join("\n");
    for (const v of Array.from({ length: 14 }, (_, i) => `sekrit-${String(i + 1).padStart(2, "0")}`)) {
      assert.not.ok(text.includes(v), `${v} is written`);
      assert.not.ok(text.includes(b64(v)), `${v} (base64) is written`);
    }
    assert.ok(text.includes("[REDACTED]"));
    assert.ok(
      files(s.dir).some((f) => f.endsWith("pipeline/observed.yaml")) && files(s.dir).some((f) => f.endsWith("pipeline/required.yaml")),
    );
  } finally {
    cp.close();
    await s.i.stop();
  }
});

I("bad payloads are logged and dropped, each call answered OK, and the sidecar goes on serving", async () => {
  const s = await inspector();
  const cp = await crossplane(s.socket);
  try {
    const codes = [
      await cp.send("EmitRequest", new Uint8Array([0xff, 0xff, 0xff, 0x0f, 0x01])), // not a protobuf message
      await cp.send(
        "EmitRequest",
        toBinary(
          EmitRequestRequestSchema,
          create(EmitRequestRequestSchema, { request: new TextEncoder().encode("{not json"), meta: meta() }),
        ),
      ),
      await cp.send(
        "EmitRequest",
        toBinary(EmitRequestRequestSchema, create(EmitRequestRequestSchema, { request: new TextEncoder().encode("{}") })),
      ), // no meta
      await cp.request(meta(), { observed: { composite: { resource: "a string" } } }), // not a RunFunctionRequest
      await cp.response(meta({ spanId: "never-requested" }), {}),
      await cp.send("EmitResponse", new Uint8Array([0x0a, 0xff])), // truncated
    ];
    assert.equal(codes, [Code.OK, Code.OK, Code.OK, Code.OK, Code.OK, Code.OK]);
    await s.i.flush();
    assert.equal(s.i.stats().dropped, { "bad request": 4, "response without its request": 1, "bad response": 1 });
    assert.ok(s.mem.lines().some((l) => l.msg === "pipeline inspector dropped a call" && l["why"] === "bad request"));
    const m = meta();
    assert.equal([await cp.request(m, { observed: { composite: { resource: XR } } }), await cp.response(m, {})], [Code.OK, Code.OK]);
    await s.i.flush();
    assert.is(s.i.stats().written, 1);
  } finally {
    cp.close();
    await s.i.stop();
  }
});

I(
  "a full queue drops what does not fit, and a write that fails (a file where a folder must go) is logged: every call still answered OK",
  async () => {
    const s = await inspector({ maxQueue: 4 });
    const cp = await crossplane(s.socket);
    try {
      const req = { observed: { composite: { resource: XR } } };
      const sent = await Promise.all(
        Array.from({ length: 40 }, async (_, k) => {
          const m = meta({ spanId: `span-${k}` });
          return [await cp.request(m, req), await cp.response(m, {})];
        }),
      );
      assert.ok(
        sent.flat().every((c) => c === Code.OK),
        JSON.stringify(sent),
      );
      await s.i.flush();
      assert.ok((s.i.stats().dropped["queue full"] ?? 0) > 0, JSON.stringify(s.i.stats()));
      // The XR's folder is a file now: no step of it can be written.
      rmSync(join(s.dir, "XBuckets._.team-a"), { recursive: true, force: true });
      writeFileSync(join(s.dir, "XBuckets._.team-a"), "in the way");
      const m = meta({ traceId: "trace-2" });
      assert.equal([await cp.request(m, req), await cp.response(m, {})], [Code.OK, Code.OK]);
      await s.i.flush();
      assert.ok((s.i.stats().dropped["write failed"] ?? 0) >= 1, JSON.stringify(s.i.stats()));
    } finally {
      cp.close();
      await s.i.stop();
    }
  },
);

I("names from the cluster are made safe, and a link planted in the folder is not followed", async () => {
  const s = await inspector();
  const cp = await crossplane(s.socket);
  const outside = join(scratch, `outside-${n}`);
  mkdirSync(outside);
  try {
    const evil = meta({
      stepName: "../../x\u001b[31m",
      context: {
        case: "compositionMeta",
        value: { compositeResourceKind: "..", compositeResourceName: "../../etc", compositeResourceNamespace: "a/b" },
      },
    });
    assert.equal([await cp.request(evil, { observed: { composite: { resource: XR } } }), await cp.response(evil, {})], [Code.OK, Code.OK]);
    await s.i.flush();
    assert.equal(readdirSync(s.dir), ["_.a_b..._.._etc"]); // one folder: "..", "a/b" and "../../etc" made safe
    assert.ok(
      files(s.dir).some((f) => f.includes("/00-.._.._x_31m/")),
      files(s.dir).join(", "),
    );
    assert.ok(s.lines[0]!.includes("step 0 ../../x^[[31m"), s.lines[0]);
    // A link where an XR's folder goes: nothing is written through it.
    symlinkSync(outside, join(s.dir, "XBuckets._.team-a"));
    const m = meta({ traceId: "trace-0002-bbbb" });
    assert.equal([await cp.request(m, { observed: { composite: { resource: XR } } }), await cp.response(m, {})], [Code.OK, Code.OK]);
    await s.i.flush();
    assert.equal(readdirSync(outside), []);
    assert.ok(s.mem.lines().some((l) => String(l["err"] ?? "").includes("leads outside")));
  } finally {
    cp.close();
    await s.i.stop();
  }
});

I("--follow says what a step changed: resources added, changed (which fields) and removed, results, conditions, errors", async () => {
  const s = await inspector();
  const cp = await crossplane(s.socket);
  try {
    const desired = {
      resources: {
        kept: { resource: { apiVersion: "v1", kind: "ConfigMap", data: { a: "1" } } },
        gone: { resource: { apiVersion: "v1", kind: "ConfigMap" } },
      },
    };
    const rsp = {
      desired: {
        resources: {
          kept: { resource: { apiVersion: "v1", kind: "ConfigMap", data: { a: "2" } } },
          added: { resource: { apiVersion: "s3.aws.upbound.io/v1beta1", kind: "Bucket" } },
        },
      },
      results: [{ severity: "SEVERITY_WARNING", message: "careful" }],
      conditions: [{ type: "DatabaseReady", status: "STATUS_CONDITION_FALSE", reason: "Creating", message: "not yet" }],
    };
    const m = meta({ stepIndex: 1, stepName: "second" });
    await cp.request(m, { observed: { composite: { resource: XR } }, desired });
    await cp.response(m, rsp);
    const f = meta({ stepIndex: 2, stepName: "third" });
    await cp.request(f, { observed: { composite: { resource: XR } } });
    await cp.response(f, undefined, "rpc error: code = Unavailable");
    await s.i.flush();
    assert.equal(s.lines.slice(1, 6), [
      "  + added (s3.aws.upbound.io/v1beta1 Bucket)",
      "  ~ kept: data.a",
      "  - gone",
      "  result Warning: careful",
      "  condition DatabaseReady=False (Creating): not yet",
    ]);
    assert.equal(s.lines.slice(-1), ["  error: rpc error: code = Unavailable"]);
    // A failed call keeps its request; with no response there is nothing to expect.
    assert.ok(files(s.dir).some((f2) => f2.endsWith("02-third/request.yaml")));
    assert.not.ok(files(s.dir).some((f2) => f2.endsWith("02-third/expected.yaml")));
  } finally {
    cp.close();
    await s.i.stop();
  }
});

I("with no sidecar on the socket, each emit gives up within Crossplane's 100 ms and is only logged: the pipeline goes on", async () => {
  const log = memoryLog();
  const o = connectInspector(join(scratch, "nobody-listens"), log.log);
  try {
    const t = performance.now();
    const step = { traceId: "t", stepIndex: 0, stepName: "s", functionName: "f" };
    const done = await o.begin(step, messageFromJson(RunFunctionRequestSchema, { observed: { composite: { resource: XR } } }));
    await done(undefined, new Error("the function failed"));
    assert.ok(performance.now() - t < 2_000, `${performance.now() - t} ms`);
    const said = log.lines().map((l) => l.msg);
    assert.ok(
      said.includes("cannot inspect request for function") && said.includes("cannot inspect response for function"),
      said.join("; "),
    );
  } finally {
    o.close();
  }
});

I("xfn host --inspector-socket emits every step as Crossplane does: a host run records cases that replay", async () => {
  const s = await inspector();
  const log = memoryLog();
  const h = await hostFor(NESTED, { inspector: connectInspector(s.socket, log.log) });
  try {
    await h.host.start();
    await nestedUp(h);
    // The host goes on after the subnet is there: wait until the nested XR's steps are written too.
    await until("an XNetwork case", async () => {
      await s.i.flush();
      return files(s.dir).some((f) => f.startsWith("XNetwork.") && f.endsWith("/expected.yaml"));
    });
    const cases = files(s.dir).filter((f) => f.endsWith("/expected.yaml"));
    assert.ok(cases.length >= 3, cases.join("\n"));
    for (const kind of ["XPlatform", "XNetwork"])
      assert.ok(
        cases.some((c) => c.startsWith(`${kind}.`)),
        `${kind}: ${cases.join(", ")}`,
      );
    // Each step's case replays once its function is named: the fixture's functions are local modules.
    const fns = loadDocs(join(NESTED, "functions.yaml"));
    const modules = new Map(
      fns.map((d) => [
        String((d.obj["metadata"] as JsonObject)["name"]),
        String(((d.obj["metadata"] as JsonObject)["annotations"] as JsonObject)["render.xfn.dev/module"]),
      ]),
    );
    const first = join(s.dir, cases[0]!.replace(/\/expected\.yaml$/, ""));
    const info = parse(readFileSync(join(first, "inspected.yaml"), "utf8")) as { function: string; composition: string };
    assert.ok(info.composition, "the Composition is named");
    writeFileSync(
      join(first, "case.yaml"),
      `function: ${join(NESTED, modules.get(info.function)!)}\nnow: "${parse(readFileSync(join(first, "case.yaml"), "utf8")).now}"\n`,
    );
    const result = await runCase(first, s.dir);
    assert.is(result.status, "passed", JSON.stringify(result).slice(0, 2000));
    // A reconcile's pipeline/ folder makes a pipeline case: add the Composition, the Functions and an
    // empty expected.yaml; --update writes what the pipeline renders, and the case passes from then on.
    const reconcile = cases
      .find((c) => c.startsWith("XPlatform."))!
      .split("/")
      .slice(0, 2)
      .join("/");
    const made = join(s.dir, "made-case");
    cpSync(join(s.dir, reconcile, "pipeline"), made, { recursive: true });
    const composition = loadDocs(join(NESTED, "manifests.yaml")).find(
      (d) => d.obj["kind"] === "Composition" && (d.obj["metadata"] as JsonObject)["name"] === "xplatforms",
    )!;
    writeFileSync(join(made, "composition.yaml"), JSON.stringify(composition.obj));
    const absolute = fns.map((d) => {
      const md = d.obj["metadata"] as JsonObject;
      const ann = md["annotations"] as JsonObject;
      return {
        ...d.obj,
        metadata: { ...md, annotations: { ...ann, "render.xfn.dev/module": join(NESTED, String(ann["render.xfn.dev/module"])) } },
      };
    });
    writeFileSync(join(made, "functions.yaml"), absolute.map((o) => JSON.stringify(o)).join("\n---\n"));
    writeFileSync(join(made, "expected.yaml"), "");
    assert.is((await runCase(made, s.dir, true)).status, "updated");
    const again = await runCase(made, s.dir);
    assert.is(again.status, "passed", JSON.stringify(again).slice(0, 2000));
    assert.match(readFileSync(join(made, "expected.yaml"), "utf8"), "kind: XNetwork");
  } finally {
    await h.host.stop();
    await h.c.stop();
    await s.i.stop();
  }
});

I("xfn package's inspect.mjs is the sidecar on plain node, away from node_modules: a step written as a case, SIGTERM ends it", async () => {
  const out = join(scratch, "packaged");
  const packaged = await run(["package", join(ROOT, "functions/hello"), "--out", out], { timeoutMs: 120_000 });
  assert.is(packaged.code, 0, packaged.stderr);
  const socket = join(scratch, "bundled.sock");
  const dir = join(scratch, "bundled-cases");
  const child = spawn(process.execPath, [join(out, "inspect.mjs"), `--socket=${socket}`, `--dir=${dir}`], { cwd: out });
  let said = "";
  child.stdout.on("data", (d) => (said += d));
  child.stderr.on("data", (d) => (said += d));
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  try {
    await until("the bundled sidecar listens", () => /pipeline inspector listening/.test(said), 15_000);
    const cp = await crossplane(socket);
    const req = { meta: { tag: "bundled" }, observed: { composite: { resource: XR } } };
    const m = meta();
    assert.is(await cp.request(m, req), Code.OK);
    assert.is(await cp.response(m, await hello(req)), Code.OK);
    cp.close();
    await until("the case written (by the bundle's own writer thread)", () => files(dir).some((f) => f.endsWith("00-hello/expected.yaml")));
    child.kill("SIGTERM");
    assert.is(await exited, 0, said);
    assert.match(said, /"msg":"pipeline inspector stopped"/);
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
});

I(
  "requests whose responses never come are held within bounds (count and bytes), the oldest dropped with a log line; RSS stays under the documented 256 MiB",
  async () => {
    const at = join(scratch, "unpaired");
    mkdirSync(at);
    const socket = join(at, "socket");
    const child = spawn(process.execPath, [join(ROOT, "bin/xfn.js"), "inspect", `--socket=${socket}`, `--dir=${join(at, "cases")}`], {
      cwd: at,
    });
    let said = "";
    child.stdout.on("data", (d) => (said += d));
    child.stderr.on("data", (d) => (said += d));
    try {
      await until("the sidecar listens", () => /pipeline inspector listening/.test(said), 15_000);
      const cp = await crossplane(socket);
      // 60 requests of 5 MB each, and not one response: 300 MB, as 150 of them held 1.1 GB before.
      const big = "x".repeat(5 * 2 ** 20);
      for (let i = 0; i < 60; i++) {
        const req = { meta: { tag: `t${i}` }, observed: { composite: { resource: { ...XR, spec: { pad: big } } } } };
        assert.is(await cp.request(meta({ spanId: `span-${i}` }), req, 30_000), Code.OK);
      }
      cp.close();
      await until("the oldest dropped, said", () => /"why":"no response came"/.test(said), 30_000);
      const status = () => readFileSync(`/proc/${child.pid}/status`, "utf8");
      const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status())![1]);
      // Give the writer a moment to finish the last writes, then read resident and peak memory.
      await new Promise((r) => setTimeout(r, 2_000));
      assert.ok(kb("VmHWM") < 256 * 1024, `peak resident memory ${Math.round(kb("VmHWM") / 1024)} MiB (the sidecar's limit is 256 MiB)`);
    } finally {
      child.kill("SIGKILL");
    }
  },
);

I(
  "a full disk: the write fails whole and leaves no temporary file behind; requests waiting for responses stay within their bytes",
  async () => {
    const root = join(scratch, "full-disk");
    mkdirSync(root);
    // A disk that fills up: each file is begun, then the write fails, as with ENOSPC.
    const full = {
      writeFile: (async (path: string, text: string) => {
        writeFileSync(path, text.slice(0, 10));
        throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
      }) as never,
    };
    const writer = new CaseWriter(root, new Map(), false, full);
    const job = (i: number, pad: string) => ({
      kind: "request" as const,
      at: Date.now(),
      bytes: toBinary(
        EmitRequestRequestSchema,
        create(EmitRequestRequestSchema, {
          request: new TextEncoder().encode(JSON.stringify({ observed: { composite: { resource: { ...XR, spec: { pad } } } } })),
          meta: meta({ spanId: `span-${i}` }),
        }),
      ),
    });
    const failed = await writer.handle(job(0, "x")).then(
      () => "",
      (err: Error) => err.message,
    );
    assert.match(failed, /ENOSPC/);
    assert.equal(
      files(root).filter((f) => f.split("/").pop()!.startsWith(".")),
      [],
      "no temporary file left",
    );
    // Requests waiting for their responses: the oldest go once their bytes pass the bound.
    const roomy = new CaseWriter(join(scratch, "roomy"), new Map(), false);
    mkdirSync(join(scratch, "roomy"));
    const pad = "y".repeat(4 * 2 ** 20);
    let dropped = 0;
    for (let i = 0; i < 20; i++) {
      const out = await roomy.handle(job(i, pad));
      if (!out.written && out.drop?.why === "no response came") dropped++;
    }
    assert.ok(roomy.held().bytes <= PENDING_BYTES, `${roomy.held().bytes} bytes held`);
    assert.ok(roomy.held().requests < 20 && dropped > 0, JSON.stringify({ ...roomy.held(), dropped }));
  },
);

I.run();
