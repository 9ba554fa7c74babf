// The bench function and what it composes, shared by the bench servers and by
// bench/fn.ts, the module xfn serve loads (on its workers).
import type { JsonObject } from "@bufbuild/protobuf";
import type * as Xfn from "../src/index.js";
// The drift check xfn host makes; the peer's function (bench/server.ts) uses it too.
import { holds } from "../src/sdk/holds.js";

export { holds };

export const EXT = "crossplane.io/external-name";

/** composed is what the function composes for resource i: about 600 bytes of spec. */
export function composed(xr: JsonObject, i: number): JsonObject {
  const spec = xr["spec"] as JsonObject;
  return {
    apiVersion: "ec2.aws.upbound.io/v1beta1",
    kind: "Instance",
    metadata: { labels: { "bench.xfn.dev/index": String(i), "bench.xfn.dev/team": String(spec["team"]) } },
    spec: {
      forProvider: {
        region: spec["region"]!,
        instanceType: "t3.medium",
        ami: `ami-${String(i).padStart(8, "0")}`,
        tags: spec["tags"]!,
        rootBlockDevice: [{ volumeSize: 20 + (i % 10), volumeType: "gp3", encrypted: true }],
        userData: spec["userData"]!,
      },
      providerConfigRef: { name: "default" },
    },
  };
}

/** BenchRuntime is the part of xfn the bench function uses, from src/ or from the package. */
export interface BenchRuntime {
  pipeline: typeof Xfn.pipeline;
  step: typeof Xfn.step;
  request: Pick<typeof Xfn.request, "getObservedCompositeResource" | "getObservedComposedResources">;
  response: Pick<typeof Xfn.response, "setDesiredComposedResource" | "setDesiredCompositeStatus">;
  steps: Pick<typeof Xfn.steps, "externalName" | "readiness">;
}

/**
 * benchFunction is the bench function: compose N resources from the XR,
 * checking each observed spec still holds what it composes (so every observed
 * spec is decoded, as a drift check's would be), then the externalName and
 * readiness steps.
 * bench/server.ts builds it from xfn's sources, bench/fn.ts from the package.
 */
export function benchFunction(x: BenchRuntime): Xfn.RunFunction {
  const compose = x.step("compose", (ctx) => {
    const xr = x.request.getObservedCompositeResource(ctx.req)!;
    const n = Number((xr["spec"] as JsonObject)["count"]);
    const observed = x.request.getObservedComposedResources(ctx.req);
    let drifted = 0;
    for (let i = 0; i < n; i++) {
      const want = composed(xr, i);
      x.response.setDesiredComposedResource(ctx.rsp, `instance-${i}`, want);
      const seen = observed[`instance-${i}`]?.resource?.["spec"];
      if (seen !== undefined && !holds(seen, want["spec"]!)) drifted++;
    }
    x.response.setDesiredCompositeStatus(ctx.rsp, { drifted });
  });
  return x.pipeline(compose, x.steps.externalName(), x.steps.readiness());
}
