// statusSchema: asks for the XR kind's schema, and warns about each status field
// the pipeline wrote that the schema would drop, naming what to add.
import { suite } from "uvu";
import { parse, stringify } from "yaml";
import * as assert from "uvu/assert";
import { Capability, Severity } from "../../src/gen/fn/v1/run_function_pb.js";
import { runSteps } from "../../src/pipeline.js";
import * as response from "../../src/sdk/response.js";
import { declares, prune } from "../../src/sdk/schema.js";
import { externalName, statusSchema, STATUS_SCHEMA_REQUIREMENT } from "../../src/steps/index.js";
import { flowYaml } from "../../src/steps/status-schema.js";
import { step } from "../../src/pipeline.js";
import { request } from "../support/requests.js";
import { NOW } from "../support/steps.js";
import { parseInput } from "../../functions/lifecycle/input.js";
import { stepsFor } from "../../functions/lifecycle/index.js";

const S = suite("step statusSchema");

const xr = { apiVersion: "example.org/v1", kind: "XNet", metadata: { name: "net" } };
const writes = step("writes", (ctx) => response.setDesiredCompositeStatus(ctx.rsp, { externalNames: { a: "id-1" }, ready: 1 }));
const schema = (status: object) => ({
  type: "object",
  properties: { spec: { type: "object" }, status: { type: "object", properties: status } },
});
const req = (extra: object = {}) => request({ observed: { composite: { resource: xr } }, ...extra } as never);

S("asks for the schema of the XR's own kind; with no answer yet it says nothing", () => {
  const rsp = runSteps([writes, statusSchema()], req(), NOW);
  assert.equal(rsp.requirements?.schemas[STATUS_SCHEMA_REQUIREMENT]?.apiVersion, "example.org/v1");
  assert.equal(rsp.requirements?.schemas[STATUS_SCHEMA_REQUIREMENT]?.kind, "XNet");
  assert.equal(rsp.results, []);
});

S("a field the schema would drop is a Warning naming it and the schema to add; declared fields are not", () => {
  const answered = req({ requiredSchemas: { [STATUS_SCHEMA_REQUIREMENT]: { openapiV3: schema({ ready: { type: "integer" } }) } } });
  const rsp = runSteps(
    [writes, statusSchema({ suggest: { "status.externalNames": { type: "object", additionalProperties: { type: "string" } } } })],
    answered,
    NOW,
  );
  const w = rsp.results.filter((r) => r.severity === Severity.WARNING);
  assert.is(w.length, 1);
  assert.is(w[0]!.reason, "StatusFieldNotInSchema");
  assert.match(w[0]!.message, /^status\.externalNames is not in the schema of XNet \(example\.org\/v1\)/);
  assert.match(w[0]!.message, /\{ externalNames: \{ type: object, additionalProperties: \{ type: string \} \} \}$/);
  // Stable requirements: asked again, so Crossplane stops calling.
  assert.ok(rsp.requirements?.schemas[STATUS_SCHEMA_REQUIREMENT]);
});

S("a suggested field this run leaves out is checked all the same, first, in the order suggested", () => {
  const answered = req({
    requiredSchemas: {
      [STATUS_SCHEMA_REQUIREMENT]: { openapiV3: schema({ externalNames: { type: "object", additionalProperties: { type: "string" } } }) },
    },
  });
  const waiting = { type: "object", additionalProperties: { type: "object" } };
  const rsp = runSteps(
    [writes, statusSchema({ suggest: { "status.waiting": waiting, "status.externalNames": { type: "object" } } })],
    answered,
    NOW,
  );
  // writes sets externalNames (declared) and ready (not); nothing sets waiting (not declared either).
  assert.equal(
    rsp.results.map((r) => r.message.split(" ")[0]),
    ["status.waiting", "status.ready"],
  );
  // With it declared, nothing is said about it.
  const declared = req({
    requiredSchemas: { [STATUS_SCHEMA_REQUIREMENT]: { openapiV3: schema({ waiting: waiting, ready: { type: "integer" } }) } },
  });
  assert.equal(runSteps([statusSchema({ suggest: { "status.waiting": waiting } })], declared, NOW).results, []);
});

S("a status that preserves unknown fields, or a kind not found, warns about nothing", () => {
  const open = req({
    requiredSchemas: {
      [STATUS_SCHEMA_REQUIREMENT]: {
        openapiV3: { type: "object", properties: { status: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } },
      },
    },
  });
  assert.equal(runSteps([writes, statusSchema()], open, NOW).results, []);
  const notFound = req({ requiredSchemas: { [STATUS_SCHEMA_REQUIREMENT]: {} } });
  assert.equal(runSteps([writes, statusSchema()], notFound, NOW).results, []);
});

S("a Crossplane that lists its capabilities without schemas is not asked", () => {
  const older = req({
    meta: {
      tag: "t",
      capabilities: [Capability.CAPABILITIES, Capability.REQUIRED_RESOURCES].map((c) => Capability[c]).map((n) => `CAPABILITY_${n}`),
    },
  });
  const rsp = runSteps([writes, statusSchema()], older, NOW);
  assert.is(rsp.requirements?.schemas[STATUS_SCHEMA_REQUIREMENT], undefined);
});

S("lifecycle: on by default, after the steps whose fields it checks; schemaCheck: false switches it off", () => {
  const names = stepsFor(parseInput({})).map((s) => s.stepName);
  assert.is(names[names.length - 1], "statusSchema");
  assert.not.ok(stepsFor(parseInput({ schemaCheck: false })).some((s) => s.stepName === "statusSchema"));
  assert.throws(() => parseInput({ schemaCheck: "yes" } as never), /input\.schemaCheck: must be true or false/);
  // externalName records into status.externalNames, which the check then finds undeclared.
  const observed = {
    a: {
      resource: { apiVersion: "s3/v1", kind: "Bucket", metadata: { name: "b", annotations: { "crossplane.io/external-name": "id-1" } } },
    },
  };
  const answered = request({
    observed: { composite: { resource: xr }, resources: observed },
    desired: { resources: { a: { resource: { apiVersion: "s3/v1", kind: "Bucket" } } } },
    requiredSchemas: { [STATUS_SCHEMA_REQUIREMENT]: { openapiV3: schema({}) } },
  } as never);
  const rsp = runSteps([externalName(), statusSchema()], answered, NOW);
  assert.equal(
    rsp.results.map((r) => r.message.split(":")[0]),
    ["status.externalNames is not in the schema of XNet (example.org/v1)"],
  );
});

S("prune and declares follow the API server's structural rules", () => {
  const s = {
    type: "object",
    properties: {
      spec: { type: "object", properties: { a: { type: "string" }, m: { type: "object", additionalProperties: { type: "string" } } } },
      status: {
        type: "object",
        properties: {
          open: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
          list: { type: "array", items: { type: "object", properties: { k: { type: "string" } } } },
        },
      },
    },
  };
  const o: any = {
    apiVersion: "x/v1",
    kind: "K",
    metadata: { name: "n", anything: 1 },
    spec: { a: "x", b: 1, m: { any: "v" } },
    status: { open: { deep: { x: 1 } }, list: [{ k: "1", drop: 2 }], gone: true },
    extra: 1,
  };
  assert.equal(prune(o, s), ["spec.b", "status.list[0].drop", "status.gone", "extra"]);
  assert.equal(o.spec, { a: "x", m: { any: "v" } });
  assert.equal(o.metadata, { name: "n", anything: 1 });
  assert.ok(declares(s, "status.open"));
  assert.ok(declares(s, "spec.m"));
  assert.not.ok(declares(s, "status.gone"));
});

S("the suggested schema is one line of flow YAML, as the yaml package writes it, and reads back as it was", () => {
  const schemas: any[] = [
    { externalNames: { type: "object", additionalProperties: { type: "string" } } },
    {
      waiting: {
        type: "object",
        properties: { for: { type: "array", items: { type: "string" } }, since: { type: "string", format: "date-time" } },
      },
    },
    { x: { type: "object", "x-kubernetes-preserve-unknown-fields": true, maxProperties: 10, required: [], default: {} } },
  ];
  for (const v of schemas) assert.is(flowYaml(v), stringify(v, { collectionStyle: "flow", lineWidth: 0 }).trim());
  // Strings YAML would read as something else, or not at all, are quoted.
  const hostile: any = {
    "a: b": [
      "true",
      "null",
      "~",
      "1e3",
      "0x1f",
      "-",
      "# not a comment",
      "{x}",
      "[y]",
      "*alias",
      "&anchor",
      "!tag",
      "'q'",
      '"q"',
      "",
      " lead",
      "trail ",
    ],
    "key with spaces": { yes: "No", ".inf": ".nan", é: "ünïcode", nested: [[], {}, null, 1.5, -2, false] },
    "new\nline": "tab\there",
  };
  assert.equal(parse(flowYaml(hostile)), hostile);
  assert.not.match(flowYaml(hostile), /\n/);
});

S.run();
