// Generated CRDs and objects for the differentials of issue 59 (item 1c and
// item 4): fast-check arbitraries over the schema features CRDs written for
// Crossplane use (objects, maps, lists of the three list types, strings with
// enums, lengths, patterns and formats, numbers with bounds, int-or-string,
// nullable, preserved unknown fields, defaults, CEL rules over siblings), and
// objects drawn from a schema that are mostly valid, with a few faults put in
// at random places: a wrong type, an unknown field, a required field left
// out, a value out of its bounds or its enum. The same seed gives the same
// CRDs and objects, so a difference replays from the seed the test prints.
import fc from "fast-check";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type Schema = { [k: string]: Json };

const NAMES = ["alpha", "beta", "gamma", "delta", "size", "name", "region", "count", "items", "tags"];
const PATTERNS = ["^[a-z]+$", "^[0-9]{2,4}$", "^a", "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"];
const FORMATS = ["date-time", "byte", "int-or-string", "uuid", "hostname", "ipv4", "date"];

/** leafArb draws a scalar schema. */
const leafArb: fc.Arbitrary<Schema> = fc.oneof(
  fc
    .record(
      {
        enum: fc.uniqueArray(fc.constantFrom("a", "b", "small", "large", "x-y"), { minLength: 1, maxLength: 3 }),
        minLength: fc.integer({ min: 0, max: 2 }),
        maxLength: fc.integer({ min: 1, max: 6 }),
        pattern: fc.constantFrom(...PATTERNS),
        format: fc.constantFrom(...FORMATS),
        default: fc.constantFrom("a", "small", "ab"),
        nullable: fc.constant(true),
      },
      { requiredKeys: [] },
    )
    .map((s) => ({ type: "string", ...s })),
  fc
    .record(
      {
        minimum: fc.integer({ min: -5, max: 5 }),
        maximum: fc.integer({ min: 5, max: 100 }),
        exclusiveMaximum: fc.boolean(),
        multipleOf: fc.constantFrom(2, 5),
        format: fc.constantFrom("int32", "int64"),
        default: fc.integer({ min: 0, max: 10 }),
        nullable: fc.constant(true),
      },
      { requiredKeys: [] },
    )
    .map((s) => ({ type: "integer", ...s })),
  fc
    .record({ minimum: fc.constantFrom(0, 0.5), maximum: fc.constantFrom(1, 10.5) }, { requiredKeys: [] })
    .map((s) => ({ type: "number", ...s })),
  fc.record({ default: fc.boolean() }, { requiredKeys: [] }).map((s) => ({ type: "boolean", ...s })),
  fc.constant({ "x-kubernetes-int-or-string": true }),
);

/** A rule over an object's properties, typed by what they are; undefined when none fits. */
function ruleFor(props: Record<string, Schema>, required: string[]): Schema | undefined {
  const guard = (p: string, e: string) => (required.includes(p) ? e : `!has(self.${p}) || ${e}`);
  for (const [p, s] of Object.entries(props)) {
    if (s.nullable) continue;
    if (s.type === "integer") return { rule: guard(p, `self.${p} <= 7`), message: `${p} must be at most 7` };
    if (s.type === "string" && !s.format) return { rule: guard(p, `self.${p}.size() <= 4`) };
    if (s.type === "array") return { rule: guard(p, `size(self.${p}) <= 2`), messageExpression: `'${p} has ' + string(size(self.${p}))` };
    if (s.type === "object" && s.additionalProperties) return { rule: guard(p, `self.${p}.all(k, k.size() < 5)`) };
  }
  return undefined;
}

/** schemaArb draws an object schema nested at most depth deep. */
export function schemaArb(depth = 3): fc.Arbitrary<Schema> {
  const node: fc.Arbitrary<Schema> =
    depth <= 0
      ? leafArb
      : fc.oneof(
          { weight: 3, arbitrary: leafArb },
          { weight: 2, arbitrary: fc.constant(0).chain(() => schemaArb(depth - 1)) },
          {
            weight: 1,
            arbitrary: leafArb.map((items) => ({ type: "object", additionalProperties: items, maxProperties: 3 })),
          },
          {
            weight: 2,
            arbitrary: fc
              .tuple(leafArb, fc.constantFrom("atomic", "set", undefined), fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }))
              .map(([items, listType, maxItems]) => ({
                type: "array",
                items: listType === "set" && !items.type ? { type: "string" } : items,
                ...(listType ? { "x-kubernetes-list-type": listType } : {}),
                ...(maxItems ? { maxItems } : {}),
              })),
          },
          {
            weight: 1,
            arbitrary: fc
              .constant(0)
              .chain(() => schemaArb(depth - 1))
              .map((item) => ({
                type: "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                items: {
                  ...item,
                  properties: { ...(item.properties as Record<string, Schema>), name: { type: "string" } },
                  required: [...new Set([...((item.required as string[]) ?? []), "name"])],
                },
              })),
          },
        );
  return fc
    .tuple(
      fc.uniqueArray(fc.constantFrom(...NAMES), { minLength: 1, maxLength: 4 }),
      fc.array(node, { minLength: 4, maxLength: 4 }),
      fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
      fc.boolean(),
      fc.integer({ min: 0, max: 9 }),
    )
    .map(([names, nodes, req, rules, extra]) => {
      const properties = Object.fromEntries(names.map((n, i) => [n, nodes[i]!]));
      const required = names.filter((n, i) => req[i] && !("default" in nodes[i]!));
      const out: Schema = { type: "object", properties };
      if (required.length) out.required = required;
      const rule = rules ? ruleFor(properties, required) : undefined;
      if (rule) out["x-kubernetes-validations"] = [rule];
      if (extra === 0) out["x-kubernetes-preserve-unknown-fields"] = true;
      return out;
    });
}

/** crdArb draws a CRD of the group with one version, whose spec is a generated object schema. */
export function crdArb(kind: string, group = "gen.xfn.dev"): fc.Arbitrary<Schema> {
  return schemaArb().map((spec) => ({
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${kind.toLowerCase()}s.${group}` },
    spec: {
      group,
      names: { kind, listKind: `${kind}List`, plural: `${kind.toLowerCase()}s`, singular: kind.toLowerCase() },
      scope: "Namespaced",
      versions: [
        {
          name: "v1",
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: "object", properties: { spec: spec as Json } } },
        },
      ],
    },
  }));
}

const GOOD_STRINGS: Record<string, string[]> = {
  "date-time": ["2024-01-02T03:04:05Z", "2024-01-02T03:04:05.5+02:00"],
  byte: ["aGVsbG8=", ""],
  "int-or-string": ["5", "abc"],
  uuid: ["6ba7b810-9dad-11d1-80b4-00c04fd430c8"],
  hostname: ["example.com", "a-b.c"],
  ipv4: ["10.0.0.1"],
  date: ["2024-02-03"],
};
const BAD_VALUES: Json[] = ["x", "2024-13-45", 3, -1, 1000, 2.5, true, null, [], {}, "ab cd", "aaaaaaaaa", "10.0.0.256", "not-a-uuid"];

/** valueArb draws a value for schema: valid mostly, with a fault in one node in about every fault-th. */
export function valueArb(schema: Schema, fault = 12): fc.Arbitrary<Json> {
  const bad = fc.constantFrom(...BAD_VALUES);
  const good = goodArb(schema, fault);
  return fc.oneof({ weight: fault, arbitrary: good }, { weight: 1, arbitrary: bad });
}

function goodArb(s: Schema, fault: number): fc.Arbitrary<Json> {
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as Json[]));
  if (s["x-kubernetes-int-or-string"]) return fc.oneof(fc.integer({ min: 0, max: 9 }), fc.constantFrom("5", "50%"));
  switch (s.type) {
    case "string": {
      const fmt = GOOD_STRINGS[s.format as string];
      if (fmt) return fc.constantFrom(...fmt);
      if (s.pattern === "^[0-9]{2,4}$") return fc.constantFrom("12", "1234");
      if (s.pattern === "^a") return fc.constantFrom("a", "abc");
      const max = (s.maxLength as number | undefined) ?? 6;
      return fc.stringMatching(/^[a-z]{1,6}$/).map((v) => v.slice(0, Math.max(max, (s.minLength as number) ?? 0)));
    }
    case "integer":
      return fc
        .integer({ min: Math.max((s.minimum as number) ?? 0, 0), max: 5 })
        .map((n) => (s.multipleOf ? n * (s.multipleOf as number) : n));
    case "number":
      return fc.constantFrom(0.5, 1, 2.25);
    case "boolean":
      return fc.boolean();
    case "array": {
      const items = s.items as Schema;
      const max = (s.maxItems as number | undefined) ?? 3;
      if (s["x-kubernetes-list-type"] === "map")
        return fc
          .uniqueArray(fc.constantFrom("a", "b", "c"), { maxLength: max })
          .chain((names) => fc.tuple(...names.map((n) => valueArb(items, fault).map((v) => (isObject(v) ? { ...v, name: n } : v)))));
      if (s["x-kubernetes-list-type"] === "set")
        return fc.uniqueArray(valueArb(items, fault), { maxLength: max, selector: (v) => JSON.stringify(v) });
      return fc.array(valueArb(items, fault), { maxLength: max });
    }
    case "object": {
      if (s.additionalProperties)
        return fc.dictionary(fc.constantFrom("k", "key", "longkey"), valueArb(s.additionalProperties as Schema, fault), { maxKeys: 3 });
      const props = (s.properties ?? {}) as Record<string, Schema>;
      const required = (s.required as string[]) ?? [];
      const entries = Object.entries(props).map(([k, p]) => {
        const keep = required.includes(k)
          ? fc.oneof({ weight: fault * 2, arbitrary: fc.constant(true) }, fc.constant(false))
          : fc.boolean();
        return fc.tuple(fc.constant(k), keep, valueArb(p, fault));
      });
      const unknown = fc.oneof({ weight: fault, arbitrary: fc.constant(undefined) }, fc.constantFrom("colour", "extra"));
      return fc.tuple(fc.tuple(...entries), unknown).map(([es, u]) => {
        const out: Record<string, Json> = {};
        for (const [k, keep, v] of es) if (keep) out[k] = v;
        if (u) out[u] = "surprise";
        return out;
      });
    }
  }
  return fc.constant("x");
}

const isObject = (v: Json): v is { [k: string]: Json } => typeof v === "object" && v !== null && !Array.isArray(v);

/** objectArb draws a whole custom resource of crd's kind named name. */
export function objectArb(crd: Schema, name: string, fault = 12): fc.Arbitrary<Schema> {
  const spec = crd.spec as Schema;
  const version = (spec.versions as Schema[])[0]!;
  const schema = ((version.schema as Schema).openAPIV3Schema as Schema).properties as Record<string, Schema>;
  return valueArb(schema.spec!, fault).map((v) => ({
    apiVersion: `${spec.group}/${version.name}`,
    kind: (spec.names as Schema).kind!,
    metadata: { name, namespace: "default" },
    spec: v,
  }));
}
