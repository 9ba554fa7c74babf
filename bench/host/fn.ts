// The host bench's function: an XR composes spec.count things (3 unless said),
// each ready once it exists (observed with a uid), as if its provider answered
// at once; the XR's status reports how many are ready.
import { defineFunction, fieldpath, request, response } from "../../src/index.js";

export default defineFunction((req) => {
  const rsp = response.to(req);
  const xr = request.getObservedCompositeResource(req)!;
  const count = fieldpath.getNumber(xr, "spec.count") ?? 3;
  const observed = request.getObservedComposedResources(req);
  let ready = 0;
  for (let i = 0; i < count; i++) {
    const name = `thing-${i}`;
    response.setDesiredComposedResource(rsp, name, {
      apiVersion: "bench.example.org/v1",
      kind: "Thing",
      metadata: { labels: { "bench.example.org/index": String(i) } },
      spec: { size: 10 + i, region: "eu-west-1", tags: { team: "platform", owner: "bench" } },
    });
    const isReady = fieldpath.getString(observed[name]?.resource, "metadata.uid") !== undefined;
    if (isReady) ready++;
    response.setReady(rsp, name, isReady);
  }
  response.setDesiredCompositeStatus(rsp, { things: { wanted: count, ready } });
  return rsp;
});
