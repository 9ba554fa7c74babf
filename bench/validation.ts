// The embedded API server's schema validation, in the store alone: 2,000 XRs
// of bench/host's kinds, each with 3 Things and a status write, written with
// and without the CRDs' compiled schemas (decode, typed apply check, validate,
// CEL). Prints the CPU of each, best of five; bench/RESULTS.md ("Schema
// validation") has what it measured.
//
//   node --import tsx bench/validation.ts [--xrs 2000]
import type { JsonObject } from "@bufbuild/protobuf";
import { join } from "node:path";
import { CRD_KEY, Store, typeKeyOf } from "../src/apiserver/store.js";
import { typedErrors } from "../src/apiserver/typed.js";
import { loadDocs } from "../src/engine/docs.js";
import { forCompositeResource } from "../src/engine/xcrd.js";
import { flag } from "./results.js";

const N = flag("--xrs", 2000);
const docs = loadDocs(join(import.meta.dirname, "host/manifests.yaml"));
const thingCRD = docs.find((d) => d.obj["kind"] === "CustomResourceDefinition")!.obj;
const xrd = docs.find((d) => d.obj["kind"] === "CompositeResourceDefinition")!.obj;

function run(validate: boolean): number {
  const s = new Store({});
  s.create(CRD_KEY, undefined, thingCRD);
  const xcrd = forCompositeResource({ ...xrd, metadata: { name: "xthings.bench.example.org", uid: "u" } });
  delete (xcrd["metadata"] as JsonObject)["ownerReferences"]; // no XRD in this store to own it
  s.create(CRD_KEY, undefined, xcrd);
  const T = typeKeyOf("bench.example.org", "things");
  const X = typeKeyOf("bench.example.org", "xthings");
  const tt = s.findType("bench.example.org", "v1", "things")!;
  const xt = s.findType("bench.example.org", "v1", "xthings")!;
  if (!validate) {
    delete tt.schemas;
    delete xt.schemas;
  }
  const start = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    const xr: JsonObject = { apiVersion: "bench.example.org/v1", kind: "XThings", metadata: { name: `x${i}` }, spec: { count: 3 } };
    xt.schemas?.["v1"]?.decode(xr);
    const x = s.create(X, undefined, xr);
    for (let k = 0; k < 3; k++) {
      const thing: JsonObject = {
        apiVersion: "bench.example.org/v1",
        kind: "Thing",
        metadata: {
          name: `x${i}-${k}`,
          labels: { "bench.example.org/index": String(k), "crossplane.io/composite": `x${i}` },
          annotations: { "crossplane.io/composition-resource-name": `thing-${k}` },
          ownerReferences: [
            {
              apiVersion: "bench.example.org/v1",
              kind: "XThings",
              name: `x${i}`,
              uid: (x["metadata"] as JsonObject)["uid"]!,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: { size: 10 + k, region: "eu-west-1", tags: { team: "platform", owner: "bench" } },
      };
      if (tt.schemas) typedErrors(thing, tt.schemas["v1"]!.root);
      tt.schemas?.["v1"]?.decode(thing);
      s.create(T, undefined, thing);
    }
    const status: JsonObject = {
      ...s.get(X, undefined, `x${i}`),
      status: {
        things: { wanted: 3, ready: 3 },
        conditions: [
          { type: "Ready", status: "True", reason: "Available", lastTransitionTime: "2026-11-26T09:00:00Z" },
          { type: "Synced", status: "True", reason: "ReconcileSuccess", lastTransitionTime: "2026-11-26T09:00:00Z" },
        ],
      },
    };
    xt.schemas?.["v1"]?.decode(status);
    s.update(X, undefined, `x${i}`, status, { status: true });
  }
  const u = process.cpuUsage(start);
  return (u.user + u.system) / 1000;
}

run(true);
run(false);
const best = (v: boolean) => Math.min(...[0, 1, 2, 3, 4].map(() => run(v)));
const off = best(false);
const on = best(true);
console.log(
  `${N} XRs x 3 Things, store only: without schemas ${off.toFixed(0)} ms CPU, with ${on.toFixed(0)} ms (validation ${(((on - off) / on) * 100).toFixed(0)}% of it)`,
);
