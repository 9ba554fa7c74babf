// Sequences from kube's own test tables, read at the pinned tag by running
// kube's tests under an overlay (../kubetables.ts), never copied:
//
//   compile     schema/cel/compilation_test.go TestCelCompilation: each case's
//               schema (rules, messageExpressions, transition rules) as a CRD's
//               spec, created on both servers: accepted or refused alike.
//   cost        the same file's TestCostEstimation: each generated schema, with
//               and without its maxItems/maxLength/maxProperties, as a CRD:
//               the rule's estimated cost is within budget on both or on neither.
//   ratcheting  test/integration/ratcheting_test.go TestRatchetingFunctionality:
//               each case's operations (schema updates, server-side applies,
//               applies expected to fail) on the CRD that test's runTests makes,
//               as an object's fields and again under its status subresource.
import type { Sequence, Step } from "../differential.js";
import { kubeTables, SOURCE } from "../kubetables.js";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);

const CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/** crdCase is one CRD of a table case: cluster-scoped, its schema under spec. */
function crdCase(id: string, source: string, group: string, n: number, what: string, schema: Json): Sequence {
  const plural = `c${n}s`;
  return {
    id,
    source,
    steps: [
      {
        name: `create a CRD whose spec is ${what}`,
        method: "POST",
        path: CRDS,
        body: {
          apiVersion: "apiextensions.k8s.io/v1",
          kind: "CustomResourceDefinition",
          metadata: { name: `${plural}.${group}` },
          spec: {
            group,
            versions: [
              { name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object", properties: { spec: schema } } } },
            ],
            names: { plural, kind: `C${n}` },
            scope: "Cluster",
          },
        },
      },
      { name: "delete the CRD", method: "DELETE", path: `${CRDS}/${plural}.${group}`, ifAnyOk: 0, compare: false },
    ],
  };
}

export function compileSequences(): Sequence[] {
  const t = kubeTables();
  const out: Sequence[] = [];
  for (const [i, c] of (t.compile as { name: string; schema: Json }[]).entries())
    out.push(
      crdCase(
        `compile/${c.name}`,
        `${SOURCE} compilation_test.go TestCelCompilation: ${c.name}`,
        "compile.example.com",
        i,
        "the case's schema",
        c.schema,
      ),
    );
  for (const [i, c] of (t.cost as { name: string; calc: Json; set: Json; maxElements: number }[]).entries()) {
    const source = `${SOURCE} compilation_test.go TestCostEstimation: ${c.name}`;
    out.push(crdCase(`cost/${c.name}/calc`, source, "cost.example.com", 2 * i, "the case's schema without limits", c.calc));
    out.push(
      crdCase(`cost/${c.name}/set`, source, "cost.example.com", 2 * i + 1, `the case's schema with limits of ${c.maxElements}`, c.set),
    );
  }
  return out;
}

/** mergePatch is RFC 7386's JSON merge patch of target by patch (as kube's test patches a schema). */
function mergePatch(target: Json | undefined, patch: Json): Json {
  if (!isObj(patch)) return patch;
  const out: Obj = isObj(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

interface Op {
  op: "schema" | "patchSchema" | "apply" | "expectError";
  description?: string;
  schema?: Obj;
  patch?: Obj;
  name?: string;
  kind?: string;
  resource?: string;
  inner?: Op;
}
interface RatchetCase {
  name: string;
  disabled: boolean;
  skipStatus: boolean;
  operations: Op[];
}

/** The CRD ratcheting_test.go's runTests creates (its schema before any case's update). */
const INITIAL: Obj = {
  type: "object",
  properties: {
    content: { type: "object", additionalProperties: { type: "string" } },
    num: { type: "object", additionalProperties: { type: "integer" } },
    status: { type: "object" },
  },
};
const SENTINEL = "__ratcheting_sentinel_field__";

function ratchetSequence(c: RatchetCase, n: number, status: boolean): Sequence {
  const group = `r${n}${status ? "s" : ""}.mygroup.example.com`;
  const apiVersion = `${group}/v1beta1`;
  const kind = "MyCoolCRD";
  const base = `/apis/${group}/v1beta1/namespaces/default/mycrds`;
  const crdName = `mycrds.${group}`;
  const version = (schema: Json): Obj => ({
    name: "v1beta1",
    served: true,
    storage: true,
    schema: { openAPIV3Schema: schema },
    subresources: { status: {} },
  });
  const steps: Step[] = [
    {
      name: "create the CRD of runTests",
      method: "POST",
      path: CRDS,
      body: {
        apiVersion: "apiextensions.k8s.io/v1",
        kind: "CustomResourceDefinition",
        metadata: { name: crdName },
        spec: { group, versions: [version(INITIAL)], names: { plural: "mycrds", kind, listKind: `${kind}List` }, scope: "Namespaced" },
      },
      served: base,
    },
  ];
  let current: Json = INITIAL;
  let sentinels = 0;
  /** update is updateMyCRDV1Beta1Schema: the schema with a sentinel field, wrapped under status for a status case. */
  const update = (schema: Obj, wrap: boolean, what: string) => {
    const uuid = `00000000-0000-4000-8000-${String(n * 1000 + ++sentinels).padStart(12, "0")}`;
    let sch: Obj = {
      ...schema,
      properties: { ...(isObj(schema["properties"]) ? schema["properties"] : {}), [SENTINEL]: { type: "string", enum: [uuid] } },
    };
    if (wrap) sch = { type: "object", properties: { status: sch } };
    current = sch;
    steps.push({
      name: `update the CRD's schema: ${what}`,
      method: "PATCH",
      type: "merge",
      path: `${CRDS}/${crdName}`,
      body: { spec: { versions: [version(sch)] } },
      ifBothOk: 0,
      settle: { path: `${base}/sentinel-resource`, apiVersion, kind, field: SENTINEL, uuid, status: wrap },
    });
  };
  const apply = (o: Op, expectError: boolean) => {
    const what = `${expectError ? "(kube's test expects an error) " : ""}${o.description ?? "apply"}`;
    const meta = { name: o.name!, namespace: "default" };
    const fields: Obj = status ? { status: o.patch! } : o.patch!;
    const body = { apiVersion, kind, metadata: meta, ...fields };
    if (status) steps.push({ name: `${what}: create the object if it is missing`, method: "POST", path: base, body, ifBothOk: 0 });
    steps.push({
      name: what,
      method: "PATCH",
      type: "apply",
      path: `${base}/${o.name!}${status ? "/status" : ""}?fieldManager=manager`,
      body,
      ifBothOk: 0,
    });
  };
  for (const o of c.operations) {
    if (o.op === "schema") update(o.schema!, status, "a new schema");
    else if (o.op === "patchSchema")
      update(
        mergePatch(current, status ? { properties: { status: o.patch! } } : o.patch!) as Obj,
        false,
        o.description ?? "patch the schema",
      );
    else if (o.op === "apply") apply(o, false);
    else if (o.op === "expectError" && o.inner?.op === "apply") apply(o.inner, true);
    else throw new Error(`ratcheting case ${c.name}: an operation of a kind not ported: ${JSON.stringify(o).slice(0, 120)}`);
  }
  steps.push({ name: "delete the CRD", method: "DELETE", path: `${CRDS}/${crdName}`, ifAnyOk: 0, compare: false });
  return {
    id: `ratcheting/${status ? "status: " : ""}${c.name}`,
    source: `${SOURCE} test/integration/ratcheting_test.go TestRatchetingFunctionality: ${c.name}`,
    steps,
  };
}

export function ratchetingSequences(): Sequence[] {
  const out: Sequence[] = [];
  for (const [n, c] of (kubeTables().ratcheting as RatchetCase[]).entries()) {
    if (c.disabled || c.operations.length === 0) continue;
    out.push(ratchetSequence(c, n, false));
    if (!c.skipStatus) out.push(ratchetSequence(c, n, true));
  }
  return out;
}
