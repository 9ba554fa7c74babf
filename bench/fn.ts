// The bench function as a module `xfn serve` loads, as a user's would: it
// imports the runtime by its package name, so the server and the function
// share one copy of xfn (compose N resources, keep external names, readiness).
import { pipeline, request, response, step, steps, type JsonObject } from "xfn-runtime";
import { composed } from "./composed.js";

const compose = step("compose", (ctx) => {
  const xr = request.getObservedCompositeResource(ctx.req)!;
  const n = Number((xr["spec"] as JsonObject)["count"]);
  for (let i = 0; i < n; i++) response.setDesiredComposedResource(ctx.rsp, `instance-${i}`, composed(xr, i));
});

export default pipeline(compose, steps.externalName(), steps.readiness());
