// An operation function: when a watched Bucket changes, label it with the time
// it was last checked, and report what it did. It reads the watched resource
// with request.getWatchedResource, applies a partial object (Crossplane applies
// an Operation's desired resources server-side), and writes an output.
import { defineFunction, fieldpath, request, response } from "../../src/index.js";

export default defineFunction((req, ctx) => {
  const rsp = response.to(req);
  const bucket = request.getWatchedResource(req);
  if (!bucket) {
    response.fatal(rsp, "no watched resource: run this function from a WatchOperation").withReason("NoWatchedResource");
    return rsp;
  }
  const name = fieldpath.getString(bucket, "metadata.name")!;
  const checked = ctx.now().toISOString().replace(/[-:]/g, "").slice(0, 15);
  response.setDesiredComposedResource(rsp, "bucket", {
    apiVersion: String(bucket["apiVersion"]),
    kind: String(bucket["kind"]),
    metadata: { name, labels: { "ops.xfn.dev/checked": checked } },
  });
  response.setOutput(rsp, { checked: name, region: fieldpath.getString(bucket, "spec.forProvider.region") ?? "unknown" });
  response.normal(rsp, `labelled ${name}`);
  return rsp;
});
