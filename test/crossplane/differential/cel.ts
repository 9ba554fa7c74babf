// Sequences of CRD validation rules (x-kubernetes-validations), sent to both
// servers: the CRD's create (is the rule accepted?), then objects that pass
// and fail it (does it evaluate alike?). Their inputs are the rules issue 59
// found the embedded server to treat otherwise, and cases of kube's own tests
// at v1.36.3: apiextensions-apiserver v0.36.3 pkg/apiserver/schema/cel
// (validation_test.go, compilation_test.go) and apiserver v0.36.3
// pkg/cel/library (its *_test.go), each named in its case. Each case is a CRD
// of its own, so that one refused rule hides no other.
import type { JsonObject } from "@bufbuild/protobuf";
import { crd } from "../../support/cluster.js";
import type { Sequence, Step } from "../differential.js";

export interface Case {
  /** A short name, unique: the CRD's group and the sequence's id come from it. */
  id: string;
  source: string;
  /** The schema of spec. */
  spec: Record<string, unknown>;
  /** The rule, or several (a table of kube's tests: all on one CRD, so one object's create answers for all). */
  rule: string | string[];
  /** Objects' specs to create after the CRD; each step compared. A string is the spec's JSON as sent (an int64 past 2^53). */
  objects: (Record<string, unknown> | string)[];
}

/** crdFor is a namespaced CRD of group <id>.cel.diff.xfn.dev whose spec carries the case's rule. */
const crdFor = (c: Case) =>
  crd(`${c.id}.cel.diff.xfn.dev`, "Thing", "things", "Namespaced", [
    {
      name: "v1",
      served: true,
      storage: true,
      schema: {
        openAPIV3Schema: {
          type: "object",
          properties: { spec: { ...c.spec, "x-kubernetes-validations": [c.rule].flat().map((rule) => ({ rule })) } },
        },
      },
    },
  ] as JsonObject[]);

export function sequence(c: Case): Sequence {
  const group = `${c.id}.cel.diff.xfn.dev`;
  const things = `/apis/${group}/v1/namespaces/default/things`;
  return {
    id: `cel/${c.id}`,
    source: c.source,
    steps: [
      {
        name:
          typeof c.rule === "string" ? `create a CRD with the rule ${JSON.stringify(c.rule)}` : `create a CRD with ${c.rule.length} rules`,
        method: "POST",
        path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        body: crdFor(c),
        served: things,
      },
      // Objects only where both created the CRD (a CRD one refused is the difference already).
      ...c.objects.map((spec, i): Step => ({
        name: `create an object whose spec is ${typeof spec === "string" ? spec : JSON.stringify(spec)}`,
        method: "POST",
        path: things,
        body: `{"apiVersion":"${group}/v1","kind":"Thing","metadata":{"name":"t${i}"},"spec":${typeof spec === "string" ? spec : JSON.stringify(spec)}}`,
        ifBothOk: 0,
      })),
      {
        name: "delete the CRD",
        method: "DELETE",
        path: `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.${group}`,
        ifAnyOk: 0,
        compare: false,
      },
    ],
  };
}

const str = { type: "object", properties: { a: { type: "string" } } };
const ISSUE = "issue 59: found by hand";
const LIB = (f: string) => `k8s.io/apiserver v0.36.3 pkg/cel/library/${f}`;
const VALIDATION = "k8s.io/apiextensions-apiserver v0.36.3 pkg/apiserver/schema/cel/validation_test.go";

export const CASES: Case[] = [
  // Where a CRD's refusal names a rule that does not parse and a pattern RE2 does not take (the
  // default tier's test/apiserver/validation.test.ts holds these fields by hand).
  {
    id: "parse",
    source: "issue 59: the place of a parse error, test/apiserver/validation.test.ts",
    spec: { type: "object", properties: { replicas: { type: "integer" } } },
    rule: "self.replicas <=",
    objects: [],
  },
  {
    id: "lookahead",
    source: "issue 59: the place of a pattern error, test/apiserver/validation.test.ts",
    spec: { type: "object", properties: { name: { type: "string", pattern: "^(?=a)" } } },
    rule: "true",
    objects: [],
  },
  // The false refusals issue 59 names.
  {
    id: "quantity",
    source: ISSUE,
    spec: str,
    rule: "quantity(self.a) == quantity('1Gi')",
    objects: [{ a: "1Gi" }, { a: "1024Mi" }, { a: "2Gi" }],
  },
  {
    id: "durationtype",
    source: ISSUE,
    spec: { type: "object", properties: { d: { type: "string", format: "duration" } } },
    rule: "type(self.d) == google.protobuf.Duration",
    objects: [{ d: "1h" }],
  },
  {
    id: "objliteral",
    source: ISSUE,
    spec: {
      type: "object",
      properties: { objs: { type: "array", maxItems: 4, items: { type: "object", properties: { k: { type: "string", maxLength: 8 } } } } },
    },
    rule: "self.objs[0] == {'k': 'a'}",
    objects: [{ objs: [{ k: "a" }] }, { objs: [{ k: "b" }] }],
  },
  // The false acceptances.
  { id: "undeclared", source: ISSUE, spec: { type: "object", properties: { a: str } }, rule: "has(self.a.undeclared)", objects: [] },
  { id: "badregex", source: ISSUE, spec: str, rule: "self.a.matches(')')", objects: [] },
  // Values.
  {
    id: "int64",
    source: ISSUE,
    spec: { type: "object", properties: { n: { type: "integer" } } },
    rule: "self.n == 9007199254740993",
    objects: ['{"n":9007199254740993}', '{"n":9007199254740992}'],
  },
  {
    id: "format",
    source: LIB("format_test.go"),
    spec: str,
    rule: "'%s-%d'.format([self.a, 1]) == 'x-1'",
    objects: [{ a: "x" }, { a: "y" }],
  },
  {
    id: "twovar",
    source: "cel-go ext TwoVarComprehensions (kube-apiserver 1.33 and later)",
    spec: { type: "object", properties: { m: { type: "object", additionalProperties: { type: "integer" } } } },
    rule: "self.m.all(k, v, v > 0)",
    objects: [{ m: { a: 1 } }, { m: { a: 0 } }],
  },
  {
    id: "optional",
    source: "cel-go optional types (kube-apiserver 1.29 and later)",
    spec: str,
    rule: "self.?a.orValue('none') != 'none'",
    objects: [{ a: "x" }, {}],
  },
  { id: "ipfamily", source: LIB("ip_test.go"), spec: str, rule: "ip(self.a).family() == 4", objects: [{ a: "10.0.0.1" }, { a: "::1" }] },
  { id: "isip", source: LIB("ip_test.go"), spec: str, rule: "isIP(self.a)", objects: [{ a: "10.0.0.1" }, { a: "10.0.0" }] },
  {
    id: "ipcanonical",
    source: LIB("ip_test.go"),
    spec: str,
    rule: "ip.isCanonical(self.a)",
    objects: [{ a: "2001:db8::1" }, { a: "2001:DB8::1" }],
  },
  {
    id: "cidrcontains",
    source: LIB("cidr_test.go"),
    spec: str,
    rule: "cidr('10.0.0.0/8').containsIP(ip(self.a))",
    objects: [{ a: "10.1.2.3" }, { a: "11.0.0.1" }],
  },
  {
    id: "cidrmasked",
    source: LIB("cidr_test.go"),
    spec: str,
    rule: "cidr(self.a).masked() == cidr('10.0.0.0/8')",
    objects: [{ a: "10.1.2.3/8" }, { a: "10.0.0.0/16" }],
  },
  {
    id: "cidrprefix",
    source: LIB("cidr_test.go"),
    spec: str,
    rule: "cidr(self.a).prefixLength() == 24",
    objects: [{ a: "192.168.0.0/24" }, { a: "192.168.0.0/16" }],
  },
  {
    id: "url",
    source: LIB("urls_test.go"),
    spec: str,
    rule: "url(self.a).getHost() == 'example.com'",
    objects: [{ a: "https://example.com/x" }],
  },
  {
    id: "semver",
    source: LIB("semverlib_test.go"),
    spec: str,
    rule: "semver(self.a).isGreaterThan(semver('1.0.0'))",
    objects: [{ a: "1.2.3" }, { a: "0.9.0" }],
  },
  {
    id: "listsort",
    source: LIB("lists_test.go"),
    spec: { type: "object", properties: { l: { type: "array", items: { type: "integer" } } } },
    rule: "self.l.sort() == [1, 2, 3]",
    objects: [{ l: [3, 1, 2] }],
  },
  {
    id: "stringsext",
    source: LIB("library_test.go (ext.Strings)"),
    spec: str,
    rule: "self.a.lowerAscii().split('-').size() == 2",
    objects: [{ a: "A-B" }, { a: "a" }],
  },
  {
    id: "oldself",
    source: VALIDATION + " (transition rules)",
    spec: str,
    rule: "self.a == oldSelf.a",
    objects: [{ a: "x" }],
  },
];

export const SEQUENCES: Sequence[] = CASES.map(sequence);
