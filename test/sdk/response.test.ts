import { toJson } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { Ready, RunFunctionResponseSchema, Severity, Status, Target } from "../../src/gen/fn/v1/run_function_pb.js";
import * as response from "../../src/sdk/response.js";
import { request as req } from "../support/requests.js";

const To = suite("response.to");

To("copies desired and context deeply, echoes the tag, sets a 60 s TTL", () => {
  const r = req({
    desired: {
      composite: { resource: { status: { a: { b: 1 } } } },
      resources: { db: { resource: { spec: { x: [1] } }, ready: "READY_TRUE" } },
    },
    context: { k: { nested: true } },
  });
  const rsp = response.to(r);
  assert.is(rsp.meta?.tag, "tag-1");
  assert.is(response.getTTLSeconds(rsp), 60);
  assert.equal(rsp.desired?.resources["db"]?.resource, { spec: { x: [1] } });
  assert.is(rsp.desired?.resources["db"]?.ready, Ready.TRUE);
  assert.equal(rsp.context, { k: { nested: true } });

  // Mutating the response must not reach the request: it is a copy.
  (rsp.desired!.resources["db"]!.resource!["spec"] as { x: number[] }).x.push(2);
  (rsp.context!["k"] as Record<string, unknown>)["nested"] = false;
  (rsp.desired!.composite!.resource!["status"] as Record<string, unknown>)["a"] = 0;
  assert.equal(r.desired?.resources["db"]?.resource, { spec: { x: [1] } });
  assert.equal(r.context, { k: { nested: true } });
  assert.equal(r.desired?.composite?.resource, { status: { a: { b: 1 } } });
});

To("a request without desired state or context gives an empty desired state and no context", () => {
  const rsp = response.to(req({ meta: { tag: "" } }), { ttlSeconds: 1.5 });
  assert.equal(rsp.desired?.resources, {});
  assert.is(rsp.context, undefined);
  assert.is(response.getTTLSeconds(rsp), 1.5);
  assert.is(rsp.meta?.ttl?.nanos, 500_000_000);
});

To("rejects a nonsense TTL", () => {
  assert.throws(() => response.to(req(), { ttlSeconds: -1 }), /TTL must be a finite, non-negative/);
  assert.throws(() => response.setTTL(response.to(req()), Number.NaN), /TTL must be/);
});

// ---

const Desired = suite("desired state writers");

Desired("set a composed resource, keep an earlier step's readiness unless told otherwise", () => {
  const rsp = response.to(req({ desired: { resources: { db: { resource: {}, ready: "READY_FALSE" } } } }));
  response.setDesiredComposedResource(rsp, "db", { kind: "DB" });
  assert.is(rsp.desired?.resources["db"]?.ready, Ready.FALSE);
  response.setDesiredComposedResource(rsp, "db", { kind: "DB" }, { ready: true });
  assert.is(rsp.desired?.resources["db"]?.ready, Ready.TRUE);
  response.setDesiredComposedResource(rsp, "new", { kind: "New" });
  assert.is(rsp.desired?.resources["new"]?.ready, Ready.UNSPECIFIED);
  assert.throws(() => response.setDesiredComposedResource(rsp, "", {}), /the name is empty/);
});

Desired("setReady needs an existing desired resource", () => {
  const rsp = response.to(req());
  assert.throws(() => response.setReady(rsp, "ghost", true), /"ghost": no such desired composed resource/);
  response.setDesiredComposedResource(rsp, "a", {});
  response.setReady(rsp, "a", false);
  assert.is(response.getDesiredComposedResource(rsp, "a")?.ready, Ready.FALSE);
});

Desired("composite status merges; composite readiness", () => {
  const rsp = response.to(req({ desired: { composite: { resource: { status: { kept: 1 } } } } }));
  response.setDesiredCompositeStatus(rsp, { added: { x: 2 } });
  assert.equal(rsp.desired?.composite?.resource, { status: { kept: 1, added: { x: 2 } } });
  response.setCompositeReady(rsp, true);
  assert.is(rsp.desired?.composite?.ready, Ready.TRUE);
});

Desired("context keys and output are copies", () => {
  const rsp = response.to(req());
  const v = { a: [1] };
  response.setContextKey(rsp, "k", v);
  response.setOutput(rsp, { o: v });
  v.a.push(2);
  assert.equal(rsp.context, { k: { a: [1] } });
  assert.equal(rsp.output, { o: { a: [1] } });
});

// ---

const Results = suite("results and conditions");

Results("results default to the XR, take a reason and a target", () => {
  const rsp = response.to(req());
  response.fatal(rsp, new Error("boom")).withReason("Broken");
  response.warning(rsp, "careful").targetCompositeAndClaim();
  response.normal(rsp, "fine");
  assert.equal(
    rsp.results.map((r) => [r.severity, r.message, r.reason, r.target]),
    [
      [Severity.FATAL, "boom", "Broken", Target.COMPOSITE],
      [Severity.WARNING, "careful", undefined, Target.COMPOSITE_AND_CLAIM],
      [Severity.NORMAL, "fine", undefined, Target.COMPOSITE],
    ],
  );
  assert.ok(response.hasFatal(rsp));
  assert.not.ok(response.hasFatal(response.to(req())));
});

Results("conditions: one per type, PascalCase type and reason required", () => {
  const rsp = response.to(req());
  response.conditionFalse(rsp, "DatabaseReady", "Creating").withMessage("waiting").targetCompositeAndClaim();
  response.conditionTrue(rsp, "DatabaseReady", "Available");
  response.conditionUnknown(rsp, "Other", "NotChecked");
  assert.equal(
    rsp.conditions.map((c) => [c.type, c.status, c.reason, c.message, c.target]),
    [
      ["DatabaseReady", Status.CONDITION_TRUE, "Available", undefined, Target.COMPOSITE],
      ["Other", Status.CONDITION_UNKNOWN, "NotChecked", undefined, Target.COMPOSITE],
    ],
  );
  assert.throws(() => response.conditionTrue(rsp, "Ready", ""), /reason "" is not a non-empty PascalCase word/);
  assert.throws(() => response.conditionTrue(rsp, "not-pascal", "Ok"), /type "not-pascal" is not PascalCase/);
});

// ---

const Req = suite("requirements");

Req("resources by name or labels, deprecated field, schemas", () => {
  const rsp = response.to(req());
  response.requireResources(rsp, "cfg", { apiVersion: "v1", kind: "ConfigMap", matchName: "cfg", namespace: "ns" });
  response.requireResources(rsp, "nets", { apiVersion: "ec2/v1", kind: "VPC", matchLabels: { env: "prod" } });
  response.requireExtraResources(rsp, "old", { apiVersion: "v1", kind: "Secret", matchName: "s" });
  response.requireSchema(rsp, "xr", { apiVersion: "example.org/v1", kind: "XBucket" });
  const json = toJson(RunFunctionResponseSchema, rsp) as Record<string, unknown>;
  assert.equal(json["requirements"], {
    extraResources: { old: { apiVersion: "v1", kind: "Secret", matchName: "s" } },
    resources: {
      cfg: { apiVersion: "v1", kind: "ConfigMap", matchName: "cfg", namespace: "ns" },
      nets: { apiVersion: "ec2/v1", kind: "VPC", matchLabels: { labels: { env: "prod" } } },
    },
    schemas: { xr: { apiVersion: "example.org/v1", kind: "XBucket" } },
  });
});

Req("bad selectors are refused with the reason", () => {
  const rsp = response.to(req());
  assert.throws(
    () => response.requireResources(rsp, "x", { apiVersion: "v1", kind: "K", matchName: "a", matchLabels: { a: "b" } } as never),
    /"x": give exactly one of matchName and matchLabels/,
  );
  assert.throws(() => response.requireResources(rsp, "x", { apiVersion: "v1", kind: "K" } as never), /exactly one of/);
  assert.throws(
    () => response.requireResources(rsp, "x", { apiVersion: "", kind: "K", matchName: "a" }),
    /apiVersion and kind are required/,
  );
  assert.throws(() => response.requireSchema(rsp, "s", { apiVersion: "v1", kind: "" }), /apiVersion and kind are required/);
});

To.run();
Desired.run();
Results.run();
Req.run();
