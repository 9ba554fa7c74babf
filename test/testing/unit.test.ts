// The `testing` helpers a function's own unit tests use.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { Severity } from "../../src/gen/fn/v1/run_function_pb.js";
import * as response from "../../src/sdk/response.js";
import { callFunction, readRequest, requestFromJson, responseToJson } from "../../src/testing/unit.js";

const U = suite("testing helpers");

U("callFunction runs a function as the server does: the clock fixed, a throw a Fatal result", async () => {
  const req = requestFromJson({ meta: { tag: "t" }, observed: { composite: { resource: { kind: "X" } } } });
  const at = new Date("2026-01-02T03:04:05Z");
  const ok = await callFunction(
    (r, ctx) => {
      const rsp = response.to(r);
      response.normal(rsp, ctx.now().toISOString());
      return rsp;
    },
    req,
    { now: at },
  );
  assert.equal(responseToJson(ok), {
    meta: { tag: "t", ttl: "60s" },
    desired: {},
    results: [{ severity: "SEVERITY_NORMAL", message: "2026-01-02T03:04:05.000Z", target: "TARGET_COMPOSITE" }],
  });
  const thrown = await callFunction(() => {
    throw new Error("boom");
  }, req);
  assert.is(thrown.results[0]?.severity, Severity.FATAL);
  assert.match(thrown.results[0]?.message ?? "", /boom/);
});

U("callFunction reports what Crossplane could not receive: a value that is not JSON", async () => {
  const req = requestFromJson({});
  const rsp = await callFunction((r) => {
    const out = response.to(r);
    response.setDesiredComposedResource(out, "x", { apiVersion: "v1", kind: "ConfigMap", data: { when: new Date(0) } } as never);
    return out;
  }, req);
  assert.is(rsp.results[0]?.severity, Severity.FATAL);
  assert.match(rsp.results[0]?.message ?? "", /data\.when/);
});

U("requestFromJson and readRequest name what does not fit", () => {
  assert.throws(() => requestFromJson({ meta: { tag: 7 } }), /cannot read a RunFunctionRequest: .*tag/);
  const dir = mkdtempSync(join(tmpdir(), "xfn-unit-"));
  try {
    writeFileSync(join(dir, "ok.yaml"), "meta:\n  tag: a\n");
    assert.is(readRequest(join(dir, "ok.yaml")).meta?.tag, "a");
    writeFileSync(join(dir, "list.yaml"), "- 1\n");
    assert.throws(() => readRequest(join(dir, "list.yaml")), /list\.yaml: expected a RunFunctionRequest object/);
    writeFileSync(join(dir, "bad.yaml"), "observed: 3\n");
    assert.throws(() => readRequest(join(dir, "bad.yaml")), /cannot read .*bad\.yaml as a RunFunctionRequest/);
    assert.throws(() => readRequest(join(dir, "none.yaml")), /cannot read .*none\.yaml: ENOENT/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

U("a composed resource named __proto__ goes through requestFromJson, the function and responseToJson", async () => {
  const req = requestFromJson(JSON.parse(`{"observed": {"resources": {"__proto__": {"resource": {"kind": "K", "spec": {"size": 2}}}}}}`));
  const rsp = await callFunction((r) => {
    const out = response.to(r);
    const seen = r.observed?.resources["__proto__"]?.resource;
    response.setDesiredComposedResource(out, "__proto__", {
      kind: "K",
      spec: { size: Number((seen?.["spec"] as { size: number }).size) * 2 },
    });
    return out;
  }, req);
  const json = responseToJson(rsp) as { desired: { resources: Record<string, unknown> } };
  assert.ok(Object.hasOwn(json.desired.resources, "__proto__"));
  assert.equal(json.desired.resources["__proto__"], { resource: { kind: "K", spec: { size: 4 } } });
});

U.run();
