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

import { benchFunction, composed, EXT } from "./composed.js";

export { composed, EXT };

const word = (r: () => number, n: number) => Array.from({ length: n }, () => "abcdefghijklmnopqrstuvwxyz"[Math.floor(r() * 26)]).join("");

/** request builds the RunFunctionRequest for n resources; the same seed gives the same bytes. */
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
  for (let i = 0; i < n; i++) {
    const c = composed(xr, i);
    (c["metadata"] as JsonObject)["name"] = `fleet-${word(r, 5)}`;
    (c["metadata"] as JsonObject)["annotations"] = {
      "crossplane.io/composition-resource-name": `instance-${i}`,
      [EXT]: `i-${word(r, 17)}`,
    };
    c["status"] = {
      atProvider: {
        id: `i-${word(r, 17)}`,
        arn: `arn:aws:ec2:eu-west-1:123456789012:instance/i-${word(r, 17)}`,
        privateIp: `10.0.${i % 250}.${(i * 7) % 250}`,
        state: "running",
      },
      conditions: [
        { type: "Ready", status: r() < 0.8 ? "True" : "False", reason: "Available", lastTransitionTime: "2026-01-01T00:00:00Z" },
        { type: "Synced", status: "True", reason: "ReconcileSuccess", lastTransitionTime: "2026-01-01T00:00:00Z" },
      ],
    };
    observed[`instance-${i}`] = { resource: c };
  }
  return toBinary(
    RunFunctionRequestSchema,
    create(RunFunctionRequestSchema, {
      meta: { tag: `bench-${n}` },
      observed: { composite: { resource: xr }, resources: observed },
      desired: {},
    } as never),
  );
}

/** xfnFunction is the bench function built from xfn's sources (bench/composed.ts). */
export function xfnFunction(): RunFunction {
  return benchFunction({ pipeline, step, request: req, response, steps: { externalName, readiness } });
}
