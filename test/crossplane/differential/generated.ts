// Generated sequences (issue 59, item 1c): CRDs of random schemas
// (schemagen.ts) and objects drawn from them, mostly valid, some with a fault;
// each CRD created on both servers, its objects created, the CRD deleted. The
// seed (XFN_SCHEMAGEN_SEED, printed by the test) replays a run.
import fc from "fast-check";
import type { Sequence, Step } from "../differential.js";
import { crdArb, objectArb } from "../schemagen.js";

export const SEED = Number(process.env["XFN_SCHEMAGEN_SEED"] || 20261129);
export const COUNT = Number(process.env["XFN_SCHEMAGEN_RUNS"] || 12);
const PER_CRD = 8;

/** sequences are COUNT generated CRDs with PER_CRD objects each, from seed. */
export function sequences(seed = SEED, count = COUNT): Sequence[] {
  return Array.from({ length: count }, (_, i) => {
    const group = `g${i}.gen.diff.xfn.dev`;
    const crd = fc.sample(crdArb("Thing", group), { seed: seed + i, numRuns: 1 })[0]!;
    const things = `/apis/${group}/v1/namespaces/default/things`;
    const objects = Array.from(
      { length: PER_CRD },
      (_, j) => fc.sample(objectArb(crd, `t${j}`), { seed: seed + i * 100 + j, numRuns: 1 })[0]!,
    );
    return {
      id: `generated/${i}`,
      source: `schemagen.ts, seed ${seed}, CRD ${i}`,
      steps: [
        {
          name: "create the generated CRD",
          method: "POST",
          path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
          body: crd,
          served: things,
        },
        ...objects.map((o, j): Step => ({ name: `create object ${j}`, method: "POST", path: things, body: o, ifBothOk: 0 })),
        // Updates where the first objects were made: each takes the next one's spec (an update ratchets
        // what it leaves unchanged, defaults and prunes again, and moves managedFields).
        ...[0, 1, 2].map((j): Step => ({
          name: `update object ${j} to object ${j + 1}'s spec (merge patch)`,
          method: "PATCH",
          type: "merge",
          path: `${things}/t${j}?fieldManager=generated-update`,
          body: { spec: objects[j + 1]!["spec"] ?? null },
          ifBothOk: 1 + j,
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
  });
}
