// What xfn render (--xrd) and xfn host drop from an object is what the API
// server drops (issue 59, item 7): both prune with src/schema's pruner, the one
// the embedded API server runs on every write. The expected answer comes from
// the embedded API server itself in the same run, over HTTP (a CRD of the
// schema created, the object created, the stored object it answers); sdk/schema.ts's
// function-side pruner, which render and the host used before, is shown to
// differ on these cases, so the test fails if they go back to it.
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster, type DevCluster } from "../../src/apiserver/server.js";
import { pruneToSchema } from "../../src/schema/schema.js";
import { prune as functionSidePrune } from "../../src/sdk/schema.js";
import { caller, widgetCRD } from "../support/cluster.js";

const P = suite("render and the host prune as the API server prunes");

const CASES: Record<string, { spec: JsonObject; obj: JsonObject }> = {
  "a null the schema neither allows nor defaults": {
    spec: { type: "object", properties: { a: { type: "string" }, b: { type: "string", nullable: true } } },
    obj: { a: null, b: null },
  },
  "under preserve-unknown-fields, a declared child is still pruned": {
    spec: {
      type: "object",
      "x-kubernetes-preserve-unknown-fields": true,
      properties: { known: { type: "object", properties: { x: { type: "string" } } } },
    },
    obj: { anything: 1, known: { x: "kept", y: "dropped" } },
  },
  "an embedded resource's metadata is pruned to ObjectMeta": {
    spec: {
      type: "object",
      properties: { template: { type: "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true } },
    },
    obj: { template: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "n", bogus: "x" }, data: { k: "v" } } },
  },
  "unknown fields in a list's objects and a map's values": {
    spec: {
      type: "object",
      properties: {
        l: { type: "array", items: { type: "object", properties: { a: { type: "string" } } } },
        m: { type: "object", additionalProperties: { type: "object", properties: { a: { type: "string" } } } },
      },
    },
    obj: { l: [{ a: "x", b: "y" }], m: { k: { a: "x", c: "z" } } },
  },
};

let dev: DevCluster;
let call: ReturnType<typeof caller>;
P.before(async () => {
  dev = await startDevCluster();
  call = caller(dev);
});
P.after(() => dev?.stop());

let n = 0;
/** The cases where sdk/schema.ts's pruner keeps another object than the API server stores. */
const differs: string[] = [];
for (const [name, { spec, obj }] of Object.entries(CASES))
  P(name, async () => {
    // A group of its own per case: one CRD each.
    const group = `p${n++}.prune.xfn.dev`;
    const crd = widgetCRD(spec);
    crd.metadata.name = `widgets.${group}`;
    crd.spec.group = group;
    assert.is((await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)).status, 201);
    const written = {
      apiVersion: `${group}/v1`,
      kind: "Widget",
      metadata: { name: "w", namespace: "default" },
      spec: structuredClone(obj),
    };
    const answer = await call("POST", `/apis/${group}/v1/namespaces/default/widgets`, written);
    assert.is(answer.status, 201, JSON.stringify(answer.body));
    const stored = answer.body as JsonObject;
    const schema = crd.spec.versions[0].schema.openAPIV3Schema as JsonObject;
    // The API server answers with its metadata (uid, times, managedFields): compared is what was written.
    const ours = structuredClone(written) as JsonObject;
    pruneToSchema(ours, schema);
    assert.equal(ours["spec"], stored["spec"], "what render and the host keep is what the API server stores");
    const before = structuredClone(written) as JsonObject;
    functionSidePrune(before, schema);
    if (JSON.stringify(before["spec"]) !== JSON.stringify(stored["spec"])) differs.push(name);
  });

P("the function-side pruner keeps what the API server drops: a disallowed null, an embedded resource's unknown metadata", () => {
  assert.equal(differs.sort(), [
    "a null the schema neither allows nor defaults",
    "an embedded resource's metadata is pruned to ObjectMeta",
  ]);
});

P("the paths dropped are named as the API server names unknown fields", () => {
  const spec = { type: "object", properties: { a: { type: "string" } } };
  const schema = widgetCRD(spec).spec.versions[0].schema.openAPIV3Schema as JsonObject;
  const obj: JsonObject = {
    apiVersion: "example.org/v1",
    kind: "Widget",
    metadata: { name: "w" },
    spec: { a: "x", b: { c: 1 } },
    status: { s: 1 },
  };
  assert.equal(pruneToSchema(obj, schema), ["spec.b", "status"]);
  assert.equal(obj, { apiVersion: "example.org/v1", kind: "Widget", metadata: { name: "w" }, spec: { a: "x" } });
});

P.run();
