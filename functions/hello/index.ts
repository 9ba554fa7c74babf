// hello: composes one bucket per entry of the XR's spec.buckets and reports
// readiness. A small, complete example of an xfn function.
//
//   apiVersion: example.xfn.dev/v1alpha1
//   kind: XBuckets
//   spec:
//     region: eu-west-1          # default region for every bucket
//     buckets:
//       - name: logs
//       - name: assets
//         region: us-east-1
//
// Input (optional):
//   apiVersion: hello.xfn.dev/v1alpha1
//   kind: Input
//   defaultRegion: us-east-1     # used when neither the bucket nor the XR sets one
import type { JsonObject } from "xfn-runtime";
import { defineFunction, fieldpath, getObjectCondition, Ready, request, response } from "xfn-runtime";

/** Input is the function's optional configuration. */
export interface Input {
  defaultRegion: string;
}

/** parseInput checks the step's input block. */
export function parseInput(raw: JsonObject): Input {
  const region = raw["defaultRegion"];
  if (region !== undefined && (typeof region !== "string" || region === "")) {
    throw new Error("defaultRegion must be a non-empty string");
  }
  return { defaultRegion: region ?? "us-east-1" };
}

interface Bucket {
  name: string;
  region?: string;
}

const NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function readBuckets(xr: JsonObject): Bucket[] {
  const entries = fieldpath.getArray(xr, "spec.buckets") ?? [];
  return entries.map((e, i) => {
    if (typeof e !== "object" || e === null || Array.isArray(e)) throw new Error(`spec.buckets[${i}] must be an object`);
    const name = e["name"];
    if (typeof name !== "string" || !NAME.test(name)) {
      throw new Error(`spec.buckets[${i}].name must be a DNS label (lowercase letters, digits and "-"), got ${JSON.stringify(name)}`);
    }
    const region = e["region"];
    if (region !== undefined && typeof region !== "string") throw new Error(`spec.buckets[${i}].region must be a string`);
    return region === undefined ? { name } : { name, region };
  });
}

export default defineFunction((req) => {
  const rsp = response.to(req);
  const xr = request.getObservedCompositeResource(req);
  if (!xr) {
    response.fatal(rsp, "the request has no observed composite resource");
    return rsp;
  }

  let input: Input;
  let buckets: Bucket[];
  try {
    input = request.getInput(req, parseInput);
    buckets = readBuckets(xr);
  } catch (err) {
    response
      .fatal(rsp, err as Error)
      .withReason("InvalidSpec")
      .targetCompositeAndClaim();
    return rsp;
  }

  const xrRegion = fieldpath.getString(xr, "spec.region");
  const observed = request.getObservedComposedResources(req);
  const notReady: string[] = [];
  for (const b of buckets) {
    const key = `bucket-${b.name}`;
    response.setDesiredComposedResource(rsp, key, {
      apiVersion: "s3.aws.upbound.io/v1beta1",
      kind: "Bucket",
      metadata: { labels: { "hello.xfn.dev/bucket": b.name } },
      spec: { forProvider: { region: b.region ?? xrRegion ?? input.defaultRegion } },
    });
    // Ready once the provider says so; an earlier step's explicit choice stays.
    const ready = getObjectCondition(observed[key]?.resource, "Ready")?.status === "True";
    if (response.getDesiredComposedResource(rsp, key)?.ready === Ready.UNSPECIFIED) response.setReady(rsp, key, ready);
    if (!ready) notReady.push(b.name);
  }

  response.setDesiredCompositeStatus(rsp, { bucketCount: buckets.length });
  if (notReady.length > 0) {
    response
      .conditionFalse(rsp, "BucketsReady", "Creating")
      .withMessage(`waiting for ${notReady.join(", ")}`)
      .targetCompositeAndClaim();
  } else {
    response.conditionTrue(rsp, "BucketsReady", "Available").targetCompositeAndClaim();
  }
  response.normal(rsp, `composed ${buckets.length} bucket${buckets.length === 1 ? "" : "s"}`);
  return rsp;
});
