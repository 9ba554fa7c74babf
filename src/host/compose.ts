// One XR reconcile: observe, run the Composition's pipeline, apply what
// changed, delete what was dropped, report (status, conditions, Events), and
// the watches that bring an XR back when one of its composed resources changes.
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
import {
  COMPOSITE_LABEL,
  COMPOSITION_RESOURCE_NAME,
  ComposeError,
  composeResources,
  firstNAndSomeMore,
  resourceRefsOf,
  type Composed,
} from "../engine/composed.js";
import {
  checkComposition,
  FatalResultError,
  resultEvent,
  runPipeline,
  type Fetch,
  type PipelineResult,
  type StepResult,
} from "../engine/composition.js";
import type { Runner } from "../engine/runner.js";
import { Ready, ResourceSchema, type Resource, type RunFunctionRequest } from "../gen/fn/v1/run_function_pb.js";
import type { HostMetrics } from "../metrics.js";
import { setOwn } from "../own.js";
import { XR_FINALIZER, type XRType } from "./crds.js";
import type { EventRecorder, HostEvent } from "./events.js";
import { apiMessage, conditionsOf, errorCode, holds, isObject, keyOf, kubeObject, metaOf, plain, refOf, str, type Ref } from "./kube.js";
import { selectComposition } from "./select.js";
import { clip, mergeConditions, type Condition } from "./status.js";
import type { Kind, WatchEvent, WatchManager } from "./watches.js";

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
/** How soon an XR is looked at again while it waits (a name held, a deletion without its pipeline). */
const WAIT_MS = 2_000;

export interface ComposerDeps {
  objects: KubernetesObjectApi;
  custom: CustomObjectsApi;
  runner: Runner;
  log: Logger;
  events: EventRecorder;
  metrics: HostMetrics;
  functionTimeoutMs: number;
  watches: () => WatchManager;
  enqueue: (key: string) => void;
  xrCache: (t: XRType) => JsonObject[];
  compositions: () => JsonObject[];
  xrd: (name: string) => JsonObject | undefined;
}

interface KindWatch {
  kind: Kind;
  handle: ReturnType<WatchManager["ensure"]>;
  users: Set<string>;
}

/** Composer reconciles XRs and keeps what the host remembers between reconciles. */
export class Composer {
  /** XR uid -> its queue key, to send composed resources' events to their XR. */
  private readonly byUid = new Map<string, string>();
  private readonly uidOf = new Map<string, string>();
  /** Composed kinds watched, and which XRs use each; an XR's kinds. */
  private readonly kinds = new Map<string, KindWatch>();
  private readonly xrKinds = new Map<string, Set<string>>();
  /** What was last applied to each composed object (a hash of the body), and last written as each XR's status. */
  private readonly applied = new Map<string, string>();
  private readonly appliedBy = new Map<string, Set<string>>();
  private readonly statusWritten = new Map<string, string>();
  /** What each XR's steps required on its last reconcile, to seed the next with (as Crossplane's dependency tracker does). */
  private readonly required = new Map<string, PipelineResult["required"]>();
  private readonly plurals = new Map<string, string>();
  private readonly namespacedKinds = new Map<string, boolean>();

  constructor(private readonly d: ComposerDeps) {}

  /** track notes an XR's uid, so its composed resources' events reach it. */
  track(uid: string, key: string): void {
    this.byUid.set(uid, key);
    this.uidOf.set(key, uid);
  }

  /** reset forgets everything (the host stopped reconciling). */
  reset(): void {
    for (const m of [this.byUid, this.uidOf, this.kinds, this.xrKinds, this.applied, this.appliedBy, this.statusWritten, this.required])
      (m as Map<string, unknown>).clear();
  }

  /** forgetKind forgets every XR of an XR kind whose controller stopped. */
  async forgetKind(t: XRType): Promise<void> {
    for (const key of [...this.xrKinds.keys()]) if (key.startsWith(`${t.xrd}|`)) await this.forget(key);
  }

  /** forget drops what is kept for an XR that is gone, releasing watches no other XR uses. */
  async forget(key: string): Promise<void> {
    for (const kk of this.xrKinds.get(key) ?? []) {
      const w = this.kinds.get(kk);
      if (!w) continue;
      w.users.delete(key);
      if (w.users.size > 0) continue;
      this.kinds.delete(kk);
      await this.d.watches().release(w.handle);
    }
    this.xrKinds.delete(key);
    for (const id of this.appliedBy.get(key) ?? []) this.applied.delete(id);
    this.appliedBy.delete(key);
    this.statusWritten.delete(key);
    this.required.delete(key);
    const uid = this.uidOf.get(key);
    if (uid) {
      this.byUid.delete(uid);
      this.d.events.forget(uid);
    }
    this.uidOf.delete(key);
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
    for (const key of [...this.xrKinds.keys()]) if (!live.has(key)) await this.forget(key);
  }

  private onComposed(e: WatchEvent): void {
    const refs = metaOf(e.object)["ownerReferences"];
    if (!Array.isArray(refs)) return;
    for (const r of refs) {
      if (!isObject(r) || r["controller"] !== true) continue;
      const key = this.byUid.get(String(r["uid"]));
      if (key) this.d.enqueue(key);
    }
  }

  /** watchKind makes sure a composed kind is watched, counting the XR among its users; it resolves with the kind. */
  private async watchKind(key: string, apiVersion: string, kind: string): Promise<Kind | undefined> {
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
    if (!group) return undefined; // core kinds are not composed here
    const k: Kind = { group, version: version!, plural: await this.pluralOf(apiVersion, kind) };
    const kk = `${group}/${version}/${k.plural}`;
    let w = this.kinds.get(kk);
    if (!w) {
      w = { kind: k, handle: this.d.watches().ensure(k, "composed", (ev) => this.onComposed(ev)), users: new Set() };
      this.kinds.set(kk, w);
    }
    w.users.add(key);
    (this.xrKinds.get(key) ?? this.xrKinds.set(key, new Set()).get(key)!).add(kk);
    return k;
  }

  /** scopes resolves whether each desired resource's kind is namespaced (absent where discovery does not know the kind). */
  private async scopes(desired: Record<string, { resource?: JsonObject | undefined }>): Promise<Map<string, boolean>> {
    const out = new Map<string, boolean>();
    for (const d of Object.values(desired)) {
      const apiVersion = str(d.resource?.["apiVersion"]);
      const kind = str(d.resource?.["kind"]);
      if (!apiVersion || !kind || out.has(`${apiVersion}|${kind}`)) continue;
      try {
        await this.pluralOf(apiVersion, kind);
        const namespaced = this.namespacedKinds.get(`${apiVersion}/${kind}`);
        if (namespaced !== undefined) out.set(`${apiVersion}|${kind}`, namespaced);
      } catch {
        // Not served: applying it says so.
      }
    }
    return out;
  }

  /** pluralOf resolves a kind's plural through discovery; it throws naming a kind the API server does not serve. */
  private async pluralOf(apiVersion: string, kind: string): Promise<string> {
    const k = `${apiVersion}/${kind}`;
    const hit = this.plurals.get(k);
    if (hit) return hit;
    // KubernetesObjectApi.resource is protected in the types but is the discovery lookup we want.
    const lookup = this.d.objects as unknown as {
      resource(av: string, k: string): Promise<{ name: string; namespaced?: boolean } | undefined>;
    };
    let r: { name: string; namespaced?: boolean } | undefined;
    try {
      r = await lookup.resource(apiVersion, kind);
    } catch (err) {
      if (errorCode(err) !== 404) throw err;
    }
    if (!r) throw new Error(`the API server does not serve ${kind} in ${apiVersion} (is its CRD installed?)`);
    this.plurals.set(k, r.name);
    if (typeof r.namespaced === "boolean") this.namespacedKinds.set(k, r.namespaced);
    return r.name;
  }

  /** reconcile runs one XR reconcile; key is "<xrd>|<namespace>/<name>". */
  async reconcile(t: XRType, key: string): Promise<{ requeueAfterMs?: number } | void> {
    const [, nsName] = key.split("|") as [string, string];
    const [ns, name] = nsName.split("/") as [string, string];
    const namespace = ns || undefined;
    const log = this.d.log.child({ xr: `${t.gvk.kind}/${nsName.replace(/^\//, "")}` });
    const started = performance.now();
    const tally = { applied: 0, skipped: 0, deleted: 0, status: false, events: 0 };

    let xr: JsonObject;
    try {
      xr = plain(
        await this.d.objects.read({
          apiVersion: t.gvk.apiVersion,
          kind: t.gvk.kind,
          metadata: { name, ...(namespace ? { namespace } : {}) },
        }),
      );
    } catch (err) {
      if (errorCode(err) !== 404) throw err;
      await this.forget(key); // gone: release the watches held for it
      return;
    }
    const m = metaOf(xr);
    this.track(String(m["uid"]), key);
    const deleting = Boolean(m["deletionTimestamp"]);
    const finalizers = Array.isArray(m["finalizers"]) ? (m["finalizers"] as string[]) : [];
    // Crossplane's XR controller adds its finalizer, and labels the XR with the
    // prefix its composed resources are named by (its own name) unless set.
    const labelled = str((m["labels"] as JsonObject | undefined)?.[COMPOSITE_LABEL]) !== undefined;
    if (!deleting && (!finalizers.includes(XR_FINALIZER) || !labelled)) {
      await this.patchXR(t, xr, {
        metadata: {
          ...(finalizers.includes(XR_FINALIZER) ? {} : { finalizers: [...finalizers, XR_FINALIZER] }),
          ...(labelled ? {} : { labels: { [COMPOSITE_LABEL]: String(m["name"]) } }),
        },
      });
      return { requeueAfterMs: 0 };
    }

    // Observed: the XR's composed resources, read fresh.
    const problems: string[] = [];
    const observed: Record<string, Resource> = {};
    const observedObjects = new Map<string, JsonObject>();
    for (const ref of resourceRefs(xr)) {
      try {
        await this.watchKind(key, ref.apiVersion, ref.kind);
        const o = plain(
          await this.d.objects.read({
            apiVersion: ref.apiVersion,
            kind: ref.kind,
            // A namespaced XR's references carry no namespace: its resources are in its own.
            metadata: { name: ref.name, ...(ref.namespace || namespace ? { namespace: (ref.namespace || namespace)! } : {}) },
          }),
        );
        const rn = str((metaOf(o)["annotations"] as JsonObject | undefined)?.[COMPOSITION_RESOURCE_NAME]);
        if (!rn) continue;
        setOwn(observed, rn, create(ResourceSchema, { resource: o }));
        observedObjects.set(rn, o);
      } catch (err) {
        // Gone (404), or its kind no longer served (its CRD deleted): not there to observe.
        if (errorCode(err) === 404 || /does not serve/.test((err as Error).message)) continue;
        problems.push(`cannot read ${ref.kind} ${ref.name}: ${apiMessage(err)}`);
      }
    }

    if (deleting && observedObjects.size === 0 && problems.length === 0) {
      await this.patchXR(t, xr, { metadata: { finalizers: finalizers.filter((f) => f !== XR_FINALIZER) } });
      log.info("all composed resources are gone; XR deleted");
      return;
    }

    const events: HostEvent[] = [];
    let composition: JsonObject;
    try {
      const chosen = selectComposition(t.gvk, this.d.xrd(t.xrd), this.d.compositions(), xr);
      composition = chosen.obj;
      // Record the choice on the XR, as Crossplane does, so that it holds when
      // other Compositions for the kind come (or the XRD's default changes).
      const cname = String(metaOf(composition)["name"]);
      if (!deleting && chosen.recorded !== cname) {
        await this.patchXR(
          t,
          xr,
          t.legacy ? { spec: { compositionRef: { name: cname } } } : { spec: { crossplane: { compositionRef: { name: cname } } } },
        );
        return { requeueAfterMs: 0 };
      }
    } catch (err) {
      const message = `cannot select a Composition: ${(err as Error).message}`;
      await this.report(
        t,
        key,
        xr,
        keptStatus(xr),
        [{ type: "Synced", status: "False", reason: "ReconcileError", message }],
        [{ type: "Warning", reason: "SelectComposition", message }],
      );
      throw new Error(message);
    }

    let result: PipelineResult;
    try {
      result = await runPipeline(
        {
          steps: checkComposition(
            { obj: xr, source: `${t.gvk.kind} ${name}` },
            { obj: composition, source: `Composition ${String(metaOf(composition)["name"])}` },
          ),
          xr,
          observed,
          context: undefined,
          credentials: [],
          fetch: this.fetcher(),
          seed: (step) => this.required.get(key)?.[step] ?? [],
        },
        this.instrumented(),
        Date.now() + this.d.functionTimeoutMs,
      );
    } catch (err) {
      // As Crossplane reports a composition that failed: Synced=False and a
      // Warning naming why; a Fatal result's step still reports the results
      // before it and its conditions, and the XR's other custom conditions
      // become Unknown, since nothing could say what they are now.
      const fatal = err instanceof FatalResultError;
      const message = `cannot compose resources: ${(err as Error).message}`;
      const results = fatal ? err.results : [];
      if (deleting) return this.deleteWithoutPipeline(t, key, xr, observedObjects, message, results, log);
      const seen = new Set<string>();
      const custom: Condition[] = [];
      for (const fc of fatal ? err.conditions : []) {
        const type = String(fc["type"]);
        if (SYSTEM_CONDITIONS.has(type)) continue;
        seen.add(type);
        custom.push(functionCondition(fc));
      }
      for (const c of conditionsOf(xr)) {
        const type = String(c["type"]);
        if (!fatal || SYSTEM_CONDITIONS.has(type) || seen.has(type)) continue;
        custom.push({
          type,
          status: "Unknown",
          reason: "FatalError",
          message: "A fatal error occurred before the status of this condition could be determined.",
        });
      }
      // Only conditions change: what the pipeline wrote last (recorded external names among it) stays.
      await this.report(
        t,
        key,
        xr,
        keptStatus(xr),
        [{ type: "Synced", status: "False", reason: "ReconcileError", message: clip(message) }, ...custom],
        [...resultEvents(results), { type: "Warning" as const, reason: "ComposeResources", message }],
      );
      throw new Error(message);
    }

    this.required.set(key, result.required);

    // While the XR is deleted, what the pipeline still desires is what it wants
    // kept for now: the deletion step drops resources in dependency order and
    // says so (Ready=False, reason Deleting). A pipeline without such a step
    // desires everything still; then, as in Crossplane, everything goes.
    const ordered = deleting && result.conditions.some((fc) => fc["type"] === "Ready" && fc["reason"] === "Deleting");
    const desiredResources = deleting && !ordered ? {} : result.desired.resources;

    // Name, place and check every desired resource as Crossplane's composer
    // does; a refusal stops the composition before anything is applied.
    let composed: Composed[];
    try {
      const scopes = await this.scopes(desiredResources);
      const seenByName: Record<string, JsonObject> = {};
      for (const [rn, o] of observedObjects) setOwn(seenByName, rn, o);
      const c = composeResources({
        xr,
        desired: desiredResources,
        observed: seenByName,
        namespaced: (apiVersion, kind) => scopes.get(`${apiVersion}|${kind}`),
      });
      composed = c.composed;
      events.push(...c.events);
    } catch (err) {
      if (!(err instanceof ComposeError)) throw err;
      const message = `cannot compose resources: ${err.message}`;
      if (deleting) return this.deleteWithoutPipeline(t, key, xr, observedObjects, message, result.results, log);
      await this.report(
        t,
        key,
        xr,
        keptStatus(xr),
        [{ type: "Synced", status: "False", reason: "ReconcileError", message: clip(message) }],
        [...resultEvents(result.results), ...events, { type: "Warning", reason: "ComposeResources", message }],
      );
      throw new Error(message);
    }

    // Apply desired composed resources that changed; delete the dropped ones.
    const refs: Ref[] = [];
    const unready: string[] = [];
    const waiting: string[] = [];
    for (const c of composed) {
      const rn = c.name;
      const seen = observedObjects.get(rn);
      const obj = c.object;
      delete obj["status"]; // the API server ignores status on apply; the status subresource is the provider's
      const id = `${String(obj["apiVersion"])}/${String(obj["kind"])}/${keyOf(str(metaOf(obj)["namespace"]), String(metaOf(obj)["name"]))}`;
      let applied: JsonObject;
      try {
        const k = await this.watchKind(key, String(obj["apiVersion"]), String(obj["kind"]));
        if (!seen && k) {
          const holder = await this.externalNameHolder(k, obj);
          if (holder) {
            const message =
              `${rn}: external name ${JSON.stringify(holder.name)} is still held by ${holder.what}, ` +
              "which is being deleted; waiting until it is gone";
            waiting.push(message);
            events.push({ type: "Warning", reason: "ExternalNameInUse", message });
            unready.push(rn);
            continue;
          }
        }
        const body = hash(obj);
        if (seen && this.applied.get(id) === body && holds(seen, obj)) {
          this.d.metrics.skipped.inc({ what: "apply" });
          tally.skipped++;
          applied = seen;
        } else {
          applied = plain(
            await this.d.objects.patch(
              kubeObject(obj),
              undefined,
              undefined,
              `xfn/${String(m["uid"])}`,
              true,
              PatchStrategy.ServerSideApply,
            ),
          );
          this.applied.set(id, body);
          (this.appliedBy.get(key) ?? this.appliedBy.set(key, new Set()).get(key)!).add(id);
          this.d.metrics.writes.inc({ what: "apply" });
          tally.applied++;
        }
      } catch (err) {
        problems.push(`cannot apply ${String(obj["kind"])} ${String(metaOf(obj)["name"])} (resource ${rn}): ${apiMessage(err)}`);
        unready.push(rn);
        if (seen) refs.push(refOf(seen));
        continue;
      }
      refs.push(refOf(applied));
      // Ready only when the pipeline says so, as in Crossplane: a resource's own
      // Ready condition counts only through a step that reads it (readiness).
      if (!c.ready) unready.push(rn);
    }
    for (const [rn, o] of observedObjects) {
      if (Object.hasOwn(desiredResources, rn)) continue;
      if (!metaOf(o)["deletionTimestamp"]) {
        try {
          await this.deleteComposed(o, deleting);
          tally.deleted++;
          log.info({ resource: rn }, deleting ? "deleting composed resource" : "deleted dropped composed resource");
        } catch (err) {
          problems.push(`cannot delete ${String(o["kind"])} ${String(metaOf(o)["name"])} (resource ${rn}): ${apiMessage(err)}`);
        }
      }
      // Still there until it is gone: keep the reference so it stays observed.
      refs.push(refOf(o));
    }

    // Resource references, then status and conditions, in this same reconcile.
    const sortedRefs = resourceRefsOf(
      xr,
      refs.map((r) => ({
        apiVersion: r.apiVersion,
        kind: r.kind,
        metadata: { name: r.name, ...(r.namespace ? { namespace: r.namespace } : {}) },
      })),
    );
    if (JSON.stringify(sortedRefs) !== JSON.stringify(resourceRefs(xr))) {
      const list = sortedRefs as unknown as JsonValue[];
      await this.patchXR(t, xr, t.legacy ? { spec: { resourceRefs: list } } : { spec: { crossplane: { resourceRefs: list } } });
    }
    const warnings = result.results.filter((r) => r.severity === "Warning").map((r) => `${r.step}: ${r.message}`);
    const conds: Condition[] = [
      problems.length > 0
        ? { type: "Synced", status: "False", reason: "ReconcileError", message: clip(problems.join("; ")) }
        : { type: "Synced", status: "True", reason: "ReconcileSuccess" },
    ];
    const xrReady = result.desired.composite?.ready ?? Ready.UNSPECIFIED;
    if (!deleting) {
      if (xrReady === Ready.TRUE || (xrReady === Ready.UNSPECIFIED && unready.length === 0 && waiting.length === 0))
        conds.push({ type: "Ready", status: "True", reason: "Available" });
      else {
        // What keeps it from being ready (the unready list as Crossplane words it),
        // and what the functions warned of, where `kubectl get` and describe show it.
        const why = [...(unready.length ? [`Unready resources: ${firstNAndSomeMore(unready)}`] : []), ...waiting, ...warnings];
        conds.push({ type: "Ready", status: "False", reason: "Creating", ...(why.length ? { message: clip(why.join("; ")) } : {}) });
      }
    }
    if (deleting && !ordered)
      conds.push({ type: "Ready", status: "False", reason: "Deleting", message: clip(deletingMessage(observedObjects)) });
    for (const fc of result.conditions) {
      // Functions may not override system conditions, except Ready while the XR is deleted (the deletion step's report).
      if (SYSTEM_CONDITIONS.has(String(fc["type"])) && !(fc["type"] === "Ready" && ordered)) continue;
      conds.push(functionCondition(fc));
    }
    const desiredStatus = isObject(result.desired.composite?.resource?.["status"])
      ? (result.desired.composite!.resource!["status"] as JsonObject)
      : {};
    for (const p of problems) events.push({ type: "Warning", reason: "ComposeResources", message: p });
    const written = await this.report(t, key, xr, desiredStatus, conds, [...resultEvents(result.results), ...events]);
    tally.status = written.status;
    tally.events = written.events;
    log.debug({ ms: Math.round(performance.now() - started), ...tally, problems: problems.length, deleting }, "reconciled");
    if (problems.length > 0) throw new Error(problems.join("; "));
    if (waiting.length > 0) return { requeueAfterMs: WAIT_MS };
    const ttl = deleting ? Math.min(result.ttlSeconds ?? 2, 2) : (result.ttlSeconds ?? 60);
    return { requeueAfterMs: ttl * 1000 };
  }

  /**
   * deleteWithoutPipeline deletes a deleted XR's composed resources when its
   * pipeline cannot run (a function down, or failing): in the order the
   * deletion step recorded (status.deletion.order: waves, dependents first),
   * one wave at a time; everything at once when none was recorded, as
   * Crossplane's garbage collection would.
   */
  private async deleteWithoutPipeline(
    t: XRType,
    key: string,
    xr: JsonObject,
    observed: Map<string, JsonObject>,
    why: string,
    results: StepResult[],
    log: Logger,
  ): Promise<{ requeueAfterMs: number }> {
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
      t,
      key,
      xr,
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
    t: XRType,
    key: string,
    xr: JsonObject,
    desired: JsonObject,
    conds: Condition[],
    events: HostEvent[],
  ): Promise<{ status: boolean; events: number }> {
    const m = metaOf(xr);
    const status = { ...desired, conditions: mergeConditions(xr, conds) };
    const body = {
      apiVersion: t.gvk.apiVersion,
      kind: t.gvk.kind,
      metadata: { name: String(m["name"]), ...(m["namespace"] ? { namespace: String(m["namespace"]) } : {}) },
      status,
    };
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
      if (m["namespace"]) await this.d.custom.patchNamespacedCustomObjectStatus({ ...base, namespace: String(m["namespace"]) }, opts);
      else await this.d.custom.patchClusterCustomObjectStatus(base, opts);
      this.statusWritten.set(key, h);
      this.d.metrics.writes.inc({ what: "status" });
      wrote = true;
    }
    const n = await this.d.events.record(xr, events);
    if (n > 0) this.d.metrics.writes.inc({ what: "event" }, n);
    return { status: wrote, events: n };
  }

  /** patchXR merge-patches the XR itself (finalizers, resource references, the chosen Composition). */
  private async patchXR(t: XRType, xr: JsonObject, patch: JsonObject): Promise<void> {
    const m = metaOf(xr);
    const base = { group: t.kind.group, version: t.kind.version, plural: t.kind.plural, name: String(m["name"]), body: patch };
    if (m["namespace"]) await this.d.custom.patchNamespacedCustomObject({ ...base, namespace: String(m["namespace"]) }, merge);
    else await this.d.custom.patchClusterCustomObject(base, merge);
    this.d.metrics.writes.inc({ what: "xr" });
  }

  /** instrumented is the runner, counting and timing each function call. */
  private instrumented(): Runner {
    const { runner, metrics } = this.d;
    return {
      async run(fn: string, req: RunFunctionRequest, deadline: number) {
        const t = performance.now();
        try {
          const rsp = await runner.run(fn, req, deadline);
          metrics.functionCalls.inc({ function: fn, result: rsp.results.some((r) => r.severity === 1) ? "fatal" : "ok" });
          return rsp;
        } catch (err) {
          metrics.functionCalls.inc({ function: fn, result: "error" });
          throw err;
        } finally {
          metrics.functionSeconds.observe({ function: fn }, (performance.now() - t) / 1000);
        }
      },
      close: () => runner.close(),
    };
  }

  private fetcher(): Fetch {
    return async (s) => {
      const sel =
        s.match.case === "matchLabels"
          ? Object.entries(s.match.value.labels)
              .map(([k, v]) => `${k}=${v}`)
              .join(",")
          : undefined;
      const list = await this.d.objects.list(
        s.apiVersion,
        s.kind,
        s.namespace,
        undefined,
        undefined,
        undefined,
        s.match.case === "matchName" ? `metadata.name=${s.match.value}` : undefined,
        sel,
      );
      // Sorted by namespace and name, as Crossplane's fetcher sorts them.
      const key = (o: JsonObject) => Buffer.from(`${str(metaOf(o)["namespace"]) ?? ""}/${String(metaOf(o)["name"])}`);
      const items = list.items.map((i) => plain(i)).sort((a, b) => Buffer.compare(key(a), key(b)));
      return {
        $typeName: "apiextensions.fn.proto.v1.Resources",
        items: items.map((i) => create(ResourceSchema, { resource: i })),
      };
    };
  }
}

/** resultEvents turns the functions' results into Events, as Crossplane reports them. */
const resultEvents = (results: StepResult[]): HostEvent[] => results.map(resultEvent);

/** SYSTEM_CONDITIONS are the condition types Crossplane keeps for itself: a function's are ignored. */
const SYSTEM_CONDITIONS = new Set(["Ready", "Synced", "Healthy", "UpToDate", "Responsive"]);

/** functionCondition is a condition a function set, as the host writes it. */
function functionCondition(fc: JsonObject): Condition {
  return {
    type: String(fc["type"]),
    status: fc["status"] === "True" ? "True" : fc["status"] === "False" ? "False" : "Unknown",
    reason: String(fc["reason"] ?? ""),
    ...(typeof fc["message"] === "string" ? { message: fc["message"] } : {}),
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

/**
 * keptStatus is the XR's status as it is, but its conditions: what a reconcile
 * that could not run the pipeline writes back, so that status the pipeline
 * wrote before (recorded external names, the deletion order) is not removed
 * by a server-side apply that leaves it out.
 */
function keptStatus(xr: JsonObject): JsonObject {
  const { conditions: _conditions, ...rest } = isObject(xr["status"]) ? (xr["status"] as JsonObject) : {};
  return rest;
}

/** recordedOrder reads status.deletion.order (waves of resource names), or [] when absent or malformed. */
function recordedOrder(xr: JsonObject): string[][] {
  const s = isObject(xr["status"]) ? xr["status"] : {};
  const d = isObject(s["deletion"]) ? s["deletion"] : {};
  const o = d["order"];
  if (!Array.isArray(o) || !o.every((w) => Array.isArray(w) && w.every((n) => typeof n === "string"))) return [];
  return o as string[][];
}

/** deletingMessage names what is left and what holds it, as the deletion step does. */
function deletingMessage(left: Map<string, JsonObject>): string {
  const parts = [...left.keys()].sort().map((rn) => {
    const f = metaOf(left.get(rn)!)["finalizers"];
    return Array.isArray(f) && f.length > 0 ? `${rn} (finalizers: ${f.join(", ")})` : rn;
  });
  return `deleting ${parts.length} composed resource${parts.length === 1 ? "" : "s"}: ${parts.join(", ")}`;
}
