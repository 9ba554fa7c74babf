// CEL cost estimated when a CRD is written, as kube-apiserver estimates it.
// The table is kubernetes' own: staging/src/k8s.io/apiextensions-apiserver/
// pkg/apiserver/schema/cel/compilation_test.go TestCostEstimation (as stored
// at 0344d507), each case once without the schema's bounds (maxItems,
// maxProperties, maxLength: "calc") and once with them ("set"), expecting the
// same costs kube computes. Then CRDs refused (and not) for cost, over the
// store and over HTTP with kube's messages.
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { costErrors, ruleCost, RULE_COST_LIMIT } from "../../src/schema/celcost.js";
import { escape } from "../../src/schema/celsize.js";
import { CRD_KEY, Store } from "../../src/apiserver/store.js";
import { crdErrors } from "../../src/apiserver/crd.js";
import { widgetCRD } from "../support/cluster.js";

const C = suite("dev-cluster: CEL cost estimated when a CRD is written");

type Gen = (max?: number) => JsonObject;
const bound = (key: string, max?: number): JsonObject => (max === undefined ? {} : { [key]: max });
const ruled = (s: JsonObject, rule: string): JsonObject => ({ ...s, "x-kubernetes-validations": [{ rule }] });
/** scalar is parseRuleType: a type name, a string format, or int-or-string. */
const scalar = (ty: string): JsonObject =>
  ["duration", "date", "date-time"].includes(ty)
    ? { type: "string", format: ty }
    : ty === "int-or-string"
      ? { "x-kubernetes-int-or-string": true }
      : { type: ty };
const array =
  (ty: string, rule: string): Gen =>
  (max) =>
    ruled({ type: "array", items: scalar(ty), ...bound("maxItems", max) }, rule);
const arrayOfArrays =
  (ty: string, rule: string): Gen =>
  (max) =>
    ruled({ type: "array", items: { type: "array", items: { type: ty } }, ...bound("maxItems", max) }, rule);
const object = (): JsonObject => ({
  type: "object",
  properties: { required: { type: "string" }, optional: { type: "string" } },
  required: ["required"],
});
const objectArray =
  (rule: string): Gen =>
  (max) =>
    ruled({ type: "array", items: object(), ...bound("maxItems", max) }, rule);
const mapArray =
  (ty: string, rule: string): Gen =>
  (max) =>
    ruled({ type: "array", items: { type: "object", additionalProperties: { type: ty } }, ...bound("maxItems", max) }, rule);
const mapOf =
  (item: JsonObject, rule: string): Gen =>
  (max) =>
    ruled({ type: "object", additionalProperties: item, ...bound("maxProperties", max) }, rule);
const map = (ty: string, rule: string) => mapOf(scalar(ty), rule);
const string =
  (rule: string): Gen =>
  (max) =>
    ruled({ type: "string", ...bound("maxLength", max) }, rule);
const bytes =
  (rule: string): Gen =>
  (max) =>
    ruled({ type: "string", format: "byte", ...bound("maxLength", max) }, rule);
const enumOf =
  (rule: string, ...values: string[]): Gen =>
  (max) =>
    ruled({ type: "string", enum: values, ...bound("maxLength", max) }, rule);
const nestedSpec =
  (rule: string): Gen =>
  (max) =>
    ruled({ type: "object", additionalProperties: { type: "string", ...bound("maxLength", max) }, ...bound("maxProperties", max) }, rule);
const nestedRoot =
  (all: boolean, rule: string): Gen =>
  (max) =>
    ruled(
      {
        type: "array",
        items: {
          type: "object",
          additionalProperties: { ...object(), ...(all ? bound("maxProperties", max) : {}) },
          ...bound("maxProperties", max),
        },
        ...(all ? bound("maxItems", max) : {}),
      },
      rule,
    );
const strings = (max?: number): JsonObject => ({ type: "string", ...bound("maxLength", max) });

/** [name, schema, set bound, cost without bounds (or -1: over the CRD limit), cost with them]; 0 is not checked, as in kube's test. */
const CASES: [string, Gen, number, number, number][] = [
  ["number array with all", array("number", "self.all(x, true)"), 10, 4718591, 32],
  ["string array with all", array("string", "self.all(x, true)"), 20, 3145727, 62],
  ["boolean array with all", array("boolean", "self.all(x, true)"), 5, 1887437, 17],
  ["array of number arrays with all", arrayOfArrays("number", "self.all(x, true)"), 100, 3145727, 302],
  ["array of objects with all", objectArray("self.all(x, true)"), 50, 555128, 152],
  ["map of numbers with all", map("number", "self.all(x, true)"), 10, 1348169, 32],
  ["map of numbers with has", map("number", "has(self.x)"), 100, 0, 0],
  ["map of strings with all", map("string", "self.all(x, true)"), 3, 1179647, 11],
  ["map of booleans with all", map("boolean", "self.all(x, true)"), 100, 943718, 302],
  ["string with contains", string("self.contains('test')"), 10, 314574, 5],
  ["string with startsWith", string("self.startsWith('test')"), 15, 2, 2],
  ["string with endsWith", string("self.endsWith('test')"), 30, 2, 2],
  ["concat string", string(`size(self + "hello") > size("hello")`), 4, 314578, 7],
  ["index of array with numbers", array("number", "self[1] == 0.0"), 5000, 2, 2],
  ["index of array with strings", array("string", "self[1] == self[1]"), 8, 314577, 314577],
  ["O(n^2) loop with numbers", array("number", "self.all(x, self.all(y, true))"), 10, -1, 352],
  ["O(n^3) loop with numbers", array("number", "self.all(x, self.all(y, self.all(z, true)))"), 10, -1, 3552],
  ["regex matches simple", string(`self.matches("x")`), 50, 314574, 22],
  ["regex matches empty string", string(`"".matches("(((((((((())))))))))[0-9]")`), 10, 7, 7],
  ["regex matches empty regex", string(`self.matches("")`), 100, 1, 1],
  ["map of strings with value length", nestedSpec("self.all(x, x.contains(self[x]))"), 10, 2752507, 72],
  ["set array maxLength to zero", array("number", "self[3] == 0.0"), 0, 2, 2],
  ["set map maxLength to zero", map("number", `self["x"] == 0.0`), 0, 2, 2],
  ["set string maxLength to zero", string(`self == "x"`), 0, 2, 1],
  ["set bytes maxLength to zero", bytes(`self == b"x"`), 0, 2, 1],
  ["set maxLength greater than estimated maxLength", array("number", "self.all(x, x == 0.0)"), 3 * 1024 * 2048, 6291454, 25165826],
  ["nested types with root rule with all supporting maxLength", nestedRoot(true, `self.all(x, x["y"].required == "z")`), 10, 7340027, 72],
  [
    "nested types with root rule with one supporting maxLength",
    nestedRoot(false, `self.all(x, x["y"].required == "z")`),
    10,
    7340027,
    7340027,
  ],
  ["int-or-string array with all", array("int-or-string", "self.all(x, true)"), 10, 4718591, 32],
  ["index of array with int-or-strings", array("int-or-string", "self[0] == 5"), 10, 3, 3],
  ["index of array with booleans", array("boolean", "self[0] == false"), 25, 2, 2],
  ["index of array of objects", objectArray("self[0] == null"), 422, 2, 2],
  ["index of array of array of numnbers", arrayOfArrays("number", "self[0][0] == -1.0"), 51, 3, 3],
  ["array of number maps with all", mapArray("number", `self.all(x, x.y == 25.2)`), 12, 6291452, 74],
  ["index of array of number maps", mapArray("number", `self[0].x > 2.0`), 3000, 4, 4],
  ["duration array with all", array("duration", "self.all(x, true)"), 5, 2359295, 17],
  ["index of duration array", array("duration", "self[0].getHours() == 2"), 525, 4, 4],
  ["date array with all", array("date", "self.all(x, true)"), 15, 725936, 47],
  ["index of date array", array("date", "self[2].getDayOfMonth() == 13"), 42, 4, 4],
  ["date-time array with all", array("date-time", "self.all(x, true)"), 25, 428963, 77],
  ["index of date-time array", array("date-time", "self[2].getMinutes() == 45"), 99, 4, 4],
  ["map of int-or-strings with all", map("int-or-string", "self.all(x, true)"), 15, 1348169, 47],
  ["map of objects with all", mapOf(object(), "self.all(x, true)"), 20, 428963, 62],
  [
    "map of number maps with all",
    mapOf({ type: "object", additionalProperties: { type: "number" } }, "self.all(x, true)"),
    10,
    1179647,
    32,
  ],
  ["map of number arrays with all", mapOf({ type: "array", items: { type: "number" } }, "self.all(x, true)"), 25, 1179647, 77],
  ["map of durations with all", map("duration", "self.all(x, true)"), 5, 1048577, 17],
  ["map of dates with all", map("date", "self.all(x, true)"), 10, 524288, 32],
  ["map of date-times with all", map("date-time", "self.all(x, true)"), 25, 349526, 77],
  ["extended library regex find", string("self.find('[0-9]+') == ''"), 10, 629147, 11],
  [
    "extended library join",
    (max) => ruled({ type: "array", items: strings(max), ...bound("maxItems", max) }, "self.join(' ') == 'aa bb'"),
    10,
    329853068905,
    43,
  ],
  [
    "extended library isSorted",
    (max) => ruled({ type: "array", items: strings(max), ...bound("maxItems", max) }, "self.isSorted() == true"),
    10,
    329854432052,
    52,
  ],
  [
    "extended library replace",
    (max) =>
      ruled(
        { type: "object", properties: { str: strings(max), before: strings(2), after: strings(4) } },
        "self.str.replace(self.before, self.after) == 'does not matter'",
      ),
    4,
    629154,
    12,
  ],
  [
    "extended library split",
    (max) => ruled({ type: "object", properties: { str: strings(max), separator: strings(max) } }, "self.str.split(self.separator) == []"),
    10,
    629160,
    22,
  ],
  ["extended library lowerAscii", (max) => ruled(strings(max), "self.lowerAscii() == 'lower!'"), 10, 314575, 6],
  ["check cost of size call", map("integer", "oldSelf.size() == self.size()"), 10, 5, 5],
  ["check cost of timestamp comparison", map("date-time", `self["a"] == self["b"]`), 7, 8, 8],
  ["check cost of duration comparison", map("duration", `self["c"] == self["d"]`), 42, 8, 8],
  ["enums with maxLength equals to the longest possible value", enumOf("self.contains('A')", "A", "B", "C", "LongValue"), 1000, 2, 401],
];

for (const [name, gen, max, calc, set] of CASES) {
  C(`kube's cost table: ${name}`, () => {
    const cost = (s: JsonObject) => ruleCost((s["x-kubernetes-validations"] as JsonObject[])[0]!["rule"] as string, s, false);
    const unbounded = cost(gen());
    if (calc === -1) assert.ok(unbounded >= 100_000_000, `cost without bounds ${unbounded} is over the CRD limit`);
    else if (calc > 0) assert.is(unbounded, calc, "cost without bounds");
    if (set > 0) assert.is(cost(gen(max)), set, "cost with bounds");
  });
}

C("property names a rule reads are kube's escapes", () => {
  assert.is(escape("a-b.c/d"), "a__dash__b__dot__c__slash__d");
  assert.is(escape("x__y"), "x__underscores__y");
  assert.is(escape("namespace"), "__namespace__");
  assert.is(escape("a b"), undefined);
  assert.is(escape("1a"), undefined);
});

// A CRD of one version (or of the same schema in every version) is checked as kube's internal CRD holds
// it, the schema moved to spec.validation (apiextensions-apiserver v0.36.3 pkg/apis/apiextensions/v1/conversion.go),
// so errors name that path; the differential tier (test/crossplane/differential.test.ts) sees kube say so.
const ROOT = "spec.validation.openAPIV3Schema";
const crd = widgetCRD;
const refused = (s: Store, c: JsonObject, update = false): string => {
  try {
    if (update) s.update(CRD_KEY, undefined, "widgets.example.org", c);
    else s.create(CRD_KEY, undefined, c);
    return "";
  } catch (err) {
    return (err as Error).message;
  }
};
const FACTOR_HINT =
  "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";

C("a quadratic rule over an unbounded list refuses the CRD, with kube's per-rule and total messages", () => {
  const msg = refused(
    new Store(),
    crd({
      type: "object",
      properties: { l: { type: "array", items: { type: "string" } } },
      "x-kubernetes-validations": [{ rule: "self.l.all(x, self.l.exists(y, x == y))" }],
    }),
  );
  const at = `${ROOT}.properties[spec].x-kubernetes-validations[0].rule`;
  assert.match(msg, `${at}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x ${FACTOR_HINT}`);
  assert.match(msg, `${at}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema`);
  assert.match(
    msg,
    `${ROOT}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x`,
  );
});

C("the same rule with maxItems and maxLength is stored, and runs", () => {
  const s = new Store();
  const spec = {
    type: "object",
    properties: { l: { type: "array", maxItems: 20, items: { type: "string", maxLength: 10 } } },
    "x-kubernetes-validations": [{ rule: "self.l.all(x, self.l.exists_one(y, x == y))", message: "duplicate" }],
  };
  assert.is(refused(s, crd(spec)), "");
  const write = (name: string, l: string[]) => {
    try {
      s.create("example.org/widgets", "default", { apiVersion: "example.org/v1", kind: "Widget", metadata: { name }, spec: { l } });
      return "stored";
    } catch (err) {
      return (err as Error).message;
    }
  };
  assert.is(write("a", ["x", "y"]), "stored");
  assert.is(write("b", ["x", "x"]), 'Widget.example.org "b" is invalid: spec: Invalid value: duplicate');
});

C("a rule under an unbounded list is counted once per item: each cheap rule, too many of them", () => {
  // Cheap alone (a string compared), but under a list of unbounded strings kube counts it for every item it could run on.
  const spec = {
    type: "object",
    properties: {
      l: { type: "array", items: { type: "string", "x-kubernetes-validations": [{ rule: "self.startsWith('a') || self.contains('b')" }] } },
    },
  };
  const msg = refused(new Store(), crd(spec));
  assert.match(
    msg,
    `${ROOT}.properties[spec].properties[l].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of`,
  );
  const bounded = structuredClone(spec) as any;
  bounded.properties.l.maxItems = 100;
  bounded.properties.l.items.maxLength = 64;
  assert.is(refused(new Store(), crd(bounded)), "");
});

C("an expensive messageExpression is refused on its own, not multiplied", () => {
  const spec = {
    type: "object",
    properties: { s: { type: "string" }, l: { type: "array", items: { type: "string" } } },
    "x-kubernetes-validations": [{ rule: "true", messageExpression: "self.l.map(x, x + self.s).join(',')" }],
  };
  const msg = refused(new Store(), crd(spec));
  assert.match(
    msg,
    `${ROOT}.properties[spec].x-kubernetes-validations[0].messageExpression: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x`,
  );
  // A string built by concatenation is estimated at any length (string(int) has no bound), as users of kube find.
  const concat = {
    type: "object",
    properties: { size: { type: "integer" } },
    "x-kubernetes-validations": [{ rule: "self.size > 0", messageExpression: "'size is ' + string(self.size)" }],
  };
  assert.match(
    refused(new Store(), crd(concat)),
    "messageExpression: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x",
  );
  const formatted = structuredClone(concat) as any;
  formatted["x-kubernetes-validations"][0].messageExpression = "'size is %d'.format([self.size])";
  assert.is(refused(new Store(), crd(formatted)), "");
});

C("between 1x and 1.5x, the factor is printed as Go's %f", () => {
  // 1,500,000 items of a rule costing 7 an item: just over the per-rule limit of 10,000,000.
  const spec = {
    type: "object",
    properties: { l: { type: "array", maxItems: 1_500_000, items: { type: "integer" } } },
    "x-kubernetes-validations": [{ rule: "self.l.all(x, x > 0 && x < 100)" }],
  };
  const raw = ruleCost("self.l.all(x, x > 0 && x < 100)", spec, false);
  assert.ok(raw > RULE_COST_LIMIT && raw < RULE_COST_LIMIT * 1.5, `cost ${raw}`);
  const errs = costErrors({ type: "object", properties: { spec } }, ROOT);
  assert.is(errs.length, 1);
  assert.is(errs[0]!.detail, `estimated rule cost exceeds budget by factor of ${(raw / RULE_COST_LIMIT).toFixed(6)}x ${FACTOR_HINT}`);
});

C("a CRD whose rules are each under the limit but together over the schema's is refused, naming the four most expensive", () => {
  const props: JsonObject = {};
  // Eleven rules of 1,900,000 items at 5 an item: 9.5 million each, 104.5 million together.
  for (let i = 0; i < 11; i++)
    props[`l${i}`] = {
      type: "array",
      maxItems: 1_900_000,
      items: { type: "integer" },
      "x-kubernetes-validations": [{ rule: "self.all(x, x > 0)" }],
    };
  const errs = costErrors({ type: "object", properties: { spec: { type: "object", properties: props } } }, ROOT);
  const contributed = errs.filter((e) => e.detail.startsWith("contributed to"));
  assert.is(contributed.length, 4);
  assert.ok(
    errs.every((e) => !e.detail.startsWith("estimated rule cost")),
    "no rule over the per-rule limit",
  );
  assert.is(errs.at(-1)!.field, ROOT);
  assert.match(
    errs.at(-1)!.detail,
    /^x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of 1\.\d+x/,
  );
});

C("an update that leaves a version's schema as stored is not refused for a rule's cost; a changed schema is", () => {
  const s = new Store();
  const cheap = crd({
    type: "object",
    properties: { l: { type: "array", maxItems: 10, items: { type: "string", maxLength: 5 } } },
    "x-kubernetes-validations": [{ rule: "self.l.all(x, self.l.exists(y, x == y))" }],
  });
  assert.is(refused(s, cheap), "");
  const stored = s.get(CRD_KEY, undefined, "widgets.example.org") as any;
  // Loosened bounds: the rule is now over kube's per-rule limit (9 an item, 3,000,000 items), and the update is refused.
  const loose = structuredClone(stored);
  const l = loose.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.l;
  l.maxItems = 3_000_000;
  loose.spec.versions[0].schema.openAPIV3Schema.properties.spec["x-kubernetes-validations"] = [{ rule: "self.l.all(x, x.size() > 0)" }];
  assert.match(refused(s, loose, true), "estimated rule cost exceeds budget by factor of");
  // A CRD stored before the estimate (an older dev-cluster's data): an update that keeps its schema is taken, its
  // rule over the per-rule limit or not (the schema's total, under its own limit, still counts); the same CRD as
  // new, or with its schema touched, is refused.
  const relabelled = structuredClone(loose);
  relabelled.metadata.labels = { a: "b" };
  assert.equal(
    crdErrors(relabelled, loose).map((e) => e.detail),
    [],
  );
  assert.match(
    crdErrors(relabelled)
      .map((e) => e.detail)
      .join("\n"),
    "estimated rule cost exceeds budget",
  );
  const touched = structuredClone(relabelled);
  touched.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.l.items.maxLength = 6;
  assert.match(
    crdErrors(touched, loose)
      .map((e) => e.detail)
      .join("\n"),
    "estimated rule cost exceeds budget",
  );
});

C.run();
