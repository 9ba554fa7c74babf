// Tables of kube's own CEL validation test, ported as sequences: k8s.io/apiextensions-apiserver
// v0.36.3 pkg/apiserver/schema/cel/validation_test.go, TestValidationExpressions, the entries
// named in each case's source. An entry's schema becomes spec's, its valid rules and its error
// rules all go on one CRD, and its object is created: both servers must accept or refuse the CRD
// alike and answer the object's create alike (the error rules' failures, in kube's words). The
// Go test runs the validator without a cost estimate; lists and maps here carry maxItems,
// maxProperties and maxLength so that the real server's estimate accepts the CRD.
import { sequence, type Case } from "./cel.js";

const TEST = "k8s.io/apiextensions-apiserver v0.36.3 pkg/apiserver/schema/cel/validation_test.go TestValidationExpressions";
const int = { type: "integer" };
const str = { type: "string", maxLength: 16 };

const CASES: Case[] = [
  {
    id: "mapaccess",
    source: `${TEST}: "map access"`,
    spec: { type: "object", properties: { val: { type: "object", maxProperties: 8, additionalProperties: int } } },
    rule: [
      "!('a' in self.val)",
      "'b' in self.val",
      "!has(self.val.a)",
      "has(self.val.b)",
      "self.val.all(k, self.val[k] > 0)",
      "self.val.exists_one(k, self.val[k] == 2)",
      "!self.val.exists_one(k, self.val[k] > 0)",
      "self.val.map(k, self.val[k]).exists(v, v == 1)",
      "size(self.val.filter(k, self.val[k] > 1)) == 1",
      "self.val.all(k, v, v > 0)",
      "self.val.exists(k, v, v == 2)",
      "self.val.existsOne(k, v, v == 2)",
      "self.val.transformMap(k, v, v > 1, v + 1).size() == 1",
      "self.val.transformMap(k, v, v + 1).size() == 2",
      "self.val.transformMapEntry(k, v, v > 1, {k + '2': v + 1}).size() == 1",
      "self.val.transformMapEntry(k, v, {k + '2': v + 1}).size() == 2",
      // its errors
      "self.val['c'] == 1",
    ],
    objects: [{ val: { b: 1, d: 2 } }],
  },
  {
    id: "listmapaccess",
    source: `${TEST}: "listMap access"`,
    spec: {
      type: "object",
      properties: {
        listMap: {
          type: "array",
          maxItems: 8,
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["k"],
          items: { type: "object", required: ["k"], properties: { k: str, v: str, v2: str } },
        },
      },
    },
    rule: [
      "has(self.listMap[0].v)",
      "self.listMap.all(m, !has(m.v2) || m.v2 == 'z')",
      "self.listMap.exists_one(m, m.k == 'a3')",
      "!self.listMap.exists_one(m, m.k.startsWith('a'))",
      "self.listMap.map(m, has(m.v2) && m.v2 == 'z', m.v2).size() == 1",
      "self.listMap.exists(m, m.v2 == 'z')",
      "!self.listMap.all(m, m.v2 != 'z')",
      "!self.listMap.all(i, m, has(m.v2) && m.v2 != 'z')",
      "self.listMap.exists(i, m, has(m.v2) && m.v2 == 'z')",
      "self.listMap.existsOne(i, m, has(m.v2) && m.v2 == 'z')",
      "self.listMap.transformList(i, m, has(m.v2) && m.v2 == 'z', m.v2).size() == 1",
      "self.listMap.transformList(i, m, m.v).size() == 3",
      // its errors
      "self.listMap.all(m, m.v2 == 'z')",
      "self.listMap.exists_one(m, m.v2 == 'z')",
      "self.listMap.filter(m, m.v2 == 'z').size() == 1",
      "self.listMap.map(m, m.v2).size() == 1",
    ],
    objects: [
      {
        listMap: [
          { k: "a1", v: "b1" },
          { k: "a2", v: "b2" },
          { k: "a3", v: "b3", v2: "z" },
        ],
      },
    ],
  },
  {
    id: "listaccess",
    source: `${TEST}: "list access"`,
    spec: { type: "object", properties: { array: { type: "array", maxItems: 16, items: int } } },
    rule: [
      "2 in self.array",
      "self.array.exists_one(e, e > 4)",
      "!self.array.exists_one(e, e == 2)",
      "self.array.map(e, e * 20).filter(e, e > 50).exists(e, e == 60)",
      "self.array.all(i, e, e > 0)",
      "self.array.existsOne(i, e, e > 4)",
      "self.array.transformList(i, e, e > 2, e * 2).size() > 0",
      "self.array.transformList(i, e, e * 2).size() > 0",
      // its errors
      "self.array[100] == 0",
    ],
    objects: [{ array: [1, 1, 2, 2, 3, 3, 4, 5] }],
  },
];

export const SEQUENCES = CASES.map(sequence);
