// When the host looks at a reconciled XR again, as Crossplane's composite
// reconciler does with realtime compositions (crossplane internal/controller/
// apiextensions/composite/reconciler.go at 2d040d2d): after the pipeline's TTL
// (its steps' shortest positive one), else after the XR's poll interval (the
// crossplane.io/poll-interval annotation, no shorter than --min-poll-interval's
// 1 s, else --poll-interval's 1 m), each give or take a tenth.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { requeueAfterMs } from "../../src/host/requeue.js";
import { applyManifests } from "../../src/host/manifests.js";
import { until } from "../support/cluster.js";
import { hostFor } from "../support/host.js";
import { ROOT } from "../support/spawn.js";

const R = suite("host: requeue after the pipeline's TTL or the XR's poll interval");

const xr = (annotation?: string): JsonObject => ({
  metadata: { name: "x", ...(annotation === undefined ? {} : { annotations: { "crossplane.io/poll-interval": annotation } }) },
});
const exact = () => 0.5; // no jitter

const CASES: [string, JsonObject, number | undefined, number][] = [
  ["no TTL, no annotation: the default poll interval", xr(), undefined, 60_000],
  ["a TTL: after it", xr(), 5, 5_000],
  ["a zero TTL is none", xr(), 0, 60_000],
  ["the annotation's poll interval", xr("30s"), undefined, 30_000],
  ["Go's notation", xr("1m30s"), undefined, 90_000],
  ["below the minimum: the minimum", xr("100ms"), undefined, 1_000],
  ["not a duration: the default", xr("soon"), undefined, 60_000],
  ["a TTL wins over the annotation, as in Crossplane", xr("30s"), 5, 5_000],
];
for (const [name, obj, ttl, want] of CASES) R(name, () => assert.is(requeueAfterMs(obj, ttl, exact), want));

R("jitter: give or take a tenth, never more", () => {
  assert.is(
    requeueAfterMs(xr(), 10, () => 0),
    9_000,
  );
  assert.is(
    requeueAfterMs(xr(), 10, () => 0.999999),
    11_000,
  );
  for (let i = 0; i < 200; i++) {
    const ms = requeueAfterMs(xr(), 10);
    assert.ok(ms >= 9_000 && ms <= 11_000, String(ms));
  }
});

/** counting makes the count function's functions.yaml, the XCount XRD, and a file its calls are counted in. */
function counting() {
  const dir = mkdtempSync(join(tmpdir(), "xfn-requeue-"));
  const calls = join(dir, "calls");
  writeFileSync(calls, "");
  writeFileSync(
    join(dir, "functions.yaml"),
    `apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: count\n  annotations:\n    render.xfn.dev/module: ${join(ROOT, "test/fixtures/requeue/count.ts")}\n`,
  );
  const xrd = {
    apiVersion: "apiextensions.crossplane.io/v2",
    kind: "CompositeResourceDefinition",
    metadata: { name: "xcounts.requeue.example.org" },
    spec: {
      group: "requeue.example.org",
      names: { kind: "XCount", plural: "xcounts" },
      scope: "Cluster",
      versions: [
        {
          name: "v1",
          served: true,
          referenceable: true,
          schema: {
            openAPIV3Schema: { type: "object", properties: { spec: { type: "object", properties: { ttl: { type: "integer" } } } } },
          },
        },
      ],
    },
  };
  /** composition is a Composition of steps (each an input for the count function), chosen by the label ttl=name. */
  const composition = (name: string, steps: JsonObject[]) => ({
    apiVersion: "apiextensions.crossplane.io/v1",
    kind: "Composition",
    metadata: { name, labels: { ttl: name } },
    spec: {
      compositeTypeRef: { apiVersion: "requeue.example.org/v1", kind: "XCount" },
      mode: "Pipeline",
      pipeline: steps.map((input, i) => ({
        step: `step-${i}`,
        functionRef: { name: "count" },
        input: { apiVersion: "count.example.org/v1", kind: "Input", file: calls, ...input },
      })),
    },
  });
  const xrOf = (name: string, comp: string) => ({
    apiVersion: "requeue.example.org/v1",
    kind: "XCount",
    metadata: { name },
    spec: { crossplane: { compositionSelector: { matchLabels: { ttl: comp } } } },
  });
  const lines = () => readFileSync(calls, "utf8").split("\n").filter(Boolean);
  return { dir, xrd, composition, xrOf, lines, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

R("a pipeline with a 1 s TTL is run again about every second; one with the default 60 s is not", async () => {
  const f = counting();
  const h = await hostFor(f.dir);
  try {
    await h.host.start();
    const count = (name: string) => f.lines().filter((l) => l === name).length;
    await applyManifests(
      h.kc,
      [f.xrd, f.composition("fast", [{ ttlSeconds: 1 }]), f.composition("slow", [{}]), f.xrOf("fast", "fast"), f.xrOf("slow", "slow")].map(
        (obj) => ({ obj, source: "test" }),
      ),
      h.mem.log,
    );
    await until("both XRs reconciled", () => count("fast") >= 1 && count("slow") >= 1, 15_000);
    // The first reconciles write the XRs (the Composition chosen, conditions), which reconciles them again:
    // wait until the slow one is settled (no call for 1.5 s), then count.
    let last = -1;
    await until(
      "the slow XR settled",
      async () => {
        const now = count("slow");
        const settled = now === last;
        last = now;
        if (!settled) await new Promise((r) => setTimeout(r, 1_500));
        return settled;
      },
      15_000,
    );
    const fast0 = count("fast");
    const slow0 = count("slow");
    await new Promise((r) => setTimeout(r, 3_500));
    assert.ok(count("fast") - fast0 >= 2, `fast: ${fast0} then ${count("fast")}`);
    assert.ok(count("slow") - slow0 <= 1, `slow: ${slow0} then ${count("slow")}`);
  } finally {
    await h.host.stop();
    await h.c.stop();
    f.cleanup();
  }
});

R(
  "a reconcile has Crossplane's deadline for its pipeline (2 minutes; 1.5 s here): the call under way is cut, no step after it runs, and Synced=False says so",
  async () => {
    const f = counting();
    const h = await hostFor(f.dir, { reconcileTimeoutMs: 1_500 });
    try {
      await h.host.start();
      await applyManifests(
        h.kc,
        [f.xrd, f.composition("slow", [{ sleepMs: 900, step: "a" }, { sleepMs: 900, step: "b" }, { step: "c" }]), f.xrOf("x", "slow")].map(
          (obj) => ({ obj, source: "test" }),
        ),
        h.mem.log,
      );
      const synced = async () =>
        (
          ((await h.objects.getClusterCustomObject({ group: "requeue.example.org", version: "v1", plural: "xcounts", name: "x" })) as any)
            .status?.conditions ?? []
        ).find((c: JsonObject) => c["type"] === "Synced");
      await until("Synced=False", async () => (await synced())?.status === "False", 20_000);
      // The second step's call is cut when the reconcile's time is up, as Crossplane's context cuts it.
      const message = String((await synced()).message);
      assert.match(message, 'cannot run Composition pipeline step "step-1"', message);
      assert.match(message, "DEADLINE_EXCEEDED", message);
      assert.ok(f.lines().includes("x a"));
      assert.not.ok(f.lines().includes("x c"), "the step past the deadline did not run");
    } finally {
      await h.host.stop();
      await h.c.stop();
      f.cleanup();
    }
  },
);

R.run();
