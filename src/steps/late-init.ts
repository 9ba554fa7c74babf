// lateInit: fold provider-filled values into desired state, only where the
// resource's management policies allow late initialization.
//
// A provider fills fields the composition left out (a default region, an
// assigned CIDR). Without LateInitialize in spec.managementPolicies it must
// not, and neither do we: the composition stays the only author. With it (or
// "*"), copying the configured fields from observed into desired stops the
// pipeline from fighting the provider. Only fields desired state leaves unset
// are copied, so running the pipeline again on its own output changes nothing.
// External names are kept by the externalName step, whatever the policy.
import { getOwn } from "../own.js";
import { step, type Step } from "../pipeline.js";
import { getArray, getValue, parsePath, setValue } from "../sdk/fieldpath.js";
import * as request from "../sdk/request.js";
import { sortedKeys } from "./common.js";

/** LateInitOptions configure the lateInit step. */
export interface LateInitOptions {
  /** Field paths to late-initialize, e.g. spec.forProvider.region. Default none. */
  fields?: readonly string[];
}

/** allowsLateInit reports whether management policies permit late initialization. */
export function allowsLateInit(policies: readonly unknown[] | undefined): boolean {
  const p = policies ?? ["*"];
  return p.includes("*") || p.includes("LateInitialize");
}

/** lateInit returns the step. */
export function lateInit(opts: LateInitOptions = {}): Step {
  const fields = [...(opts.fields ?? [])];
  for (const f of fields) {
    parsePath(f); // throws naming a malformed path
    if (!/^spec(\.|\[)/.test(f)) throw new Error(`lateInit field ${JSON.stringify(f)} must be under spec`);
  }
  return step("lateInit", (ctx) => {
    if (fields.length === 0) return;
    const observed = request.getObservedComposedResources(ctx.req);
    const desired = ctx.rsp.desired?.resources ?? {};
    for (const name of sortedKeys(desired)) {
      const want = desired[name]!.resource;
      const have = getOwn(observed, name)?.resource;
      if (!want || !have) continue;
      // The desired policy is what will be applied; fall back to what is there.
      const policies = getArray(want, "spec.managementPolicies") ?? getArray(have, "spec.managementPolicies");
      if (!allowsLateInit(policies)) continue;
      for (const f of fields) {
        const v = getValue(have, f);
        if (v === undefined || getValue(want, f) !== undefined) continue;
        setValue(want, f, structuredClone(v));
      }
    }
  });
}
