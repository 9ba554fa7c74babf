// render --converge: reconcile after reconcile offline (src/render/converge.ts),
// with the real example functions (hello, then lifecycle's dependency,
// readiness and external-name steps) and with functions written here.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse } from "yaml";
import { loadDocs, loadOne } from "../../src/engine/docs.js";
import { createRunner } from "../../src/engine/runner.js";
import { converge, type ConvergeRules } from "../../src/render/converge.js";
import { FIXED_TIME, render, type RenderInputs } from "../../src/render/render.js";
import { ROOT } from "../support/spawn.js";

const EX = join(ROOT, "examples");
const C = suite("render --converge: rounds until the pipeline settles");
const scratch = mkdtempSync(join(tmpdir(), "xfn-converge-"));
C.after(() => rmSync(scratch, { recursive: true, force: true }));

const write = (name: string, text: string) => {
  const p = join(scratch, name);
  writeFileSync(p, text);
  return p;
};

/** The example Composition with lifecycle's input replaced (YAML), in scratch. */
function exampleWith(lifecycleInput: Record<string, unknown>): string {
  const doc = parse(readFileSync(join(EX, "composition.yaml"), "utf8")) as { spec: { pipeline: { step: string; input: object }[] } };
  doc.spec.pipeline.find((p) => p.step === "lifecycle")!.input = {
    apiVersion: "lifecycle.xfn.dev/v1alpha1",
    kind: "Lifecycle",
    ...lifecycleInput,
  };
  return write(`comp-${Object.keys(lifecycleInput).join("-") || "plain"}-${Math.random().toString(36).slice(2)}.yaml`, JSON.stringify(doc));
}

const inputs = (comp: string, observed: string[] = []): RenderInputs => ({
  xr: loadOne(join(EX, "xr.yaml"), "composite resource"),
  composition: loadOne(comp, "Composition"),
  observed: observed.flatMap((p) => loadDocs(p)),
  required: [],
  credentials: [],
  context: {},
});

async function run(comp: string, rules: ConvergeRules, fns = join(EX, "functions.yaml"), observed: string[] = []) {
  const now = new Date(FIXED_TIME);
  const runner = await createRunner(loadDocs(fns), fns, () => now);
  try {
    const c = await converge(inputs(comp, observed), runner, { timeoutMs: 60_000, now }, rules);
    const final = await render(c.inputs, runner, { timeoutMs: 60_000, now });
    return { c, final };
  } finally {
    runner.close();
  }
}

type Obj = Record<string, any>;
const cond = (o: Obj, type: string) => (o["status"]?.conditions ?? []).find((c: Obj) => c["type"] === type);
const names = (docs: Obj[]) => docs.map((d) => d["metadata"].annotations["crossplane.io/composition-resource-name"]).sort();

C("the example: bucket-assets waits for bucket-logs, composed the round after logs is ready; the XR Ready once both are", async () => {
  const { c, final } = await run(join(EX, "composition.yaml"), {});
  assert.ok(c.converged);
  assert.equal(
    c.rounds.map((r) => r.summary),
    [
      "round 1: composed bucket-logs; XR Ready=False (Creating); then ready: bucket-logs",
      "round 2: composed bucket-assets; XR Ready=False (Creating); then ready: bucket-assets",
      // Both exist: the Usage that makes Crossplane delete bucket-assets first (issue 61 point 1).
      "round 3: composed usage-of-bucket-logs-by-bucket-assets; XR Ready=True (Available); then ready: usage-of-bucket-logs-by-bucket-assets",
      "round 4: XR Ready=True (Available)",
      "round 5: rendered the same as the round before; XR Ready=True (Available)",
    ],
  );
  // Each round's diff: round 2 adds bucket-assets and drops the waiting list; round 5's is empty.
  assert.match(c.rounds[1]!.diff, /^\+ {4}crossplane\.io\/composition-resource-name: bucket-assets$/m);
  assert.match(c.rounds[1]!.diff, /^- {2}waiting:$/m);
  assert.is(c.rounds[4]!.diff, "");
  assert.equal(names(final.composed), ["bucket-assets", "bucket-logs", "usage-of-bucket-logs-by-bucket-assets"]);
  assert.equal(
    [cond(final.xr, "DeletionOrdered").status, cond(final.xr, "DeletionOrdered").message],
    ["True", "On deletion, Crossplane deletes bucket-logs after bucket-assets"],
  );
  assert.is(cond(final.xr, "Ready").status, "True");
  // The externalName step recorded what the simulated provider set (the resource's name, as crossplane-runtime's default).
  const ext = (final.xr as Obj)["status"].externalNames as Record<string, string>;
  for (const d of final.composed as Obj[])
    assert.is(ext[d["metadata"].annotations["crossplane.io/composition-resource-name"]], d["metadata"].name);
});

// A function that composes a db and an app and leaves their readiness undecided, for lifecycle's readiness step.
write(
  "plain.ts",
  `import { response } from ${JSON.stringify(join(ROOT, "src/index.ts"))};
export default (req: never) => {
  const rsp = response.to(req);
  for (const n of ["db", "app"]) response.setDesiredComposedResource(rsp, n, { apiVersion: "example.org/v1", kind: n === "db" ? "DB" : "App", spec: {} });
  return rsp;
};
`,
);
const plainFns = write(
  "plain-functions.yaml",
  "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata: { name: plain, annotations: { render.xfn.dev/module: plain.ts } }\n---\n" +
    `apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata: { name: lifecycle, annotations: { render.xfn.dev/module: ${join(ROOT, "functions/lifecycle")} } }\n`,
);
const plainComp = write(
  "plain-comp.yaml",
  JSON.stringify({
    apiVersion: "apiextensions.crossplane.io/v1",
    kind: "Composition",
    metadata: { name: "c" },
    spec: {
      compositeTypeRef: { apiVersion: "example.xfn.dev/v1alpha1", kind: "XBuckets" },
      mode: "Pipeline",
      pipeline: [
        { step: "compose", functionRef: { name: "plain" } },
        {
          step: "lifecycle",
          functionRef: { name: "lifecycle" },
          input: {
            apiVersion: "lifecycle.xfn.dev/v1alpha1",
            kind: "Lifecycle",
            readiness: { checks: { db: [{ type: "Expression", expression: "self.status.atProvider.endpoint != ''" }] } },
            dependencies: { app: { waitFor: ["db.status.atProvider.endpoint"] } },
          },
        },
      ],
    },
  }),
);

C("the readiness and dependency steps over what a provider publishes (readyStatus), readyAfter per resource", async () => {
  // Without the endpoint: db is created and never ready by its check, app waits: it settles, the XR not ready.
  const none = await run(plainComp, {}, plainFns);
  assert.ok(none.c.converged);
  assert.equal(names(none.final.composed), ["db"]);
  assert.is(cond(none.final.xr, "Ready").status, "False");
  assert.equal((none.final.xr as Obj)["status"].waiting.app.for, ["db.status.atProvider.endpoint"]);
  // The provider publishes the endpoint two rounds after the create: app follows, then everything is ready.
  const { c, final } = await run(
    plainComp,
    { readyAfter: { db: 2 }, readyStatus: { db: { atProvider: { endpoint: "db:5432" } } } },
    plainFns,
  );
  assert.ok(c.converged);
  assert.equal(
    c.rounds.map((r) => r.summary),
    [
      "round 1: composed db; XR Ready=False (Creating)",
      "round 2: XR Ready=False (Creating); then ready: db",
      "round 3: composed app; XR Ready=False (Creating); then ready: app",
      "round 4: composed usage-of-db-by-app; XR Ready=True (Available); then ready: usage-of-db-by-app",
      "round 5: XR Ready=True (Available)",
      "round 6: rendered the same as the round before; XR Ready=True (Available)",
    ],
  );
  assert.equal(names(final.composed), ["app", "db", "usage-of-db-by-app"]);
  assert.is(cond(final.xr, "Ready").status, "True");
  assert.is((final.xr as Obj)["status"].waiting, undefined);
});

C("a CEL rule (self, xr) that never holds: it settles with the dependent never composed", async () => {
  const { c, final } = await run(join(EX, "composition.yaml"), { ready: { "bucket-logs": "self.spec.forProvider.region == 'mars-1'" } });
  assert.ok(c.converged);
  assert.equal(names(final.composed), ["bucket-logs"]);
  const ok = await run(join(EX, "composition.yaml"), {
    ready: { "*": "xr.metadata.name == 'team-a' && self.spec.forProvider.region != ''" },
  });
  assert.equal(names(ok.final.composed), ["bucket-assets", "bucket-logs", "usage-of-bucket-logs-by-bucket-assets"]);
});

// A function that writes a counter one higher than the XR's each time: it never settles.
write(
  "counter.ts",
  `import { request, response } from ${JSON.stringify(join(ROOT, "src/index.ts"))};
export default (req: never) => {
  const rsp = response.to(req);
  const n = Number((request.getObservedCompositeResource(req)?.["status"] as { count?: number } | undefined)?.count ?? 0);
  response.setDesiredCompositeField(rsp, "status.count", n + 1);
  return rsp;
};
`,
);
const counterFns = write(
  "counter-functions.yaml",
  "apiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata: { name: counter, annotations: { render.xfn.dev/module: counter.ts } }\n",
);
const counterComp = write(
  "counter-comp.yaml",
  "apiVersion: apiextensions.crossplane.io/v1\nkind: Composition\nmetadata: { name: c }\n" +
    "spec:\n  compositeTypeRef: { apiVersion: example.xfn.dev/v1alpha1, kind: XBuckets }\n  mode: Pipeline\n" +
    "  pipeline:\n    - step: s\n      functionRef: { name: counter }\n",
);

C("a pipeline that never settles stops at maxRounds, naming what still changed", async () => {
  const { c, final } = await run(counterComp, { maxRounds: 3 }, counterFns);
  assert.not.ok(c.converged);
  assert.is(c.rounds.length, 3);
  assert.is(c.changing, "the XR's status.count");
  assert.is((final.xr as Obj)["status"].count, 4);
});

C("bad rules are refused naming the rule", async () => {
  const bad: [ConvergeRules, RegExp][] = [
    [{ maxRounds: 0 }, /converge: maxRounds must be a whole number from 1 to 1000, got 0/],
    [{ readyAfter: { a: 0 } }, /converge: readyAfter a: must be a whole number of rounds, 1 or more, got 0/],
    [{ ready: { a: "self.(" } }, /converge: ready a: cannot parse "self\.\("/],
    [{ readyStatus: { a: "x" as never } }, /converge: readyStatus a: must be a map/],
  ];
  for (const [rules, want] of bad) {
    const err = await run(join(EX, "composition.yaml"), rules).then(
      () => undefined,
      (e: Error) => e,
    );
    assert.match(err?.message ?? "no error", want);
  }
});

C("a Fatal result in a round ends it, naming the round", async () => {
  // An expression that cannot be evaluated once bucket-logs is observed with a size (round 2): the dependency step fails.
  const comp = exampleWith({ dependencies: { "bucket-assets": { waitUntil: ["observed['bucket-logs'].status.atProvider.size + 1"] } } });
  const err = await run(comp, { readyStatus: { "bucket-logs": { atProvider: { size: 3 } } } }).then(
    () => undefined,
    (e: Error) => e,
  );
  assert.match(
    err?.message ?? "no error",
    /^round 2: pipeline step "lifecycle" returned a fatal result: step dependencies: expression /,
    err?.message,
  );
});

C.run();
