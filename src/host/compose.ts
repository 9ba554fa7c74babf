// One XR reconcile, in the phases Crossplane's composer has: observe, run the
// Composition's pipeline, compose, apply what changed, delete what was
// dropped, report (status, conditions, Events). The watches that bring an XR
// back when one of its composed resources changes are in composed-watches.ts.
import { createHash } from "node:crypto";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import {
  PatchStrategy,
  setHeaderOptions,
  type CustomObjectsApi,
  type KubernetesObject,
  type KubernetesObjectApi,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { StepObserver } from "../engine/observer.js";
import {
  COMPOSITE_LABEL,
  COMPOSITION_RESOURCE_NAME,
  ComposeError,
  composeResources,
  resourceRefsOf,
  type Composed,
} from "../engine/composed.js";
import { checkComposition, FatalResultError, runPipeline, type PipelineResult, type StepResult } from "../engine/composition.js";
import type { Runner } from "../engine/runner.js";
import type { Tracing } from "../telemetry/otel.js";
import { counted, traceReconcile, type loadSdk, type Traced } from "./tracing.js";
import { Ready, ResourceSchema, type Resource } from "../gen/fn/v1/run_function_pb.js";
import type { HostMetrics } from "../metrics.js";
import { setOwn } from "../own.js";
import { XR_FINALIZER, type XRType } from "./crds.js";
import type { EventRecorder, HostEvent } from "./events.js";
import { apiMessage, errorCode, holds, isObject, keyOf, kubeObject, metaOf, plain, refOf, str, type Ref } from "./kube.js";
import { requeueAfterMs } from "./requeue.js";
import { selectComposition } from "./select.js";
import { deletingMessage, deletionReport } from "../engine/deleting.js";
import {
  afterFatal,
  clip,
  FOREGROUND_NOTE,
  foreground,
  keptStatus,
  mergeConditions,
  readyAndSynced,
  withHealth,
  recordedOrder,
  resultEvents,
  type Condition,
} from "./status.js";
import { pruneToSchema } from "../schema/schema.js";
import { mergePatch } from "../apiserver/patch.js";
import type { ResourceState } from "../graph/model.js";
import { ComposedWatches } from "./composed-watches.js";
import type { Kind, WatchManager } from "./watches.js";
import { messageOf } from "../sdk/errors.js";
import { fetcher } from "./fetch.js";
import { HOST_CONTEXT_KEY } from "../steps/usages.js";

const EXTERNAL_NAME = "crossplane.io/external-name";
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
/** hash is a digest of a JSON value that does not depend on the order of its keys (a resource named before or after it was observed). */
const hash = (v: unknown) =>
  createHash("sha256")
    .update(
      JSON.stringify(v, (_k, x: unknown) =>
        isObject(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x,
      ),
    )
    .digest("hex");
/** objectId names an object by apiVersion, kind, namespace and name (what the host applied, what it deleted). */
const objectId = (apiVersion: string, kind: string, namespace: string | undefined, name: string) =>
  `${apiVersion}/${kind}/${keyOf(namespace, name)}`;

/** How long a composed resource the host deleted is read from the API server, not the cache (which may not show it yet). */
const DELETED_READ_MS = 30_000;

/** How soon an XR is looked at again while it waits (a name held, a deletion without its pipeline). */
const WAIT_MS = 2_000;

export interface ComposerDeps {
  objects: KubernetesObjectApi;
  custom: CustomObjectsApi;
  runner: Runner;
  log: Logger;
  events: EventRecorder;
  metrics: HostMetrics;
  /** The longest one function call may take. */
  functionTimeoutMs: number;
  /** The longest a reconcile's pipeline may take: Crossplane's reconcile timeout (2 minutes). */
  reconcileTimeoutMs: number;
  watches: () => WatchManager;
  enqueue: (key: string) => void;
  xrCache: (t: XRType) => JsonObject[];
  compositions: () => JsonObject[];
  xrd: (name: string) => JsonObject | undefined;
  /** Keep each XR's resource states and pipeline context for its graph (picture). */
  graphs: boolean;
  /** Told of every step's request and response (a Pipeline Inspector). */
  inspector?: StepObserver;
  /** Traces, when the OTEL_ variables ask for them (host/tracing.ts). */
  tracing?: { t: Tracing; api: Awaited<ReturnType<typeof loadSdk>> };
}

/** Stop ends a reconcile early, with what reconcile returns then (a requeue, or nothing). */
class Stop {
  constructor(readonly result: { requeueAfterMs?: number } | void) {}
}

/** Reconciling is one reconcile under way: the XR, what was observed of it, and what is to be said of it. */
interface Reconciling {
  t: XRType;
  key: string;
  namespace: string | undefined;
  xr: JsonObject;
  deleting: boolean;
  log: Logger;
  started: number;
  /** When the reconcile's time is up (Date.now() clock): Crossplane gives a reconcile 2 minutes. */
  deadline: number;
  tally: { applied: number; skipped: number; deleted: number; status: boolean; events: number };
  /** What went wrong along the way that does not stop the reconcile (Synced=False names each). */
  problems: string[];
  /** Events to record with the status. */
  events: HostEvent[];
  /** The composed resources, by composition resource name: as the pipeline observes them, and as read. */
  observed: Record<string, Resource>;
  observedObjects: Map<string, JsonObject>;
  /**
   * What is to be written to the XR itself (finalizer, label, the chosen
   * Composition, resource references), already set on xr in memory, and the
   * Events that say so: one patch before the first composed write (flush).
   */
  pending: { patch: JsonObject; events: HostEvent[] } | undefined;
}

/** Applied is what the apply phase did: what keeps the XR from being ready. */
interface Applied {
  unready: string[];
  waiting: string[];
}

/**
 * Composer reconciles XRs and keeps what the host remembers between
 * reconciles. A reconcile runs in the phases Crossplane's composer has:
 * begin (read the XR, add its finalizer and label), observe (its composed
 * resources), choose a Composition, run the functions, compose (name, place
 * and check the desired resources), apply, prune (delete what was dropped)
 * and report (references, status, conditions, Events).
 */
export class Composer {
  /** The composed kinds each XR watches. */
  private readonly watched: ComposedWatches;
  /** What was last applied to each composed object (a digest of the body), and last written as each XR's status. */
  private readonly applied = new Map<string, string>();
  private readonly appliedBy = new Map<string, Set<string>>();
  private readonly statusWritten = new Map<string, string>();
  /** Composed resources this host deleted (apiVersion/kind/namespace/name) and when: read from the API server for a while. */
  private readonly deleted = new Map<string, number>();
  /** What each XR's last reconcile knew for its graph (/graph), by XR key. */
  private readonly pictures = new Map<string, { states: ResourceState[]; context: JsonObject }>();
  /** Status fields already warned of as undeclared, by XRD and path. */
  private readonly warnedUndeclared = new Set<string>();
  /** What each XR's steps required on its last reconcile, to seed the next with (as Crossplane's dependency tracker does). */
  private readonly required = new Map<string, PipelineResult["required"]>();

  constructor(private readonly d: ComposerDeps) {
    this.watched = new ComposedWatches({ objects: d.objects, watches: d.watches, enqueue: d.enqueue });
  }

  /** track notes an XR's uid, so its composed resources' events reach it. */
  track(uid: string, key: string): void {
    this.watched.track(uid, key);
  }

  /** reset forgets everything (the host stopped reconciling). */
  reset(): void {
    this.watched.reset();
    for (const m of [this.applied, this.appliedBy, this.statusWritten, this.required]) (m as Map<string, unknown>).clear();
  }

  /** forgetKind forgets every XR of an XR kind whose controller stopped. */
  async forgetKind(t: XRType): Promise<void> {
    for (const key of this.watched.keys()) if (key.startsWith(`${t.xrd}|`)) await this.forget(key);
  }

  /** forget drops what is kept for an XR that is gone, releasing watches no other XR uses. */
  async forget(key: string): Promise<void> {
    const uid = await this.watched.release(key);
    for (const id of this.appliedBy.get(key) ?? []) this.applied.delete(id);
    this.appliedBy.delete(key);
    this.statusWritten.delete(key);
    this.required.delete(key);
    this.pictures.delete(key);
    if (uid) this.d.events.forget(uid);
  }

  /** picture is what the last reconcile of the XR at key knew for its graph (the resources' states, the pipeline's context). */
  picture(key: string): { states: ResourceState[]; context: JsonObject } | undefined {
    return this.pictures.get(key);
  }

  /**
   * collectWatches releases what is kept for XRs no longer in their kind's
   * cache (gone while an event was missed). A watch an existing XR uses is
   * never released.
   */
  async collectWatches(types: XRType[]): Promise<void> {
    const live = new Set<string>();
    for (const t of types)
      for (const o of this.d.xrCache(t)) live.add(`${t.xrd}|${keyOf(str(metaOf(o)["namespace"]), String(metaOf(o)["name"]))}`);
    for (const key of this.watched.keys()) if (!live.has(key)) await this.forget(key);
  }

  /** reconcile runs one XR reconcile; key is "<xrd>|<namespace>/<name>". */
  async reconcile(t: XRType, key: string): Promise<{ requeueAfterMs?: number } | void> {
    // With traces: a span for the reconcile, its function calls its children (host/tracing.ts).
    const traced = this.d.tracing && traceReconcile(this.d.tracing.t, this.d.tracing.api, t.gvk.kind, key);
    const out = this.reconcileOnce(t, key, traced);
    out.then(
      (o) => traced && traced.end({ requeueAfterMs: o?.requeueAfterMs }),
      (error: unknown) => traced && traced.end({ error }),
    );
    return out;
  }

  private async reconcileOnce(t: XRType, key: string, traced: Traced | undefined): Promise<{ requeueAfterMs?: number } | void> {
    try {
      const r = await this.begin(t, key);
      await this.observe(r);
      const composition = await this.chooseComposition(r);
      const result = await this.runFunctions(r, composition, traced);
      // While the XR is deleted, what the pipeline still desires is what it wants
      // kept for now: the deletion step drops resources in dependency order and
      // says so (Ready=False, reason Deleting). A pipeline without such a step
      // desires everything still; then, as in Crossplane, everything goes.
      const ordered = r.deleting && deletionReport(result.conditions) !== undefined;
      const desired = r.deleting && !ordered ? {} : result.desired.resources;
      const composed = await this.compose(r, result, desired);
      await this.recordRefs(r, composed);
      const applied = await this.apply(r, composed);
      await this.prune(r, desired);
      return await this.finish(r, result, ordered, applied);
    } catch (err) {
      if (err instanceof Stop) return err.result;
      throw err;
    }
  }

  /**
   * begin reads the XR fresh (one gone is forgotten) and adds what Crossplane's
   * XR controller adds before anything else: its finalizer, and the label
   * naming the prefix of its composed resources (its own name) unless set.
   */
  private async begin(t: XRType, key: string): Promise<Reconciling> {
    const [, nsName] = key.split("|") as [string, string];
    const [ns, name] = nsName.split("/") as [string, string];
    const namespace = ns || undefined;
    let xr: JsonObject;
    try {
      // The informer's copy when it has one as new as the host's own last write (watches.ts get),
      // as Crossplane's cached client reads; only the API server says an XR is gone.
      const cached = this.d.watches().get(t.kind, name, namespace);
      xr = plain(
        cached ??
          (await this.d.objects.read({
            apiVersion: t.gvk.apiVersion,
            kind: t.gvk.kind,
            metadata: { name, ...(namespace ? { namespace } : {}) },
          })),
      );
    } catch (err) {
      if (errorCode(err) !== 404) throw err;
      await this.forget(key); // gone: release the watches held for it
      throw new Stop(undefined);
    }
    const m = metaOf(xr);
    this.track(String(m["uid"]), key);
    const deleting = Boolean(m["deletionTimestamp"]);
    const finalizers = Array.isArray(m["finalizers"]) ? (m["finalizers"] as string[]) : [];
    const labelled = str((m["labels"] as JsonObject | undefined)?.[COMPOSITE_LABEL]) !== undefined;
    const r: Reconciling = {
      t,
      key,
      namespace,
      xr,
      deleting,
      log: this.d.log.child({ xr: `${t.gvk.kind}/${nsName.replace(/^\//, "")}` }),
      started: performance.now(),
      deadline: Date.now() + this.d.reconcileTimeoutMs,
      tally: { applied: 0, skipped: 0, deleted: 0, status: false, events: 0 },
      problems: [],
      events: [],
      observed: {},
      observedObjects: new Map(),
      pending: undefined,
    };
    if (!deleting && (!finalizers.includes(XR_FINALIZER) || !labelled))
      amend(r, {
        metadata: {
          ...(finalizers.includes(XR_FINALIZER) ? {} : { finalizers: [...finalizers, XR_FINALIZER] }),
          ...(labelled ? {} : { labels: { [COMPOSITE_LABEL]: String(m["name"]) } }),
        },
      });
    return r;
  }

  /**
   * observe reads the XR's composed resources fresh, by its references. One
   * gone, or whose kind is no longer served, is not there to observe. A
   * deleted XR with nothing left loses its finalizer, and the reconcile ends.
   */
  private async observe(r: Reconciling): Promise<void> {
    for (const ref of resourceRefs(r.xr)) {
      try {
        const k = await this.watched.watch(r.key, ref.apiVersion, ref.kind);
        const ns = ref.namespace || r.namespace; // a namespaced XR's references carry no namespace: its resources are in its own
        // From the watch's cache when it has it (as begin reads the XR); one not there is read, and only a 404 is gone.
        const gone = objectId(ref.apiVersion, ref.kind, ns, ref.name);
        const at = this.deleted.get(gone);
        if (at !== undefined && Date.now() - at > DELETED_READ_MS) this.deleted.delete(gone);
        const cached = k && at === undefined ? this.d.watches().get(k, ref.name, ns) : undefined;
        const o = plain(
          cached ??
            (await this.d.objects.read({
              apiVersion: ref.apiVersion,
              kind: ref.kind,
              metadata: { name: ref.name, ...(ns ? { namespace: ns } : {}) },
            })),
        );
        const rn = str((metaOf(o)["annotations"] as JsonObject | undefined)?.[COMPOSITION_RESOURCE_NAME]);
        if (!rn) continue;
        setOwn(r.observed, rn, create(ResourceSchema, { resource: o }));
        r.observedObjects.set(rn, o);
      } catch (err) {
        if (errorCode(err) === 404 || /does not serve/.test(messageOf(err))) continue;
        r.problems.push(`cannot read ${ref.kind} ${ref.name}: ${apiMessage(err)}`);
      }
    }
    if (r.deleting && r.observedObjects.size === 0 && r.problems.length === 0) {
      const finalizers = metaOf(r.xr)["finalizers"];
      await this.patchXR(r.t, r.xr, {
        metadata: { finalizers: (Array.isArray(finalizers) ? (finalizers as string[]) : []).filter((f) => f !== XR_FINALIZER) },
      });
      r.log.info("all composed resources are gone; XR deleted");
      throw new Stop(undefined);
    }
  }

  /**
   * chooseComposition picks the XR's Composition as Crossplane does, and
   * records the choice on the XR, so that it holds when other Compositions
   * for the kind come (or the XRD's default changes).
   */
  private async chooseComposition(r: Reconciling): Promise<JsonObject> {
    try {
      const chosen = selectComposition(r.t.gvk, this.d.xrd(r.t.xrd), this.d.compositions(), r.xr);
      const name = String(metaOf(chosen.obj)["name"]);
      if (!r.deleting && chosen.recorded !== name)
        // Written with the XR's other changes (flush); the Event is the one Crossplane's
        // XR reconciler records when it first sets the reference (reconciler.go, v2.4.0).
        amend(r, r.t.legacy ? { spec: { compositionRef: { name } } } : { spec: { crossplane: { compositionRef: { name } } } }, {
          type: "Normal",
          reason: "SelectComposition",
          message: `Successfully selected composition: ${name}`,
        });
      return chosen.obj;
    } catch (err) {
      const message = `cannot select a Composition: ${messageOf(err)}`;
      await this.report(
        r,
        keptStatus(r.xr),
        [{ type: "Synced", status: "False", reason: "ReconcileError", message }],
        [{ type: "Warning", reason: "SelectComposition", message }],
      );
      throw new Error(message);
    }
  }

  /**
   * runFunctions runs the Composition's pipeline. A failure is reported as
   * Crossplane reports one: Synced=False and a Warning naming why; a Fatal
   * result's step still reports the results before it and its conditions,
   * and the XR's other custom conditions become Unknown, since nothing could
   * say what they are now. A deleted XR whose pipeline cannot run is deleted
   * without it.
   */
  private async runFunctions(r: Reconciling, composition: JsonObject, traced?: Traced): Promise<PipelineResult> {
    let result: PipelineResult;
    try {
      result = await runPipeline(
        {
          steps: checkComposition(
            { obj: r.xr, source: `${r.t.gvk.kind} ${String(metaOf(r.xr)["name"])}` },
            { obj: composition, source: `Composition ${String(metaOf(composition)["name"])}` },
          ),
          xr: r.xr,
          observed: r.observed,
          // The host deletes in dependency order itself: the dependencies step composes no Crossplane Usages here.
          context: { [HOST_CONTEXT_KEY]: { ordersDeletion: true } },
          credentials: [],
          fetch: fetcher(this.d.objects),
          seed: (step) => this.required.get(r.key)?.[step] ?? [],
          ...(this.d.inspector ? { observer: this.d.inspector, compositionName: String(metaOf(composition)["name"] ?? "") } : {}),
        },
        counted(this.d, traced),
        r.deadline,
      );
    } catch (err) {
      const fatal = err instanceof FatalResultError;
      const message = `cannot compose resources: ${messageOf(err)}`;
      const results = fatal ? err.results : [];
      if (r.deleting) throw new Stop(await this.deleteWithoutPipeline(r, message, results));
      const custom = fatal ? afterFatal(err, r.xr) : [];
      // Only conditions change: what the pipeline wrote last (recorded external names among it) stays.
      await this.report(
        r,
        keptStatus(r.xr),
        [{ type: "Synced", status: "False", reason: "ReconcileError", message: clip(message) }, ...custom],
        [...resultEvents(results), { type: "Warning" as const, reason: "ComposeResources", message }],
      );
      throw new Error(message);
    }
    this.required.set(r.key, result.required);
    // What the steps required is watched: a change to it reconciles this XR again (crossplane PR #7572).
    await this.watched.require(r.key, result.required);
    return result;
  }

  /** compose names, places and checks every desired resource as Crossplane's composer does; a refusal stops before anything is applied. */
  private async compose(r: Reconciling, result: PipelineResult, desired: Record<string, Resource>): Promise<Composed[]> {
    try {
      const scopes = await this.watched.scopes(desired);
      const observed: Record<string, JsonObject> = {};
      for (const [rn, o] of r.observedObjects) setOwn(observed, rn, o);
      const c = composeResources({ xr: r.xr, desired, observed, namespaced: (apiVersion, kind) => scopes.get(`${apiVersion}|${kind}`) });
      r.events.push(...c.events);
      return c.composed;
    } catch (err) {
      if (!(err instanceof ComposeError)) throw err;
      const message = `cannot compose resources: ${err.message}`;
      if (r.deleting) throw new Stop(await this.deleteWithoutPipeline(r, message, result.results));
      await this.report(
        r,
        keptStatus(r.xr),
        [{ type: "Synced", status: "False", reason: "ReconcileError", message: clip(message) }],
        [...resultEvents(result.results), ...r.events, { type: "Warning", reason: "ComposeResources", message }],
      );
      throw new Error(message);
    }
  }

  /**
   * recordRefs records references to every composed resource before any is
   * applied, as Crossplane's composer does: a host killed between applying a
   * resource and writing the XR's status finds it again by reference next time,
   * so nothing it composed is orphaned and its functions observe what they
   * composed (an external name above all). Resources observed but no longer
   * desired stay referenced until they are gone (prune deletes them).
   */
  private async recordRefs(r: Reconciling, composed: Composed[]): Promise<void> {
    const desired = new Set(composed.map((c) => c.name));
    const leaving = [...r.observedObjects].filter(([rn]) => !desired.has(rn)).map(([, o]) => o);
    const refs = resourceRefsOf(
      r.xr,
      [...composed.map((c) => c.object), ...leaving].map((o) => {
        const x = refOf(o);
        return { apiVersion: x.apiVersion, kind: x.kind, metadata: { name: x.name, ...(x.namespace ? { namespace: x.namespace } : {}) } };
      }),
    );
    if (JSON.stringify(refs) !== JSON.stringify(resourceRefs(r.xr))) {
      const list = refs as unknown as JsonValue[];
      amend(r, r.t.legacy ? { spec: { resourceRefs: list } } : { spec: { crossplane: { resourceRefs: list } } });
    }
    await this.flush(r);
  }

  /**
   * flush writes what the reconcile has to write to the XR itself in one
   * patch (Crossplane's reconciler makes one update for its finalizer, one for
   * its Composition and one apply for its references, each before anything is
   * composed), then the Events that say so. It comes before the first composed
   * resource is written, and before a failure is reported.
   */
  private async flush(r: Reconciling): Promise<void> {
    const p = r.pending;
    if (!p) return;
    await this.patchXR(r.t, r.xr, p.patch);
    r.pending = undefined;
    if (p.events.length > 0) await this.d.events.record(r.xr, p.events);
  }

  /**
   * apply server-side applies each composed resource that changed (one
   * unchanged since its last apply is skipped), holding back a new one whose
   * external name a resource being deleted still holds.
   */
  private async apply(r: Reconciling, composed: Composed[]): Promise<Applied> {
    const out: Applied = { unready: [], waiting: [] };
    for (const c of composed) {
      const rn = c.name;
      const seen = r.observedObjects.get(rn);
      const obj = c.object;
      delete obj["status"]; // the API server ignores status on apply; the status subresource is the provider's
      const id = objectId(String(obj["apiVersion"]), String(obj["kind"]), str(metaOf(obj)["namespace"]), String(metaOf(obj)["name"]));
      try {
        const k = await this.watched.watch(r.key, String(obj["apiVersion"]), String(obj["kind"]));
        const holder = !seen && k ? await this.externalNameHolder(k, obj) : undefined;
        if (holder) {
          const message =
            `${rn}: external name ${JSON.stringify(holder.name)} is still held by ${holder.what}, ` +
            "which is being deleted; waiting until it is gone";
          out.waiting.push(message);
          r.events.push({ type: "Warning", reason: "ExternalNameInUse", message });
          out.unready.push(rn);
          continue;
        }
        const body = hash(obj);
        if (seen && this.applied.get(id) === body && holds(seen, obj)) {
          this.d.metrics.skipped.inc({ what: "apply" });
          r.tally.skipped++;
        } else {
          const manager = `xfn/${String(metaOf(r.xr)["uid"])}`;
          const answer = await this.d.objects.patch(kubeObject(obj), undefined, undefined, manager, true, PatchStrategy.ServerSideApply);
          if (k) this.d.watches().wrote(k, answer);
          this.applied.set(id, body);
          (this.appliedBy.get(r.key) ?? this.appliedBy.set(r.key, new Set()).get(r.key)!).add(id);
          this.d.metrics.writes.inc({ what: "apply" });
          r.tally.applied++;
        }
      } catch (err) {
        r.problems.push(`cannot apply ${String(obj["kind"])} ${String(metaOf(obj)["name"])} (resource ${rn}): ${apiMessage(err)}`);
        out.unready.push(rn);
        continue;
      }
      // Ready only when the pipeline says so, as in Crossplane: a resource's own
      // Ready condition counts only through a step that reads it (readiness).
      if (!c.ready) out.unready.push(rn);
    }
    return out;
  }

  /** prune deletes the observed resources the pipeline no longer desires; each stays referenced, and observed, until it is gone. */
  private async prune(r: Reconciling, desired: Record<string, Resource>): Promise<void> {
    for (const [rn, o] of r.observedObjects) {
      if (Object.hasOwn(desired, rn)) continue;
      if (!metaOf(o)["deletionTimestamp"]) {
        try {
          await this.deleteComposed(o, r.deleting);
          r.tally.deleted++;
          r.log.info({ resource: rn }, r.deleting ? "deleting composed resource" : "deleted dropped composed resource");
        } catch (err) {
          r.problems.push(`cannot delete ${String(o["kind"])} ${String(metaOf(o)["name"])} (resource ${rn}): ${apiMessage(err)}`);
        }
      }
    }
  }

  /** finish writes the status, conditions and Events (references were recorded before apply); it says when to come back. */
  private async finish(r: Reconciling, result: PipelineResult, ordered: boolean, applied: Applied): Promise<{ requeueAfterMs: number }> {
    const { waiting } = applied;
    if (this.d.graphs)
      this.pictures.set(r.key, {
        states: Object.entries(result.desired.resources).map(([name, d]) => ({
          name,
          kind: str(d.resource?.["kind"]) ?? "",
          ready: d.ready === Ready.TRUE,
          observed: r.observedObjects.has(name),
        })),
        context: result.context ?? {},
      });
    const conds = readyAndSynced(r, result, ordered, applied);
    if (r.deleting && foreground(r.xr)) {
      // Kubernetes' garbage collector deletes every dependent of a foreground deletion at once: say so where the XR's state is read.
      const ready = conds.find((x) => x.type === "Ready");
      if (ready) ready.message = clip(ready.message ? `${FOREGROUND_NOTE}; ${ready.message}` : FOREGROUND_NOTE);
      r.events.push({ type: "Warning", reason: "ForegroundDeletion", message: FOREGROUND_NOTE });
    }
    const status = result.desired.composite?.resource?.["status"];
    for (const p of r.problems) r.events.push({ type: "Warning", reason: "ComposeResources", message: p });
    // Crossplane's XR reconciler names each composed resource not ready yet in an event of its own, every reconcile.
    if (!r.deleting)
      for (const rn of applied.unready)
        r.events.push({ type: "Normal", reason: "ComposeResources", message: `Composed resource ${JSON.stringify(rn)} is not yet ready` });
    const written = await this.report(r, isObject(status) ? status : {}, conds, [...resultEvents(result.results), ...r.events]);
    r.tally.status = written.status;
    r.tally.events = written.events;
    r.log.debug(
      { ms: Math.round(performance.now() - r.started), ...r.tally, problems: r.problems.length, deleting: r.deleting },
      "reconciled",
    );
    if (r.problems.length > 0) throw new Error(r.problems.join("; "));
    if (waiting.length > 0) return { requeueAfterMs: WAIT_MS };
    if (r.deleting) return { requeueAfterMs: Math.min(result.ttlSeconds ?? 2, 2) * 1000 };
    return { requeueAfterMs: requeueAfterMs(r.xr, result.ttlSeconds) };
  }

  /**
   * deleteWithoutPipeline deletes a deleted XR's composed resources when its
   * pipeline cannot run (a function down, or failing): in the order the
   * deletion step recorded (status.deletion.order: waves, dependents first),
   * one wave at a time; everything at once when none was recorded, as
   * Crossplane's garbage collection would.
   */
  private async deleteWithoutPipeline(r: Reconciling, why: string, results: StepResult[]): Promise<{ requeueAfterMs: number }> {
    const { xr, log } = r;
    const observed = r.observedObjects;
    const present = [...observed.keys()].sort();
    const recorded = recordedOrder(xr);
    const known = new Set(recorded.flat());
    const waves = [present.filter((n) => !known.has(n)), ...recorded.map((w) => w.filter((n) => observed.has(n)))].filter(
      (w) => w.length > 0,
    );
    const now = waves[0] ?? [];
    for (const rn of now) {
      const o = observed.get(rn)!;
      if (metaOf(o)["deletionTimestamp"]) continue;
      await this.deleteComposed(o, true);
      log.info({ resource: rn }, "deleting composed resource (without the pipeline, in the recorded order)");
    }
    const later = waves.slice(1).flat();
    const how = recorded.length > 0 ? "in the order the pipeline recorded" : "all at once (no order was recorded)";
    const message =
      `deleting without the pipeline (${why}), ${how}: ${deletingMessage(new Map(now.map((n) => [n, observed.get(n)!])))}` +
      (later.length ? `; deleting later: ${later.join(", ")}` : "");
    await this.report(
      r,
      keptStatus(xr),
      [
        { type: "Synced", status: "False", reason: "ReconcileError", message: clip(why) },
        { type: "Ready", status: "False", reason: "Deleting", message: clip(message) },
      ],
      [...resultEvents(results), { type: "Warning", reason: "Deleting", message: `the pipeline cannot run; deleting ${how}` }],
    );
    return { requeueAfterMs: WAIT_MS };
  }

  private async deleteComposed(o: JsonObject, foreground: boolean): Promise<void> {
    const m = metaOf(o);
    if (this.deleted.size >= 100_000) this.deleted.clear();
    this.deleted.set(objectId(String(o["apiVersion"]), String(o["kind"]), str(m["namespace"]), String(m["name"])), Date.now());
    await this.d.objects
      .delete(o as KubernetesObject, undefined, undefined, undefined, undefined, foreground ? "Foreground" : "Background")
      .catch((err) => {
        if (errorCode(err) !== 404) throw err;
      });
    this.d.metrics.writes.inc({ what: "delete" });
  }

  /**
   * externalNameHolder finds an object of the same kind, being deleted, that
   * still holds the external name obj is about to be created with: creating
   * obj now would make two objects manage one cloud resource.
   */
  private async externalNameHolder(k: Kind, obj: JsonObject): Promise<{ name: string; what: string } | undefined> {
    const ext = str((metaOf(obj)["annotations"] as JsonObject | undefined)?.[EXTERNAL_NAME]);
    if (!ext) return undefined;
    await this.d.watches().synced(k);
    for (const o of this.d.watches().cached(k) as unknown as JsonObject[]) {
      const om = metaOf(o);
      if (!om["deletionTimestamp"] || str((om["annotations"] as JsonObject | undefined)?.[EXTERNAL_NAME]) !== ext) continue;
      if (om["name"] === metaOf(obj)["name"] && om["namespace"] === metaOf(obj)["namespace"]) continue;
      return { name: ext, what: `${String(o["kind"])} ${String(om["name"])}` };
    }
    return undefined;
  }

  /**
   * report writes the XR's status (its desired status and the conditions) if
   * that changes anything, and the Events that are new. It returns what it wrote.
   */
  private async report(
    r: Reconciling,
    desired: JsonObject,
    conds: Condition[],
    events: HostEvent[],
  ): Promise<{ status: boolean; events: number }> {
    await this.flush(r);
    const { t, key, xr } = r;
    const m = metaOf(xr);
    const status = { ...desired, conditions: mergeConditions(xr, withHealth(conds, r.observedObjects)) };
    const body = {
      apiVersion: t.gvk.apiVersion,
      kind: t.gvk.kind,
      metadata: { name: String(m["name"]), ...(m["namespace"] ? { namespace: String(m["namespace"]) } : {}) },
      status,
    };
    // Crossplane writes an XR's status with an update, which the API server
    // prunes to the XRD's schema; a server-side apply of an undeclared field
    // would fail the whole write instead. So the host drops what the schema
    // does not declare, as the update would, and says so once per field (the
    // statusSchema step names the schema to add).
    if (t.schema) for (const path of pruneToSchema(body, t.schema)) this.undeclared(r, path);
    const h = hash(status);
    let wrote = false;
    if (this.statusWritten.get(key) === h && holds(xr["status"], status)) this.d.metrics.skipped.inc({ what: "status" });
    else {
      const base = {
        group: t.kind.group,
        version: t.kind.version,
        plural: t.kind.plural,
        name: String(m["name"]),
        body,
        fieldManager: `xfn-status/${String(m["uid"])}`,
        force: true,
      };
      const opts = setHeaderOptions("Content-Type", PatchStrategy.ServerSideApply);
      const write = async (b: JsonObject) => {
        const answer = m["namespace"]
          ? await this.d.custom.patchNamespacedCustomObjectStatus({ ...base, body: b, namespace: String(m["namespace"]) }, opts)
          : await this.d.custom.patchClusterCustomObjectStatus({ ...base, body: b }, opts);
        this.d.watches().wrote(t.kind, answer as KubernetesObject);
      };
      try {
        await write(body);
      } catch (err) {
        if (errorCode(err) !== 422) throw err;
        // The API server refused the pipeline's status (the XRD's schema, its
        // rules): keep the status as it was and say why, naming the field,
        // where users look (Crossplane would leave the conditions as they were).
        const why = `cannot update the composite resource's status: ${apiMessage(err)}`;
        const synced: Condition = { type: "Synced", status: "False", reason: "ReconcileError", message: clip(why) };
        await write({
          ...body,
          status: {
            ...keptStatus(xr),
            conditions: mergeConditions(xr, withHealth([...conds.filter((c) => c.type !== "Synced"), synced], r.observedObjects)),
          },
        });
        await this.d.events.record(xr, [...events, { type: "Warning", reason: "ComposeResources", message: why }]);
        throw new Error(why);
      }
      this.statusWritten.set(key, h);
      this.d.metrics.writes.inc({ what: "status" });
      wrote = true;
    }
    const n = await this.d.events.record(xr, events);
    if (n > 0) this.d.metrics.writes.inc({ what: "event" }, n);
    return { status: wrote, events: n };
  }

  /** undeclared warns, once per XR kind and field, of a status field the XRD does not declare. */
  private undeclared(r: Reconciling, path: string): void {
    const key = `${r.t.xrd}\n${path.replace(/\[\d+\]/g, "[]")}`;
    if (this.warnedUndeclared.has(key)) return;
    this.warnedUndeclared.add(key);
    r.log.warn(
      { xrd: r.t.xrd, field: path },
      `the pipeline wrote ${path}, which the XRD's schema does not declare: the API server drops it (declare it in the XRD)`,
    );
  }

  /** patchXR merge-patches the XR itself (finalizers, resource references, the chosen Composition). */
  private async patchXR(t: XRType, xr: JsonObject, patch: JsonObject): Promise<void> {
    const m = metaOf(xr);
    const base = { group: t.kind.group, version: t.kind.version, plural: t.kind.plural, name: String(m["name"]), body: patch };
    const answer = m["namespace"]
      ? await this.d.custom.patchNamespacedCustomObject({ ...base, namespace: String(m["namespace"]) }, merge)
      : await this.d.custom.patchClusterCustomObject(base, merge);
    // Until the watch brings this write, the XR is read from the API server (watches.ts get).
    this.d.watches().wrote(t.kind, answer as KubernetesObject);
    this.d.metrics.writes.inc({ what: "xr" });
  }
}

/** amend sets a change to the XR itself in memory, and keeps it (merged with others) for flush to write, with the Event that says so. */
function amend(r: Reconciling, patch: JsonObject, event?: HostEvent): void {
  r.xr = mergePatch(r.xr, patch) as JsonObject;
  r.pending = {
    patch: mergePatch(r.pending?.patch ?? {}, patch) as JsonObject,
    events: [...(r.pending?.events ?? []), ...(event ? [event] : [])],
  };
}

/** resourceRefs reads the XR's composed resource references (spec.crossplane.resourceRefs, or spec.resourceRefs of a legacy XR). */
export function resourceRefs(xr: JsonObject): Ref[] {
  const spec = isObject(xr["spec"]) ? xr["spec"] : {};
  const cp = isObject(spec["crossplane"]) ? spec["crossplane"] : {};
  const refs = Array.isArray(cp["resourceRefs"]) ? cp["resourceRefs"] : Array.isArray(spec["resourceRefs"]) ? spec["resourceRefs"] : [];
  return refs.filter(isObject).map((r) => ({
    apiVersion: String(r["apiVersion"]),
    kind: String(r["kind"]),
    name: String(r["name"]),
    ...(r["namespace"] ? { namespace: String(r["namespace"]) } : {}),
  }));
}
