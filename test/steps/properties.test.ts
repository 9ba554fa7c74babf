// Property-style tests: random but reproducible desired and observed sets,
// run through every step, must keep earlier steps' choices, never lose a
// recorded name, never invent a resource, and be a fixed point: running the
// pipeline again on its own applied output changes nothing.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { fromJson, toJson } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import {
  Ready,
  RunFunctionRequestSchema,
  RunFunctionResponseSchema,
  type RunFunctionResponse,
} from "../../src/gen/fn/v1/run_function_pb.js";
import { runSteps, type Step } from "../../src/pipeline.js";
import { getAnnotation } from "../../src/sdk/object.js";
import { dependencies, deletion, externalName, isOwnUsage, lateInit, readiness, USAGE_BY, USAGE_OF } from "../../src/steps/index.js";
import { rng } from "../support/rng.js";

const EXT = "crossplane.io/external-name";
const NOW = new Date("2026-07-01T00:00:00Z");
const CASES = 300;

interface Scenario {
  req: JsonObject;
  steps: Step[];
  recorded: Record<string, string>;
}

const POLICIES = [undefined, ["*"], ["Observe", "Create", "Update", "Delete", "LateInitialize"], ["Observe", "Create", "Update", "Delete"]];

function scenario(seed: number): Scenario {
  const r = rng(seed);
  const n = 1 + Math.floor(r.next() * 6);
  const names = Array.from({ length: n }, (_, i) => `r${i}`);
  const observed: JsonObject = {};
  const desired: JsonObject = {};
  const recorded: Record<string, string> = {};
  const deps: Record<string, { dependsOn?: string[]; waitFor?: string[] }> = {};
  for (const [i, name] of names.entries()) {
    const policies = r.pick(POLICIES);
    if (r.chance(0.6)) {
      const annotations: Record<string, string> = r.chance(0.6) ? { [EXT]: `${name}-ext-${Math.floor(r.next() * 3)}` } : {};
      observed[name] = {
        resource: {
          kind: "MR",
          metadata: { name: `${name}-x`, annotations },
          spec: { ...(policies ? { managementPolicies: policies } : {}), forProvider: { region: r.pick(["eu", "us"]), size: 1 } },
          status: {
            conditions: [{ type: "Ready", status: r.pick(["True", "False"]) }],
            atProvider: r.chance(0.5) ? { id: `${name}-id` } : {},
          },
        },
      };
    }
    if (r.chance(0.85)) {
      const annotations = r.chance(0.2) ? { [EXT]: `${name}-explicit` } : undefined;
      desired[name] = {
        resource: {
          kind: "MR",
          ...(annotations ? { metadata: { annotations } } : {}),
          spec: { ...(policies ? { managementPolicies: policies } : {}), forProvider: r.chance(0.5) ? { size: 2 } : {} },
        },
        ...(r.chance(0.3) ? { ready: r.pick(["READY_TRUE", "READY_FALSE"]) } : {}),
      };
    }
    if (r.chance(0.4)) recorded[name] = `${name}-ext-${Math.floor(r.next() * 3)}`;
    // Edges only to lower indices: never a cycle.
    if (i > 0 && r.chance(0.4)) {
      const dep = names[Math.floor(r.next() * i)]!;
      deps[name] = r.chance(0.5) ? { dependsOn: [dep] } : { waitFor: [`${dep}:status.atProvider.id`] };
    }
  }
  const xr: JsonObject = { kind: "XR", metadata: { name: "xr" }, status: { externalNames: recorded } };
  return {
    req: { meta: { tag: `seed-${seed}` }, observed: { composite: { resource: xr }, resources: observed }, desired: { resources: desired } },
    steps: [
      externalName(),
      lateInit({ fields: ["spec.forProvider.region"] }),
      readiness(),
      dependencies(deps),
      deletion({ dependencies: deps }),
    ],
    recorded,
  };
}

const run = (s: Scenario, req: JsonObject = s.req): RunFunctionResponse =>
  runSteps(s.steps, fromJson(RunFunctionRequestSchema, req as JsonValue), NOW);

function merge(base: JsonValue | undefined, over: JsonValue): JsonValue {
  if (typeof over !== "object" || over === null || Array.isArray(over)) return structuredClone(over);
  const out: JsonObject = typeof base === "object" && base !== null && !Array.isArray(base) ? structuredClone(base) : {};
  for (const [k, v] of Object.entries(over)) out[k] = merge(out[k], v);
  return out;
}

/**
 * applied is the next reconcile's request after Crossplane applies rsp: the
 * observed objects now carry what was desired. With ownOutput, the function's
 * own desired state is its input; otherwise the earlier functions produce the
 * same desired state as before, as they do in a real pipeline.
 */
function applied(s: Scenario, rsp: RunFunctionResponse, ownOutput: boolean): JsonObject {
  const out = toJson(RunFunctionResponseSchema, rsp) as JsonObject;
  const req = structuredClone(s.req) as any;
  const desired = ((out["desired"] as JsonObject | undefined) ?? {}) as any;
  req.observed.composite.resource = merge(req.observed.composite.resource, desired.composite?.resource ?? {});
  for (const [name, r] of Object.entries((desired.resources ?? {}) as Record<string, any>)) {
    if (req.observed.resources[name]) req.observed.resources[name].resource = merge(req.observed.resources[name].resource, r.resource);
  }
  if (ownOutput) req.desired = desired;
  return req;
}

const P = suite("step properties");

P(`earlier steps' choices are kept (${CASES} random cases)`, () => {
  for (let seed = 1; seed <= CASES; seed++) {
    const s = scenario(seed);
    const rsp = run(s);
    const before = (s.req["desired"] as any).resources as Record<string, any>;
    const after = rsp.desired?.resources ?? {};
    const waiting = rsp.results.map((r) => r.message);
    for (const [name, d] of Object.entries(before)) {
      if (!after[name]) {
        assert.ok(
          !(s.req["observed"] as any).resources[name] && waiting.some((m) => m.startsWith(`${name}: waiting for`)),
          `seed ${seed}: ${name} was dropped without being a not-yet-created resource that waits`,
        );
        continue;
      }
      const explicitReady = d.ready === "READY_TRUE" ? Ready.TRUE : d.ready === "READY_FALSE" ? Ready.FALSE : undefined;
      if (explicitReady !== undefined) assert.is(after[name]!.ready, explicitReady, `seed ${seed}: ${name} readiness overridden`);
      const explicitName = d.resource.metadata?.annotations?.[EXT];
      if (explicitName)
        assert.is(getAnnotation(after[name]!.resource, EXT), explicitName, `seed ${seed}: ${name} explicit external name changed`);
    }
    // The one thing a step adds: the dependencies step's Usage between two resources that both exist.
    const observedNow = (s.req["observed"] as any).resources as Record<string, unknown>;
    for (const [name, r] of Object.entries(after)) {
      const edge = isOwnUsage(r.resource) ? (r.resource!["metadata"] as any).annotations : undefined;
      assert.ok(before[name] || (edge && observedNow[edge[USAGE_OF]] && observedNow[edge[USAGE_BY]]), `seed ${seed}: ${name} was invented`);
    }
    const names = ((rsp.desired?.composite?.resource?.["status"] as any)?.externalNames ?? {}) as Record<string, string>;
    for (const name of Object.keys(s.recorded)) assert.ok(names[name], `seed ${seed}: recorded name of ${name} lost`);
  }
});

P(`a fixed point: the next reconcile, after applying, changes nothing (${CASES} random cases)`, () => {
  for (let seed = 1; seed <= CASES; seed++) {
    const s = scenario(seed);
    const first = toJson(RunFunctionResponseSchema, run(s)) as any;
    const second = toJson(RunFunctionResponseSchema, run(s, applied(s, run(s), false))) as any;
    assert.equal(second.desired, first.desired, `seed ${seed}: desired state changed on the next reconcile`);
  }
});

P(`a fixed point: the pipeline on its own applied output applies nothing new (${CASES} random cases)`, () => {
  for (let seed = 1; seed <= CASES; seed++) {
    const s = scenario(seed);
    const first = toJson(RunFunctionResponseSchema, run(s)) as any;
    const second = toJson(RunFunctionResponseSchema, run(s, applied(s, run(s), true))) as any;
    assert.equal(second.desired?.resources, first.desired?.resources, `seed ${seed}: desired resources changed`);
    assert.equal(
      second.desired?.composite?.resource?.status?.externalNames,
      first.desired?.composite?.resource?.status?.externalNames,
      `seed ${seed}`,
    );
  }
});

P.run();
