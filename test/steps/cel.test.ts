// kro-style expressions: readiness (readyWhen), waiting (waitUntil), inclusion (includeWhen), in CEL.
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { create, toBinary, type JsonObject } from "@bufbuild/protobuf";
import { Ready, ResourceSchema, RunFunctionRequestSchema, Severity } from "../../src/gen/fn/v1/run_function_pb.js";
import { runSteps } from "../../src/pipeline.js";
import { dependencies, deletion, includeWhen, readiness } from "../../src/steps/index.js";
import { compile, evaluate, variables } from "../../src/steps/cel.js";
import { decodeRequest, encodeRequest } from "../../src/wire/codec.js";
import { setOwn } from "../../src/own.js";
import { parseInput } from "../../functions/lifecycle/input.js";
import { stepsFor } from "../../functions/lifecycle/index.js";
import { messages, NOW, run } from "../support/steps.js";
import { request } from "../support/requests.js";

const C = suite("CEL expressions");

const db = (status: JsonObject): JsonObject => ({ apiVersion: "rds/v1", kind: "Instance", metadata: { name: "db-1" }, status });
const xr = (spec: JsonObject): JsonObject => ({ apiVersion: "x/v1", kind: "XApp", metadata: { name: "app" }, spec });

const table: Record<string, { expr: string; vars: Record<string, unknown>; want: boolean | "not yet" | RegExp }> = {
  FieldCompare: { expr: "db.status.endpoint != ''", vars: variables(undefined, { db: db({ endpoint: "h:5432" }) }), want: true },
  IntAgainstJsonNumber: { expr: "db.status.replicas >= 2", vars: variables(undefined, { db: db({ replicas: 3 }) }), want: true },
  ConditionExists: {
    expr: "db.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
    vars: variables(undefined, { db: db({ conditions: [{ type: "Ready", status: "True" }] }) }),
    want: true,
  },
  XRField: { expr: "xr.spec.tier == 'prod'", vars: variables(xr({ tier: "dev" }), {}), want: false },
  HasMacro: { expr: "has(db.status.endpoint)", vars: variables(undefined, { db: db({}) }), want: false },
  MissingFieldIsNotYet: { expr: "db.status.endpoint != ''", vars: variables(undefined, { db: db({}) }), want: "not yet" },
  MissingResourceIsNotYet: { expr: "db.status.endpoint != ''", vars: variables(undefined, {}), want: "not yet" },
  NonIdentifierName: { expr: "observed['my-db'].status.ok", vars: variables(undefined, { "my-db": db({ ok: true }) }), want: true },
  // A pattern a backtracking engine takes exponential time over (33 bytes ran for minutes): RE2 answers at once.
  MatchesOnRE2: {
    expr: "xr.spec.owner.matches('^([a-z0-9]+-?)*$')",
    vars: variables(xr({ owner: `${"a".repeat(32)}!` }), {}),
    want: false,
  },
  MatchesFinds: { expr: "xr.spec.owner.matches('team-[0-9]+')", vars: variables(xr({ owner: "the team-42 bucket" }), {}), want: true },
  MatchesAsFunction: { expr: "matches(xr.spec.owner, '^team')", vars: variables(xr({ owner: "team-42" }), {}), want: true },
  MatchesBadPattern: { expr: "xr.spec.owner.matches('(')", vars: variables(xr({ owner: "x" }), {}), want: /invalid regular expression/ },
  NotABool: { expr: "db.status.replicas", vars: variables(undefined, { db: db({ replicas: 3 }) }), want: /gave a number, not a bool/ },
};
for (const [name, tc] of Object.entries(table)) {
  C(`evaluate: ${name}`, () => {
    const e = compile(tc.expr, "t");
    if (tc.want instanceof RegExp) {
      assert.throws(() => evaluate(e, tc.vars), tc.want);
      return;
    }
    const out = evaluate(e, tc.vars);
    if (tc.want === "not yet") {
      assert.not.ok(out.ok);
      assert.match((out as { why: string }).why, /No such key|Unknown variable/);
    } else assert.is(out.ok, tc.want);
  });
}

C("a syntax error is refused when the step is built, naming where", () => {
  assert.throws(
    () => compile("db.status. ==", "dependencies.app.waitUntil[0]"),
    /^dependencies\.app\.waitUntil\[0\]: cannot parse "db\.status\. =="/,
  );
  assert.throws(
    () => readiness({ checks: { db: [{ type: "Expression", expression: "1 +" }] } }),
    /checks\.db\[0\]\.expression: cannot parse/,
  );
  assert.throws(() => includeWhen({ mon: ["xr.spec.("] }), /includeWhen\.mon\[0\]: cannot parse/);
  assert.throws(() => parseInput({ includeWhen: { mon: ["(("] } }), /input\.includeWhen\.mon\[0\]: cannot parse/);
  assert.throws(
    () => parseInput({ readiness: { checks: { db: [{ type: "Expression" }] } } }),
    /input\.readiness\.checks\.db\[0\]\.expression/,
  );
});

C("readiness: an Expression check (readyWhen) sees self, the XR and the others", () => {
  const checks = { db: [{ type: "Expression" as const, expression: "self.status.endpoint != '' && xr.spec.tier == 'prod'" }] };
  const ok = run([readiness({ checks })], {
    xr: xr({ tier: "prod" }),
    observed: { db: db({ endpoint: "h" }) },
    desired: { db: { kind: "Instance" } },
  });
  assert.is(ok.desired!.resources["db"]!.ready, Ready.TRUE);
  const no = run([readiness({ checks })], { xr: xr({ tier: "prod" }), observed: { db: db({}) }, desired: { db: { kind: "Instance" } } });
  assert.is(no.desired!.resources["db"]!.ready, Ready.FALSE);
  assert.match(
    messages(no)[0]!,
    /not ready: db \(self\.status\.endpoint != '' && xr\.spec\.tier == 'prod' \(No such key: endpoint\) is not true\)/,
  );
});

C("dependencies: waitUntil holds a resource until its expressions hold, and what they name orders deletion", () => {
  const deps = { app: { waitUntil: ["db.status.endpoint != ''"] } };
  const waiting = run([dependencies(deps)], { observed: { db: db({}) }, desired: { db: { kind: "Instance" }, app: { kind: "App" } } });
  assert.equal(Object.keys(waiting.desired!.resources), ["db"], "app is held back");
  assert.match(JSON.stringify((waiting.desired!.composite!.resource!["status"] as any).waiting.app.for), /db\.status\.endpoint != ''/);
  const go = run([dependencies(deps)], {
    observed: { db: db({ endpoint: "h" }) },
    desired: { db: { kind: "Instance" }, app: { kind: "App" } },
  });
  assert.equal(Object.keys(go.desired!.resources).sort(), ["app", "db"]);
  // db is named in app's expression: app is deleted before db.
  const order = run([deletion({ dependencies: { app: { waitUntil: ["db.status.endpoint != ''"] }, db: {} } })], {
    observed: { db: db({}), app: { kind: "App", metadata: { name: "a" } } },
    desired: { db: { kind: "Instance" }, app: { kind: "App" } },
  });
  assert.equal((order.desired!.composite!.resource!["status"] as any).deletion.order, [["app"], ["db"]]);
});

C("includeWhen: a resource whose expressions do not hold is left out, with a Normal result", () => {
  const step = includeWhen({ monitoring: ["xr.spec.monitoring == true"] });
  const off = run([step], { xr: xr({ monitoring: false }), desired: { monitoring: { kind: "Dashboard" }, db: { kind: "Instance" } } });
  assert.equal(Object.keys(off.desired!.resources), ["db"]);
  assert.equal(messages(off, Severity.NORMAL), ["not composing monitoring: xr.spec.monitoring == true is not true"]);
  const on = run([step], { xr: xr({ monitoring: true }), desired: { monitoring: { kind: "Dashboard" }, db: { kind: "Instance" } } });
  assert.equal(Object.keys(on.desired!.resources).sort(), ["db", "monitoring"]);
  const unset = run([step], { xr: xr({}), desired: { monitoring: { kind: "Dashboard" } } });
  assert.equal(Object.keys(unset.desired!.resources), [], "a field not there yet counts as false");
});

C("lifecycle: includeWhen runs first; waitUntil and Expression checks come from the input", () => {
  const o = parseInput({
    includeWhen: { monitoring: ["xr.spec.monitoring"] },
    dependencies: { app: { dependsOn: ["db"], waitUntil: ["db.status.endpoint != ''"] } },
    readiness: { checks: { db: [{ type: "Expression", expression: "has(self.status.endpoint)" }] } },
  });
  assert.equal(stepsFor(o)[0]!.stepName, "includeWhen");
  assert.equal(o.dependencies!["app"]!.waitUntil, ["db.status.endpoint != ''"]);
});

C("expressions read values decoded lazily from the wire", () => {
  const big = { endpoint: "h:5432", padding: "x".repeat(300), replicas: 3 };
  const bytes = toBinary(
    RunFunctionRequestSchema,
    request({
      observed: { composite: { resource: xr({ tier: "prod" }) }, resources: { db: { resource: db(big) } } },
      desired: { resources: { db: { resource: { kind: "Instance" } }, app: { resource: { kind: "App" } } } },
    } as never),
  );
  const rsp = runSteps(
    [dependencies({ app: { waitUntil: ["db.status.endpoint != '' && db.status.replicas == 3 && xr.spec.tier == 'prod'"] } })],
    decodeRequest(bytes),
    NOW,
  );
  assert.equal(Object.keys(rsp.desired!.resources).sort(), ["app", "db"]);
});

C('a composed resource named __proto__ is observed["__proto__"], and its fields are not variables', () => {
  // A map key on the wire may be any string. protobuf-es's fromJson cannot carry this one, so the
  // request is made by hand and crosses the wire codec, as Crossplane's would.
  const req = create(RunFunctionRequestSchema, { observed: { composite: { resource: xr({}) } }, desired: {} });
  setOwn(req.observed!.resources, "__proto__", create(ResourceSchema, { resource: db({ endpoint: "h:5432" }) }));
  for (const name of ["__proto__", "app"]) setOwn(req.desired!.resources, name, create(ResourceSchema, { resource: { kind: "K" } }));
  const decoded = () => decodeRequest(encodeRequest(req));

  const observed = Object.fromEntries(Object.entries(decoded().observed!.resources).map(([k, r]) => [k, r.resource]));
  const seen = variables(undefined, observed);
  assert.is(Object.getPrototypeOf(seen), Object.prototype, "the resource became the variables' prototype");
  assert.ok(Object.hasOwn(seen["observed"] as object, "__proto__"));
  assert.equal(evaluate(compile("observed['__proto__'].status.endpoint == 'h:5432'", "t"), seen), { ok: true });
  // Its fields are not top-level variables, as they were through the prototype.
  assert.is(evaluate(compile("status.endpoint == 'h:5432'", "t"), seen).ok, false);

  const ready = runSteps(
    [
      readiness({
        checks: { ["__proto__"]: [{ type: "Expression", expression: "self.status.endpoint == observed['__proto__'].status.endpoint" }] },
      }),
    ],
    decoded(),
    NOW,
  );
  assert.is(ready.desired!.resources["__proto__"]!.ready, Ready.TRUE);
  const go = runSteps([dependencies({ app: { waitUntil: ["observed['__proto__'].status.endpoint == 'h:5432'"] } })], decoded(), NOW);
  assert.equal(Object.keys(go.desired!.resources).sort(), ["__proto__", "app"]);
});

C.run();
