// kube's integration test of CRD validation rules, as sequences: the schemas of
// k8s.io/kubernetes v1.36.3 test/integration/apiserver/crd_validation_expressions_test.go,
// read from the module's source at test time (not copied), each made into the CRD its
// crdWithSchema makes (cluster-scoped, v1beta1, a status subresource) and created on
// both servers; then objects: an empty spec (defaults and rules run) and, for the schema
// TestCustomResourceValidators uses, that test's valid and invalid specs and its status update.
import { readFileSync } from "node:fs";
import { join } from "node:path";
// @ts-expect-error -- a plain .mjs script without types
import { goModuleDir, VERSIONS } from "../../../scripts/anchors.mjs";
import type { Sequence, Step } from "../differential.js";

const FILE = "test/integration/apiserver/crd_validation_expressions_test.go";
const SOURCE = `k8s.io/kubernetes ${VERSIONS.kubernetes as string} ${FILE}`;
const GROUP = "mygroup.example.com";

/** The spec objects TestCustomResourceValidators writes against structuralSchemaWithValidators. */
const VALIDATORS_SPECS: unknown[] = [
  { x: 2, y: 2, limit: 123 },
  { x: -1, y: 0 },
  { x: 2, y: 2, extra: "anything?", floatMap: { key1: 0.2, key2: 0.3 }, assocList: [{ k: "a", v: "1" }], limit: null },
  { extra: "something" },
  { floatMap: { key1: 0.1, key2: 0.2 } },
  { assocList: [{ k: "a", v: "2" }] },
];

/** sequences reads the test's schemas from the Kubernetes module and makes one sequence of each. */
export function sequences(): Sequence[] {
  const dir = goModuleDir("k8s.io/kubernetes", VERSIONS.kubernetes) as string;
  const text = readFileSync(join(dir, FILE), "utf8");
  const out: Sequence[] = [];
  for (const m of text.matchAll(/^var structuralSchema(\w+) = \[\]byte\(`([\s\S]*?)`\)/gm)) {
    const name = m[1]!;
    const kind = name.replace(/^With/, "");
    const plural = `${kind.toLowerCase()}s`;
    const validation = JSON.parse(m[2]!) as object;
    const path = `/apis/${GROUP}/v1beta1/${plural}`;
    const crd = {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: `${plural}.${GROUP}` },
      spec: {
        group: GROUP,
        versions: [{ name: "v1beta1", served: true, storage: true, schema: validation, subresources: { status: {} } }],
        names: { plural, kind },
        scope: "Cluster",
      },
    };
    const specs = name === "WithValidators" ? VALIDATORS_SPECS : [{}];
    const objects = specs.map((spec, i): Step => ({
      name: `create a ${kind} whose spec is ${JSON.stringify(spec)}`,
      method: "POST",
      path,
      body: { apiVersion: `${GROUP}/v1beta1`, kind, metadata: { name: `cr-${i}` }, spec },
      ifBothOk: 0,
    }));
    const status: Step[] =
      name === "WithValidators"
        ? [
            {
              name: "a status update the root rule refuses (status.z above spec.x + spec.y)",
              method: "PATCH",
              type: "merge",
              path: `${path}/cr-0/status`,
              body: { status: { z: 5 } },
              ifBothOk: 1,
            },
          ]
        : [];
    out.push({
      id: `expressions/${name}`,
      source: `${SOURCE}: structuralSchema${name}`,
      steps: [
        {
          name: `create the CRD of structuralSchema${name}`,
          method: "POST",
          path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
          body: crd,
          served: path,
        },
        ...objects,
        ...status,
        {
          name: "delete the CRD",
          method: "DELETE",
          path: `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${plural}.${GROUP}`,
          ifAnyOk: 0,
          compare: false,
        },
      ],
    });
  }
  return out;
}
