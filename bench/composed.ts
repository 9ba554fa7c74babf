// What the bench function composes: pure data, shared by the bench servers
// and by bench/fn.ts, the module xfn serve loads (on its workers).
import type { JsonObject } from "@bufbuild/protobuf";

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
