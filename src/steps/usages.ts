// usages: make Crossplane delete composed resources in dependency order.
//
// Crossplane does not call a pipeline while its XR is deleted: Kubernetes'
// garbage collector deletes every composed resource at once. Its own answer is
// the Usage (protection.crossplane.io/v1beta1): while a Usage of D by R exists,
// Crossplane's admission webhook refuses to delete D; a composed Usage waits for
// R to be gone before it goes, and with replayDeletion it deletes D again then
// (crossplane v2.4.0 internal/controller/protection/usage/reconciler.go and
// internal/webhook/protection/usage/handler.go). So for each dependency edge
// (R dependsOn, waitFor or waitUntil D) whose two ends exist, the dependencies
// step composes a Usage of D by R: a namespaced Usage where either end is
// namespaced (in R's namespace, or D's when R is cluster-scoped), a
// ClusterUsage where both are cluster-scoped.
//
// Each is keyed usage-of-D-by-R, so it is the same composed resource on every
// reconcile, and carries the two names in annotations, so that a later run
// knows it as its own. When an edge goes (the configuration drops it, usages
// are switched off, or one end leaves desired state) the Usage goes with care,
// as Crossplane would otherwise wedge: a composed Usage that is deleted while R
// exists waits for R, and D, still in use, cannot be deleted meanwhile.
// - R stays: the Usage is first applied without `by` (a plain reason), and
//   dropped once it is observed so; then it goes at once.
// - R goes too: the Usage is dropped and waits for R, as it should.
// - D leaves desired state while a Usage of it exists: D is kept as it is until
//   the Usage is gone, so Crossplane does not try (and fail) to delete it first.
//
// xfn host orders deletion itself (the deletion step, and its recorded order
// when the pipeline cannot run): it says so in the pipeline's context, and no
// Usage is composed there. The XR's DeletionOrdered condition says what is
// deleted after what, and what is not ordered yet; it persists on the XR while
// Crossplane deletes it, when no function runs.
import type { JsonObject } from "@bufbuild/protobuf";
import type { RunFunctionRequest } from "../gen/fn/v1/run_function_pb.js";
import { getOwn } from "../own.js";
import { lastDesired, step, type Step, type StepContext } from "../pipeline.js";
import { getObject, getString } from "../sdk/fieldpath.js";
import { getObjectCondition, isDeleting } from "../sdk/object.js";
import * as request from "../sdk/request.js";
import * as response from "../sdk/response.js";
import { isObject } from "../json.js";
import { observedXR } from "./common.js";
import type { Graph } from "./graph.js";

export const USAGE_API_VERSION = "protection.crossplane.io/v1beta1";
/** The XR condition that says what Crossplane deletes after what. */
export const DELETION_ORDER_TYPE = "DeletionOrdered";
/** Annotations on a Usage the step composed: the composition resource names of what is used, and of what uses it. */
export const USAGE_OF = "usage.xfn.dev/of";
export const USAGE_BY = "usage.xfn.dev/by";
/**
 * HOST_CONTEXT_KEY is the context key xfn host sends its pipelines
 * ({ordersDeletion: true}): it deletes in dependency order itself, and
 * composes no Usages.
 */
export const HOST_CONTEXT_KEY = "xfn.dev/host";

/** UsageOptions configure the Usages the dependencies step composes. */
export interface UsageOptions {
  /**
   * Compose Usages: by default where the caller lists its capabilities
   * (Crossplane v2.2 and later, xfn render), whose protection.crossplane.io
   * Usages exist (Crossplane v1 has none, v2.0 and v2.1 list nothing: true
   * there). Off, the step still releases the Usages it composed before.
   */
  enabled?: boolean;
  /** Have Crossplane delete what was used as soon as its user is gone, rather than at the garbage collector's next retry (default true). */
  replayDeletion?: boolean;
}

interface Edge {
  of: string;
  by: string;
}

/** usageKey is the composition resource name of the Usage of `of` by `by`. */
export const usageKey = (e: Edge): string => `usage-of-${e.of}-by-${e.by}`;

/** hostOrdersDeletion says whether the pipeline runs under xfn host, which orders deletion itself. */
export function hostOrdersDeletion(ctx: StepContext): boolean {
  const v = request.getContextKey(ctx.req, HOST_CONTEXT_KEY);
  return isObject(v) && v["ordersDeletion"] === true;
}

const isUsageKind = (o: JsonObject) =>
  typeof o["apiVersion"] === "string" &&
  o["apiVersion"].startsWith("protection.crossplane.io/") &&
  (o["kind"] === "Usage" || o["kind"] === "ClusterUsage");

/** ours reads a composed resource as a Usage this step composed: the edge its annotations name. */
function ours(o: JsonObject | undefined): Edge | undefined {
  if (!o || !isUsageKind(o)) return undefined;
  const a = getObject(o, "metadata.annotations") ?? {};
  const [of, by] = [a[USAGE_OF], a[USAGE_BY]];
  return typeof of === "string" && typeof by === "string" ? { of, by } : undefined;
}

const ref = (o: JsonObject) => ({
  apiVersion: getString(o, "apiVersion") ?? "",
  kind: getString(o, "kind") ?? "",
  resourceRef: { name: getString(o, "metadata.name") ?? "" } as JsonObject,
});

/** usageObject is the Usage of used by user (observed objects). */
function usageObject(e: Edge, used: JsonObject, user: JsonObject, replayDeletion: boolean): JsonObject {
  const annotations = { [USAGE_OF]: e.of, [USAGE_BY]: e.by };
  const [usedNs, userNs] = [getString(used, "metadata.namespace") ?? "", getString(user, "metadata.namespace") ?? ""];
  if (usedNs === "" && userNs === "")
    return {
      apiVersion: USAGE_API_VERSION,
      kind: "ClusterUsage",
      metadata: { annotations },
      spec: { of: ref(used), by: ref(user), replayDeletion },
    };
  // `by` must be cluster-scoped or in the Usage's namespace; `of` may be anywhere, given `by`.
  const namespace = userNs || usedNs;
  const of = ref(used);
  if (usedNs !== "" && usedNs !== namespace) of.resourceRef["namespace"] = usedNs;
  return {
    apiVersion: USAGE_API_VERSION,
    kind: "Usage",
    metadata: { namespace, annotations },
    spec: { of, by: ref(user), replayDeletion },
  };
}

/** released is an observed Usage without its `by`: deleted later, it goes at once rather than waiting for its user. */
function released(e: Edge, observed: JsonObject): JsonObject {
  const m = getObject(observed, "metadata") ?? {};
  const spec = getObject(observed, "spec") ?? {};
  return {
    apiVersion: observed["apiVersion"]!,
    kind: observed["kind"]!,
    metadata: {
      ...(m["name"] !== undefined ? { name: m["name"] } : {}),
      ...(m["namespace"] !== undefined ? { namespace: m["namespace"] } : {}),
      annotations: { [USAGE_OF]: e.of, [USAGE_BY]: e.by },
    },
    spec: {
      of: spec["of"] ?? {},
      reason: `released: ${e.by} no longer depends on ${e.of}`,
      ...(spec["replayDeletion"] !== undefined ? { replayDeletion: spec["replayDeletion"] } : {}),
    },
  };
}

const isReadyTrue = (o: JsonObject | undefined) => o !== undefined && getObjectCondition(o, "Ready")?.status === "True";

/** edgesOf lists the graph's edges, sorted by what is used, then by its user. */
function edgesOf(graph: Graph): Edge[] {
  const out: Edge[] = [];
  for (const [by, deps] of graph) for (const of of deps) out.push({ of, by });
  return out.sort((a, b) => (a.of === b.of ? (a.by < b.by ? -1 : 1) : a.of < b.of ? -1 : 1));
}

/** composeUsages composes, releases and drops the Usages of the graph's edges (see the top of this file). */
export function composeUsages(ctx: StepContext, graph: Graph, opts: UsageOptions): void {
  const xr = observedXR(ctx);
  // While the XR is deleted, the deletion step orders (xfn host, xfn render): Crossplane calls no pipeline then.
  if (isDeleting(xr)) return;
  const host = hostOrdersDeletion(ctx);
  const on = !host && (opts.enabled ?? request.advertisesCapabilities(ctx.req));
  const replay = opts.replayDeletion !== false;
  const observed = request.getObservedComposedResources(ctx.req);
  const desired = ctx.rsp.desired!.resources;
  const obs = (name: string) => getOwn(observed, name)?.resource;
  const present = (name: string) => {
    const o = obs(name);
    return o !== undefined && !isDeleting(o);
  };

  const mine = new Map<string, Edge & { obj: JsonObject }>();
  for (const [key, r] of Object.entries(observed)) {
    const e = ours(r.resource);
    if (e) mine.set(key, { ...e, obj: r.resource! });
  }

  const edges = edgesOf(graph);
  const wanted = new Map<string, Edge>();
  const notYet: string[] = [];
  for (const e of on ? edges : []) {
    const key = usageKey(e);
    const absent = [e.by, e.of].filter((n) => !present(n));
    if (absent.length > 0) {
      notYet.push(`${e.of} after ${e.by} (${absent.join(" and ")} ${absent.length > 1 ? "do" : "does"} not exist yet)`);
      continue;
    }
    // R leaving desired state goes first anyway; D leaving it while R stays is kept below, being in use.
    if (!Object.hasOwn(desired, e.by) || (!Object.hasOwn(desired, e.of) && !mine.has(key))) continue;
    const taken = getOwn(desired, key);
    const twin = wanted.get(key);
    if ((taken && !ours(taken.resource)) || twin) {
      const holder = twin ? `the Usage of ${twin.of} by ${twin.by} has that name too` : "a composed resource of that name exists";
      response.warning(ctx.rsp, `cannot compose the Usage ${key} (of ${e.of} by ${e.by}): ${holder}`).withReason("UsageNameTaken");
      continue;
    }
    wanted.set(key, e);
    const usage = usageObject(e, obs(e.of)!, obs(e.by)!, replay);
    // Ready whatever its own condition says: the XR's infrastructure is there either way (DeletionOrdered tells the rest).
    response.setDesiredComposedResource(ctx.rsp, key, usage, { ready: true });
  }

  // Usages composed before and no longer wanted: released while their user stays, else dropped.
  for (const [key, u] of mine) {
    if (wanted.has(key)) continue;
    const hasBy = getObject(u.obj, "spec.by") !== undefined;
    if (!host && hasBy && present(u.by) && Object.hasOwn(desired, u.by) && !isDeleting(u.obj))
      response.setDesiredComposedResource(ctx.rsp, key, released(u, u.obj), { ready: true });
    else delete desired[key];
  }

  // What a Usage still protects stays, so that Crossplane does not try to delete it (and fail) before the Usage goes.
  for (const [key, u] of mine) {
    if (host || Object.hasOwn(desired, u.of) || !present(u.of)) continue;
    response.setDesiredComposedResource(ctx.rsp, u.of, lastDesired(ctx.req, u.of), { ready: true });
    response
      .normal(
        ctx.rsp,
        wanted.has(key)
          ? `${u.of}: no longer desired, but ${u.by} depends on it; keeping it while it does (the Usage ${key} protects it)`
          : `${u.of}: keeping it until the Usage ${key} is gone`,
      )
      .withReason("KeptInUse")
      .targetCompositeAndClaim();
  }

  const why = host ? "host" : on ? "on" : opts.enabled === false ? "off" : "unknown caller";
  deletionOrderCondition(ctx, xr, { why, edges, wanted, notYet, mine });
}

function deletionOrderCondition(
  ctx: StepContext,
  xr: JsonObject,
  s: {
    why: "host" | "on" | "off" | "unknown caller";
    edges: Edge[];
    wanted: Map<string, Edge>;
    notYet: string[];
    mine: Map<string, { obj: JsonObject }>;
  },
): void {
  const had = getObjectCondition(xr, DELETION_ORDER_TYPE) !== undefined;
  if (s.why !== "on" || s.edges.length === 0) {
    // Crossplane keeps a condition a function stops returning: say it no longer holds.
    if (had)
      response
        .conditionFalse(ctx.rsp, DELETION_ORDER_TYPE, "NotOrdered")
        .withMessage(
          s.why === "host"
            ? "xfn host deletes in dependency order itself: no Usages"
            : s.edges.length === 0
              ? "No dependencies to order: Crossplane deletes the composed resources all at once"
              : s.why === "off"
                ? "Usages are off for this pipeline: Crossplane deletes the composed resources all at once"
                : "No Usages: the caller does not list its capabilities (a Crossplane before v2.2, which may have none); " +
                  "usages enabled: true turns them on",
        );
    return;
  }
  // Nothing composed yet, nothing said before: too early to say anything (status.waiting says what is held).
  if (s.wanted.size === 0 && !had) return;
  const after = new Map<string, string[]>();
  const pending: string[] = [...s.notYet];
  for (const [key, e] of s.wanted) {
    if (isReadyTrue(s.mine.get(key)?.obj)) after.set(e.of, [...(after.get(e.of) ?? []), e.by]);
    else pending.push(`${e.of} after ${e.by} (its Usage is not ready yet; Crossplane runs Usages with its webhooks on)`);
  }
  const ordered = [...after].map(([of, by]) => `${of} after ${by.join(" and ")}`);
  const parts = [
    ...(ordered.length ? [`On deletion, Crossplane deletes ${ordered.join("; ")}`] : []),
    ...(pending.length ? [`not ordered yet: ${pending.join("; ")}`] : []),
  ];
  const message = parts.join("; ");
  const c =
    pending.length === 0
      ? response.conditionTrue(ctx.rsp, DELETION_ORDER_TYPE, "Ordered")
      : response.conditionFalse(ctx.rsp, DELETION_ORDER_TYPE, "Pending");
  c.withMessage(message.charAt(0).toUpperCase() + message.slice(1));
}

/** isOwnUsage says whether a composed resource is a Usage the dependencies step composed. */
export const isOwnUsage = (o: JsonObject | undefined): boolean => ours(o) !== undefined;

/** hasOwnUsages says whether the request observes a Usage the dependencies step composed (releaseUsages has work). */
export function hasOwnUsages(req: RunFunctionRequest): boolean {
  return Object.values(request.getObservedComposedResources(req)).some((r) => isOwnUsage(r.resource));
}

/**
 * releaseUsages is the step for a pipeline that no longer has a dependencies
 * step: it releases and drops the Usages one composed before, as the
 * dependencies step does with usages off, so that none is left waiting for its
 * user (function-lifecycle runs it when its input has no dependencies and the
 * request observes such a Usage: hasOwnUsages).
 */
export function releaseUsages(): Step {
  return step("releaseUsages", (ctx) => composeUsages(ctx, new Map(), { enabled: false }));
}
