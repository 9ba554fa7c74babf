import { readFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse } from "yaml";
import { Ready, serve, Severity, type JsonObject, type RunFunctionResponse } from "xfn-runtime";
import { rawClient } from "../../test/support/client.js";
import { memoryLog } from "../../test/support/log.js";
import { request } from "../../test/support/requests.js";
import { parseInput } from "./input.js";
import lifecycle, { stepsFor } from "./index.js";

const ctx = { signal: new AbortController().signal, log: memoryLog().log, now: () => new Date("2026-01-01T00:00:00Z") };
const L = suite("functions/lifecycle");

const invalid: Record<string, { input: Record<string, unknown>; want: string }> = {
  UnknownStepKey: {
    input: { readyness: {} },
    want: 'input: unknown key "readyness"; allowed: apiVersion, kind, externalNames, lateInit, readiness, dependencies, usages, deletion, includeWhen, schemaCheck, summary',
  },
  BadDuration: {
    input: { deletion: { stuckAfter: "5 minutes" } },
    want: 'input.deletion.stuckAfter: "5 minutes" is not a duration (examples: 30s, 5m, 1h30m)',
  },
  UnknownCheckType: {
    input: { readiness: { checks: { bucket: [{ type: "MatchSometimes" }] } } },
    want: 'input.readiness.checks.bucket[0].type: unknown check type "MatchSometimes"; expected one of MatchCondition, NonEmpty, MatchString, MatchInteger, MatchTrue, MatchFalse, None, Expression',
  },
  WaitForWithoutPath: {
    input: { dependencies: { subnet: { waitFor: ["vpc"] } } },
    want:
      'input.dependencies.subnet.waitFor[0]: "vpc" is not a resource\'s name then a field path ' +
      "(e.g. vpc.status.atProvider.id, or xr.status.network.id for the XR)",
  },
  CheckWithoutFieldPath: {
    input: { readiness: { checks: { db: [{ type: "NonEmpty" }] } } },
    want: "input.readiness.checks.db[0].fieldPath: must be a non-empty string, got undefined",
  },
  MatchIntegerNotInteger: {
    input: { readiness: { checks: { db: [{ type: "MatchInteger", fieldPath: "status.x", matchInteger: 1.5 }] } } },
    want: "input.readiness.checks.db[0].matchInteger: must be an integer, got 1.5",
  },
  UnknownCheckKey: {
    input: { readiness: { checks: { db: [{ type: "None", fieldpath: "x" }] } } },
    want: 'input.readiness.checks.db[0]: unknown key "fieldpath"; allowed: type, matchCondition, fieldPath, matchString, matchInteger, expression',
  },
  LateInitNotAList: { input: { lateInit: { fields: "spec.x" } }, want: 'input.lateInit.fields: must be a list of strings, got "spec.x"' },
  DependsOnNotStrings: {
    input: { dependencies: { a: { dependsOn: [1] } } },
    want: "input.dependencies.a.dependsOn[0]: must be a non-empty string, got 1",
  },
  WrongKind: {
    input: { apiVersion: "lifecycle.xfn.dev/v1alpha1", kind: "Lifecyle" },
    want: 'input.kind: must be Lifecycle, got "Lifecyle"',
  },
  WrongApiVersion: {
    input: { apiVersion: "lifecycle.xfn.dev/v1", kind: "Lifecycle" },
    want: 'input.apiVersion: must be lifecycle.xfn.dev/v1alpha1, got "lifecycle.xfn.dev/v1"',
  },
  BadEnabled: { input: { externalNames: { enabled: "yes" } }, want: "input.externalNames.enabled: must be true or false" },
  StatusFieldOutsideStatus: {
    input: { externalNames: { statusField: "spec.names" } },
    want: 'externalName statusField must be under status, got "spec.names"',
  },
  FromFieldsNotAMap: {
    input: { externalNames: { fromFields: ["status.atProvider.id"] } },
    want: 'input.externalNames.fromFields: must be a map of resource names, got ["status.atProvider.id"]',
  },
  FromFieldNotAString: {
    input: { externalNames: { fromFields: { db: 3 } } },
    want: "input.externalNames.fromFields.db: must be a non-empty string, got 3",
  },
  FromFieldBadPath: {
    input: { externalNames: { fromFields: { db: "status.atProvider[" } } },
    want: 'externalName fromFields.db: field path "status.atProvider[": unterminated "[" at position 17',
  },
  SummaryNotAnObject: { input: { summary: true }, want: "input.summary: must be an object, got true" },
  SummaryUnknownKey: {
    input: { summary: { healthy: false } },
    want: 'input.summary: unknown key "healthy"; allowed: type, health, healthType, event',
  },
  SummaryBadEvent: { input: { summary: { event: "no" } }, want: "input.summary.event: must be true or false" },
  SummarySystemType: {
    input: { summary: { healthType: "Healthy" } },
    want: 'summary: health "Healthy" is a condition type Crossplane keeps for itself and drops from a function',
  },
  UsagesNotAnObject: { input: { usages: false }, want: "input.usages: must be an object, got false" },
  UsagesUnknownKey: {
    input: { usages: { replay: true } },
    want: 'input.usages: unknown key "replay"; allowed: enabled, replayDeletion',
  },
  UsagesBadEnabled: { input: { usages: { enabled: "no" } }, want: "input.usages.enabled: must be true or false" },
  UsagesBadReplay: { input: { usages: { replayDeletion: 1 } }, want: "input.usages.replayDeletion: must be true or false" },
  LateInitOutsideSpec: { input: { lateInit: { fields: ["status.id"] } }, want: 'lateInit field "status.id" must be under spec' },
};
for (const [name, tc] of Object.entries(invalid)) {
  L(`invalid input is a Fatal result saying what and where: ${name}`, async () => {
    const rsp = await lifecycle(request({ input: tc.input as never, desired: { resources: { kept: { resource: { kind: "K" } } } } }), ctx);
    assert.equal(
      rsp.results.map((r) => [r.severity, r.message]),
      [[Severity.FATAL, `invalid Lifecycle input: ${tc.want}`]],
    );
  });
}

L("the README's example input parses into every step, in order, then the schema check, then the summary", () => {
  const readme = readFileSync(join(import.meta.dirname, "README.md"), "utf8");
  const yaml = /```yaml\n(apiVersion: lifecycle\.xfn\.dev[\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(yaml, "README has the example input");
  const list = stepsFor(parseInput(parse(yaml!)));
  assert.equal(
    list.map((s) => s.stepName),
    ["includeWhen", "externalName", "lateInit", "readiness", "dependencies", "deletion", "statusSchema", "summary"],
  );
});

L("defaults: externalNames, deletion and the schema check on; the rest off until configured", () => {
  assert.equal(
    stepsFor(parseInput({})).map((s) => s.stepName),
    ["externalName", "deletion", "statusSchema"],
  );
  assert.equal(
    stepsFor(parseInput({ externalNames: { enabled: false }, deletion: { enabled: false }, schemaCheck: false })).map((s) => s.stepName),
    [],
  );
});

L("usages: given to the dependencies step; without dependencies, released only where a Usage of its own is observed", async () => {
  const observed = (extra: Record<string, unknown>) =>
    request({
      // As Crossplane v2.2 and later call it, listing what it supports.
      meta: { tag: "t", capabilities: ["CAPABILITY_CAPABILITIES", "CAPABILITY_REQUIRED_SCHEMAS"] },
      input: { apiVersion: "lifecycle.xfn.dev/v1alpha1", kind: "Lifecycle", ...extra } as never,
      observed: {
        composite: { resource: { apiVersion: "x/v1", kind: "X", metadata: { name: "x" } } },
        resources: {
          a: { resource: { apiVersion: "v1", kind: "A", metadata: { name: "a1" } } },
          b: { resource: { apiVersion: "v1", kind: "B", metadata: { name: "b1" } } },
          "usage-of-a-by-b": {
            resource: {
              apiVersion: "protection.crossplane.io/v1beta1",
              kind: "ClusterUsage",
              metadata: { name: "u1", annotations: { "usage.xfn.dev/of": "a", "usage.xfn.dev/by": "b" } },
              spec: { of: { kind: "A", resourceRef: { name: "a1" } }, by: { kind: "B", resourceRef: { name: "b1" } } },
            },
          },
        },
      },
      desired: { resources: { a: { resource: { apiVersion: "v1", kind: "A" } }, b: { resource: { apiVersion: "v1", kind: "B" } } } },
    });
  const spec = (rsp: RunFunctionResponse) => rsp.desired!.resources["usage-of-a-by-b"]?.resource?.["spec"] as JsonObject | undefined;
  const deps = { dependencies: { b: { dependsOn: ["a"] } } };
  // On by default: the Usage kept, with its user; from a caller that does not list its capabilities, only when asked for.
  assert.ok(spec(await lifecycle(observed(deps), ctx))?.["by"]);
  const older = observed({ ...deps, usages: { enabled: true } });
  older.meta!.capabilities = [];
  assert.ok(spec(await lifecycle(older, ctx))?.["by"]);
  // Off: released (applied without its user).
  const off = spec(await lifecycle(observed({ ...deps, usages: { enabled: false } }), ctx));
  assert.equal([off?.["by"], off?.["reason"]], [undefined, "released: b no longer depends on a"]);
  // No dependencies at all: the release step runs, as the request observes a Usage of its own, and only then.
  const none = await lifecycle(observed({}), ctx);
  assert.equal(spec(none)?.["reason"], "released: b no longer depends on a");
  assert.equal(
    stepsFor(parseInput({}), observed({})).map((s) => s.stepName),
    ["externalName", "releaseUsages", "deletion", "statusSchema"],
  );
  assert.equal(
    stepsFor(parseInput({}), request({})).map((s) => s.stepName),
    ["externalName", "deletion", "statusSchema"],
  );
});

L("served over gRPC after another function: passes through what it does not own, adds what it does", async () => {
  const srv = await serve(lifecycle, { address: "127.0.0.1:0", insecure: true }, memoryLog().log);
  const client = rawClient(srv.port);
  try {
    const rsp = await client.run(
      request({
        input: {
          apiVersion: "lifecycle.xfn.dev/v1alpha1",
          kind: "Lifecycle",
          readiness: { checks: { db: [{ type: "NonEmpty", fieldPath: "status.atProvider.endpoint" }] } },
        },
        observed: {
          composite: { resource: { kind: "XApp", metadata: { name: "a" } } },
          resources: {
            db: {
              resource: {
                kind: "DB",
                metadata: { annotations: { "crossplane.io/external-name": "db-1" } },
                status: { atProvider: { endpoint: "db:5432" } },
              },
            },
          },
        },
        // What an earlier function (say, patch-and-transform) produced.
        desired: {
          composite: { resource: { status: { fromEarlier: true } } },
          resources: { db: { resource: { kind: "DB", spec: { size: 1 } } }, cache: { resource: { kind: "Cache" }, ready: "READY_TRUE" } },
        },
        context: { "apiextensions.crossplane.io/environment": { region: "eu" } },
      }),
    );
    assert.equal(
      rsp.results.filter((r) => r.severity === Severity.FATAL),
      [],
    );
    assert.equal(rsp.desired!.composite!.resource, { status: { fromEarlier: true, externalNames: { db: "db-1" } } });
    assert.equal(rsp.desired!.resources["db"]!.resource, {
      kind: "DB",
      spec: { size: 1 },
      metadata: { annotations: { "crossplane.io/external-name": "db-1" } },
    });
    assert.is(rsp.desired!.resources["db"]!.ready, Ready.TRUE);
    assert.is(rsp.desired!.resources["cache"]!.ready, Ready.TRUE, "an earlier function's readiness stands");
    assert.equal(rsp.context, { "apiextensions.crossplane.io/environment": { region: "eu" } });
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

L.run();
