import { suite } from "uvu";
import * as assert from "uvu/assert";
import { Capability } from "../../src/gen/fn/v1/run_function_pb.js";
import { InputError, XfnError } from "../../src/sdk/errors.js";
import * as request from "../../src/sdk/request.js";
import { request as req, xr } from "../support/requests.js";

const Read = suite("request readers");

Read("observed and desired composite and composed resources", () => {
  const r = req({
    observed: {
      composite: { resource: xr({ size: 1 }) },
      resources: { bucket: { resource: { kind: "Bucket" }, connectionDetails: { password: "c2VjcmV0" } } },
    },
    desired: { composite: { resource: { status: { a: 1 } } }, resources: { db: { resource: { kind: "DB" }, ready: "READY_TRUE" } } },
  });
  assert.equal(request.getObservedCompositeResource(r)?.["spec"], { size: 1 });
  assert.equal(Object.keys(request.getObservedComposedResources(r)), ["bucket"]);
  assert.equal(new TextDecoder().decode(request.getObservedComposedResources(r)["bucket"]!.connectionDetails["password"]), "secret");
  assert.equal(request.getDesiredComposite(r)?.resource, { status: { a: 1 } });
  assert.is(request.getDesiredComposedResources(r)["db"]!.ready, 1);
  assert.is(request.getTag(r), "tag-1");
});

Read("an empty request reads as empty, never throws", () => {
  const r = req({ meta: {}, observed: {} });
  assert.is(request.getObservedCompositeResource(r), undefined);
  assert.equal(request.getObservedComposedResources(r), {});
  assert.equal(request.getDesiredComposedResources(r), {});
  assert.equal(request.getInput(r), {});
  assert.is(request.getTag(r), "");
});

const inputCases: Record<string, { input?: object; want?: unknown; err?: RegExp }> = {
  Valid: { input: { apiVersion: "x/v1", kind: "In", count: 2 }, want: { count: 2 } },
  MissingCount: { input: { apiVersion: "x/v1", kind: "In" }, err: /cannot parse function input: count must be a number/ },
  NoInputAtAll: { err: /cannot parse function input: count must be a number/ },
};
const parseIn = (i: Record<string, unknown>) => {
  if (typeof i["count"] !== "number") throw new Error("count must be a number");
  return { count: i["count"] };
};
for (const [name, tc] of Object.entries(inputCases)) {
  Read(`typed input: ${name}`, () => {
    const r = req(tc.input ? { input: tc.input as never } : {});
    if (tc.err) assert.throws(() => request.getInput(r, parseIn), tc.err);
    else assert.equal(request.getInput(r, parseIn), tc.want);
  });
}

Read("context keys, including the environment", () => {
  const r = req({ context: { [request.ENVIRONMENT_KEY]: { region: "eu" }, n: 1 } });
  assert.equal(request.getContextKey(r, request.ENVIRONMENT_KEY), { region: "eu" });
  assert.is(request.getContextKey(r, "n"), 1);
  assert.is(request.getContextKey(r, "absent"), undefined);
  assert.is(request.getContextKey(r, "toString"), undefined);
});

Read("getEnvironment: the environment object, or undefined", () => {
  assert.equal(request.getEnvironment(req({ context: { [request.ENVIRONMENT_KEY]: { region: "eu", tier: { a: 1 } } } })), {
    region: "eu",
    tier: { a: 1 },
  });
  assert.is(request.getEnvironment(req()), undefined);
  assert.is(request.getEnvironment(req({ context: { [request.ENVIRONMENT_KEY]: "not an object" } })), undefined);
});

Read("getAllRequiredResources: every answered requirement, new field first", () => {
  const r = req({
    requiredResources: { a: { items: [{ resource: { kind: "A" } }] }, empty: {} },
    extraResources: { a: { items: [{ resource: { kind: "Old" } }] }, b: { items: [{ resource: { kind: "B" } }] } },
  } as never);
  assert.equal(request.getAllRequiredResources(r), { a: [{ kind: "A" }], empty: [], b: [{ kind: "B" }] });
  assert.equal(request.getAllRequiredResources(req()), {});
});

Read("a parser's error is an InputError with the parser's error as cause", () => {
  const cause = new TypeError("size must be a number");
  try {
    request.getInput(req({ input: { size: "x" } }), () => {
      throw cause;
    });
    assert.unreachable();
  } catch (e) {
    assert.ok(e instanceof InputError && e instanceof XfnError);
    assert.is((e as Error).cause, cause);
    assert.match((e as Error).message, /cannot parse function input: size must be a number/);
  }
});

Read("getWatchedResource: what a WatchOperation hands its Operation, or undefined", () => {
  const bucket = { apiVersion: "s3/v1", kind: "Bucket", metadata: { name: "b" } };
  assert.equal(
    request.getWatchedResource(req({ requiredResources: { [request.WATCHED_RESOURCE]: { items: [{ resource: bucket }] } } } as never)),
    bucket,
  );
  assert.is(request.WATCHED_RESOURCE, "ops.crossplane.io/watched-resource");
  assert.is(request.getWatchedResource(req()), undefined);
  assert.is(request.getWatchedResource(req({ requiredResources: { [request.WATCHED_RESOURCE]: {} } } as never)), undefined);
});

const requiredCases: Record<string, { json: object; want: unknown }> = {
  NotAnswered: { json: {}, want: undefined },
  AnsweredEmpty: { json: { requiredResources: { cfg: {} } }, want: [] },
  Answered: { json: { requiredResources: { cfg: { items: [{ resource: { kind: "ConfigMap" } }] } } }, want: [{ kind: "ConfigMap" }] },
  DeprecatedField: { json: { extraResources: { cfg: { items: [{ resource: { kind: "Old" } }] } } }, want: [{ kind: "Old" }] },
  NewFieldWins: {
    json: {
      requiredResources: { cfg: { items: [{ resource: { kind: "New" } }] } },
      extraResources: { cfg: { items: [{ resource: { kind: "Old" } }] } },
    },
    want: [{ kind: "New" }],
  },
};
for (const [name, tc] of Object.entries(requiredCases)) {
  Read(`required resources: ${name}`, () => {
    assert.equal(request.getRequiredResources(req(tc.json as never), "cfg"), tc.want);
  });
}

Read("required schemas: unanswered, not found, found", () => {
  assert.is(request.getRequiredSchema(req(), "s"), undefined);
  assert.is(request.getRequiredSchema(req({ requiredSchemas: { s: {} } }), "s"), null);
  assert.equal(request.getRequiredSchema(req({ requiredSchemas: { s: { openapiV3: { type: "object" } } } }), "s"), { type: "object" });
});

Read("credentials", () => {
  const r = req({ credentials: { aws: { credentialData: { data: { key: "c2VjcmV0" } } } } });
  assert.is(new TextDecoder().decode(request.getCredentials(r, "aws")!["key"]), "secret");
  assert.is(request.getCredentials(r, "gcp"), undefined);
});

const capCases: Record<string, { caps: string[]; advertises: boolean; conditions: boolean }> = {
  OldCrossplane: { caps: [], advertises: false, conditions: false },
  NewWithConditions: { caps: ["CAPABILITY_CAPABILITIES", "CAPABILITY_CONDITIONS"], advertises: true, conditions: true },
  NewWithout: { caps: ["CAPABILITY_CAPABILITIES"], advertises: true, conditions: false },
};
for (const [name, tc] of Object.entries(capCases)) {
  Read(`capabilities: ${name}`, () => {
    const r = req({ meta: { tag: "t", capabilities: tc.caps } });
    assert.is(request.advertisesCapabilities(r), tc.advertises);
    assert.is(request.hasCapability(r, Capability.CONDITIONS), tc.conditions);
  });
}

Read("getObservedComposedResource returns one observed object by name, typed as asked, or undefined", () => {
  interface Bucket {
    apiVersion: "s3.aws.upbound.io/v1beta1";
    kind: "Bucket";
    spec?: { forProvider?: { region?: string } };
  }
  const r = req({
    observed: {
      resources: { b: { resource: { apiVersion: "s3.aws.upbound.io/v1beta1", kind: "Bucket", spec: { forProvider: { region: "eu" } } } } },
    },
  });
  const b = request.getObservedComposedResource<Bucket>(r, "b");
  assert.is(b?.spec?.forProvider?.region, "eu");
  assert.is(request.getObservedComposedResource(r, "missing"), undefined);
  assert.is(request.getObservedComposedResource(r, "__proto__"), undefined, "only own entries");
  assert.is(request.getObservedComposedResource(req({ observed: {} }), "b"), undefined);
});

Read.run();
