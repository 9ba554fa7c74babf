// What the host writes to an XRD's status, as Crossplane's definition
// controller does (crossplane 2d040d2d: apis/apiextensions/v1/conditions.go,
// internal/controller/apiextensions/definition/reconciler.go): once its XR
// kind's CRD is established and the XR controller runs, Established=True
// (WatchingCompositeResource) and status.controllers.compositeResourceType;
// while the XRD is deleted, Established=False (TerminatingCompositeResource).
// Each condition carries the XRD's generation (crossplane-runtime's
// ObservedGenerationPropagationManager), and one that is Equal to the
// current (type, status, reason, message and, when both have one,
// observedGeneration) keeps its lastTransitionTime (SetConditions).
//
// Unlike Crossplane, the host serves no claims: an XRD that offers them gets
// Offered=False (ClaimsNotServed) saying so, where Crossplane's offered
// controller would set Offered=True (docs/host.md, differences).
import type { JsonObject } from "@bufbuild/protobuf";
import { isObject, metaOf } from "./kube.js";

/** The XRD condition types and reasons, as Crossplane names them. */
export const ESTABLISHED = "Established";
export const OFFERED = "Offered";
export const WATCHING_COMPOSITE = "WatchingCompositeResource";
export const TERMINATING_COMPOSITE = "TerminatingCompositeResource";
/** The host's own reason: it serves no claims. */
export const CLAIMS_NOT_SERVED = "ClaimsNotServed";

interface XRDCondition {
  type: string;
  status: "True" | "False";
  reason: string;
  message?: string;
}

/** conditionsOf returns an object's status.conditions that are objects. */
function conditionsOf(o: JsonObject): JsonObject[] {
  const status = isObject(o["status"]) ? o["status"] : {};
  return Array.isArray(status["conditions"]) ? status["conditions"].filter(isObject) : [];
}

/** equal is crossplane-runtime's Condition.Equal: lastTransitionTime aside, and observedGeneration only when both have one. */
function equal(a: JsonObject, b: JsonObject): boolean {
  const same = ["type", "status", "reason", "message"].every((k) => (a[k] ?? "") === (b[k] ?? ""));
  const ga = Number(a["observedGeneration"] ?? 0);
  const gb = Number(b["observedGeneration"] ?? 0);
  return same && (ga === 0 || gb === 0 || ga === gb);
}

/**
 * setConditions is crossplane-runtime's SetConditions with the generation
 * propagated: each condition replaces the one of its type unless they are
 * equal, and is added when there is none. It returns undefined when nothing
 * changed.
 */
export function setConditions(current: JsonObject[], set: XRDCondition[], generation: number, now: string): JsonObject[] | undefined {
  const out = [...current];
  let changed = false;
  for (const c of set) {
    const n: JsonObject = {
      type: c.type,
      status: c.status,
      lastTransitionTime: now,
      reason: c.reason,
      ...(c.message ? { message: c.message } : {}),
      ...(generation ? { observedGeneration: generation } : {}),
    };
    const i = out.findIndex((x) => x["type"] === c.type);
    if (i >= 0 && equal(out[i]!, n)) continue;
    changed = true;
    if (i >= 0) out[i] = n;
    else out.push(n);
  }
  return changed ? out : undefined;
}

/**
 * xrdStatusPatch is the status merge patch that brings an XRD to what the
 * host has done with it (serving its XR kind at apiVersion and kind, or
 * terminating it), or undefined when its status says so already.
 */
export function xrdStatusPatch(
  xrd: JsonObject,
  phase: { serving: { apiVersion: string; kind: string } } | { terminating: true },
  now: string,
): JsonObject | undefined {
  const generation = Number(metaOf(xrd)["generation"] ?? 0);
  const spec = isObject(xrd["spec"]) ? xrd["spec"] : {};
  const set: XRDCondition[] = [];
  if ("serving" in phase) {
    set.push({ type: ESTABLISHED, status: "True", reason: WATCHING_COMPOSITE });
    if (isObject(spec["claimNames"]))
      set.push({
        type: OFFERED,
        status: "False",
        reason: CLAIMS_NOT_SERVED,
        message: "xfn host does not serve claims: create the XRs directly",
      });
  } else set.push({ type: ESTABLISHED, status: "False", reason: TERMINATING_COMPOSITE });
  const conditions = setConditions(conditionsOf(xrd), set, generation, now);
  const status = isObject(xrd["status"]) ? xrd["status"] : {};
  const controllers = isObject(status["controllers"]) ? status["controllers"] : {};
  const ref = isObject(controllers["compositeResourceType"]) ? controllers["compositeResourceType"] : {};
  const refChanged = "serving" in phase && (ref["apiVersion"] !== phase.serving.apiVersion || ref["kind"] !== phase.serving.kind);
  if (!conditions && !refChanged) return undefined;
  return {
    status: {
      ...(conditions ? { conditions } : {}),
      // Both references are struct fields in Crossplane's XRD status (apis/v2 v2.4.0 apiextensions/v1/xrd_types.go,
      // `omitempty` on a struct omits nothing), so the claim type is written empty when no claim is served, as the
      // real Crossplane wrote it in test/crossplane/crossplane.test.ts.
      ...(refChanged
        ? {
            controllers: {
              compositeResourceClaimType: { apiVersion: "", kind: "" },
              ...controllers,
              compositeResourceType: { ...phase.serving },
            },
          }
        : {}),
    },
  };
}

/** isEstablished tells whether a CRD's status says Established=True (xcrd.IsEstablished). */
export function isEstablished(crd: JsonObject | undefined): boolean {
  return crd !== undefined && conditionsOf(crd).some((c) => c["type"] === "Established" && c["status"] === "True");
}
