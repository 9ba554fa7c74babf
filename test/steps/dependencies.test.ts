import { create, type JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { Ready, ResourceSchema, RunFunctionRequestSchema, Severity } from "../../src/gen/fn/v1/run_function_pb.js";
import { runSteps } from "../../src/pipeline.js";
import { decodeRequest, encodeRequest } from "../../src/wire/codec.js";
import { setOwn } from "../../src/own.js";
import * as response from "../../src/sdk/response.js";
import { dependencies, readiness } from "../../src/steps/index.js";
import { closest, formatWaitFor, parseWaitFor } from "../../src/steps/dependencies.js";
import { messages, NOW, readyCondition, run } from "../support/steps.js";

const D = suite("step dependencies");

const vpcReady = { kind: "VPC", ...readyCondition("True"), status: { ...readyCondition("True").status, atProvider: { id: "vpc-1" } } };
const vpcBooting = { kind: "VPC", ...readyCondition("False", "Creating") };

D("dependsOn: a dependent waits, not created, until its dependency is ready", () => {
  const steps = [readiness(), dependencies({ subnet: { dependsOn: ["vpc"] } })];
  const waiting = run(steps, { observed: { vpc: vpcBooting }, desired: { vpc: { kind: "VPC" }, subnet: { kind: "Subnet" } } });
  assert.equal(Object.keys(waiting.desired!.resources), ["vpc"]);
  assert.ok(messages(waiting, Severity.NORMAL).includes("subnet: waiting for vpc to be ready; not creating it yet"));
  assert.is(response.getTTLSeconds(waiting), 5);
  assert.equal((waiting.desired!.composite!.resource!["status"] as Record<string, unknown>)["waiting"], {
    subnet: { for: ["vpc to be ready"], since: NOW.toISOString() },
  });

  const go = run(steps, { observed: { vpc: vpcReady }, desired: { vpc: { kind: "VPC" }, subnet: { kind: "Subnet" } } });
  assert.equal(Object.keys(go.desired!.resources).sort(), ["subnet", "vpc"]);
  // Nothing waits: the field is left out (an empty map would be null after a server-side apply, src/steps/dependencies.ts).
  assert.is((go.desired?.composite?.resource?.["status"] as Record<string, unknown> | undefined)?.["waiting"], undefined);
  assert.is(response.getTTLSeconds(go), 60);
});

D("waitFor a field of another resource, and of the XR", () => {
  const steps = [
    dependencies({ subnet: { waitFor: ["vpc:status.atProvider.id"] }, cluster: { waitFor: ["xr:status.network.privateSubnetId"] } }),
  ];
  const rsp = run(steps, { observed: { vpc: vpcBooting }, desired: { subnet: {}, cluster: {} } });
  assert.equal(Object.keys(rsp.desired!.resources), []);
  assert.equal(messages(rsp, Severity.NORMAL).sort(), [
    "cluster: waiting for xr.status.network.privateSubnetId; not creating it yet",
    "subnet: waiting for vpc.status.atProvider.id; not creating it yet",
  ]);
  const later = run(steps, {
    xr: { kind: "XNet", status: { network: { privateSubnetId: "subnet-9" } } },
    observed: { vpc: vpcReady },
    desired: { subnet: {}, cluster: {} },
  });
  assert.equal(Object.keys(later.desired!.resources).sort(), ["cluster", "subnet"]);
});

D("waitFor reads the form waits are reported in; the older colon form means the same", () => {
  // Before, "vpc.status.atProvider.id" (as a wait is printed) was refused: "is not resource:field.path".
  for (const form of ["vpc.status.atProvider.id", "vpc:status.atProvider.id"]) {
    const steps = [dependencies({ subnet: { waitFor: [form] } })];
    const rsp = run(steps, { observed: { vpc: vpcBooting }, desired: { subnet: {} } });
    assert.equal(messages(rsp, Severity.NORMAL), ["subnet: waiting for vpc.status.atProvider.id; not creating it yet"], form);
    const waiting = (rsp.desired!.composite!.resource!["status"] as JsonObject)["waiting"] as JsonObject;
    assert.equal((waiting["subnet"] as JsonObject)["for"], ["vpc.status.atProvider.id"]);
    const go = run(steps, { observed: { vpc: vpcReady }, desired: { subnet: {} } });
    assert.equal(Object.keys(go.desired!.resources), ["subnet"], form);
  }
});

// What each entry means, and how it is written back (status, events, the graph's context): parsed again, the same.
const waitForms: [entry: string, resource: string, path: string, printed: string][] = [
  ["vpc.status.atProvider.id", "vpc", "status.atProvider.id", "vpc.status.atProvider.id"],
  ["vpc:status.atProvider.id", "vpc", "status.atProvider.id", "vpc.status.atProvider.id"],
  ["xr.status.network.id", "xr", "status.network.id", "xr.status.network.id"],
  ["db.metadata.annotations[example.org/a.b]", "db", "metadata.annotations[example.org/a.b]", "db.metadata.annotations[example.org/a.b]"],
  ["db.metadata.annotations[example.org:x]", "db", "metadata.annotations[example.org:x]", "db.metadata.annotations[example.org:x]"],
  ['db["status"].id', "db", '["status"].id', 'db["status"].id'],
  ["my.bucket:status.arn", "my.bucket", "status.arn", "my.bucket:status.arn"],
  ["bucket-logs.status.atProvider.arn", "bucket-logs", "status.atProvider.arn", "bucket-logs.status.atProvider.arn"],
];
D("waitFor forms: parsed, and printed so that they parse to the same", () => {
  for (const [entry, resource, path, printed] of waitForms) {
    const w = parseWaitFor(entry, "w");
    assert.equal(w, { resource, path }, entry);
    assert.is(formatWaitFor(w), printed, entry);
    assert.equal(parseWaitFor(printed, "w"), w, printed);
  }
});

D("a dependency nothing composes or observes is named as such (a typo in dependsOn or waitFor shows)", () => {
  const steps = [readiness(), dependencies({ subnet: { dependsOn: ["vpcc"] }, route: { waitFor: ["vpcc:status.atProvider.id"] } })];
  const rsp = run(steps, { observed: { vpc: vpcReady }, desired: { vpc: { kind: "VPC" }, subnet: {}, route: {} } });
  assert.equal(Object.keys(rsp.desired!.resources), ["vpc"]);
  assert.equal(
    messages(rsp, Severity.NORMAL)
      .filter((m) => m.includes("waiting"))
      .sort(),
    [
      "route: waiting for vpcc.status.atProvider.id (no resource named vpcc is desired or observed yet); not creating it yet",
      "subnet: waiting for vpcc to be ready (no resource named vpcc is desired or observed yet); not creating it yet",
    ],
  );
  // And a Warning per dependent, naming the closest resource there is.
  assert.equal(messages(rsp, Severity.WARNING).sort(), [
    "route depends on vpcc, but no resource named vpcc is desired or observed: did you mean vpc?",
    "subnet depends on vpcc, but no resource named vpcc is desired or observed: did you mean vpc?",
  ]);
  assert.ok(rsp.results.filter((r) => r.severity === Severity.WARNING).every((r) => r.reason === "DependencyNotFound"));
  // Nothing close: the resources there are.
  const far = run([dependencies({ subnet: { dependsOn: ["gateway"] } })], { desired: { vpc: { kind: "VPC" }, subnet: {} } });
  assert.equal(messages(far, Severity.WARNING), [
    "subnet depends on gateway, but no resource named gateway is desired or observed (the resources are subnet, vpc)",
  ]);
  // Desired but not created yet: the usual wait, no hint.
  const first = run(steps.slice(0, 1).concat(dependencies({ subnet: { dependsOn: ["vpc"] } })), {
    desired: { vpc: { kind: "VPC" }, subnet: {} },
  });
  assert.ok(messages(first, Severity.NORMAL).includes("subnet: waiting for vpc to be ready; not creating it yet"));
  assert.equal(messages(first, Severity.WARNING), [], "no Warning for a dependency that is desired");
});

D("closest: the name a typo most likely meant, within a third of its length", () => {
  const names = ["bucket-logs", "bucket-assets", "vpc", "subnet-a", "subnet-b"];
  const cases: [string, string | undefined][] = [
    ["bucket-log", "bucket-logs"],
    ["bucket-asets", "bucket-assets"],
    ["vcp", "vpc"],
    ["subnet-c", "subnet-a"],
    ["gateway", undefined],
    ["vp", "vpc"],
    ["x", undefined],
    ["bucket", undefined],
  ];
  for (const [typo, want] of cases) assert.is(closest(typo, names), want, typo);
});

D("an existing dependent is never dropped when its dependency flickers", () => {
  const rsp = run([readiness(), dependencies({ subnet: { dependsOn: ["vpc"] } })], {
    observed: { vpc: vpcBooting, subnet: { kind: "Subnet", spec: { vpcId: "vpc-1" }, ...readyCondition("True") } },
    desired: { vpc: { kind: "VPC" }, subnet: { kind: "Subnet", spec: { vpcId: "vpc-1" } } },
  });
  assert.equal(rsp.desired!.resources["subnet"]!.resource, { kind: "Subnet", spec: { vpcId: "vpc-1" } });
  assert.is(rsp.desired!.resources["subnet"]!.ready, Ready.FALSE);
  assert.ok(messages(rsp).includes("subnet: waiting for vpc to be ready; keeping it as it is"));
});

D("waiting is transitive: c waits for b, which waits for a", () => {
  const rsp = run([dependencies({ b: { dependsOn: ["a"] }, c: { dependsOn: ["b"] } })], {
    observed: { a: { ...readyCondition("False") } },
    desired: { a: {}, b: {}, c: {} },
  });
  assert.equal(Object.keys(rsp.desired!.resources), ["a"]);
});

D("a cycle is a Fatal result printing it", () => {
  const rsp = run([dependencies({ a: { dependsOn: ["b"] }, b: { waitFor: ["a:status.x"] } })], { desired: { a: {}, b: {} } });
  assert.equal(messages(rsp, Severity.FATAL), ["step dependencies: dependency cycle: a -> b -> a"]);
  const self = run([dependencies({ a: { dependsOn: ["a"] } })], { desired: { a: {} } });
  assert.equal(messages(self, Severity.FATAL), ["step dependencies: dependency cycle: a -> a"]);
});

D("the TTL backs off the longer a resource waits", () => {
  const steps = [dependencies({ subnet: { dependsOn: ["vpc"] } })];
  const since = (ago: number) => ({
    kind: "XNet",
    status: { waiting: { subnet: { since: new Date(NOW.getTime() - ago * 1000).toISOString() } } },
  });
  const ttl = (ago: number) => response.getTTLSeconds(run(steps, { xr: since(ago), desired: { subnet: {} } }));
  assert.equal([ttl(0), ttl(30), ttl(100), ttl(1000)], [5, 15, 50, 60]);
  const rsp = run(steps, { xr: since(100), desired: { subnet: {} } });
  assert.is((rsp.desired!.composite!.resource!["status"] as any).waiting.subnet.since, new Date(NOW.getTime() - 100_000).toISOString());
});

D("a resource named __proto__ is recorded as waiting, and keeps when it began", () => {
  // Any string may name a composed resource. protobuf-es's fromJson cannot carry this one as a
  // map key, so the request is made by hand and crosses the wire codec.
  const call = (recorded: string | undefined) => {
    const waiting: JsonObject = {};
    if (recorded) setOwn(waiting, "__proto__", { for: ["vpc to be ready"], since: recorded });
    const req = create(RunFunctionRequestSchema, {
      observed: { composite: { resource: { kind: "XNet", status: { waiting } } } },
      desired: {},
    });
    setOwn(req.desired!.resources, "__proto__", create(ResourceSchema, { resource: { kind: "Subnet" } }));
    req.desired!.resources["vpc"] = create(ResourceSchema, { resource: { kind: "VPC" } });
    const rsp = runSteps([dependencies({ ["__proto__"]: { dependsOn: ["vpc"] } })], decodeRequest(encodeRequest(req)), NOW);
    return { rsp, waiting: (rsp.desired!.composite!.resource!["status"] as JsonObject)["waiting"] as JsonObject };
  };
  const first = call(undefined);
  assert.ok(Object.hasOwn(first.waiting, "__proto__"), JSON.stringify(first.waiting));
  assert.equal(first.waiting["__proto__"], { for: ["vpc to be ready"], since: NOW.toISOString() });
  assert.equal(Object.keys(first.rsp.desired!.resources), ["vpc"]);
  assert.is(response.getTTLSeconds(first.rsp), 5);
  const began = new Date(NOW.getTime() - 100_000).toISOString();
  const later = call(began);
  assert.equal(later.waiting["__proto__"], { for: ["vpc to be ready"], since: began });
  assert.is(response.getTTLSeconds(later.rsp), 50);
});

D("bad configuration is refused naming where", () => {
  assert.throws(
    () => dependencies({ subnet: { waitFor: ["vpc"] } }),
    /dependencies\.subnet\.waitFor\[0\]: "vpc" is not a resource's name then a field path \(e\.g\. vpc\.status\.atProvider\.id, or xr\.status/,
  );
  for (const bad of ["vpc:", "vpc.", ".status.id", ":status.id", "[0].x"])
    assert.throws(() => dependencies({ subnet: { waitFor: [bad] } }), /is not a resource's name then a field path/, bad);
  assert.throws(() => dependencies({ subnet: { waitFor: ["vpc:status..id"] } }), /dependencies\.subnet\.waitFor\[0\]: field path/);
  assert.throws(() => dependencies({ subnet: { waitFor: ["vpc.status..id"] } }), /dependencies\.subnet\.waitFor\[0\]: field path/);
  assert.throws(() => dependencies({ subnet: { dependsOn: [""] } }), /dependencies\.subnet\.dependsOn\[0\] must be a resource name/);
});

D.run();
