// xfn render op: an Operation's pipeline offline, as crossplane render does for Operations.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { runRenderOp } from "../../src/cli/render.js";
import { DEFAULT_NOW } from "../../src/cli/render.js";
import { sink } from "../support/sink.js";
import { ROOT, run } from "../support/spawn.js";

const OP = join(ROOT, "examples/operation");

async function renderOp(op: string, over: Record<string, unknown> = {}) {
  const out = sink();
  const err = sink();
  const flags = { requiredResources: [] as string[], timeout: 60_000, now: new Date(DEFAULT_NOW), includeFunctionResults: true, ...over };
  const code = await runRenderOp(op, join(OP, "functions.yaml"), flags as never, out.stream, err.stream);
  return { code, out: out.text(), err: err.text(), docs: parseAllDocuments(out.text()).map((d) => d.toJS() as Record<string, any>) };
}

let scratch: string;
const O = suite("cli: xfn render op");
O.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-render-op-"));
});
O.after(() => rmSync(scratch, { recursive: true, force: true }));
const write = (name: string, text: string) => {
  const p = join(scratch, name);
  writeFileSync(p, text);
  return p;
};

O("a WatchOperation: the watched resource reaches the function; the Operation's status, what it applies, its results", async () => {
  const r = await renderOp(join(OP, "watch-operation.yaml"), { watchedResource: join(OP, "watched.yaml") });
  assert.is(r.code, 0, r.err);
  const [op, bucket, result] = r.docs;
  assert.equal(op!["metadata"], { name: "label-buckets" });
  assert.equal(
    op!["status"].conditions.map((c: any) => [c.type, c.status, c.reason]),
    [
      ["Succeeded", "True", "PipelineSuccess"],
      ["ValidPipeline", "True", "ValidPipeline"],
      ["Synced", "True", "ReconcileSuccess"],
    ],
  );
  assert.equal(op!["status"].pipeline, [{ step: "label", output: { checked: "team-a-7xq2m", region: "eu-west-1" } }]);
  assert.equal(op!["status"].appliedResourceRefs, [{ apiVersion: "s3.aws.upbound.io/v1beta1", kind: "Bucket", name: "team-a-7xq2m" }]);
  assert.equal(bucket, {
    apiVersion: "s3.aws.upbound.io/v1beta1",
    kind: "Bucket",
    metadata: { name: "team-a-7xq2m", labels: { "ops.xfn.dev/checked": "20240101T000000" } },
  });
  assert.equal(result, {
    apiVersion: "render.crossplane.io/v1beta1",
    kind: "Result",
    severity: "Normal",
    reason: "RunPipelineStep",
    message: 'Pipeline step "label": labelled team-a-7xq2m',
  });
});

O("a WatchOperation without --watched-resource is refused naming the flag", async () => {
  const r = await renderOp(join(OP, "watch-operation.yaml"));
  assert.is(r.code, 1);
  assert.match(r.err, /a WatchOperation runs for a resource that changed: give it with --watched-resource/);
});

O("a plain Operation: a step's own required resources are answered from -e; a Fatal result exits 3", async () => {
  const plain = write(
    "op.yaml",
    `apiVersion: ops.crossplane.io/v1alpha1\nkind: Operation\nmetadata: {name: once}\nspec:\n  mode: Pipeline\n  pipeline:\n` +
      `    - step: label\n      functionRef: {name: label-stale}\n      requirements:\n        requiredResources:\n` +
      `          - {requirementName: ops.crossplane.io/watched-resource, apiVersion: s3.aws.upbound.io/v1beta1, kind: Bucket, name: team-a-7xq2m}\n`,
  );
  const ok = await renderOp(plain, { requiredResources: [join(OP, "watched.yaml")] });
  assert.is(ok.code, 0, ok.err);
  assert.is(ok.docs[0]!["metadata"].name, "once");
  assert.is(ok.docs[1]!["metadata"].name, "team-a-7xq2m");
  const fatal = await renderOp(plain);
  assert.is(fatal.code, 3);
  assert.match(fatal.err, /pipeline step "label" returned a fatal result: no watched resource: run this function from a WatchOperation/);
});

O("a CronOperation renders the Operation of its template; other kinds are refused", async () => {
  const cron = write(
    "cron.yaml",
    `apiVersion: ops.crossplane.io/v1alpha1\nkind: CronOperation\nmetadata: {name: nightly}\nspec:\n  schedule: "0 3 * * *"\n` +
      `  operationTemplate:\n    spec:\n      mode: Pipeline\n      pipeline:\n        - step: label\n          functionRef: {name: label-stale}\n`,
  );
  const r = await renderOp(cron, { watchedResource: join(OP, "watched.yaml") });
  assert.is(r.code, 0, r.err);
  assert.equal([r.docs[0]!["kind"], r.docs[0]!["metadata"].name], ["Operation", "nightly"]);
  const xr = await renderOp(join(ROOT, "examples/xr.yaml"));
  assert.is(xr.code, 1);
  assert.match(
    xr.err,
    /expected an ops\.crossplane\.io Operation, CronOperation or WatchOperation, got example\.xfn\.dev\/v1alpha1 XBuckets/,
  );
  const empty = await renderOp(
    write("empty.yaml", `apiVersion: ops.crossplane.io/v1alpha1\nkind: Operation\nmetadata: {name: e}\nspec: {pipeline: []}\n`),
  );
  assert.is(empty.code, 1);
  assert.match(empty.err, /spec\.pipeline must list at least one step/);
});

O("the real command: xfn render op with its own -r after the subcommand", async () => {
  const r = await run(["render", "op", "examples/operation/watch-operation.yaml", "-w", "examples/operation/watched.yaml", "-r"]);
  assert.is(r.code, 0, r.stderr);
  assert.match(r.stdout, /reason: RunPipelineStep/);
  assert.match(r.stdout, /^kind: Operation$/m);
});

O.run();
