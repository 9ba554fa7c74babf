import { toJson } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { Ready, RunFunctionResponseSchema, Severity, Status, Target } from "../../src/gen/fn/v1/run_function_pb.js";
import { EncodingError, UsageError } from "../../src/sdk/errors.js";
import * as response from "../../src/sdk/response.js";
import { request as req } from "../support/requests.js";

const To = suite("response.to");

To("copies desired and context deeply, echoes the tag, sets a 60 s TTL", () => {
  const r = req({
    desired: {
      composite: { resource: { status: { a: { b: 1 } } } },
      resources: { db: { resource: { spec: { x: [1] } }, ready: "READY_TRUE" } },
    },
    context: { k: { nested: true } },
  });
  const rsp = response.to(r);
  assert.is(rsp.meta?.tag, "tag-1");
  assert.is(response.getTTLSeconds(rsp), 60);
  assert.equal(rsp.desired?.resources["db"]?.resource, { spec: { x: [1] } });
  assert.is(rsp.desired?.resources["db"]?.ready, Ready.TRUE);
  assert.equal(rsp.context, { k: { nested: true } });

  // Mutating the response must not reach the request: it is a copy.
  (rsp.desired!.resources["db"]!.resource!["spec"] as { x: number[] }).x.push(2);
  (rsp.context!["k"] as Record<string, unknown>)["nested"] = false;
  (rsp.desired!.composite!.resource!["status"] as Record<string, unknown>)["a"] = 0;
  assert.equal(r.desired?.resources["db"]?.resource, { spec: { x: [1] } });
  assert.equal(r.context, { k: { nested: true } });
  assert.equal(r.desired?.composite?.resource, { status: { a: { b: 1 } } });
});

To("a request without desired state or context gives an empty desired state and no context", () => {
  const rsp = response.to(req({ meta: { tag: "" } }), { ttlSeconds: 1.5 });
  assert.equal(rsp.desired?.resources, {});
  assert.is(rsp.context, undefined);
  assert.is(response.getTTLSeconds(rsp), 1.5);
  assert.is(rsp.meta?.ttl?.nanos, 500_000_000);
});

To("rejects a nonsense TTL", () => {
  assert.throws(() => response.to(req(), { ttlSeconds: -1 }), /TTL must be a finite, non-negative/);
  assert.throws(() => response.setTTL(response.to(req()), Number.NaN), /TTL must be/);
});

// ---

const Desired = suite("desired state writers");

Desired("set a composed resource, keep an earlier step's readiness unless told otherwise", () => {
  const rsp = response.to(req({ desired: { resources: { db: { resource: {}, ready: "READY_FALSE" } } } }));
  response.setDesiredComposedResource(rsp, "db", { kind: "DB" });
  assert.is(rsp.desired?.resources["db"]?.ready, Ready.FALSE);
  response.setDesiredComposedResource(rsp, "db", { kind: "DB" }, { ready: true });
  assert.is(rsp.desired?.resources["db"]?.ready, Ready.TRUE);
  response.setDesiredComposedResource(rsp, "new", { kind: "New" });
  assert.is(rsp.desired?.resources["new"]?.ready, Ready.UNSPECIFIED);
  assert.throws(() => response.setDesiredComposedResource(rsp, "", {}), /the name is empty/);
});

Desired("setReady needs an existing desired resource", () => {
  const rsp = response.to(req());
  assert.throws(() => response.setReady(rsp, "ghost", true), /"ghost": no such desired composed resource/);
  response.setDesiredComposedResource(rsp, "a", {});
  response.setReady(rsp, "a", false);
  assert.is(response.getDesiredComposedResource(rsp, "a")?.ready, Ready.FALSE);
});

Desired("composite status merges; composite readiness", () => {
  const rsp = response.to(req({ desired: { composite: { resource: { status: { kept: 1 } } } } }));
  response.setDesiredCompositeStatus(rsp, { added: { x: 2 } });
  assert.equal(rsp.desired?.composite?.resource, { status: { kept: 1, added: { x: 2 } } });
  response.setCompositeReady(rsp, true);
  assert.is(rsp.desired?.composite?.ready, Ready.TRUE);
});

Desired("context keys and output are copies", () => {
  const rsp = response.to(req());
  const v = { a: [1] };
  response.setContextKey(rsp, "k", v);
  response.setOutput(rsp, { o: v });
  v.a.push(2);
  assert.equal(rsp.context, { k: { a: [1] } });
  assert.equal(rsp.output, { o: { a: [1] } });
});

// ---

const Results = suite("results and conditions");

Results("results default to the XR, take a reason and a target", () => {
  const rsp = response.to(req());
  response.fatal(rsp, new Error("boom")).withReason("Broken");
  response.warning(rsp, "careful").targetCompositeAndClaim();
  response.normal(rsp, "fine");
  assert.equal(
    rsp.results.map((r) => [r.severity, r.message, r.reason, r.target]),
    [
      [Severity.FATAL, "boom", "Broken", Target.COMPOSITE],
      [Severity.WARNING, "careful", undefined, Target.COMPOSITE_AND_CLAIM],
      [Severity.NORMAL, "fine", undefined, Target.COMPOSITE],
    ],
  );
  assert.ok(response.hasFatal(rsp));
  assert.not.ok(response.hasFatal(response.to(req())));
});

Results("conditions: one per type; any type and reason Crossplane takes", () => {
  const rsp = response.to(req());
  response.conditionFalse(rsp, "DatabaseReady", "Creating").withMessage("waiting").targetCompositeAndClaim();
  response.conditionTrue(rsp, "DatabaseReady", "Available");
  response.conditionUnknown(rsp, "Other", "NotChecked");
  assert.equal(
    rsp.conditions.map((c) => [c.type, c.status, c.reason, c.message, c.target]),
    [
      ["DatabaseReady", Status.CONDITION_TRUE, "Available", undefined, Target.COMPOSITE],
      ["Other", Status.CONDITION_UNKNOWN, "NotChecked", undefined, Target.COMPOSITE],
    ],
  );
});

// function-sdk-go and Crossplane take these as they are (its types and reasons are plain strings).
const acceptedConditions: Record<string, [type: string, reason: string]> = {
  KebabType: ["database-ready", "Available"],
  DottedType: ["example.org/Replicated", "Synced"],
  EmptyReason: ["DatabaseReady", ""],
  LowercaseReason: ["DatabaseReady", "creating"],
  ReasonWithSpaces: ["DatabaseReady", "Waiting For VPC"],
  SystemTypeReady: ["Ready", "Deleting"],
};
for (const [name, [type, reason]] of Object.entries(acceptedConditions)) {
  Results(`condition accepted: ${name}`, () => {
    const rsp = response.to(req());
    response.conditionFalse(rsp, type, reason);
    const json = toJson(RunFunctionResponseSchema, rsp) as { conditions: Array<Record<string, unknown>> };
    assert.is(json.conditions[0]!["type"], type);
    assert.is(json.conditions[0]!["reason"] ?? "", reason);
  });
}

Results("condition refused at the call: an empty type, a reason that is not a string", () => {
  const rsp = response.to(req());
  assert.throws(
    () => response.conditionTrue(rsp, "", "Ok"),
    (e: unknown) => e instanceof UsageError && /the type is empty/.test(e.message),
  );
  assert.throws(
    () => response.conditionTrue(rsp, "T", 5 as never),
    (e: unknown) => e instanceof UsageError && /the reason is number, not a string/.test(e.message),
  );
  assert.equal(rsp.conditions, []);
});

Results("setReadyWhereUndecided decides only what no step decided", () => {
  const rsp = response.to(
    req({
      desired: {
        resources: { a: { resource: { kind: "A" }, ready: "READY_TRUE" }, b: { resource: { kind: "B" } }, c: { resource: { kind: "C" } } },
      },
    }),
  );
  response.setReady(rsp, "c", false);
  assert.equal(response.setReadyWhereUndecided(rsp, true), ["b"]);
  assert.equal(
    Object.entries(rsp.desired!.resources).map(([n, r]) => [n, r.ready]),
    [
      ["a", Ready.TRUE],
      ["b", Ready.TRUE],
      ["c", Ready.FALSE],
    ],
  );
  const rsp2 = response.to(req({ desired: { resources: { x: { resource: { kind: "X" } }, y: { resource: { kind: "Y" } } } } }));
  assert.equal(
    response.setReadyWhereUndecided(rsp2, (n, r) => n === "x" && r["kind"] === "X"),
    ["x", "y"],
  );
  assert.equal([rsp2.desired!.resources["x"]!.ready, rsp2.desired!.resources["y"]!.ready], [Ready.TRUE, Ready.FALSE]);
});

Results("setConnectionDetails merges strings and bytes into the desired XR's connection details", () => {
  const rsp = response.to(req());
  response.setConnectionDetails(rsp, { username: "admin", key: new Uint8Array([1, 2]) });
  response.setConnectionDetails(rsp, { endpoint: "db.example.org" });
  const json = toJson(RunFunctionResponseSchema, rsp) as any;
  assert.equal(json.desired.composite.connectionDetails, {
    username: Buffer.from("admin").toString("base64"),
    key: Buffer.from([1, 2]).toString("base64"),
    endpoint: Buffer.from("db.example.org").toString("base64"),
  });
  assert.throws(
    () => response.setConnectionDetails(rsp, { port: 5432 as never }),
    (e: unknown) => e instanceof EncodingError && /connection detail "port": it is number, not a string or bytes/.test(e.message),
  );
});

// A value the wire cannot carry fails at the call that hands it over, naming where (it failed at encoding before).
const unencodable: Record<string, { call: (rsp: ReturnType<typeof response.to>) => void; err: RegExp; path: string }> = {
  DateInResource: {
    call: (rsp) => response.setDesiredComposedResource(rsp, "db", { apiVersion: "v1", kind: "K", spec: { when: new Date(0) } } as never),
    err: /cannot set desired composed resource "db": the value at \.spec\.when is a Date, not a JSON object/,
    path: ".spec.when",
  },
  UndefinedInArray: {
    call: (rsp) => response.setDesiredCompositeStatus(rsp, { list: [1, undefined] } as never),
    err: /cannot set the desired XR's status: the value at \.list\[1\] is undefined/,
    path: ".list[1]",
  },
  NaNOutput: { call: (rsp) => response.setOutput(rsp, { n: NaN }), err: /cannot set the output: the value at \.n is NaN/, path: ".n" },
  FunctionInContext: {
    call: (rsp) => response.setContextKey(rsp, "k", { f: (() => 1) as never }),
    err: /cannot set context key "k": the value at \.f is a function/,
    path: ".f",
  },
  BigIntField: {
    call: (rsp) => response.setDesiredCompositeField(rsp, "status.n", 1n as never),
    err: /cannot set status\.n of the desired XR: the value is a bigint/,
    path: "",
  },
  Cycle: {
    call: (rsp) => {
      const o: Record<string, unknown> = {};
      o["self"] = o;
      response.setOutput(rsp, o);
    },
    err: /cannot set the output: the value at \.self is the same object as the value 1 level up, which holds it: a cycle/,
    path: ".self",
  },
};
for (const [name, tc] of Object.entries(unencodable)) {
  Desired(`refused at the call: ${name}`, () => {
    const rsp = response.to(req());
    const before = toJson(RunFunctionResponseSchema, rsp);
    let caught: unknown;
    try {
      tc.call(rsp);
    } catch (e) {
      caught = e;
    }
    assert.ok(caught instanceof EncodingError, String(caught));
    assert.match((caught as Error).message, tc.err);
    if (tc.path) assert.is((caught as EncodingError).path, tc.path);
    assert.ok((caught as Error).cause instanceof Error, "the encoder's error is the cause");
    assert.equal(toJson(RunFunctionResponseSchema, rsp), before, "nothing was set");
  });
}

Desired("a value nested past the recursion limit is checked by the loop, with its whole path", () => {
  const root: Record<string, unknown> = {};
  let at = root;
  for (let i = 0; i < 700; i++) at = at["n"] = {} as Record<string, unknown>;
  at["when"] = new Date(0);
  try {
    response.setOutput(response.to(req()), root);
    assert.unreachable();
  } catch (e) {
    assert.ok(e instanceof EncodingError, String(e));
    assert.is((e as EncodingError).path, `${".n".repeat(700)}.when`);
  }
});

Desired("values read lazily from the request are not visited, and stay unread", async () => {
  const { decodeRequest } = await import("../../src/wire/codec.js");
  const { toBinary } = await import("@bufbuild/protobuf");
  const { RunFunctionRequestSchema } = await import("../../src/gen/fn/v1/run_function_pb.js");
  const { isUnread } = await import("../../src/wire/struct/lazy.js");
  const big = { spec: { forProvider: { tags: Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, "v".repeat(10)])) } } };
  const r = decodeRequest(toBinary(RunFunctionRequestSchema, req({ observed: { resources: { db: { resource: big } } } })));
  const observed = r.observed!.resources["db"]!.resource!;
  const rsp = response.to(r);
  response.setDesiredComposedResource(rsp, "db", observed);
  assert.ok(isUnread(observed, "spec"), "checking did not decode the observed spec");
});

// ---

const Req = suite("requirements");

Req("resources by name or labels, deprecated field, schemas", () => {
  const rsp = response.to(req());
  response.requireResources(rsp, "cfg", { apiVersion: "v1", kind: "ConfigMap", matchName: "cfg", namespace: "ns" });
  response.requireResources(rsp, "nets", { apiVersion: "ec2/v1", kind: "VPC", matchLabels: { env: "prod" } });
  response.requireExtraResources(rsp, "old", { apiVersion: "v1", kind: "Secret", matchName: "s" });
  response.requireSchema(rsp, "xr", { apiVersion: "example.org/v1", kind: "XBucket" });
  const json = toJson(RunFunctionResponseSchema, rsp) as Record<string, unknown>;
  assert.equal(json["requirements"], {
    extraResources: { old: { apiVersion: "v1", kind: "Secret", matchName: "s" } },
    resources: {
      cfg: { apiVersion: "v1", kind: "ConfigMap", matchName: "cfg", namespace: "ns" },
      nets: { apiVersion: "ec2/v1", kind: "VPC", matchLabels: { labels: { env: "prod" } } },
    },
    schemas: { xr: { apiVersion: "example.org/v1", kind: "XBucket" } },
  });
});

Req("bad selectors are refused with the reason", () => {
  const rsp = response.to(req());
  assert.throws(
    () => response.requireResources(rsp, "x", { apiVersion: "v1", kind: "K", matchName: "a", matchLabels: { a: "b" } } as never),
    /"x": give exactly one of matchName, matchLabels and all/,
  );
  assert.throws(() => response.requireResources(rsp, "x", { apiVersion: "v1", kind: "K" } as never), /exactly one of/);
  assert.throws(
    () => response.requireResources(rsp, "x", { apiVersion: "", kind: "K", matchName: "a" }),
    /apiVersion and kind are required/,
  );
  assert.throws(() => response.requireSchema(rsp, "s", { apiVersion: "v1", kind: "" }), /apiVersion and kind are required/);
  assert.throws(
    () => response.requireResources(rsp, "x", { apiVersion: "v1", kind: "K", all: true, matchLabels: {} } as never),
    (e: unknown) => e instanceof UsageError && /exactly one of/.test(e.message),
  );
});

Req("all: every object of a kind, as an empty label selector", () => {
  const rsp = response.to(req());
  response.requireResources(rsp, "every", { apiVersion: "v1", kind: "ConfigMap", namespace: "ns", all: true });
  const json = toJson(RunFunctionResponseSchema, rsp) as any;
  assert.equal(json.requirements.resources.every, { apiVersion: "v1", kind: "ConfigMap", matchLabels: {}, namespace: "ns" });
});

To.run();
Desired.run();
Results.run();
Req.run();
