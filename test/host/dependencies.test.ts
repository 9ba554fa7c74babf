// The dependency tracker's cases, ported from Crossplane's own
// (internal/controller/apiextensions/composite/dependency/tracker_test.go at
// crossplane/crossplane 2d040d2daf4e001799c4154a4a09b9e1f40d7fde:
// TestDependants, TestGVKs, TestRequirements), plus the selectors' mapping
// (references.go's ReferenceFromSelector).
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { DependencyTracker, kindOf, referenceOf, type Changed, type Reference } from "../../src/host/dependencies.js";

const CM = { apiVersion: "v1", kind: "ConfigMap" };
const POD = { apiVersion: "v1", kind: "Pod" };
const ref = (gvk: typeof CM, namespace: string, more: Partial<Reference> = {}): Reference => ({ ...gvk, namespace, ...more });
const obj = (gvk: typeof CM, namespace: string, name: string, labels: Record<string, string> = {}): Changed => ({
  ...gvk,
  namespace,
  name,
  labels,
});
const reqs = (...refs: Reference[]) => refs.map((reference) => ({ step: "", name: "", reference }));

interface Track {
  xr: string;
  composed?: Reference[];
  required?: Reference[];
}

const tracked = (tracks: Track[]) => {
  const t = new DependencyTracker();
  for (const k of tracks) t.track(k.xr, reqs(...(k.required ?? [])), k.composed ?? []);
  return t;
};

const D = suite("dependency tracker: dependants (crossplane TestDependants)");
const DEPENDANTS: Array<[string, Track[], Changed, string[]]> = [
  ["MatchByName", [{ xr: "ns/xr", required: [ref(CM, "ns", { name: "cm" })] }], obj(CM, "ns", "cm"), ["ns/xr"]],
  ["NoMatchByName", [{ xr: "ns/xr", required: [ref(CM, "ns", { name: "other" })] }], obj(CM, "ns", "cm"), []],
  ["NoMatchByGVK", [{ xr: "ns/xr", required: [ref(POD, "ns", { name: "cm" })] }], obj(CM, "ns", "cm"), []],
  ["ComposedMatchByName", [{ xr: "ns/xr", composed: [ref(CM, "ns", { name: "cm" })] }], obj(CM, "ns", "cm"), ["ns/xr"]],
  [
    "MatchByLabel",
    [{ xr: "ns/xr", required: [ref(CM, "ns", { labels: { k: "v" } })] }],
    obj(CM, "ns", "cm", { k: "v", other: "label" }),
    ["ns/xr"],
  ],
  ["NoMatchByLabel", [{ xr: "ns/xr", required: [ref(CM, "ns", { labels: { k: "v" } })] }], obj(CM, "ns", "cm", { k: "different" }), []],
  ["MatchAll", [{ xr: "ns/xr", required: [ref(CM, "ns")] }], obj(CM, "ns", "cm"), ["ns/xr"]],
  [
    "LabelMatchesAnyNamespace",
    [{ xr: "ns/xr", required: [ref(CM, "", { labels: { k: "v" } })] }],
    obj(CM, "other", "cm", { k: "v" }),
    ["ns/xr"],
  ],
  ["LabelScopedToNamespace", [{ xr: "ns/xr", required: [ref(CM, "ns", { labels: { k: "v" } })] }], obj(CM, "other", "cm", { k: "v" }), []],
  [
    "MultipleDependants",
    [
      { xr: "ns/a", required: [ref(CM, "ns", { name: "cm" })] },
      { xr: "ns/b", required: [ref(CM, "ns", { labels: { k: "v" } })] },
      { xr: "ns/c", required: [ref(CM, "ns", { name: "other" })] },
    ],
    obj(CM, "ns", "cm", { k: "v" }),
    ["ns/a", "ns/b"],
  ],
  [
    "Deduplicated",
    [{ xr: "ns/xr", required: [ref(CM, "ns", { name: "cm" }), ref(CM, "ns", { labels: { k: "v" } })] }],
    obj(CM, "ns", "cm", { k: "v" }),
    ["ns/xr"],
  ],
  [
    "ReplacedByLaterTrack",
    [
      { xr: "ns/xr", required: [ref(CM, "ns", { name: "cm" })] },
      { xr: "ns/xr", required: [ref(CM, "ns", { name: "other" })] },
    ],
    obj(CM, "ns", "cm"),
    [],
  ],
  // Beyond Crossplane's table: a name with no namespace is a cluster-scoped object, never any namespace's.
  [
    "a name reference without a namespace is not a wildcard",
    [{ xr: "xr", required: [ref(CM, "", { name: "cm" })] }],
    obj(CM, "ns", "cm"),
    [],
  ],
  [
    "a label that is only a prefix of the wanted value does not match",
    [{ xr: "xr", required: [ref(CM, "", { labels: { k: "v" } })] }],
    obj(CM, "ns", "cm", { k: "vv" }),
    [],
  ],
];
for (const [name, tracks, o, want] of DEPENDANTS) D(name, () => assert.equal(tracked(tracks).dependants(o).sort(), want));
D("a label named like an Object.prototype member is no wildcard", () => {
  const t = tracked([{ xr: "xr", required: [ref(CM, "", { labels: { constructor: "x" } })] }]);
  assert.equal(t.dependants(obj(CM, "ns", "cm")), []);
});
D.run();

const G = suite("dependency tracker: the kinds to watch (crossplane TestGVKs)");
const KINDS: Array<[string, Track[], string[]]> = [
  ["Empty", [], []],
  [
    "ComposedAndRequired",
    [{ xr: "ns/xr", composed: [ref(POD, "ns", { name: "p" })], required: [ref(CM, "ns", { name: "cm" })] }],
    [kindOf("v1", "ConfigMap"), kindOf("v1", "Pod")],
  ],
  [
    "Deduplicated",
    [
      { xr: "ns/a", required: [ref(CM, "ns", { name: "cm" })] },
      { xr: "ns/b", required: [ref(CM, "ns", { name: "other" })] },
    ],
    [kindOf("v1", "ConfigMap")],
  ],
  [
    "DroppedWhenLastReferenceReplaced",
    [
      { xr: "ns/xr", required: [ref(CM, "ns", { name: "cm" })] },
      { xr: "ns/xr", required: [ref(POD, "ns", { name: "p" })] },
    ],
    [kindOf("v1", "Pod")],
  ],
  [
    "RetainedWhileAnotherXRReferences",
    [
      { xr: "ns/a", required: [ref(CM, "ns", { name: "cm" })] },
      { xr: "ns/b", required: [ref(CM, "ns", { name: "other" })] },
      { xr: "ns/a", required: [ref(POD, "ns", { name: "p" })] },
    ],
    [kindOf("v1", "ConfigMap"), kindOf("v1", "Pod")],
  ],
];
for (const [name, tracks, want] of KINDS) G(name, () => assert.equal(tracked(tracks).kinds().sort(), want));
G("forgetting an XR drops its kinds and its matches", () => {
  const t = tracked([{ xr: "a", required: [ref(CM, "ns", { name: "cm" }), ref(POD, "", { labels: { k: "v" } })] }]);
  t.forget("a");
  assert.equal(t.kinds(), []);
  assert.equal(t.dependants(obj(CM, "ns", "cm")), []);
  assert.equal(t.dependants(obj(POD, "ns", "p", { k: "v" })), []);
  assert.equal(t.xrs(), []);
});
G.run();

const Q = suite("dependency tracker: a step's requirements (crossplane TestRequirements) and selectors");
Q("ReturnsStepRequirements", () => {
  const t = new DependencyTracker();
  t.track("ns/xr", [
    { step: "a", name: "cm", reference: ref(CM, "ns", { name: "cm" }) },
    { step: "b", name: "cm", reference: ref(CM, "ns", { name: "other" }) },
  ]);
  assert.equal(t.requirements("ns/xr", "a"), [{ step: "a", name: "cm", reference: ref(CM, "ns", { name: "cm" }) }]);
});
Q("UnknownXR", () => assert.equal(new DependencyTracker().requirements("ns/xr", "a"), []));
Q("a selector becomes a reference: a name, labels, or neither (every object of the kind); no namespace is empty", () => {
  const labels = { $typeName: "apiextensions.fn.proto.v1.MatchLabels" as const, labels: { k: "v" } };
  assert.equal(referenceOf({ ...CM, namespace: "ns", match: { case: "matchName", value: "cm" } }), ref(CM, "ns", { name: "cm" }));
  assert.equal(referenceOf({ ...CM, match: { case: "matchLabels", value: labels } }), ref(CM, "", { labels: { k: "v" } }));
  assert.equal(referenceOf({ ...CM, match: { case: undefined } }), ref(CM, ""));
});
Q.run();
