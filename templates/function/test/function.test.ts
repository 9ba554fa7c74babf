// Unit tests of the function, with Node's own test runner. They call the
// function as the server does (callFunction, from xfn-runtime/testing), so what passes here is
// what Crossplane gets.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Ready, Severity } from "xfn-runtime";
import { callFunction, requestFromJson } from "xfn-runtime/testing";
import fn from "../src/index.js";
import { parseInput } from "../src/input.js";

const xr = (spec: Record<string, unknown>) => ({
  apiVersion: "example.org/v1alpha1",
  kind: "XBuckets",
  metadata: { name: "team-a", namespace: "default" },
  spec,
});

test("composes one bucket per entry, in the XR's region unless the entry names one", async () => {
  const req = requestFromJson({
    observed: { composite: { resource: xr({ region: "eu-west-1", buckets: [{ name: "logs" }, { name: "assets", region: "us-east-1" }] }) } },
  });
  const rsp = await callFunction(fn, req);
  const desired = rsp.desired?.resources ?? {};
  assert.deepEqual(Object.keys(desired).sort(), ["bucket-assets", "bucket-logs"]);
  assert.equal((desired["bucket-logs"]?.resource?.["spec"] as { forProvider: { region: string } }).forProvider.region, "eu-west-1");
  assert.equal((desired["bucket-assets"]?.resource?.["spec"] as { forProvider: { region: string } }).forProvider.region, "us-east-1");
  assert.equal(desired["bucket-logs"]?.ready, Ready.FALSE, "not observed yet, so not ready");
  assert.deepEqual(rsp.desired?.composite?.resource?.["status"], { bucketCount: 2 });
});

test("a bad bucket name is a Fatal result naming it", async () => {
  const req = requestFromJson({ observed: { composite: { resource: xr({ buckets: [{ name: "Not_A_Label" }] }) } } });
  const rsp = await callFunction(fn, req);
  assert.equal(rsp.results[0]?.severity, Severity.FATAL);
  assert.match(rsp.results[0]?.message ?? "", /spec\.buckets\[0\]\.name must be a DNS label, got "Not_A_Label"/);
});

test("input: defaultRegion defaults to us-east-1 and must be a non-empty string", () => {
  assert.deepEqual(parseInput({}), { defaultRegion: "us-east-1" });
  assert.deepEqual(parseInput({ defaultRegion: "ap-south-1" }), { defaultRegion: "ap-south-1" });
  assert.throws(() => parseInput({ defaultRegion: "" }), /non-empty string/);
});
