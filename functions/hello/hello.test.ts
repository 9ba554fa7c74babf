import { suite } from "uvu";
import * as assert from "uvu/assert";
import type { JsonObject, RunContext, RunFunctionResponse } from "xfn-runtime";
import { Ready, Severity, Status, Target } from "xfn-runtime";
import { request } from "../../test/support/requests.js";
import hello from "./index.js";

const ctx = {} as RunContext; // hello uses neither the signal, the log nor the clock.

const xr = (spec: JsonObject): JsonObject => ({ apiVersion: "example.xfn.dev/v1alpha1", kind: "XBuckets", metadata: { name: "x" }, spec });
const ready = { status: { conditions: [{ type: "Ready", status: "True" }] } };

interface Want {
  regions?: Record<string, string>;
  ready?: Record<string, Ready>;
  kept?: string[];
  condition?: [Status, string, string | undefined];
  fatal?: RegExp;
  bucketCount?: number;
}

const cases: Record<string, { reason: string; json: JsonObject; want: Want }> = {
  NoBuckets: {
    reason: "An XR without buckets composes nothing and is ready.",
    json: { observed: { composite: { resource: xr({}) } } },
    want: { regions: {}, bucketCount: 0, condition: [Status.CONDITION_TRUE, "Available", undefined] },
  },
  RegionPrecedence: {
    reason: "A bucket's own region wins over the XR's, which wins over the input default.",
    json: {
      observed: { composite: { resource: xr({ region: "eu-west-1", buckets: [{ name: "a" }, { name: "b", region: "us-east-2" }] }) } },
      input: { defaultRegion: "ap-south-1" },
    },
    want: { regions: { "bucket-a": "eu-west-1", "bucket-b": "us-east-2" }, bucketCount: 2 },
  },
  InputDefault: {
    reason: "Without any region the input's default applies.",
    json: { observed: { composite: { resource: xr({ buckets: [{ name: "a" }] }) } }, input: { defaultRegion: "ap-south-1" } },
    want: { regions: { "bucket-a": "ap-south-1" } },
  },
  Readiness: {
    reason: "A bucket is ready when the provider reports Ready=True; the XR condition names the rest.",
    json: {
      observed: {
        composite: { resource: xr({ buckets: [{ name: "a" }, { name: "b" }] }) },
        resources: { "bucket-a": { resource: { kind: "Bucket", ...ready } } },
      },
    },
    want: { ready: { "bucket-a": Ready.TRUE, "bucket-b": Ready.FALSE }, condition: [Status.CONDITION_FALSE, "Creating", "waiting for b"] },
  },
  EarlierChoiceKept: {
    reason: "Readiness an earlier step set explicitly is not overridden.",
    json: {
      observed: { composite: { resource: xr({ buckets: [{ name: "a" }] }) } },
      desired: { resources: { "bucket-a": { resource: {}, ready: "READY_TRUE" }, other: { resource: { kind: "Other" } } } },
    },
    want: { ready: { "bucket-a": Ready.TRUE }, kept: ["bucket-a", "other"] },
  },
  BadBucketName: {
    reason: "A bucket name that is not a DNS label is a Fatal result naming the entry.",
    json: { observed: { composite: { resource: xr({ buckets: [{ name: "Bad_Name" }] }) } } },
    want: { fatal: /spec\.buckets\[0\]\.name must be a DNS label.*"Bad_Name"/ },
  },
  BadBucketEntry: {
    reason: "A bucket entry that is not an object is a Fatal result.",
    json: { observed: { composite: { resource: xr({ buckets: ["a"] }) } } },
    want: { fatal: /spec\.buckets\[0\] must be an object/ },
  },
  BucketsNotAList: {
    reason: "spec.buckets of the wrong type is a Fatal result naming the field.",
    json: { observed: { composite: { resource: xr({ buckets: "a" }) } } },
    want: { fatal: /"spec\.buckets": is a string, not an array/ },
  },
  BadInput: {
    reason: "Invalid input is a Fatal result naming the field.",
    json: { observed: { composite: { resource: xr({}) } }, input: { defaultRegion: 7 } },
    want: { fatal: /cannot parse function input: defaultRegion must be a non-empty string/ },
  },
  NoObservedXR: {
    reason: "A request without an observed XR is a Fatal result.",
    json: { observed: {} },
    want: { fatal: /the request has no observed composite resource/ },
  },
};

const Hello = suite("functions/hello");

for (const [name, tc] of Object.entries(cases)) {
  Hello(name, async () => {
    const rsp: RunFunctionResponse = await hello(request(tc.json), ctx);
    const w = tc.want;
    if (w.fatal) {
      assert.is(rsp.results.length, 1, tc.reason);
      assert.is(rsp.results[0]!.severity, Severity.FATAL, tc.reason);
      assert.match(rsp.results[0]!.message, w.fatal, tc.reason);
      return;
    }
    assert.not.ok(
      rsp.results.some((r) => r.severity === Severity.FATAL),
      tc.reason,
    );
    const resources = rsp.desired?.resources ?? {};
    if (w.regions) {
      const got = Object.fromEntries(
        Object.entries(resources).map(([k, r]) => [k, ((r.resource?.["spec"] as JsonObject)["forProvider"] as JsonObject)["region"]]),
      );
      assert.equal(got, w.regions, tc.reason);
    }
    if (w.ready) {
      for (const [k, want] of Object.entries(w.ready)) assert.is(resources[k]?.ready, want, `${tc.reason} (${k})`);
    }
    if (w.kept) assert.equal(Object.keys(resources).sort(), w.kept, tc.reason);
    if (w.bucketCount !== undefined) assert.equal(rsp.desired?.composite?.resource?.["status"], { bucketCount: w.bucketCount }, tc.reason);
    if (w.condition) {
      const c = rsp.conditions.find((c) => c.type === "BucketsReady");
      assert.equal([c?.status, c?.reason, c?.message], w.condition, tc.reason);
      assert.is(c?.target, Target.COMPOSITE_AND_CLAIM);
    }
  });
}

Hello.run();
