// xfn render against Crossplane's own render engine and composer, case by
// case. Ported from crossplane/crossplane at
// 2d040d2daf4e001799c4154a4a09b9e1f40d7fde and crossplane/cli at
// 3d72f9316e0703e8e9dbde50e5bc9114544c9199, case names kept:
// - internal/render/composite/render_test.go: TestRender, TestSelectSchema,
//   TestCheckObservedResources;
// - internal/controller/apiextensions/composite/composition_functions_test.go:
//   TestFunctionCompose (the cases about each desired resource), TestUpdateResourceRefs;
// - cmd/crossplane/render/xr/cmd_test.go: TestCmdRun (MatchLabelMissing, MatchLabelMismatch).
// Where Crossplane's test mocks a client, the case sets up what the mock
// stands for (a kind's scope, an observed resource).
import { create, type JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { composeResources, ComposeError, resourceRefsOf } from "../../src/engine/composed.js";
import type { Doc } from "../../src/engine/docs.js";
import { FatalResultError } from "../../src/engine/composition.js";
import type { Runner } from "../../src/engine/runner.js";
import {
  Ready,
  ResourceSchema,
  RunFunctionResponseSchema,
  Severity,
  Status,
  Target,
  type RunFunctionRequest,
  type RunFunctionResponse,
} from "../../src/gen/fn/v1/run_function_pb.js";
import { checkObserved, render, type RenderInputs } from "../../src/render/render.js";

const T = "2024-01-01T00:00:00Z";
const doc = (obj: JsonObject, source = "test.yaml"): Doc => ({ obj, source });

/** runnerOf answers every call with respond(request). */
const runnerOf = (respond: (req: RunFunctionRequest) => Partial<RunFunctionResponse> = () => ({})): Runner => ({
  async run(_name, req) {
    return create(RunFunctionResponseSchema, respond(req) as never);
  },
  close() {},
});

const composition = (kind: string, name: string, steps: string[] = [], labels?: Record<string, string>): Doc =>
  doc({
    apiVersion: "apiextensions.crossplane.io/v1",
    kind: "Composition",
    metadata: { name, ...(labels ? { labels } : {}) },
    spec: {
      compositeTypeRef: { apiVersion: "example.org/v1alpha1", kind },
      mode: "Pipeline",
      pipeline: steps.map((s) => ({ step: s, functionRef: { name: "cool-function" } })),
    },
  });

const xrd = (apiVersion: string, kind: string, scope?: string, versions = [{ name: "v1alpha1", served: true, referenceable: true }]) =>
  doc({
    apiVersion,
    kind: "CompositeResourceDefinition",
    metadata: { name: `${kind.toLowerCase()}s.example.org` },
    spec: { group: "example.org", names: { kind, plural: `${kind.toLowerCase()}s` }, ...(scope ? { scope } : {}), versions },
  });

const inputs = (xr: JsonObject, comp: Doc, over: Partial<RenderInputs> = {}): RenderInputs => ({
  xr: doc(xr),
  composition: comp,
  observed: [],
  required: [],
  credentials: [],
  context: {},
  ...over,
});

const succeeded = [
  { type: "Responsive", status: "True", reason: "WatchCircuitClosed", lastTransitionTime: T },
  { type: "Synced", status: "True", reason: "ReconcileSuccess", lastTransitionTime: T },
  { type: "Ready", status: "True", reason: "Available", lastTransitionTime: T },
];
const selected = (name: string) => ({
  apiVersion: "render.crossplane.io/v1beta1",
  kind: "Result",
  severity: "Normal",
  reason: "SelectComposition",
  message: `Successfully selected composition: ${name}`,
});

const R = suite("render like crossplane's render engine (TestRender)");

R("EmptyPipeline", async () => {
  const xr = { apiVersion: "example.org/v1alpha1", kind: "XBucket", metadata: { name: "my-bucket" } };
  const o = await render(inputs(xr, composition("XBucket", "bucket-composition")), runnerOf(), { timeoutMs: 10_000 });
  assert.equal(o.xr, { ...xr, spec: { crossplane: { resourceRefs: [] } }, status: { conditions: succeeded } });
  assert.equal(o.results, [selected("bucket-composition")]);
  assert.equal(o.composed, []);
});

R("ModernXRWithV2XRD", async () => {
  const xr = { apiVersion: "example.org/v1alpha1", kind: "XModernResource", metadata: { name: "my-xr", namespace: "default" } };
  const o = await render(
    inputs(xr, composition("XModernResource", "modern-composition"), { xrd: xrd("apiextensions.crossplane.io/v2", "XModernResource") }),
    runnerOf(),
    { timeoutMs: 10_000 },
  );
  assert.equal(o.xr, { ...xr, spec: { crossplane: { resourceRefs: [] } }, status: { conditions: succeeded } });
  assert.equal(o.results, [selected("modern-composition")]);
});

R("LegacyXRWithV1XRDDefaultScope", async () => {
  const xr = { apiVersion: "example.org/v1alpha1", kind: "XLegacyResource", metadata: { name: "my-xr" } };
  const o = await render(
    inputs(xr, composition("XLegacyResource", "legacy-composition"), { xrd: xrd("apiextensions.crossplane.io/v1", "XLegacyResource") }),
    runnerOf(),
    { timeoutMs: 10_000 },
  );
  assert.equal(o.xr, { ...xr, spec: { resourceRefs: [] }, status: { conditions: succeeded } });
  assert.equal(o.warnings, [], "the legacy references are the XR's own field, never pruned");
});

R("LegacyXRWithV1XRDExplicitLegacyClusterScope", async () => {
  const xr = { apiVersion: "example.org/v1alpha1", kind: "XLegacyResource", metadata: { name: "my-xr" } };
  const o = await render(
    inputs(xr, composition("XLegacyResource", "legacy-composition"), {
      xrd: xrd("apiextensions.crossplane.io/v1", "XLegacyResource", "LegacyCluster"),
    }),
    runnerOf(),
    { timeoutMs: 10_000 },
  );
  assert.equal(o.xr, { ...xr, spec: { resourceRefs: [] }, status: { conditions: succeeded } });
});

R("LegacyXRWithObservedResources", async () => {
  const xr = { apiVersion: "example.org/v1alpha1", kind: "XLegacyResource", metadata: { name: "my-xr", uid: "xr-uid" } };
  const observed = {
    apiVersion: "example.org/v1alpha1",
    kind: "XComposed",
    metadata: {
      name: "obs-1",
      annotations: { "crossplane.io/composition-resource-name": "obs-1" },
      ownerReferences: [
        {
          apiVersion: "example.org/v1alpha1",
          kind: "XLegacyResource",
          name: "my-xr",
          uid: "xr-uid",
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
  };
  let seen: JsonObject | undefined;
  const o = await render(
    inputs(xr, composition("XLegacyResource", "legacy-composition", ["observe"]), {
      xrd: xrd("apiextensions.crossplane.io/v1", "XLegacyResource"),
      observed: [doc(observed)],
    }),
    runnerOf((req) => {
      seen = req.observed?.composite?.resource;
      return {};
    }),
    { timeoutMs: 10_000 },
  );
  // The reconcile found the observed resource through the reference at the legacy path...
  assert.equal((seen!["spec"] as JsonObject)["resourceRefs"], [{ apiVersion: "example.org/v1alpha1", kind: "XComposed", name: "obs-1" }]);
  assert.equal((seen!["spec"] as JsonObject)["compositionRef"], { name: "legacy-composition" });
  // ...and, desired by no step, it was deleted: no references remain.
  assert.equal(o.xr, { ...xr, metadata: { name: "my-xr" }, spec: { resourceRefs: [] }, status: { conditions: succeeded } });
  assert.equal(o.composed, []);
});
R.run();

const Schema = suite("render: which XRs are legacy (TestSelectSchema)");
const pathOf = async (x: JsonObject, d?: Doc) => {
  const o = await render(inputs(x, composition(String(x["kind"]), "c")), runnerOf(), { timeoutMs: 10_000 }).catch(() => undefined);
  const withXRD = d ? await render({ ...inputs(x, composition(String(x["kind"]), "c")), xrd: d }, runnerOf(), { timeoutMs: 10_000 }) : o!;
  return Object.keys(withXRD.xr["spec"] as JsonObject)[0] === "resourceRefs" ? "legacy" : "modern";
};
const legacyXR = { apiVersion: "example.org/v1alpha1", kind: "XLegacyResource", metadata: { name: "my-xr" } };
const schemaCases: Record<string, { xr?: JsonObject; def?: Doc; want?: "legacy" | "modern"; err?: string[] }> = {
  NoXRDBackCompat: { want: "modern" },
  V1XRDDefaultScope: { def: xrd("apiextensions.crossplane.io/v1", "XLegacyResource"), want: "legacy" },
  V1XRDExplicitLegacyClusterScope: { def: xrd("apiextensions.crossplane.io/v1", "XLegacyResource", "LegacyCluster"), want: "legacy" },
  V1XRDExplicitClusterScope: { def: xrd("apiextensions.crossplane.io/v1", "XLegacyResource", "Cluster"), want: "modern" },
  V2XRD: { def: xrd("apiextensions.crossplane.io/v2", "XLegacyResource"), want: "modern" },
  V2FormPreservingLegacyClusterScope: { def: xrd("apiextensions.crossplane.io/v2", "XLegacyResource", "LegacyCluster"), want: "legacy" },
  XRDDoesNotMatchXR: {
    def: xrd("apiextensions.crossplane.io/v1", "XOther"),
    err: ["does not match the input XR", "XLegacyResource", "XOther"],
  },
  XRMatchesByGroupAndKindOnDifferentVersion: {
    xr: { ...legacyXR, apiVersion: "example.org/v1beta1" },
    def: xrd("apiextensions.crossplane.io/v1", "XLegacyResource", undefined, [
      { name: "v1alpha1", served: true, referenceable: true },
      { name: "v1beta1", served: true, referenceable: false },
    ]),
    want: "legacy",
  },
  UnrecognizedXRDAPIVersion: {
    def: doc({
      apiVersion: "apiextensions.crossplane.io/v3",
      kind: "CompositeResourceDefinition",
      metadata: { name: "weird.example.org" },
      spec: {},
    }),
    err: ["unrecognized apiVersion", "apiextensions.crossplane.io/v3"],
  },
};
for (const [name, c] of Object.entries(schemaCases)) {
  Schema(name, async () => {
    const x = c.xr ?? legacyXR;
    const comp = composition(String(x["kind"]), "c");
    (comp.obj["spec"] as JsonObject)["compositeTypeRef"] = { apiVersion: x["apiVersion"]!, kind: x["kind"]! };
    const got = render({ ...inputs(x, comp), ...(c.def ? { xrd: c.def } : {}) }, runnerOf(), { timeoutMs: 10_000 });
    if (c.err) {
      const err = (await got.catch((e: unknown) => e)) as Error;
      assert.instance(err, Error);
      for (const s of c.err) assert.ok(err.message.includes(s), `${err.message} should contain ${s}`);
      return;
    }
    const o = await got;
    assert.is(Object.keys(o.xr["spec"] as JsonObject)[0] === "resourceRefs" ? "legacy" : "modern", c.want);
  });
}
void pathOf;
Schema.run();

const Obs = suite("render: observed resources the XR would not read (TestCheckObservedResources)");
const obs = (name: string, namespace = "", owners: JsonObject[] = []): JsonObject => ({
  apiVersion: "example.org/v1alpha1",
  kind: "XComposed",
  metadata: { name, ...(namespace ? { namespace } : {}), ...(owners.length ? { ownerReferences: owners } : {}) },
});
const controllerRef = (uid: string) => ({
  apiVersion: "example.org/v1alpha1",
  kind: "XLegacyResource",
  name: "my-xr",
  uid,
  controller: true,
});
const nonControllerRef = (uid: string) => ({ apiVersion: "example.org/v1alpha1", kind: "XLegacyResource", name: "my-xr", uid });
const obsCases: Record<string, { ns?: string; observed: JsonObject[]; err?: string[] }> = {
  NoObservedResources: { observed: [] },
  NoControllerRefClusterScoped: { observed: [obs("obs-1")] },
  MatchingControllerRef: { observed: [obs("obs-1", "", [controllerRef("xr-uid")])] },
  NonControllerOwnerRefIgnored: { observed: [obs("obs-1", "", [nonControllerRef("other-uid")])] },
  MismatchedControllerRef: {
    observed: [obs("obs-bad", "", [controllerRef("other-uid")])],
    err: ["has a controller ref but is not controlled by the XR", "obs-bad"],
  },
  NamespacedXRSameNamespace: { ns: "ns-a", observed: [obs("obs-1", "ns-a")] },
  NamespacedXRDifferentNamespace: {
    ns: "ns-a",
    observed: [obs("obs-bad", "ns-b")],
    err: ["is not in the same namespace as the XR", "obs-bad"],
  },
  ClusterScopedXRIgnoresNamespace: { observed: [obs("obs-1", "ns-b")] },
  MultipleViolationsJoined: {
    ns: "ns-a",
    observed: [obs("obs-bad", "ns-b", [controllerRef("other-uid")])],
    err: ["has a controller ref but is not controlled by the XR", "is not in the same namespace as the XR", "obs-bad"],
  },
  MultipleResourcesOneBad: {
    observed: [obs("obs-good", "", [controllerRef("xr-uid")]), obs("obs-bad", "", [controllerRef("other-uid")])],
    err: ["has a controller ref but is not controlled by the XR", "obs-bad"],
  },
};
for (const [name, c] of Object.entries(obsCases)) {
  Obs(name, () => {
    let err: Error | undefined;
    try {
      checkObserved("xr-uid", c.ns ?? "", c.observed);
    } catch (e) {
      err = e as Error;
    }
    if (!c.err) return assert.is(err, undefined);
    assert.ok(err, "expected an error");
    for (const s of c.err) assert.ok(err.message.includes(s), `${err.message} should contain ${s}`);
    if (name === "MultipleResourcesOneBad") assert.not.ok(err.message.includes("obs-good"));
  });
}
Obs("render refuses them, naming the resource (exit 1 in the CLI)", async () => {
  const xr = { apiVersion: "example.org/v1alpha1", kind: "XBucket", metadata: { name: "b", uid: "xr-uid" } };
  const bad = obs("obs-bad", "", [controllerRef("other-uid")]);
  (bad["metadata"] as JsonObject)["annotations"] = { "crossplane.io/composition-resource-name": "r" };
  const err = (await render(inputs(xr, composition("XBucket", "c"), { observed: [doc(bad)] }), runnerOf(), { timeoutMs: 10_000 }).catch(
    (e: unknown) => e,
  )) as Error;
  assert.is(err.message, "invalid observed resources: observed resource obs-bad has a controller ref but is not controlled by the XR");
});
Obs.run();

const C = suite("composing desired resources (TestFunctionCompose, TestUpdateResourceRefs)");
const parentXR = (namespace?: string): JsonObject => ({
  apiVersion: "example.org/v1alpha1",
  kind: "XParent",
  metadata: {
    name: "parent-xr",
    uid: "parent-uid",
    labels: { "crossplane.io/composite": "parent-xr" },
    ...(namespace ? { namespace } : {}),
  },
});
const desired = (rs: Record<string, JsonObject>) =>
  Object.fromEntries(Object.entries(rs).map(([k, resource]) => [k, create(ResourceSchema, { resource })]));

C("InvalidNameCreateComposedResourceError", () => {
  const run = () =>
    composeResources({
      xr: parentXR(),
      desired: desired({
        "cool-resource": { apiVersion: "test.crossplane.io/v1", kind: "CoolComposed", metadata: { name: "%!(cool)-resource" } },
      }),
      observed: {},
    });
  assert.throws(run, (e: Error) => e instanceof ComposeError);
  assert.throws(
    run,
    (e: Error) =>
      e.message ===
      'cannot apply composed resource "cool-resource" because it has an invalid name "%!(cool)-resource". Must be a valid RFC 1123 subdomain name.',
  );
});

C("NamespacedXRClusterCompositionError", () => {
  assert.throws(
    () =>
      composeResources({
        xr: parentXR("test-namespace"),
        desired: desired({
          "cluster-resource": { apiVersion: "test.crossplane.io/v1", kind: "ClusterComposed", metadata: { name: "cluster-resource" } },
        }),
        observed: {},
        namespaced: () => false,
      }),
    (e: Error) =>
      e.message ===
      'cannot apply cluster scoped composed resource "cluster-resource" (a ClusterComposed named cluster-resource) for a namespaced composite resource.',
  );
});

C("NamespacedXRNamespacedComposition", () => {
  const r = composeResources({
    xr: parentXR("test-namespace"),
    desired: desired({
      "ns-resource": { apiVersion: "test.crossplane.io/v1", kind: "NamespaceComposed", metadata: { name: "ns-resource" } },
    }),
    observed: {},
    namespaced: () => true,
  });
  assert.equal(
    r.composed.map((c) => [c.name, c.ready]),
    [["ns-resource", false]],
  );
  assert.is((r.composed[0]!.object["metadata"] as JsonObject)["namespace"], "test-namespace");
  assert.equal(r.events, []);
});

C("NamespacedXRNamespaceOverridden", () => {
  const r = composeResources({
    xr: parentXR("test-namespace"),
    desired: desired({
      "ns-resource": {
        apiVersion: "test.crossplane.io/v1",
        kind: "NamespaceComposed",
        metadata: { name: "ns-resource", namespace: "other-namespace" },
      },
    }),
    observed: {},
  });
  assert.equal(r.events, [
    {
      type: "Warning",
      reason: "NamespaceOverridden",
      message: 'cannot create composed resource "ns-resource" in namespace "other-namespace", using XR namespace "test-namespace" instead',
    },
  ]);
  assert.is((r.composed[0]!.object["metadata"] as JsonObject)["namespace"], "test-namespace");
});

C("NamespacedXRNamespaceMatchesXR", () => {
  const r = composeResources({
    xr: parentXR("test-namespace"),
    desired: desired({
      "ns-resource": {
        apiVersion: "test.crossplane.io/v1",
        kind: "NamespaceComposed",
        metadata: { name: "ns-resource", namespace: "test-namespace" },
      },
    }),
    observed: {},
  });
  assert.equal(r.events, []);
});

C("ClusterXRClusterCompositionSuccess", () => {
  const r = composeResources({
    xr: parentXR(),
    desired: desired({
      "cluster-resource": { apiVersion: "test.crossplane.io/v1", kind: "ClusterComposed", metadata: { name: "cluster-resource" } },
    }),
    observed: {},
    namespaced: () => false,
  });
  assert.equal(
    r.composed.map((c) => [c.name, c.ready]),
    [["cluster-resource", false]],
  );
});

C(
  "a resource without a name is named from its generateName, the XR's uid and its name in the pipeline; the XR becomes its controller",
  () => {
    const r = composeResources({
      xr: parentXR(),
      desired: desired({ database: { apiVersion: "test.crossplane.io/v1", kind: "CoolComposed" } }),
      observed: {},
    });
    const m = r.composed[0]!.object["metadata"] as JsonObject;
    assert.is(m["generateName"], "parent-xr-");
    // python3: hashlib.sha256(b"parent-uiddatabase").hexdigest()[:12]
    assert.is(m["name"], "parent-xr-dd7cd44dfad8");
    assert.equal(m["ownerReferences"], [
      {
        apiVersion: "example.org/v1alpha1",
        kind: "XParent",
        name: "parent-xr",
        uid: "parent-uid",
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    assert.equal(m["labels"], { "crossplane.io/composite": "parent-xr" });
    assert.equal(m["annotations"], { "crossplane.io/composition-resource-name": "database" });
  },
);

C("a resource controlled by another XR is refused (RenderComposedResourceMetadata's AddControllerReference)", () => {
  assert.throws(
    () =>
      composeResources({
        xr: parentXR(),
        desired: desired({
          theirs: {
            apiVersion: "test.crossplane.io/v1",
            kind: "CoolComposed",
            metadata: {
              name: "theirs",
              ownerReferences: [{ apiVersion: "v1", kind: "XOther", name: "other", uid: "other-uid", controller: true }],
            },
          },
        }),
        observed: {},
      }),
    (e: Error) =>
      e.message ===
      'cannot render metadata for composed resource "theirs": cannot set controller reference: theirs is already controlled by XOther other (UID other-uid)',
  );
});

C("Ready only when the pipeline says READY_TRUE", () => {
  const r = composeResources({
    xr: parentXR(),
    desired: {
      yes: create(ResourceSchema, { resource: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "yes" } }, ready: Ready.TRUE }),
      unsaid: create(ResourceSchema, {
        resource: {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "unsaid" },
          status: { conditions: [{ type: "Ready", status: "True" }] },
        },
      }),
    },
    observed: {},
  });
  assert.equal(
    r.composed.map((c) => [c.name, c.ready]),
    [
      ["unsaid", false],
      ["yes", true],
    ],
  );
});

C("ClusterScopedXR (TestUpdateResourceRefs)", () => {
  const o = (namespace: string, name: string) => ({ metadata: { name, ...(namespace ? { namespace } : {}) } });
  assert.equal(
    resourceRefsOf({ metadata: {} }, [
      o("c", "never-created-c-42"),
      o("b", "never-created-b-42"),
      o("a", "never-created-b-42"),
      o("", "never-created-a-42"),
    ]),
    [
      { name: "never-created-a-42" },
      { name: "never-created-b-42", namespace: "a" },
      { name: "never-created-b-42", namespace: "b" },
      { name: "never-created-c-42", namespace: "c" },
    ],
  );
});

C("NamespacedXR (TestUpdateResourceRefs)", () => {
  const o = (name: string) => ({ metadata: { name, namespace: "default" } });
  assert.equal(
    resourceRefsOf({ metadata: { namespace: "default" } }, [o("never-created-c-42"), o("never-created-b-42"), o("never-created-a-42")]),
    [{ name: "never-created-a-42" }, { name: "never-created-b-42" }, { name: "never-created-c-42" }],
  );
});
C.run();

const Res = suite("render: results, conditions and events as Crossplane records them");
const oneStep = (
  respond: (req: RunFunctionRequest) => Partial<RunFunctionResponse>,
  xr: JsonObject = { apiVersion: "example.org/v1alpha1", kind: "XBucket", metadata: { name: "b" } },
) => render(inputs(xr, composition("XBucket", "c", ["run-cool-function"])), runnerOf(respond), { timeoutMs: 10_000 });

Res(
  "FatalFunctionResultError: results before the Fatal one are reported, those after it are not; the step's conditions are kept",
  async () => {
    const err = (await oneStep(() => ({
      results: [
        { severity: Severity.NORMAL, message: "A result before the fatal result with the default Reason." },
        {
          severity: Severity.NORMAL,
          reason: "SomeReason",
          message: "A result before the fatal result with a specific Reason.",
          target: Target.COMPOSITE_AND_CLAIM,
        },
        { severity: Severity.FATAL, message: "oh no" },
        { severity: Severity.NORMAL, message: "a result after the fatal result" },
      ] as never,
      conditions: [
        { type: "DatabaseReady", status: Status.CONDITION_FALSE, reason: "Creating" },
        {
          type: "DeploymentReady",
          status: Status.CONDITION_TRUE,
          reason: "Available",
          message: "The deployment is ready.",
          target: Target.COMPOSITE_AND_CLAIM,
        },
      ] as never,
    })).catch((e: unknown) => e)) as FatalResultError;
    assert.instance(err, FatalResultError);
    assert.is(err.message, 'pipeline step "run-cool-function" returned a fatal result: oh no');
    assert.equal(
      err.results.map((r) => [r.severity, r.reason, r.message, r.claim]),
      [
        ["Normal", "ComposeResources", "A result before the fatal result with the default Reason.", false],
        ["Normal", "SomeReason", "A result before the fatal result with a specific Reason.", true],
      ],
    );
    assert.equal(err.conditions, [
      { type: "DatabaseReady", status: "False", reason: "Creating" },
      { type: "DeploymentReady", status: "True", reason: "Available", message: "The deployment is ready.", claim: true },
    ]);
  },
);

Res("a result of unknown severity is a Warning that says so, without the step's prefix", async () => {
  const o = await oneStep(() => ({ results: [{ severity: Severity.UNSPECIFIED, reason: "Odd", message: "from the future" }] as never }));
  assert.equal(o.results[1], {
    apiVersion: "render.crossplane.io/v1beta1",
    kind: "Result",
    severity: "Warning",
    reason: "Odd",
    message: 'Pipeline step "run-cool-function" returned a result of unknown severity (assuming warning): from the future',
  });
});

Res("a composed resource with an invalid name is not rendered: the render fails naming it", async () => {
  const err = (await oneStep(() => ({
    desired: {
      resources: { "cool-resource": { resource: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "Not_Valid" } } } },
    } as never,
  })).catch((e: unknown) => e)) as Error;
  assert.instance(err, ComposeError);
  assert.match(err.message, /cannot apply composed resource "cool-resource" because it has an invalid name "Not_Valid"/);
});

Res("a namespaced XR's function that sets another namespace: the XR's namespace, and Crossplane's Warning", async () => {
  const xr = { apiVersion: "example.org/v1alpha1", kind: "XBucket", metadata: { name: "b", namespace: "team-a" } };
  const o = await oneStep(
    () => ({
      desired: { resources: { cm: { resource: { apiVersion: "v1", kind: "ConfigMap", metadata: { namespace: "team-b" } } } } } as never,
    }),
    xr,
  );
  assert.is((o.composed[0]!["metadata"] as JsonObject)["namespace"], "team-a");
  assert.equal(o.results.slice(1), [
    {
      apiVersion: "render.crossplane.io/v1beta1",
      kind: "Result",
      severity: "Warning",
      reason: "NamespaceOverridden",
      message: 'cannot create composed resource "cm" in namespace "team-b", using XR namespace "team-a" instead',
    },
    {
      apiVersion: "render.crossplane.io/v1beta1",
      kind: "Result",
      severity: "Normal",
      reason: "ComposeResources",
      message: 'Composed resource "cm" is not yet ready',
    },
  ]);
});

Res("a namespaced XR composing a kind a CRD says is cluster-scoped is refused", async () => {
  const xr = { apiVersion: "example.org/v1alpha1", kind: "XBucket", metadata: { name: "b", namespace: "team-a" } };
  const crd = doc({
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "clusterthings.example.org" },
    spec: {
      group: "example.org",
      names: { kind: "ClusterThing", plural: "clusterthings" },
      scope: "Cluster",
      versions: [{ name: "v1", served: true, storage: true }],
    },
  });
  const respond = () => ({
    desired: { resources: { thing: { resource: { apiVersion: "example.org/v1", kind: "ClusterThing" } } } } as never,
  });
  const err = (await render(inputs(xr, composition("XBucket", "c", ["s"]), { schemas: [crd] }), runnerOf(respond), {
    timeoutMs: 10_000,
  }).catch((e: unknown) => e)) as Error;
  assert.instance(err, ComposeError);
  assert.is(
    err.message,
    'cannot apply cluster scoped composed resource "thing" (a ClusterThing named ) for a namespaced composite resource.',
  );
  // Without the CRD, its scope is unknown, and it renders (as crossplane render, whose client takes every kind as namespaced).
  const o = await render(inputs(xr, composition("XBucket", "c", ["s"])), runnerOf(respond), { timeoutMs: 10_000 });
  assert.is(o.composed.length, 1);
});

Res(
  "conditions: the observed XR's first, then Responsive, the functions', Synced, Ready; three unready names spelt as Crossplane does",
  async () => {
    const xr = {
      apiVersion: "example.org/v1alpha1",
      kind: "XBucket",
      metadata: { name: "b", generation: 4 },
      status: {
        conditions: [{ type: "Custom", status: "True", reason: "Before", lastTransitionTime: "2020-01-01T00:00:00Z", extra: "dropped" }],
      },
    };
    const o = await oneStep(
      () => ({
        desired: {
          resources: Object.fromEntries(["c", "a", "b"].map((n) => [n, { resource: { apiVersion: "v1", kind: "ConfigMap" } }])),
        } as never,
        conditions: [{ type: "FnCond", status: Status.CONDITION_FALSE, reason: "Waiting" }] as never,
      }),
      xr,
    );
    assert.equal((o.xr["status"] as JsonObject)["conditions"], [
      { type: "Custom", status: "True", lastTransitionTime: T, reason: "Before" },
      { type: "Responsive", status: "True", observedGeneration: 4, lastTransitionTime: T, reason: "WatchCircuitClosed" },
      { type: "FnCond", status: "False", lastTransitionTime: T, reason: "Waiting" },
      { type: "Synced", status: "True", observedGeneration: 4, lastTransitionTime: T, reason: "ReconcileSuccess" },
      {
        type: "Ready",
        status: "False",
        observedGeneration: 4,
        lastTransitionTime: T,
        reason: "Creating",
        message: "Unready resources: a, b, and c",
      },
    ]);
  },
);

Res(
  "the XR the functions observe: a uid (render's own when none), the composite label, the Composition chosen, resourceVersion 999",
  async () => {
    let seen: JsonObject | undefined;
    await oneStep((req) => {
      seen = req.observed?.composite?.resource;
      return {};
    });
    const m = seen!["metadata"] as JsonObject;
    // crossplane render's uuid.NewSHA1(uuid.Nil, "example.org/v1alpha1, Kind=XBucket\x00\x00b") (python3 uuid.uuid5).
    assert.is(m["uid"], "448d0b34-2650-5145-a7a5-89f7462f48b0");
    assert.is(m["resourceVersion"], "999");
    assert.equal(m["labels"], { "crossplane.io/composite": "b" });
    assert.equal(((seen!["spec"] as JsonObject)["crossplane"] as JsonObject)["compositionRef"], { name: "c" });
  },
);

Res("an XR that already names the Composition gets no SelectComposition event", async () => {
  const xr = {
    apiVersion: "example.org/v1alpha1",
    kind: "XBucket",
    metadata: { name: "b" },
    spec: { crossplane: { compositionRef: { name: "c" } } },
  };
  const o = await oneStep(() => ({}), xr);
  assert.equal(o.results, []);
});
Res.run();

const Sel = suite("render: the XR's compositionSelector (crossplane render TestCmdRun)");
const selXR = (at: "modern" | "legacy", labels: Record<string, string>) => ({
  apiVersion: "example.org/v1alpha1",
  kind: "XBucket",
  metadata: { name: "b" },
  spec:
    at === "modern" ? { crossplane: { compositionSelector: { matchLabels: labels } } } : { compositionSelector: { matchLabels: labels } },
});
Sel("MatchLabelMissing", async () => {
  const err = (await render(inputs(selXR("modern", { env: "prod" }), composition("XBucket", "xbuckets")), runnerOf(), {
    timeoutMs: 10_000,
  }).catch((e: unknown) => e)) as Error;
  assert.is(err.message, 'composition "xbuckets" is missing required label "env"');
});
Sel("MatchLabelMismatch", async () => {
  const err = (await render(inputs(selXR("modern", { env: "prod" }), composition("XBucket", "xbuckets", [], { env: "dev" })), runnerOf(), {
    timeoutMs: 10_000,
  }).catch((e: unknown) => e)) as Error;
  assert.is(err.message, 'composition "xbuckets" has incorrect value for label "env": want "prod", got "dev"');
});
Sel("the legacy location is checked for a legacy XR", async () => {
  const err = (await render(
    {
      ...inputs(selXR("legacy", { env: "prod" }), composition("XBucket", "xbuckets", [], { env: "dev" })),
      xrd: xrd("apiextensions.crossplane.io/v1", "XBucket"),
    },
    runnerOf(),
    { timeoutMs: 10_000 },
  ).catch((e: unknown) => e)) as Error;
  assert.match(err.message, /has incorrect value for label "env"/);
});
Sel("matching labels render", async () => {
  const o = await render(
    inputs(selXR("modern", { env: "prod" }), composition("XBucket", "xbuckets", [], { env: "prod", more: "x" })),
    runnerOf(),
    {
      timeoutMs: 10_000,
    },
  );
  assert.ok(o.xr);
});
Sel.run();
