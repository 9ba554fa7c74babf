// A client that is not ours: @grpc/proto-loader compiles our .proto files with
// protobufjs, a second protobuf implementation, and calls the server with its
// own encoder and decoder. What it sends must mean to us what it means to it,
// and what we answer must decode to what we meant.
import { fromBinary, toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { credentials, loadPackageDefinition, type GrpcObject, type ServiceClientConstructor, type ServiceError } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import protobuf from "protobufjs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { RunFunctionRequestSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import * as response from "../../src/sdk/response.js";
import { serve, type RunningServer } from "../../src/server/server.js";
import { memoryLog } from "../support/log.js";

const root = join(import.meta.dirname, "../..");
const protoFiles = {
  v1: { file: "fn/v1/run_function.proto", pkg: "apiextensions.fn.proto.v1" },
  v1beta1: { file: "fn/v1beta1/zz_generated_run_function.proto", pkg: "apiextensions.fn.proto.v1beta1" },
};
const loaderOptions = { keepCase: false, longs: String, enums: String, defaults: false, oneofs: false, includeDirs: [join(root, "proto")] };

// protobufjs has no JSON mapping for Struct; these convert by hand, independently of protobuf-es.
type PbValue = {
  nullValue?: string;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: PbStruct;
  listValue?: { values?: PbValue[] };
};
type PbStruct = { fields?: Record<string, PbValue> };

function toPbValue(v: JsonValue): PbValue {
  if (v === null) return { nullValue: "NULL_VALUE" };
  if (typeof v === "number") return { numberValue: v };
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toPbValue) } };
  return { structValue: toPbStruct(v) };
}
const toPbStruct = (o: JsonObject): PbStruct => ({ fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, toPbValue(v)])) });

function fromPbValue(v: PbValue): JsonValue {
  if (v.structValue) return fromPbStruct(v.structValue);
  if (v.listValue) return (v.listValue.values ?? []).map(fromPbValue);
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.numberValue !== undefined) return v.numberValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return null;
}
const fromPbStruct = (s: PbStruct): JsonObject => Object.fromEntries(Object.entries(s.fields ?? {}).map(([k, v]) => [k, fromPbValue(v)]));

const xr = {
  apiVersion: "example.org/v1",
  kind: "XBucket",
  metadata: { name: "b", labels: { a: "1" } },
  spec: { n: 2.5, on: true, tags: ["x", null] },
};
const input = { apiVersion: "x/v1", kind: "Input", replicas: 3 };

// The request in protobufjs's object form.
const pbRequest = {
  meta: { tag: "interop", capabilities: ["CAPABILITY_CAPABILITIES", "CAPABILITY_CONDITIONS"] },
  observed: {
    composite: { resource: toPbStruct(xr), connectionDetails: { pw: Buffer.from("secret") } },
    resources: { db: { resource: toPbStruct({ kind: "DB", status: { ok: true } }) } },
  },
  desired: { resources: { db: { resource: toPbStruct({ kind: "DB" }), ready: "READY_TRUE" } } },
  input: toPbStruct(input),
  context: toPbStruct({ "apiextensions.crossplane.io/environment": { region: "eu" } }),
  credentials: { aws: { credentialData: { data: { key: Buffer.from("k") } } } },
  requiredResources: { cfg: { items: [{ resource: toPbStruct({ kind: "ConfigMap" }) }] } },
  requiredSchemas: { s: { openapiV3: toPbStruct({ type: "object" }) } },
};

// The same request in the proto3 JSON mapping, which protobuf-es parses.
const jsonRequest = {
  meta: { tag: "interop", capabilities: ["CAPABILITY_CAPABILITIES", "CAPABILITY_CONDITIONS"] },
  observed: {
    composite: { resource: xr, connectionDetails: { pw: Buffer.from("secret").toString("base64") } },
    resources: { db: { resource: { kind: "DB", status: { ok: true } } } },
  },
  desired: { resources: { db: { resource: { kind: "DB" }, ready: "READY_TRUE" } } },
  input,
  context: { "apiextensions.crossplane.io/environment": { region: "eu" } },
  credentials: { aws: { credentialData: { data: { key: Buffer.from("k").toString("base64") } } } },
  requiredResources: { cfg: { items: [{ resource: { kind: "ConfigMap" } }] } },
  requiredSchemas: { s: { openapiV3: { type: "object" } } },
};

const Interop = suite("interop: a protobufjs client");

Interop("bytes encoded by protobufjs decode in protobuf-es to the same request as the JSON mapping", () => {
  const rootType = protobuf.loadSync(join(root, "proto", protoFiles.v1.file));
  const Req = rootType.lookupType("apiextensions.fn.proto.v1.RunFunctionRequest");
  const bytes = Req.encode(Req.fromObject(pbRequest)).finish();
  const ours = fromBinary(RunFunctionRequestSchema, bytes);
  assert.equal(toJson(RunFunctionRequestSchema, ours), jsonRequest);
});

for (const [version, { file, pkg }] of Object.entries(protoFiles)) {
  Interop(`${version}: calls the server and decodes its response`, async () => {
    const seen: unknown[] = [];
    let srv: RunningServer | undefined;
    let client: InstanceType<ServiceClientConstructor> | undefined;
    try {
      srv = await serve(
        (req) => {
          seen.push(toJson(RunFunctionRequestSchema, req));
          const rsp = response.to(req, { ttlSeconds: 30 });
          response.setDesiredComposedResource(
            rsp,
            "bucket",
            { kind: "Bucket", spec: { size: 1, list: [true, null, "s"] } },
            { ready: false },
          );
          response.setDesiredCompositeStatus(rsp, { count: 2 });
          response.warning(rsp, "careful").withReason("Careful").targetCompositeAndClaim();
          response.conditionTrue(rsp, "BucketsReady", "Available").withMessage("all good");
          response.requireResources(rsp, "cfg", { apiVersion: "v1", kind: "ConfigMap", matchLabels: { app: "x" }, namespace: "ns" });
          response.setContextKey(rsp, "next", { n: 1 });
          return rsp;
        },
        { address: "127.0.0.1:0", insecure: true },
        memoryLog().log,
      );
      const def = loadSync(join(root, "proto", file), loaderOptions);
      const ns = pkg.split(".").reduce<GrpcObject>((o, k) => o[k] as GrpcObject, loadPackageDefinition(def));
      const Client = ns["FunctionRunnerService"] as ServiceClientConstructor;
      client = new Client(`127.0.0.1:${srv.port}`, credentials.createInsecure());
      const c = client;
      const got = await new Promise<Record<string, any>>((resolve, reject) =>
        c["RunFunction"]!(pbRequest, (err: ServiceError | null, r: Record<string, any>) => (err ? reject(err) : resolve(r))),
      );

      assert.equal(seen, [jsonRequest], "the server saw what protobufjs sent");
      assert.equal(got["meta"], { tag: "interop", ttl: { seconds: "30" } });
      assert.equal(fromPbStruct(got["desired"].resources.db.resource), { kind: "DB" });
      assert.is(got["desired"].resources.db.ready, "READY_TRUE");
      assert.equal(fromPbStruct(got["desired"].resources.bucket.resource), { kind: "Bucket", spec: { size: 1, list: [true, null, "s"] } });
      assert.is(got["desired"].resources.bucket.ready, "READY_FALSE");
      assert.equal(fromPbStruct(got["desired"].composite.resource), { status: { count: 2 } });
      assert.equal(got["results"], [
        { severity: "SEVERITY_WARNING", message: "careful", reason: "Careful", target: "TARGET_COMPOSITE_AND_CLAIM" },
      ]);
      assert.equal(got["conditions"], [
        { type: "BucketsReady", status: "STATUS_CONDITION_TRUE", reason: "Available", message: "all good", target: "TARGET_COMPOSITE" },
      ]);
      assert.equal(got["requirements"].resources.cfg, {
        apiVersion: "v1",
        kind: "ConfigMap",
        matchLabels: { labels: { app: "x" } },
        namespace: "ns",
      });
      assert.equal(fromPbStruct(got["context"]), { "apiextensions.crossplane.io/environment": { region: "eu" }, next: { n: 1 } });
    } finally {
      client?.close();
      await srv?.stop(1000);
    }
  });
}

Interop.run();
