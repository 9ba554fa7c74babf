// The bench function as a module `xfn serve` loads, as a user's would: it
// imports the runtime by its package name, so the server and the function
// share one copy of xfn (compose N resources, keep external names, readiness).
import { pipeline, request, response, step, steps, type JsonObject } from "xfn-runtime";
import { composed } from "./composed.js";

const compose = step("compose", (ctx) => {
  const xr = request.getObservedCompositeResource(ctx.req)!;
  const n = Number((xr["spec"] as JsonObject)["count"]);
  const observed = request.getObservedComposedResources(ctx.req);
  let drifted = 0;
  for (let i = 0; i < n; i++) {
    const want = composed(xr, i);
    response.setDesiredComposedResource(ctx.rsp, `instance-${i}`, want);
    const seen = observed[`instance-${i}`]?.resource?.["spec"];
    if (seen !== undefined && JSON.stringify(seen) !== JSON.stringify(want["spec"])) drifted++;
  }
  response.setDesiredCompositeStatus(ctx.rsp, { drifted });
});

export default pipeline(compose, steps.externalName(), steps.readiness());
