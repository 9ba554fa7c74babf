// The requirements loop and required resource lookups, as Crossplane runs and
// answers them. Ported from crossplane/crossplane at
// 2d040d2daf4e001799c4154a4a09b9e1f40d7fde: internal/xfn/required_resources_test.go
// (TestFetchingFunctionRunner, TestExistingRequiredResourcesFetcherFetch; case
// names kept) and internal/render/client.go (the in-memory client render's
// lookups go through). Cases named in lower case are xfn's own, for what the
// issue found different: context between iterations, answers of older
// iterations, and selectors without a match.
import { clone, create, type JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import {
  FatalResultError,
  MAX_REQUIREMENTS_ITERATIONS,
  runPipeline,
  StepError,
  type Fetch,
  type PipelineStep,
} from "../../src/engine/composition.js";
import type { Runner } from "../../src/engine/runner.js";
import {
  RunFunctionRequestSchema,
  RunFunctionResponseSchema,
  Severity,
  type RunFunctionRequest,
  type RunFunctionResponse,
} from "../../src/gen/fn/v1/run_function_pb.js";
import { select } from "../../src/render/render.js";

const cool: JsonObject = { apiVersion: "test.crossplane.io/v1", Kind: "CoolResource", metadata: { name: "pretty-cool" } };
const coolResources = () => ({
  $typeName: "apiextensions.fn.proto.v1.Resources" as const,
  items: [{ $typeName: "apiextensions.fn.proto.v1.Resource" as const, resource: structuredClone(cool), connectionDetails: {}, ready: 0 }],
});

/** fakeRunner answers each call with respond(request, call number) and keeps a copy of every request. */
function fakeRunner(respond: (req: RunFunctionRequest, n: number) => Partial<RunFunctionResponse> | Error) {
  const seen: RunFunctionRequest[] = [];
  const runner: Runner = {
    async run(_name, req) {
      seen.push(clone(RunFunctionRequestSchema, req));
      const r = respond(req, seen.length);
      if (r instanceof Error) throw r;
      return create(RunFunctionResponseSchema, r as never);
    },
    close() {},
  };
  return { runner, seen };
}

const step = (over: Partial<PipelineStep> = {}): PipelineStep => ({
  step: "cool-step",
  functionName: "cool-function",
  credentials: [],
  bootstrap: [],
  bootstrapSchemas: [],
  ...over,
});

const run = (
  runner: Runner,
  fetch: Fetch = () => coolResources(),
  over: Partial<PipelineStep> = {},
  schemaOf?: (a: string, k: string) => JsonObject | undefined,
) =>
  runPipeline(
    { steps: [step(over)], observed: {}, context: undefined, credentials: [], fetch, ...(schemaOf ? { schemaOf } : {}) },
    runner,
    Date.now() + 60_000,
  );

const gimme = { gimme: { apiVersion: "test.crossplane.io/v1", kind: "CoolResource" } };

const F = suite("requirements loop (crossplane TestFetchingFunctionRunner)");

F("RunFunctionError", async () => {
  const { runner } = fakeRunner(() => new Error("boom"));
  const err = await run(runner).catch((e: unknown) => e);
  assert.instance(err, StepError);
  assert.is((err as Error).message, 'cannot run Composition pipeline step "cool-step": boom');
});

F("FatalResult", async () => {
  const { runner, seen } = fakeRunner(() => ({
    results: [{ severity: Severity.FATAL, message: "no" } as never],
    requirements: { extraResources: gimme } as never,
  }));
  const err = await run(runner).catch((e: unknown) => e);
  assert.instance(err, FatalResultError);
  assert.is(seen.length, 1, "a Fatal result ends the loop, whatever it requires");
});

F("NoRequirements", async () => {
  const { runner, seen } = fakeRunner(() => ({ results: [{ severity: Severity.NORMAL, message: "hi" } as never] }));
  const r = await run(runner);
  assert.is(seen.length, 1);
  assert.is(r.results[0]!.message, "hi");
});

F("FetchResourcesError", async () => {
  const { runner } = fakeRunner(() => ({ requirements: { extraResources: gimme } as never }));
  const err = await run(runner, () => {
    throw new Error("boom");
  }).catch((e: unknown) => e);
  assert.instance(err, StepError);
  assert.is((err as Error).message, 'cannot run Composition pipeline step "cool-step": fetching resources for gimme: boom');
});

F("RequirementsDidntStabilizeError", async () => {
  const { runner, seen } = fakeRunner((_req, n) => ({
    requirements: { extraResources: { gimme: { apiVersion: "test.crossplane.io/v1", kind: `CoolResource${n}` } } } as never,
  }));
  const err = await run(runner).catch((e: unknown) => e);
  assert.instance(err, StepError);
  assert.is(
    (err as Error).message,
    'cannot run Composition pipeline step "cool-step": requirements didn\'t stabilize after the maximum number of iterations (5)',
  );
  // Crossplane's loop runs for i := 0; i <= MaxRequirementsIterations: one call, then five more.
  assert.is(seen.length, MAX_REQUIREMENTS_ITERATIONS + 1);
});

F("Success", async () => {
  const { runner, seen } = fakeRunner(() => ({ requirements: { extraResources: gimme } as never }));
  await run(runner);
  assert.is(seen.length, 2);
  assert.equal(Object.keys(seen[0]!.extraResources), []);
  assert.equal(seen[1]!.extraResources["gimme"]!.items[0]!.resource, cool);
});

F("SeededRequirementResolvesInOneCall", async () => {
  const { runner, seen } = fakeRunner(() => ({
    requirements: {
      resources: {
        gimme: { apiVersion: "test.crossplane.io/v1", kind: "CoolResource", match: { case: "matchName", value: "pretty-cool" } },
      },
    } as never,
  }));
  await run(runner, () => coolResources(), {
    bootstrap: [
      {
        name: "gimme",
        selector: { apiVersion: "test.crossplane.io/v1", kind: "CoolResource", match: { case: "matchName", value: "pretty-cool" } },
      },
    ],
  });
  assert.is(seen.length, 1, "bootstrap requirements the function asks for again are already answered: one call");
  assert.ok(seen[0]!.requiredResources["gimme"]);
});

F("PreserveBootstrapResourcesWithDynamicRequirements", async () => {
  const dynamic = { "dynamic-secret": { apiVersion: "v1", kind: "Secret", match: { case: "matchName", value: "dynamic-secret" } } };
  const { runner, seen } = fakeRunner(() => ({ requirements: { resources: dynamic } as never }));
  await run(runner, () => coolResources(), {
    bootstrap: [{ name: "bootstrap-cm", selector: { apiVersion: "v1", kind: "ConfigMap", match: { case: "matchName", value: "cm" } } }],
  });
  assert.is(seen.length, 2);
  assert.equal(Object.keys(seen[0]!.requiredResources), ["bootstrap-cm"]);
  assert.equal(Object.keys(seen[1]!.requiredResources).sort(), ["bootstrap-cm", "dynamic-secret"]);
});

F("FetchSchemasSuccess", async () => {
  const { runner, seen } = fakeRunner(() => ({ requirements: { schemas: { "pod-schema": { apiVersion: "v1", kind: "Pod" } } } as never }));
  await run(runner, undefined, {}, (apiVersion, kind) => ({
    type: "object",
    "x-kubernetes-group-version-kind": [{ group: "", version: apiVersion, kind }],
  }));
  assert.is(seen.length, 2);
  assert.equal(seen[1]!.requiredSchemas["pod-schema"]!.openapiV3, {
    type: "object",
    "x-kubernetes-group-version-kind": [{ group: "", version: "v1", kind: "Pod" }],
  });
});

F("PreserveBootstrapSchemasWithDynamicRequirements", async () => {
  const { runner, seen } = fakeRunner(() => ({
    requirements: { schemas: { "dynamic-schema": { apiVersion: "apps/v1", kind: "Deployment" } } } as never,
  }));
  await run(runner, undefined, { bootstrapSchemas: [{ name: "bootstrap-schema", apiVersion: "v1", kind: "Pod" }] }, () => ({
    type: "object",
  }));
  assert.is(seen.length, 2);
  assert.equal(Object.keys(seen[0]!.requiredSchemas), ["bootstrap-schema"]);
  assert.equal(Object.keys(seen[1]!.requiredSchemas).sort(), ["bootstrap-schema", "dynamic-schema"]);
});

F("the context a call returns is the context the next call of the loop receives", async () => {
  const { runner, seen } = fakeRunner((req, n) => ({
    context: { calls: n },
    requirements: { extraResources: n === 1 ? gimme : { other: { apiVersion: "v1", kind: "ConfigMap" } } } as never,
  }));
  await run(runner);
  assert.is(seen.length, 3);
  assert.equal(seen[0]!.context, undefined);
  assert.equal(seen[1]!.context, { calls: 1 });
  assert.equal(seen[2]!.context, { calls: 2 });
});

F("a call gets the answers to the last call's requirements only, not older ones", async () => {
  const { runner, seen } = fakeRunner((_req, n) => ({
    requirements: { resources: n === 1 ? { first: gimme.gimme } : { second: gimme.gimme } } as never,
  }));
  await run(runner);
  assert.is(seen.length, 3);
  assert.equal(Object.keys(seen[1]!.requiredResources), ["first"]);
  assert.equal(Object.keys(seen[2]!.requiredResources), ["second"]);
});

F("a function that stops requiring is called once more, without the answers", async () => {
  const { runner, seen } = fakeRunner((_req, n) => (n === 1 ? { requirements: { resources: gimme } as never } : {}));
  await run(runner);
  assert.is(seen.length, 3);
  assert.equal(Object.keys(seen[2]!.requiredResources), []);
});

F("resources a step required on its last run are seeded: one call; a seed that cannot be fetched is skipped; bootstrap wins", async () => {
  const sel = { apiVersion: "test.crossplane.io/v1", kind: "CoolResource", match: { case: "matchName" as const, value: "pretty-cool" } };
  const { runner, seen } = fakeRunner(() => ({ requirements: { resources: { gimme: sel } } as never }));
  const r = await runPipeline(
    {
      steps: [step()],
      observed: {},
      context: undefined,
      credentials: [],
      fetch: () => coolResources(),
      seed: () => [{ name: "gimme", selector: sel as never }],
    },
    runner,
    Date.now() + 60_000,
  );
  assert.is(seen.length, 1, "seeded with what it asks for, the function is called once");
  assert.equal(
    r.required["cool-step"]!.map((x) => x.name),
    ["gimme"],
    "and what it required is reported for the next run",
  );
  const { runner: r2, seen: seen2 } = fakeRunner(() => ({}));
  const r2result = await runPipeline(
    {
      steps: [
        step({
          bootstrap: [
            { name: "gimme", selector: { apiVersion: "v1", kind: "ConfigMap", match: { case: "matchName", value: "from-bootstrap" } } },
          ],
        }),
      ],
      observed: {},
      context: undefined,
      credentials: [],
      fetch: (s) => {
        if (s.kind === "Broken") throw new Error("boom");
        return {
          $typeName: "apiextensions.fn.proto.v1.Resources",
          items: [{ $typeName: "apiextensions.fn.proto.v1.Resource", resource: { kind: s.kind }, connectionDetails: {}, ready: 0 }],
        };
      },
      seed: () => [
        { name: "gimme", selector: sel as never },
        { name: "broken", selector: { apiVersion: "v1", kind: "Broken", match: { case: undefined } } as never },
      ],
    },
    r2,
    Date.now() + 60_000,
  );
  assert.equal(Object.keys(seen2[0]!.requiredResources), ["gimme"]);
  assert.equal(seen2[0]!.requiredResources["gimme"]!.items[0]!.resource, { kind: "ConfigMap" }, "bootstrap, not the seed");
  // Bootstrap requirements are recorded too, so they are watched even when the function does not ask again
  // (composition_functions.go at 2d040d2d tracks them).
  assert.equal(
    r2result.required["cool-step"]!.map((x) => [x.name, x.selector.kind]),
    [["gimme", "ConfigMap"]],
  );
});

F("a bootstrap selector with neither name nor labels selects every object of its kind", async () => {
  const { runner, seen } = fakeRunner(() => ({}));
  const store = [
    { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "b", namespace: "x" } },
    { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a", namespace: "y" } },
    { apiVersion: "v1", kind: "Secret", metadata: { name: "s", namespace: "x" } },
  ];
  await run(runner, (s) => select(store, s), {
    bootstrap: [{ name: "all", selector: { apiVersion: "v1", kind: "ConfigMap", match: { case: undefined } } }],
  });
  assert.equal(
    seen[0]!.requiredResources["all"]!.items.map((i) => (i.resource!["metadata"] as JsonObject)["name"]),
    ["b", "a"],
    "sorted by namespace, then name",
  );
});
F.run();

const S = suite("required resource lookups (crossplane TestExistingRequiredResourcesFetcherFetch, render's in-memory client)");
const foo = (name: string, extra: JsonObject = {}): JsonObject => ({
  apiVersion: "test.crossplane.io/v1",
  kind: "Foo",
  metadata: { name, ...extra },
});
const names = (r: ReturnType<typeof select>) => r.items.map((i) => (i.resource!["metadata"] as JsonObject)["name"]);

S("SuccessMatchName", () => {
  const r = select([foo("cool-resource"), foo("other")], {
    apiVersion: "test.crossplane.io/v1",
    kind: "Foo",
    match: { case: "matchName", value: "cool-resource" },
  });
  assert.equal(names(r), ["cool-resource"]);
});
S("SuccessMatchAll", () => {
  const store = [
    foo("cool-resource", { namespace: "default" }),
    foo("cooler-resource", { namespace: "default" }),
    foo("elsewhere", { namespace: "other" }),
  ];
  const r = select(store, { apiVersion: "test.crossplane.io/v1", kind: "Foo", namespace: "default", match: { case: undefined } });
  assert.equal(names(r), ["cool-resource", "cooler-resource"]);
});
S("SuccessMatchLabels", () => {
  const labels = { labels: { cool: "resource" } };
  const store = [
    foo("cool-resource", { namespace: "default", ...labels }),
    foo("cooler-resource", { namespace: "default", ...labels }),
    foo("plain", { namespace: "default" }),
  ];
  const r = select(store, {
    apiVersion: "test.crossplane.io/v1",
    kind: "Foo",
    namespace: "default",
    match: { case: "matchLabels", value: { $typeName: "apiextensions.fn.proto.v1.MatchLabels", labels: { cool: "resource" } } },
  });
  assert.equal(names(r), ["cool-resource", "cooler-resource"]);
});
S("SuccessMatchLabelsSortedByName", () => {
  const labels = { labels: { cool: "resource" } };
  const store = [foo("b-cool-resource", { namespace: "default", ...labels }), foo("a-cool-resource", { namespace: "default", ...labels })];
  const r = select(store, {
    apiVersion: "test.crossplane.io/v1",
    kind: "Foo",
    namespace: "default",
    match: { case: "matchLabels", value: { $typeName: "apiextensions.fn.proto.v1.MatchLabels", labels: { cool: "resource" } } },
  });
  assert.equal(names(r), ["a-cool-resource", "b-cool-resource"]);
});
S("NotFoundMatchName", () => {
  const r = select([foo("other")], {
    apiVersion: "test.crossplane.io/v1",
    kind: "Foo",
    match: { case: "matchName", value: "cool-resource" },
  });
  assert.equal(r.items, []);
});
S("a name without a namespace finds only an object without one (render's client keys objects by namespace and name)", () => {
  const r = select([foo("cool-resource", { namespace: "default" })], {
    apiVersion: "test.crossplane.io/v1",
    kind: "Foo",
    match: { case: "matchName", value: "cool-resource" },
  });
  assert.equal(r.items, []);
});
S("a list matches group, kind and version, in every namespace when none is given", () => {
  const store = [
    foo("v1-one", { namespace: "a" }),
    { apiVersion: "test.crossplane.io/v2", kind: "Foo", metadata: { name: "v2-one", namespace: "b" } },
    { apiVersion: "other.crossplane.io/v1", kind: "Foo", metadata: { name: "other-group" } },
  ];
  assert.equal(names(select(store, { apiVersion: "test.crossplane.io/v1", kind: "Foo", match: { case: undefined } })), ["v1-one"]);
  assert.equal(names(select(store, { apiVersion: "test.crossplane.io/v2", kind: "Foo", match: { case: undefined } })), ["v2-one"]);
});
S.run();
