// The benchmark's workload: a seeded, deterministic request with N composed
// resources (about 1 KB of spec and status each), and the one function all
// servers implement: compose N resources from the XR, keep external names,
// mark readiness.
import { create, toBinary, type JsonObject } from "@bufbuild/protobuf";
import { RunFunctionRequestSchema } from "../src/gen/fn/v1/run_function_pb.js";
import { mulberry32 as rng } from "../test/support/rng.js";
import type { RunFunction } from "../src/function.js";
import { pipeline, step } from "../src/pipeline.js";
import * as req from "../src/sdk/request.js";
import * as response from "../src/sdk/response.js";
import { externalName, readiness } from "../src/steps/index.js";

import { benchFunction, composed, EXT, holds } from "./composed.js";

export { composed, EXT, holds };

const word = (r: () => number, n: number) => Array.from({ length: n }, () => "abcdefghijklmnopqrstuvwxyz"[Math.floor(r() * 26)]).join("");

/**
 * request builds the RunFunctionRequest for n resources; the same seed gives
 * the same bytes. Each observed resource is what the API server returns for a
 * managed resource a provider has reconciled, about 3.5 KB on the wire
 * (N = 1000 is about 3.5 MiB): metadata as the API server and Crossplane fill
 * it, the composed spec plus defaulted fields, and status.atProvider with
 * what the provider observed.
 */
export function request(n: number, seed = 42): Uint8Array {
  const r = rng(seed + n);
  const tags: Record<string, string> = {};
  for (let i = 0; i < 8; i++) tags[`tag-${word(r, 6)}`] = word(r, 12);
  const xr = {
    apiVersion: "bench.xfn.dev/v1",
    kind: "XFleet",
    metadata: { name: "fleet", uid: "0b5e3c1c-bench" },
    spec: { count: n, region: "eu-west-1", team: "platform", tags, userData: word(r, 120) },
  };
  const observed: Record<string, { resource: JsonObject }> = {};
  for (let i = 0; i < n; i++) observed[`instance-${i}`] = { resource: observedInstance(r, xr, i) };
  return toBinary(
    RunFunctionRequestSchema,
    create(RunFunctionRequestSchema, {
      meta: { tag: `bench-${n}` },
      observed: { composite: { resource: xr }, resources: observed },
      desired: {},
    } as never),
  );
}

const hex = (r: () => number, n: number) => Array.from({ length: n }, () => "0123456789abcdef"[Math.floor(r() * 16)]).join("");
const uuid = (r: () => number) => `${hex(r, 8)}-${hex(r, 4)}-${hex(r, 4)}-${hex(r, 4)}-${hex(r, 12)}`;

/** observedInstance is composed resource i as observed: the composed object plus what the API server and provider added. */
function observedInstance(r: () => number, xr: JsonObject, i: number): JsonObject {
  const c = composed(xr, i);
  const meta = c["metadata"] as JsonObject;
  const spec = c["spec"] as JsonObject;
  const fp = spec["forProvider"] as JsonObject;
  const id = `i-${word(r, 17)}`;
  const at = "2026-01-01T00:00:00Z";
  const zone = `eu-west-1${"abc"[i % 3]}`;
  const ip = `10.0.${i % 250}.${(i * 7) % 250}`;
  const device = (fp["rootBlockDevice"] as JsonObject[])[0]!;
  meta["name"] = `fleet-${word(r, 5)}`;
  meta["generateName"] = "fleet-";
  meta["uid"] = uuid(r);
  meta["resourceVersion"] = String(100000 + Math.floor(r() * 900000));
  meta["generation"] = 1 + Math.floor(r() * 5);
  meta["creationTimestamp"] = at;
  meta["labels"] = { ...(meta["labels"] as JsonObject), "crossplane.io/composite": "fleet" };
  meta["annotations"] = {
    "crossplane.io/composition-resource-name": `instance-${i}`,
    [EXT]: id,
    "crossplane.io/external-create-pending": at,
    "crossplane.io/external-create-succeeded": at,
  };
  meta["ownerReferences"] = [
    { apiVersion: "bench.xfn.dev/v1", kind: "XFleet", name: "fleet", uid: "0b5e3c1c-bench", controller: true, blockOwnerDeletion: true },
  ];
  meta["finalizers"] = ["finalizer.managedresource.crossplane.io"];
  spec["deletionPolicy"] = "Delete";
  spec["managementPolicies"] = ["*"];
  spec["initProvider"] = {};
  Object.assign(fp, { monitoring: false, tenancy: "default", sourceDestCheck: true, hibernation: false });
  c["status"] = {
    atProvider: {
      ami: fp["ami"]!,
      instanceType: fp["instanceType"]!,
      monitoring: false,
      tenancy: "default",
      id,
      arn: `arn:aws:ec2:eu-west-1:123456789012:instance/${id}`,
      availabilityZone: zone,
      privateIp: ip,
      privateDns: `ip-${ip.replaceAll(".", "-")}.eu-west-1.compute.internal`,
      primaryNetworkInterfaceId: `eni-${word(r, 17)}`,
      subnetId: `subnet-${word(r, 17)}`,
      vpcSecurityGroupIds: [`sg-${word(r, 17)}`, `sg-${word(r, 17)}`],
      instanceState: "running",
      instanceInitiatedShutdownBehavior: "stop",
      keyName: "platform",
      tagsAll: { ...(fp["tags"] as JsonObject), "crossplane-kind": "instance.ec2.aws.upbound.io", "crossplane-name": String(meta["name"]) },
      cpuOptions: [{ coreCount: 1, threadsPerCore: 2, amdSevSnp: "" }],
      creditSpecification: [{ cpuCredits: "unlimited" }],
      metadataOptions: [
        {
          httpEndpoint: "enabled",
          httpProtocolIpv6: "disabled",
          httpPutResponseHopLimit: 2,
          httpTokens: "required",
          instanceMetadataTags: "disabled",
        },
      ],
      rootBlockDevice: [
        {
          ...device,
          deleteOnTermination: true,
          deviceName: "/dev/xvda",
          iops: 3000,
          throughput: 125,
          volumeId: `vol-${word(r, 17)}`,
          tags: {},
        },
      ],
      ebsOptimized: false,
    },
    conditions: [
      { type: "Ready", status: r() < 0.8 ? "True" : "False", reason: "Available", lastTransitionTime: at },
      { type: "Synced", status: "True", reason: "ReconcileSuccess", lastTransitionTime: at },
      { type: "LastAsyncOperation", status: "True", reason: "Success", lastTransitionTime: at },
    ],
  };
  return c;
}

/** xfnFunction is the bench function built from xfn's sources (bench/composed.ts). */
export function xfnFunction(): RunFunction {
  return benchFunction({ pipeline, step, request: req, response, steps: { externalName, readiness } });
}
