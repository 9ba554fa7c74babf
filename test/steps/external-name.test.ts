import { create, type JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ResourceSchema, RunFunctionRequestSchema, type RunFunctionResponse, Severity } from "../../src/gen/fn/v1/run_function_pb.js";
import { pipeline } from "../../src/pipeline.js";
import { decodeRequest, encodeRequest } from "../../src/wire/codec.js";
import { setOwn } from "../../src/own.js";
import { getAnnotation } from "../../src/sdk/object.js";
import { externalName } from "../../src/steps/index.js";
import { annotated, messages, run } from "../support/steps.js";

const EXT = "crossplane.io/external-name";
const E = suite("step externalName");
const xrWith = (names: Record<string, string>) => ({ kind: "XNet", metadata: { name: "net" }, status: { externalNames: names } });

E("records an observed name in the desired XR status and keeps it on the desired resource", () => {
  const rsp = run([externalName()], {
    observed: { bucket: annotated("b", { [EXT]: "bkt-123" }) },
    desired: { bucket: { kind: "Bucket" } },
  });
  assert.equal(rsp.desired!.composite!.resource, { status: { externalNames: { bucket: "bkt-123" } } });
  assert.is(getAnnotation(rsp.desired!.resources["bucket"]!.resource, EXT), "bkt-123");
  assert.equal(messages(rsp), []);
});

E("restores a recorded name when the resource comes back without it (provider restart)", () => {
  const rsp = run([externalName()], {
    xr: xrWith({ bucket: "bkt-123" }),
    observed: { bucket: annotated("b", {}) },
    desired: { bucket: { kind: "Bucket" } },
  });
  assert.is(getAnnotation(rsp.desired!.resources["bucket"]!.resource, EXT), "bkt-123");
  assert.equal(messages(rsp, Severity.NORMAL), ['bucket: restored external name "bkt-123"']);
  assert.equal(rsp.desired!.composite!.resource, { status: { externalNames: { bucket: "bkt-123" } } });
});

E("restores a recorded name on a resource that is not observed (recreated after deletion)", () => {
  const rsp = run([externalName()], { xr: xrWith({ bucket: "bkt-123" }), desired: { bucket: { kind: "Bucket" } } });
  assert.is(getAnnotation(rsp.desired!.resources["bucket"]!.resource, EXT), "bkt-123");
});

E("a conflict is a Warning naming both; the observed name wins", () => {
  const rsp = run([externalName()], {
    xr: xrWith({ bucket: "old-name" }),
    observed: { bucket: annotated("b", { [EXT]: "new-name" }) },
    desired: { bucket: { kind: "Bucket" } },
  });
  assert.equal(messages(rsp, Severity.WARNING), [
    'bucket: recorded external name "old-name" differs from the observed "new-name"; keeping the observed one',
  ]);
  assert.equal(rsp.desired!.composite!.resource, { status: { externalNames: { bucket: "new-name" } } });
  assert.is(getAnnotation(rsp.desired!.resources["bucket"]!.resource, EXT), "new-name");
});

E("never invents a name", () => {
  const rsp = run([externalName()], { observed: { bucket: annotated("b", {}) }, desired: { bucket: { kind: "Bucket" } } });
  assert.equal(rsp.desired!.resources["bucket"]!.resource, { kind: "Bucket" });
  assert.is(rsp.desired!.composite, undefined);
});

E("keeps an earlier step's explicit annotation", () => {
  const rsp = run([externalName()], {
    xr: xrWith({ bucket: "recorded" }),
    desired: { bucket: { kind: "Bucket", metadata: { annotations: { [EXT]: "explicit" } } } },
  });
  assert.is(getAnnotation(rsp.desired!.resources["bucket"]!.resource, EXT), "explicit");
});

E("keeps names of resources that are no longer composed", () => {
  const rsp = run([externalName()], { xr: xrWith({ gone: "g-1" }), observed: { bucket: annotated("b", { [EXT]: "b-1" }) } });
  assert.equal(rsp.desired!.composite!.resource, { status: { externalNames: { gone: "g-1", bucket: "b-1" } } });
});

const pendingCases: Record<string, { annotations: Record<string, string>; warns: boolean }> = {
  PendingOnly: { annotations: { "crossplane.io/external-create-pending": "2026-06-01T11:00:00Z" }, warns: true },
  SucceededAfter: {
    annotations: {
      "crossplane.io/external-create-pending": "2026-06-01T11:00:00Z",
      "crossplane.io/external-create-succeeded": "2026-06-01T11:00:05Z",
    },
    warns: false,
  },
  FailedAfter: {
    annotations: {
      "crossplane.io/external-create-pending": "2026-06-01T11:00:00Z",
      "crossplane.io/external-create-failed": "2026-06-01T11:00:05Z",
    },
    warns: false,
  },
  SucceededBeforeANewPending: {
    annotations: {
      "crossplane.io/external-create-pending": "2026-06-01T11:00:00Z",
      "crossplane.io/external-create-succeeded": "2026-05-01T00:00:00Z",
    },
    warns: true,
  },
  SucceededInTheSameSecond: {
    annotations: {
      "crossplane.io/external-create-pending": "2026-06-01T11:00:00Z",
      "crossplane.io/external-create-succeeded": "2026-06-01T11:00:00Z",
    },
    warns: false,
  },
  // Not crossplane-runtime's format: compared as instants, not as text.
  PendingWithAnOffsetBeforeTheResult: {
    annotations: {
      "crossplane.io/external-create-pending": "2026-06-01T13:00:00+02:00",
      "crossplane.io/external-create-succeeded": "2026-06-01T11:00:05Z",
    },
    warns: false,
  },
  PendingWithFractionsAfterTheResult: {
    annotations: {
      "crossplane.io/external-create-pending": "2026-06-01T11:00:00.500Z",
      "crossplane.io/external-create-succeeded": "2026-06-01T11:00:00Z",
    },
    warns: true,
  },
  UnparseablePendingAnyResultCounts: {
    annotations: {
      "crossplane.io/external-create-pending": "soon",
      "crossplane.io/external-create-failed": "2020-01-01T00:00:00Z",
    },
    warns: false,
  },
  UnparseableResultDoesNotCount: {
    annotations: {
      "crossplane.io/external-create-pending": "2026-06-01T11:00:00Z",
      "crossplane.io/external-create-succeeded": "later",
    },
    warns: true,
  },
};
for (const [name, tc] of Object.entries(pendingCases)) {
  E(`a create pending without a result after it warns: ${name}`, () => {
    const rsp = run([externalName()], { observed: { db: annotated("d", tc.annotations) } });
    const w = messages(rsp, Severity.WARNING);
    assert.is(w.length, tc.warns ? 1 : 0, JSON.stringify(w));
    const pending = tc.annotations["crossplane.io/external-create-pending"]!;
    if (tc.warns) assert.ok(w[0]!.startsWith(`db: the provider began creating it at ${pending} and recorded no result`), w[0]);
  });
}

E("a name still held by a deleting resource holds the new one back with a Warning", () => {
  const rsp = run([externalName()], {
    observed: {
      old: annotated(
        "o",
        { [EXT]: "shared" },
        { metadata: { name: "o", deletionTimestamp: "2026-06-01T11:59:00Z", annotations: { [EXT]: "shared" } } },
      ),
    },
    desired: { old: { kind: "Bucket" }, replacement: { kind: "Bucket", metadata: { annotations: { [EXT]: "shared" } } } },
  });
  assert.equal(Object.keys(rsp.desired!.resources), ["old"]);
  assert.equal(messages(rsp, Severity.WARNING), [
    'replacement: external name "shared" is still held by old, which is being deleted; waiting until it is gone',
  ]);
  assert.ok(messages(rsp, Severity.NORMAL).some((m) => m.startsWith("replacement: waiting for old to finish deleting")));
});

E("reports and holds come in name order, whatever order the maps arrived in", () => {
  // Go marshals a map in random order: the same call must give the same response.
  const deleting = (n: string, ext: string) =>
    annotated(n, { [EXT]: ext }, { metadata: { name: n, deletionTimestamp: "2026-06-01T11:59:00Z", annotations: { [EXT]: ext } } });
  const pending = { "crossplane.io/external-create-pending": "2026-06-01T11:00:00Z" };
  const observed = {
    "c-conflict": annotated("c", { [EXT]: "c-new" }),
    "old-b": deleting("ob", "shared"),
    "a-conflict": annotated("a", { [EXT]: "a-new" }),
    "b-pending": annotated("b", pending),
    "old-a": deleting("oa", "shared"),
    "new-z": annotated("z", { [EXT]: "z" }),
    "new-y": annotated("y", { [EXT]: "y" }),
  };
  const desired = {
    "y-restore": { kind: "Bucket" },
    "x-restore": { kind: "Bucket" },
    "w-waits": { kind: "Bucket", metadata: { annotations: { [EXT]: "shared" } } },
    "v-waits": { kind: "Bucket", metadata: { annotations: { [EXT]: "shared" } } },
    "u-explicit": { kind: "Bucket", metadata: { annotations: { [EXT]: "u" } } },
    "t-explicit": { kind: "Bucket", metadata: { annotations: { [EXT]: "t" } } },
  };
  const xr = xrWith({ "c-conflict": "c-old", "y-restore": "y1", "a-conflict": "a-old", "x-restore": "x1" });
  const reversed = <T>(o: Record<string, T>) => Object.fromEntries(Object.entries(o).reverse());
  const a = run([externalName()], { xr, observed, desired });
  const b = run([externalName()], { xr, observed: reversed(observed), desired: reversed(desired) });
  for (const rsp of [a, b]) {
    assert.equal(messages(rsp, Severity.WARNING), [
      'a-conflict: recorded external name "a-old" differs from the observed "a-new"; keeping the observed one',
      "b-pending: the provider began creating it at 2026-06-01T11:00:00Z and recorded no result; " +
        "check the cloud for a resource it may have lost track of",
      'c-conflict: recorded external name "c-old" differs from the observed "c-new"; keeping the observed one',
      // Two deleting objects hold "shared": the one last by name is named.
      'v-waits: external name "shared" is still held by old-b, which is being deleted; waiting until it is gone',
      'w-waits: external name "shared" is still held by old-b, which is being deleted; waiting until it is gone',
    ]);
    const restored = messages(rsp, Severity.NORMAL).filter((m) => m.includes("restored"));
    assert.equal(restored, ['x-restore: restored external name "x1"', 'y-restore: restored external name "y1"']);
    const status = rsp.desired!.composite!.resource!["status"] as JsonObject;
    assert.equal(status["externalNames"], {
      "a-conflict": "a-new",
      "c-conflict": "c-new",
      "new-y": "y",
      "new-z": "z",
      "old-a": "shared",
      "old-b": "shared",
      "t-explicit": "t",
      "u-explicit": "u",
      "x-restore": "x1",
      "y-restore": "y1",
    });
  }
  assert.equal(a, b);
});

E("a composed resource named __proto__ keeps its external name like any other", () => {
  // Resource names are the composition's map keys: any string, this one too. protobuf-es's
  // fromJson cannot carry such a key, so the request is made by hand and crosses the wire codec.
  const call = (xrNames: JsonObject | undefined, observed: JsonObject | undefined) => {
    const req = create(RunFunctionRequestSchema, {
      observed: { composite: { resource: { kind: "XNet", ...(xrNames ? { status: { externalNames: xrNames } } : {}) } } },
      desired: {},
    });
    if (observed) setOwn(req.observed!.resources, "__proto__", create(ResourceSchema, { resource: observed }));
    setOwn(req.desired!.resources, "__proto__", create(ResourceSchema, { resource: { kind: "Bucket" } }));
    const rsp = pipeline(externalName())(decodeRequest(encodeRequest(req)), { now: () => new Date(0) } as never) as RunFunctionResponse;
    const names = ((rsp.desired!.composite?.resource ?? {})["status"] as JsonObject | undefined)?.["externalNames"] as JsonObject;
    return { rsp, names: names ?? {} };
  };
  const proto = () => {
    const o: JsonObject = {};
    setOwn(o, "__proto__", "proto-1");
    return o;
  };
  const seen = call(undefined, annotated("p", { [EXT]: "proto-1" }));
  assert.ok(Object.hasOwn(seen.names, "__proto__"), JSON.stringify(seen.names));
  assert.is(seen.names["__proto__"], "proto-1");
  assert.is(getAnnotation(seen.rsp.desired!.resources["__proto__"]!.resource, EXT), "proto-1");
  // Recorded, then the annotation lost: put back, and still recorded.
  const restored = call(proto(), { metadata: { name: "p" } });
  assert.is(getAnnotation(restored.rsp.desired!.resources["__proto__"]!.resource, EXT), "proto-1");
  assert.equal(messages(restored.rsp), ['__proto__: restored external name "proto-1"']);
  assert.is(restored.names["__proto__"], "proto-1");
  // Recorded and not observed at all (an object's prototype is not a recorded name).
  const gone = call(proto(), undefined);
  assert.is(getAnnotation(gone.rsp.desired!.resources["__proto__"]!.resource, EXT), "proto-1");
  // Nothing recorded, nothing observed: no name is invented from Object.prototype.
  const none = call(undefined, undefined);
  assert.is(getAnnotation(none.rsp.desired!.resources["__proto__"]!.resource, EXT), undefined);
  assert.equal(messages(none.rsp), []);
});

E("a custom status field; a field outside status is refused", () => {
  const rsp = run([externalName({ statusField: "status.xfn.names" })], { observed: { bucket: annotated("b", { [EXT]: "n" }) } });
  assert.equal(rsp.desired!.composite!.resource, { status: { xfn: { names: { bucket: "n" } } } });
  assert.throws(() => externalName({ statusField: "spec.names" }), /must be under status/);
});

E.run();
