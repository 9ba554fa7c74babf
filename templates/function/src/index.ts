// The function: compose one Bucket per entry of the XR's spec.buckets, then let
// xfn's built-in steps keep every external name the provider reports and mark
// each bucket ready when its Ready condition is True.
//
// The types in ./generated/types.ts come from the CRD and XRD in crds/:
// after changing either, run `npm run generate`. Each kind has two: Bucket as
// a function writes it, ObservedBucket as read back (its defaults set).
import { pipeline, request, response, step, steps } from "xfn-runtime";
import type { Bucket, ObservedXBuckets } from "./generated/types.js";
import { parseInput } from "./input.js";

const NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** composeBuckets desires one Bucket per spec.buckets entry, named bucket-<name>. */
export const composeBuckets = step("composeBuckets", ({ req, rsp }) => {
  const input = request.getInput(req, parseInput);
  // The type says what the XRD promises; values users write are still checked.
  const xr = request.getObservedCompositeResource<ObservedXBuckets>(req);
  const buckets = xr?.spec?.buckets ?? [];
  for (const [i, b] of buckets.entries()) {
    if (!b.name || !NAME.test(b.name)) {
      throw new Error(`spec.buckets[${i}].name must be a DNS label, got ${JSON.stringify(b.name)}`);
    }
    const bucket: Bucket = {
      apiVersion: "s3.aws.m.upbound.io/v1beta1",
      kind: "Bucket",
      metadata: { labels: { "example.org/bucket": b.name } },
      spec: { forProvider: { region: b.region ?? xr?.spec?.region ?? input.defaultRegion } },
    };
    response.setDesiredComposedResource(rsp, `bucket-${b.name}`, bucket);
  }
  response.setDesiredCompositeStatus(rsp, { bucketCount: buckets.length });
});

export default pipeline(
  composeBuckets,
  steps.externalName(), // records names in status.externalNames: the XRD declares that field
  steps.readiness(), // Ready=True condition, unless an earlier step decided
);
