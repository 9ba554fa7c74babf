// The embedded API server validates, defaults and prunes writes as
// kube-apiserver does. Each expected message is kube-apiserver's, as its
// sources build it: kubernetes/apiextensions-apiserver 1aa2717a5
// (pkg/apiserver/validation, pkg/apiserver/schema/{pruning,defaulting,cel,
// listtype}, pkg/registry/customresource), kubernetes/kube-openapi d427ff9
// (pkg/validation/validate, errors) and kubernetes/apimachinery eed236ce
// (pkg/util/validation/field, pkg/api/validation, pkg/api/errors).
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ApiError } from "../../src/apiserver/errors.js";
import { CRD_KEY, Store, typeKeyOf } from "../../src/apiserver/store.js";
import { startDevCluster } from "../../src/apiserver/server.js";

const G = typeKeyOf("example.org", "gadgets");
const CM = typeKeyOf("", "configmaps");

const SCHEMA: JsonObject = {
  type: "object",
  properties: {
    spec: {
      type: "object",
      required: ["region"],
      "x-kubernetes-validations": [
        { rule: "self.replicas <= self.maxReplicas", message: "replicas must be at most maxReplicas" },
        {
          rule: "!has(self.zone) || self.zone.startsWith(self.region)",
          fieldPath: ".zone",
          reason: "FieldValueForbidden",
          message: "zone outside region",
        },
      ],
      properties: {
        region: { type: "string", "x-kubernetes-validations": [{ rule: "self == oldSelf", message: "region is immutable" }] },
        zone: { type: "string" },
        replicas: { type: "integer", minimum: 0, maximum: 10, default: 1 },
        maxReplicas: { type: "integer", default: 3 },
        ratio: { type: "number", exclusiveMinimum: true, minimum: 0, multipleOf: 0.5 },
        size: { type: "string", enum: ["small", "large"] },
        name: {
          type: "string",
          maxLength: 5,
          minLength: 2,
          pattern: "^[a-z]+$",
          "x-kubernetes-validations": [{ rule: "self != 'admin'", messageExpression: "'the name ' + self + ' is reserved'" }],
        },
        when: { type: "string", format: "date-time" },
        port: { "x-kubernetes-int-or-string": true },
        tags: { type: "array", maxItems: 3, items: { type: "string" }, "x-kubernetes-list-type": "set" },
        rules: {
          type: "array",
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["name"],
          items: { type: "object", required: ["name"], properties: { name: { type: "string" }, weight: { type: "integer", default: 1 } } },
        },
        extra: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
        note: { type: "string", nullable: true },
        mode: { type: "string", default: "fast" },
      },
    },
    status: { type: "object", properties: { phase: { type: "string", enum: ["Pending", "Ready"] }, count: { type: "integer" } } },
  },
};

const gadgets = (schema: JsonObject = SCHEMA): JsonObject => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "gadgets.example.org" },
  spec: {
    group: "example.org",
    names: { kind: "Gadget", plural: "gadgets" },
    scope: "Namespaced",
    versions: [{ name: "v1", served: true, storage: true, subresources: { status: {} }, schema: { openAPIV3Schema: schema } }],
  },
});

const gadget = (name: string, spec: JsonObject): JsonObject => ({ apiVersion: "example.org/v1", kind: "Gadget", metadata: { name }, spec });

function store(): Store {
  const s = new Store({});
  s.create(CRD_KEY, undefined, gadgets());
  return s;
}

/** decoded is a gadget as the server hands it to the store: defaulted and pruned by the schema. */
function decoded(s: Store, o: JsonObject): JsonObject {
  s.findType("example.org", "v1", "gadgets")!.schemas!["v1"]!.decode(o);
  return o;
}

/** refused runs a write that must be refused and gives the Status details kube-apiserver would send. */
function refused(write: () => unknown): { message: string; causes: Array<{ reason: string; field: string; message: string }> } {
  try {
    write();
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    assert.is(err.code, 422, err.message);
    assert.is(err.reason, "Invalid");
    const details = (err as ApiError & { details: { causes: Array<{ reason: string; field: string; message: string }> } }).details;
    return { message: err.message, causes: details.causes };
  }
  assert.unreachable("the write was accepted");
  throw new Error("unreachable");
}

const cause = (reason: string, field: string, message: string) => ({ reason, field, message });

const V = suite("schema validation (kube-openapi, apiextensions-apiserver)");

// Table: one bad field each, with the cause kube-apiserver reports for it.
const TABLE: Array<[string, JsonObject, ReturnType<typeof cause>]> = [
  [
    "type",
    { region: "eu", replicas: "three" },
    cause("FieldValueTypeInvalid", "spec.replicas", 'Invalid value: "string": spec.replicas in body must be of type integer: "string"'),
  ],
  ["required", { replicas: 1 }, cause("FieldValueRequired", "spec.region", "Required value")],
  [
    "enum",
    { region: "eu", size: "huge" },
    cause("FieldValueNotSupported", "spec.size", 'Unsupported value: "huge": supported values: "small", "large"'),
  ],
  [
    "maximum",
    { region: "eu", replicas: 11, maxReplicas: 20 },
    cause("FieldValueInvalid", "spec.replicas", "Invalid value: 11: spec.replicas in body should be less than or equal to 10"),
  ],
  [
    "minimum",
    { region: "eu", replicas: -1 },
    cause("FieldValueInvalid", "spec.replicas", "Invalid value: -1: spec.replicas in body should be greater than or equal to 0"),
  ],
  [
    "exclusiveMinimum",
    { region: "eu", ratio: 0 },
    cause("FieldValueInvalid", "spec.ratio", "Invalid value: 0: spec.ratio in body should be greater than 0"),
  ],
  [
    "multipleOf",
    { region: "eu", ratio: 0.7 },
    cause("FieldValueInvalid", "spec.ratio", "Invalid value: 0.7: spec.ratio in body should be a multiple of 0.5"),
  ],
  ["maxLength", { region: "eu", name: "abcdef" }, cause("FieldValueTooLong", "spec.name", "Too long: may not be more than 5 bytes")],
  [
    "minLength",
    { region: "eu", name: "a" },
    cause("FieldValueInvalid", "spec.name", 'Invalid value: "a": spec.name in body should be at least 2 chars long'),
  ],
  [
    "pattern",
    { region: "eu", name: "Ab" },
    cause("FieldValueInvalid", "spec.name", "Invalid value: \"Ab\": spec.name in body should match '^[a-z]+$'"),
  ],
  [
    "format",
    { region: "eu", when: "yesterday" },
    cause("FieldValueTypeInvalid", "spec.when", 'Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday"'),
  ],
  [
    "int-or-string",
    { region: "eu", port: true },
    cause("FieldValueTypeInvalid", "spec.port", 'Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"'),
  ],
  [
    "maxItems",
    { region: "eu", tags: ["a", "b", "c", "d"] },
    cause("FieldValueTooMany", "spec.tags", "Too many: 4: must have at most 3 items"),
  ],
  ["list-type set", { region: "eu", tags: ["a", "a"] }, cause("FieldValueDuplicate", "spec.tags[1]", 'Duplicate value: "a"')],
  [
    "list-type map",
    { region: "eu", rules: [{ name: "x" }, { name: "x", weight: 2 }] },
    cause("FieldValueDuplicate", "spec.rules[1]", 'Duplicate value: {"name":"x"}'),
  ],
  ["required in an item", { region: "eu", rules: [{ weight: 2 }] }, cause("FieldValueRequired", "spec.rules[0].name", "Required value")],
  [
    "null in a list",
    { region: "eu", tags: [null] },
    cause("FieldValueTypeInvalid", "spec.tags[0]", 'Invalid value: "null": spec.tags[0] in body must be of type string: "null"'),
  ],
  [
    "CEL rule on an object",
    { region: "eu", replicas: 5, maxReplicas: 4 },
    cause("FieldValueInvalid", "spec", "Invalid value: replicas must be at most maxReplicas"),
  ],
  ["CEL fieldPath and reason", { region: "eu", zone: "us-1" }, cause("FieldValueForbidden", "spec.zone", "Forbidden: zone outside region")],
  [
    "CEL messageExpression",
    { region: "eu", name: "admin" },
    cause("FieldValueInvalid", "spec.name", 'Invalid value: "admin": the name admin is reserved'),
  ],
];

// These types stop the CEL rules from running (strategy.go, hasBlockingErr).
const BLOCKING = ["FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong", "FieldValueTooMany", "FieldValueTypeInvalid"];
const NOT_CHECKED = cause(
  "FieldValueInvalid",
  "<nil>",
  "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
);

for (const [name, spec, want] of TABLE)
  V(`refused: ${name}`, () => {
    const s = store();
    const got = refused(() => s.create(G, "default", decoded(s, gadget("a", spec))));
    const all = BLOCKING.includes(want.reason) ? [want, NOT_CHECKED] : [want];
    assert.equal(got.causes, all);
    const text = all.map((c) => `${c.field}: ${c.message}`);
    assert.is(got.message, `Gadget.example.org "a" is invalid: ${text.length === 1 ? text[0] : `[${text.join(", ")}]`}`);
  });

V("several errors: every cause, and the message lists them in brackets", () => {
  const got = refused(() => store().create(G, "default", gadget("a", { ratio: 0.7, replicas: 11, maxReplicas: 20 })));
  assert.equal(got.causes.map((c) => c.field).sort(), ["<nil>", "spec.ratio", "spec.region", "spec.replicas"]);
  assert.match(got.message, /^Gadget\.example\.org "a" is invalid: \[spec\.\w+: .*, spec\.\w+: .*, spec\.\w+: .*, <nil>: .*\]$/);
});

V("a type error keeps the CEL rules from running, and says so (hasBlockingErr)", () => {
  const got = refused(() => store().create(G, "default", gadget("a", { region: "eu", replicas: "x", maxReplicas: 1 })));
  assert.equal(got.causes[1], {
    reason: "FieldValueInvalid",
    field: "<nil>",
    message:
      "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
  });
  assert.is(got.causes.length, 2);
});

V("a valid object is stored with its defaults, a nullable null kept, and preserved fields kept", () => {
  const s = store();
  const o = s.create(
    G,
    "default",
    decoded(s, gadget("a", { region: "eu", note: null, extra: { any: { thing: 1 } }, rules: [{ name: "x" }] })),
  );
  assert.equal(o["spec"], {
    region: "eu",
    note: null,
    extra: { any: { thing: 1 } },
    rules: [{ name: "x", weight: 1 }],
    replicas: 1,
    maxReplicas: 3,
    mode: "fast",
  });
});

V("transition rules: skipped on create, checked against the old value on update", () => {
  const s = store();
  const a = s.create(G, "default", decoded(s, gadget("a", { region: "eu" })));
  const got = refused(() => s.update(G, "default", "a", { ...a, spec: { ...(a["spec"] as JsonObject), region: "us" } }));
  assert.equal(got.causes, [cause("FieldValueInvalid", "spec.region", 'Invalid value: "us": region is immutable')]);
  s.update(G, "default", "a", { ...a, spec: { ...(a["spec"] as JsonObject), replicas: 2 } });
});

V("ratcheting: an update keeps a value that is invalid under a newer schema if it does not change it", () => {
  const loose = structuredClone(SCHEMA);
  const props = ((loose["properties"] as JsonObject)["spec"] as JsonObject)["properties"] as JsonObject;
  delete (props["name"] as JsonObject)["maxLength"];
  const s = new Store({});
  s.create(CRD_KEY, undefined, gadgets(loose));
  const a = s.create(G, "default", decoded(s, gadget("a", { region: "eu", name: "abcdefgh" })));
  const crd = s.get(CRD_KEY, undefined, "gadgets.example.org");
  s.update(CRD_KEY, undefined, "gadgets.example.org", { ...crd, spec: gadgets()["spec"]! });
  const b = s.update(G, "default", "a", { ...a, spec: { ...(a["spec"] as JsonObject), replicas: 2 } });
  assert.is((b["spec"] as JsonObject)["name"], "abcdefgh", "unchanged: kept");
  const got = refused(() => s.update(G, "default", "a", { ...b, spec: { ...(b["spec"] as JsonObject), name: "abcdefghi" } }));
  assert.equal(got.causes, [cause("FieldValueTooLong", "spec.name", "Too long: may not be more than 5 bytes"), NOT_CHECKED]);
});

V("a status write is validated against the status schema, under status.", () => {
  const s = store();
  const a = s.create(G, "default", decoded(s, gadget("a", { region: "eu" })));
  const got = refused(() => s.update(G, "default", "a", { ...a, status: { phase: "Done", count: "x" } }, { status: true }));
  assert.equal(got.causes, [
    cause("FieldValueNotSupported", "status.phase", 'Unsupported value: "Done": supported values: "Pending", "Ready"'),
    cause("FieldValueTypeInvalid", "status.count", 'Invalid value: "string": count in body must be of type integer: "string"'),
    NOT_CHECKED,
  ]);
  assert.equal(s.update(G, "default", "a", { ...a, status: { phase: "Ready" } }, { status: true })["status"], { phase: "Ready" });
});

V("a CRD whose rule does not compile is refused, naming the rule", () => {
  const bad = structuredClone(SCHEMA);
  ((bad["properties"] as JsonObject)["spec"] as JsonObject)["x-kubernetes-validations"] = [{ rule: "self.replicas <=" }];
  const got = refused(() => new Store({}).create(CRD_KEY, undefined, gadgets(bad)));
  // One version: kube reports its schema under spec.validation (the differential tier's cel/parse case).
  assert.is(got.causes[0]!.field, "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule");
  assert.match(got.causes[0]!.message, /^Invalid value: \{"Rule":"self\.replicas \\u003c=",.*\}: compilation failed: /);
});

V("patterns and CEL's regex functions run on RE2: linear in the value, whatever the pattern (^(a+)+$ took 30 s of the event loop)", () => {
  const evil = structuredClone(SCHEMA);
  const spec = (evil["properties"] as JsonObject)["spec"] as JsonObject;
  const props = spec["properties"] as JsonObject;
  props["word"] = { type: "string", maxLength: 10_000, pattern: "^(a+)+$" };
  props["phrase"] = {
    type: "string",
    maxLength: 10_000,
    "x-kubernetes-validations": [
      { rule: "!self.matches('^(a+)+$')", message: "no runs of a" },
      { rule: "self.findAll('b+').size() <= 2 && self.find('c[0-9]') != 'c9'", message: "findAll and find" },
    ],
  };
  const s = new Store({});
  s.create(CRD_KEY, undefined, gadgets(evil));
  const long = `${"a".repeat(5_000)}!`;
  const started = performance.now();
  const got = refused(() => s.create(G, "default", decoded(s, gadget("g1", { region: "eu", word: long, phrase: "a".repeat(5_000) }))));
  const ms = performance.now() - started;
  assert.ok(ms < 2_000, `validated in ${Math.round(ms)} ms`);
  assert.equal(
    got.causes.map((c) => c.field),
    ["spec.word", "spec.phrase"],
  );
  assert.match(got.causes[0]!.message, /spec\.word in body should match '\^\(a\+\)\+\$'$/);
  assert.match(got.causes[1]!.message, /: no runs of a$/);
  // find and findAll as kube's regex library has them.
  const ok = s.create(G, "default", decoded(s, gadget("g2", { region: "eu", word: "aaa", phrase: "bb-b-c1-c9" })));
  assert.ok(ok);
  const many = refused(() => s.create(G, "default", decoded(s, gadget("g3", { region: "eu", phrase: "b b b" }))));
  assert.match(many.causes[0]!.message, /findAll and find/);
});

V("a pattern RE2 does not take is refused where the CRD is written, in Go regexp's words", () => {
  for (const [pattern, why] of [
    ["^(?=a)", "error parsing regexp: invalid or unsupported Perl syntax: `(?=`"],
    ["(a)\\1", "error parsing regexp: invalid escape sequence: `\\1`"],
    ["[", "error parsing regexp: missing closing ]: `[`"],
  ] as const) {
    const bad = structuredClone(SCHEMA);
    (((bad["properties"] as JsonObject)["spec"] as JsonObject)["properties"] as JsonObject)["name"] = { type: "string", pattern };
    const got = refused(() => new Store({}).create(CRD_KEY, undefined, gadgets(bad)));
    assert.equal(got.causes[0], {
      reason: "FieldValueInvalid",
      field: "spec.validation.openAPIV3Schema.properties[spec].properties[name].pattern",
      message: `Invalid value: ${JSON.stringify(pattern)}: must be a valid regular expression, but isn't: ${why}`,
    });
  }
});

V("decode: unknown fields are pruned and reported, defaults fill absent and disallowed-null fields", () => {
  const s = store();
  const t = s.findType("example.org", "v1", "gadgets")!;
  const o = gadget("a", { region: "eu", bogus: 1, mode: null, extra: { kept: true }, rules: [{ name: "x", junk: 2 }] });
  (o as JsonObject)["junkTop"] = "x";
  const unknown = t.schemas!["v1"]!.decode(o);
  assert.equal(unknown, ["junkTop", "spec.bogus", "spec.rules[0].junk"]);
  assert.equal(o["spec"], {
    region: "eu",
    mode: "fast",
    extra: { kept: true },
    rules: [{ name: "x", weight: 1 }],
    replicas: 1,
    maxReplicas: 3,
  });
});

// Found by the differential tier against kube-apiserver v1.36.3 (test/crossplane/differential/kubetables.ts:
// apiextensions-apiserver v0.36.3 test/integration/ratcheting_test.go and schema/cel/compilation_test.go).
V("ratcheting: a map list reordered but not changed keeps its old invalid length (kube's CachedDeepEqual correlates by keys)", () => {
  const list = (maxItems?: number): JsonObject => ({
    type: "array",
    ...(maxItems ? { maxItems } : {}),
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["name"],
    items: { type: "object", required: ["name"], properties: { name: { type: "string" }, v: { type: "string" } } },
  });
  const schema = (maxItems?: number) => ({
    type: "object",
    properties: { spec: { type: "object", properties: { field: list(maxItems) } } },
  });
  const s = new Store({});
  s.create(CRD_KEY, undefined, gadgets(schema()));
  const items = [{ name: "a" }, { name: "b" }, { name: "c" }];
  s.create(G, "default", decoded(s, gadget("g1", { field: items })));
  const crd = structuredClone(s.get(CRD_KEY, undefined, "gadgets.example.org")) as JsonObject;
  ((crd["spec"] as JsonObject)["versions"] as JsonObject[])[0]!["schema"] = { openAPIV3Schema: schema(2) };
  s.update(CRD_KEY, undefined, "gadgets.example.org", crd);
  const reordered = [items[2]!, items[0]!, items[1]!];
  assert.ok(s.update(G, "default", "g1", decoded(s, gadget("g1", { field: reordered }))));
  const changed = refused(() =>
    s.update(G, "default", "g1", decoded(s, gadget("g1", { field: [...reordered.slice(0, 2), { name: "b", v: "x" }] }))),
  );
  assert.equal(
    changed.causes.map((c) => c.field),
    ["spec.field"],
  );
});

V(
  "a write that changes nothing is still checked by a transition rule (not ratcheted), and a custom resource's generation counts any change outside metadata and status",
  () => {
    const s = new Store({});
    s.create(
      CRD_KEY,
      undefined,
      gadgets({
        type: "object",
        properties: {
          field: {
            type: "string",
            "x-kubernetes-validations": [{ rule: "!oldSelf.hasValue()", message: "oldSelf must be null", optionalOldSelf: true }],
          },
          other: { type: "string" },
          status: { type: "object", properties: { n: { type: "integer" } } },
        },
      }),
    );
    const obj = (field: string, other?: string): JsonObject => ({
      apiVersion: "example.org/v1",
      kind: "Gadget",
      metadata: { name: "g1" },
      field,
      ...(other ? { other } : {}),
    });
    s.create(G, "default", decoded(s, obj("value")));
    const same = refused(() => s.update(G, "default", "g1", decoded(s, obj("value"))));
    assert.match(same.message, /oldSelf must be null/);
    const s2 = new Store({});
    s2.create(CRD_KEY, undefined, gadgets({ type: "object", properties: { other: { type: "string" }, status: { type: "object" } } }));
    s2.create(G, "default", decoded(s2, { apiVersion: "example.org/v1", kind: "Gadget", metadata: { name: "g1" }, other: "a" }));
    const next = s2.update(
      G,
      "default",
      "g1",
      decoded(s2, { apiVersion: "example.org/v1", kind: "Gadget", metadata: { name: "g1" }, other: "b" }),
    );
    assert.is((next["metadata"] as JsonObject)["generation"], 2);
  },
);

V(
  "rules read a property by its escaped name (__namespace__, a__dash__b) and by a reserved word's bare name; a function no library has is refused",
  () => {
    const schema: JsonObject = {
      type: "object",
      properties: {
        spec: {
          type: "object",
          properties: { namespace: { type: "integer" }, "a-b": { type: "integer" } },
          "x-kubernetes-validations": [
            { rule: "self.__namespace__ == 1", message: "escaped" },
            { rule: "self.namespace == 1", message: "bare" },
            { rule: "self.a__dash__b == 2", message: "dashed" },
          ],
        },
      },
    };
    const s = new Store({});
    s.create(CRD_KEY, undefined, gadgets(schema));
    assert.ok(s.create(G, "default", decoded(s, gadget("g1", { namespace: 1, "a-b": 2 }))));
    const bad = refused(() => s.create(G, "default", decoded(s, gadget("g2", { namespace: 2, "a-b": 3 }))));
    assert.equal(
      bad.causes.map((c) => c.message.replace(/^.*: /, "")),
      ["escaped", "bare", "dashed"],
    );
    const unknown = structuredClone(schema);
    (unknown["properties"] as JsonObject)["spec"] = {
      type: "string",
      "x-kubernetes-validations": [{ rule: "fakeFunction('abc') == 'ABC'" }],
    };
    const refusedCRD = refused(() => new Store({}).create(CRD_KEY, undefined, gadgets(unknown)));
    assert.match(refusedCRD.message, /undeclared reference to 'fakeFunction' \(in container ''\)/);
    const objectVsInt = structuredClone(schema);
    ((objectVsInt["properties"] as JsonObject)["spec"] as JsonObject)["x-kubernetes-validations"] = [{ rule: "self == 10" }];
    assert.match(
      refused(() => new Store({}).create(CRD_KEY, undefined, gadgets(objectVsInt))).message,
      /found no matching overload for '_==_'/,
    );
  },
);

V.run();

const M = suite("metadata, ConfigMap and Secret checks (apimachinery ValidateObjectMeta, ValidateConfigMap, ValidateSecret)");

M("labels, annotations, finalizers and owner references are checked on every kind", () => {
  const s = store();
  const cm = (metadata: JsonObject) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", ...metadata } });
  let got = refused(() => s.create(CM, "default", cm({ labels: { "bad key": "ok", ok: "bad value!" } })));
  assert.equal(got.causes, [
    cause(
      "FieldValueInvalid",
      "metadata.labels",
      "Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    ),
    cause(
      "FieldValueInvalid",
      "metadata.labels",
      "Invalid value: \"bad value!\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    ),
  ]);
  assert.match(got.message, /^ConfigMap "c" is invalid: \[metadata\.labels: /);
  got = refused(() => s.create(CM, "default", cm({ annotations: { big: "x".repeat(256 * 1024) } })));
  assert.equal(got.causes, [cause("FieldValueTooLong", "metadata.annotations", "Too long: may not be more than 262144 bytes")]);
  got = refused(() => s.create(CM, "default", cm({ finalizers: ["a/b/c"] })));
  assert.is(got.causes[0]!.field, "metadata.finalizers");
  const owner = (name: string) => ({ apiVersion: "v1", kind: "ConfigMap", name, uid: `u-${name}`, controller: true });
  got = refused(() =>
    s.create(CM, "default", cm({ ownerReferences: [owner("x"), owner("y"), { apiVersion: "v1", kind: "ConfigMap", name: "z" }] })),
  );
  assert.equal(
    got.causes.map((c) => [c.field, c.message.split(": ").slice(-1)[0]]),
    [
      [
        "metadata.ownerReferences",
        'Only one reference can have Controller set to true. Found "true" in references for ConfigMap/x and ConfigMap/y',
      ],
      ["metadata.ownerReferences[2].uid", "must not be empty"],
    ],
  );
});

M("ConfigMap and Secret data: keys checked, a Secret's stringData folded into data", () => {
  const s = store();
  const got = refused(() =>
    s.create(CM, "default", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" }, data: { "a b": "x" } }),
  );
  assert.equal(got.causes[0]!.field, "data");
  assert.match(got.causes[0]!.message, /^Invalid value: "a b": a valid config key must consist of alphanumeric characters/);
});

M.run();

const H = suite("validation over HTTP");

H(
  "a 422 is kube-apiserver's Status; unknown fields warn, or fail with fieldValidation=Strict; data that does not decode is a 400",
  async () => {
    const c = await startDevCluster();
    try {
      const call = async (method: string, path: string, body?: unknown, type = "application/json") => {
        const r = await fetch(`${c.url}${path}`, {
          method,
          headers: { "content-type": type },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        return { code: r.status, body: (await r.json()) as any, warning: r.headers.get("warning") };
      };
      assert.is((await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", gadgets())).code, 201);
      const bad = await call("POST", "/apis/example.org/v1/namespaces/default/gadgets", gadget("a", { region: "eu", ratio: 0.7 }));
      assert.equal(bad, {
        code: 422,
        warning: null,
        body: {
          kind: "Status",
          apiVersion: "v1",
          metadata: {},
          status: "Failure",
          message: 'Gadget.example.org "a" is invalid: spec.ratio: Invalid value: 0.7: spec.ratio in body should be a multiple of 0.5',
          reason: "Invalid",
          details: {
            name: "a",
            group: "example.org",
            kind: "Gadget",
            causes: [
              {
                reason: "FieldValueInvalid",
                message: "Invalid value: 0.7: spec.ratio in body should be a multiple of 0.5",
                field: "spec.ratio",
              },
            ],
          },
          code: 422,
        },
      });
      const warned = await call("POST", "/apis/example.org/v1/namespaces/default/gadgets", gadget("a", { region: "eu", bogus: 1 }));
      assert.is(warned.code, 201);
      assert.is(warned.warning, '299 - "unknown field \\"spec.bogus\\""');
      assert.is(warned.body.spec.bogus, undefined);
      const strict = await call(
        "POST",
        "/apis/example.org/v1/namespaces/default/gadgets?fieldValidation=Strict",
        gadget("b", { region: "eu", bogus: 1 }),
      );
      assert.equal(
        [strict.code, strict.body.message],
        [400, 'Gadget in version "v1" cannot be handled as a Gadget: strict decoding error: unknown field "spec.bogus"'],
      );
      // Server-side apply converts the applied configuration with the schema first: 500, reason "", structured-merge-diff's words.
      const ssa = await call(
        "PATCH",
        "/apis/example.org/v1/namespaces/default/gadgets/c?fieldManager=t",
        { ...gadget("c", { region: "eu", bogus: 1 }), metadata: { name: "c", namespace: "default" } },
        "application/apply-patch+yaml",
      );
      assert.equal(
        [ssa.code, ssa.body.reason, ssa.body.message],
        [
          500,
          "",
          "failed to create typed patch object (default/c; example.org/v1, Kind=Gadget): .spec.bogus: field not declared in schema",
        ],
      );
      const ssaOk = await call(
        "PATCH",
        "/apis/example.org/v1/namespaces/default/gadgets/c?fieldManager=t",
        gadget("c", { region: "eu", extra: { free: { form: 1 } } }),
        "application/apply-patch+yaml",
      );
      assert.equal([ssaOk.code, ssaOk.body.spec.extra, ssaOk.body.spec.mode], [201, { free: { form: 1 } }, "fast"]);
      const cm = await call("POST", "/api/v1/namespaces/default/configmaps", {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "c" },
        data: { n: 1 },
      });
      assert.equal(
        [cm.code, cm.body.message],
        [
          400,
          'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string',
        ],
      );
      const secret = await call("POST", "/api/v1/namespaces/default/secrets", {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "s" },
        stringData: { password: "hunter2" },
      });
      assert.equal(
        [secret.code, secret.body.data, secret.body.stringData],
        [201, { password: Buffer.from("hunter2").toString("base64") }, undefined],
      );
      const b64 = await call("POST", "/api/v1/namespaces/default/secrets", {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "t" },
        data: { k: "not base64!" },
      });
      assert.equal(
        [b64.code, b64.body.message],
        [400, 'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3'],
      );
    } finally {
      await c.stop();
    }
  },
);

H.run();
