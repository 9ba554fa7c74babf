// The host loop: a thin controller that runs compositions without Crossplane.
//
// An XRD is reconciled as Crossplane's definition controller does: it holds a
// finalizer, its XR kind is served by a CRD the host creates (and creates
// again if someone deletes it), and deleting it deletes its XRs, then its CRD,
// then lets it go. While it lives, a controller reconciles its XRs. Each XR
// reconcile (compose.ts):
//   read the XR fresh -> read its composed resources fresh (no stale cache
//   hides new status) -> run the Composition's pipeline (src/engine: context
//   threaded, requirements answered from the API, up to 5 passes) -> apply
//   each desired composed resource that changed (server-side apply, a field
//   manager per XR, an owner reference with blockOwnerDeletion) -> delete
//   what was dropped -> write the XR's references, status and conditions, if
//   they changed -> Kubernetes Events for the functions' results -> requeue
//   at the TTL. A reconcile that finds nothing changed writes nothing.
// Composed resources are watched with one informer per kind, whose events
// go to the XR that controls them (its owner reference): any change
// re-reconciles that XR at once. Unlike Crossplane, an XR being deleted still
// runs its pipeline, so the deletion step reports and orders the deletion;
// when the pipeline cannot run then, the order it recorded is followed.
// With leader election, only the replica holding the Lease does any of this.
import type { JsonObject } from "@bufbuild/protobuf";
import { CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig, type KubernetesObjectApi } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { StepObserver } from "../engine/observer.js";
import type { Runner } from "../engine/runner.js";
import { hostMetrics, type HostMetrics } from "../metrics.js";
import { apiClient, objectClient } from "./client.js";
import { Composer, type ComposerDeps } from "./compose.js";
import { forCompositeResource } from "../engine/xcrd.js";
import { graphOf, type GraphModel } from "../graph/model.js";
import { COMPOSITIONS, crossplaneCRDs, CRDS, XRD_FINALIZER, XRD_KINDS, xrCRDRef, xrType, type XRType } from "./crds.js";
import { EventRecorder } from "./events.js";
import { apiMessage, errorCode, holds, isObject, keyOf, kubeObject, metaOf, plain, str } from "./kube.js";
import { Elector, type LeaderElectionOptions } from "./leader.js";
import { WorkQueue } from "./queue.js";
import { isEstablished, xrdStatusPatch } from "./xrd-status.js";
import { kindKey, WatchManager, type Handle, type Kind, type WatchEvent } from "./watches.js";
import { messageOf } from "../sdk/errors.js";

export { crossplaneCRDs, XP_GROUP, XR_FINALIZER } from "./crds.js";
export { kubeObject, plain } from "./kube.js";

/** HostOptions configure the host loop. */
export interface HostOptions {
  kc: KubeConfig;
  runner: Runner;
  log: Logger;
  workers?: number;
  /** How often watches held for XRs that are gone are released. Default 60 s. In-use watches are never released. */
  watchGcIntervalMs?: number;
  /** Per-function call timeout. Default 30 s. */
  functionTimeoutMs?: number;
  /** How long a reconcile's pipeline may take in all. Default 2 minutes, Crossplane's reconcile timeout. */
  reconcileTimeoutMs?: number;
  /** Backoff for failed reconciles. */
  baseBackoffMs?: number;
  maxBackoffMs?: number;
  /** Longest wait between restarts of a failed watch. Default 30 s. */
  maxWatchBackoffMs?: number;
  /** How long a request to the API server may take before it is given up. Default 60 s, kube-apiserver's own limit. */
  requestTimeoutMs?: number;
  /**
   * Watch timing (client.ts): the range each watch's server-side timeout is drawn from, the grace past it,
   * and how long a watch may stay silent once the server has sent bookmarks on its kind's watches.
   */
  watchTimeoutMs?: readonly [number, number];
  watchGraceMs?: number;
  watchIdleMs?: number;
  /** Reconcile only while holding this Lease (see leader.ts). */
  leaderElection?: LeaderElectionOptions;
  /** Keep what each XR's last reconcile knew for its graph (Host.graph, the /graph page). Off by default: it costs every reconcile. */
  graphs?: boolean;
  /** Metrics to report to; by default the host makes its own (Host.metrics). */
  metrics?: HostMetrics;
  /** Told when this host loses leadership (xfn host exits, as controller-runtime does); by default it campaigns again. */
  onLostLeadership?: () => void;
  /** Told of every step's request and response, as Crossplane tells a Pipeline Inspector (--inspector-socket). */
  inspector?: StepObserver;
  /** Spans of every reconcile and its function calls (host/tracing.ts), when the OTEL_ variables ask for traces. */
  tracing?: ComposerDeps["tracing"];
}

/** Controller is one XRD's running XR controller. */
interface Controller {
  type: XRType;
  handle: Handle;
}

const XRD_KEY = "xrd:";
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

export class Host {
  readonly metrics: HostMetrics;
  watches: WatchManager;
  queue: WorkQueue;
  private readonly objects: KubernetesObjectApi;
  private readonly custom: CustomObjectsApi;
  private readonly events: EventRecorder;
  private readonly composer: Composer;
  private readonly controllers = new Map<string, Controller>();
  private handles: Handle[] = [];
  private gcTimer: NodeJS.Timeout | undefined;
  private readonly elector: Elector | undefined;
  private stopping = false;
  private running = false;

  constructor(private readonly o: HostOptions) {
    const timeout = o.requestTimeoutMs ?? 60_000;
    this.objects = objectClient(o.kc, timeout);
    this.custom = apiClient(o.kc, CustomObjectsApi, timeout);
    this.watches = this.newWatches();
    this.queue = this.newQueue();
    this.metrics =
      o.metrics ??
      hostMetrics(
        () => this.queue.depth(),
        () => this.watches.watching().length,
      );
    this.events = new EventRecorder(o.kc, o.log, timeout);
    this.composer = new Composer({
      objects: this.objects,
      custom: this.custom,
      runner: o.runner,
      log: o.log,
      events: this.events,
      metrics: this.metrics,
      functionTimeoutMs: o.functionTimeoutMs ?? 30_000,
      reconcileTimeoutMs: o.reconcileTimeoutMs ?? 120_000,
      watches: () => this.watches,
      enqueue: (key) => this.queue.add(key),
      xrCache: (t) => this.watches.cached(t.kind) as unknown as JsonObject[],
      compositions: () => this.watches.cached(COMPOSITIONS) as unknown as JsonObject[],
      xrd: (name) => this.xrdObject(name),
      graphs: o.graphs === true,
      ...(o.inspector ? { inspector: o.inspector } : {}),
      ...(o.tracing ? { tracing: o.tracing } : {}),
    });
    if (o.leaderElection)
      this.elector = new Elector(o.kc, o.leaderElection, o.log, {
        started: () =>
          void this.run().catch((err: Error) => {
            o.log.error({ err: err.message }, "cannot start reconciling");
            void this.halt();
          }),
        // Told too when stop() or crash() ends the campaign: only a loss nobody asked for is reported.
        stopped: () => void this.halt().then(() => this.stopping || o.onLostLeadership?.()),
      });
  }

  private newWatches(): WatchManager {
    return new WatchManager(this.o.kc, this.o.log, {
      initialBackoffMs: 200,
      maxBackoffMs: this.o.maxWatchBackoffMs ?? 30_000,
      requestTimeoutMs: this.o.requestTimeoutMs ?? 60_000,
      watchTimeoutMs: this.o.watchTimeoutMs,
      watchGraceMs: this.o.watchGraceMs,
      watchIdleMs: this.o.watchIdleMs,
      onRestart: () => this.metrics?.watchRestarts.inc(),
    });
  }

  private newQueue(): WorkQueue {
    return new WorkQueue(
      (k) => (k.startsWith(XRD_KEY) ? this.reconcileXRD(k.slice(XRD_KEY.length)) : this.reconcileXR(k)),
      { workers: this.o.workers ?? 4, baseBackoffMs: this.o.baseBackoffMs ?? 200, maxBackoffMs: this.o.maxBackoffMs ?? 30_000 },
      (key, err, retry) => this.o.log.warn({ key, err: messageOf(err), retryInMs: retry }, "reconcile failed; retrying"),
    );
  }

  /** start runs the host: at once, or once it is elected leader. */
  async start(): Promise<void> {
    if (this.elector) {
      this.metrics.leader.set(0);
      this.elector.start();
      return;
    }
    await this.run();
  }

  /** run installs the Crossplane kinds the host reads if missing, then watches XRDs, Compositions and CRDs. */
  /** Counts runs and halts: a run that awaits sees whether it is still the current one. */
  private term = 0;

  private async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    const term = ++this.term;
    this.metrics.leader.set(1);
    this.watches = this.newWatches();
    this.queue = this.newQueue();
    for (const c of crossplaneCRDs()) {
      try {
        await this.objects.create(kubeObject(c));
        this.metrics.writes.inc({ what: "crd" });
      } catch (err) {
        if (errorCode(err) !== 409) throw new Error(`cannot install CRD ${String(metaOf(c)["name"])}: ${apiMessage(err)}`);
      }
      // Halted while installing them (leadership lost, or stop), and perhaps
      // started again since: start nothing that halt would have ended.
      if (term !== this.term) return;
    }
    // Composition changes re-reconcile every XR of their kind.
    this.handles.push(this.watches.ensure(COMPOSITIONS, "host", (e) => this.onComposition(e)));
    for (const k of XRD_KINDS) this.handles.push(this.watches.ensure(k, "host", (e) => this.onXRD(e)));
    // An XR kind's CRD deleted under a live XRD is created again.
    this.handles.push(this.watches.ensure(CRDS, "host", (e) => this.onCRD(e)));
    this.gcTimer = setInterval(() => void this.composer.collectWatches(this.controllerTypes()), this.o.watchGcIntervalMs ?? 60_000);
    this.o.log.info("host started: watching CompositeResourceDefinitions");
  }

  /** halt stops reconciling (leadership lost, or stop): queue, watches, controllers. */
  private async halt(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.term++;
    this.metrics.leader.set(0);
    clearInterval(this.gcTimer);
    this.queue.stop();
    await this.watches.stopAll();
    this.controllers.clear();
    this.handles = [];
    this.composer.reset();
  }

  /** stop stops the host; a leader gives up its Lease. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.elector?.stop(true);
    await this.halt();
    this.o.runner.close();
  }

  /** crash stops everything without giving up the Lease, as a killed process would (tests). */
  async crash(): Promise<void> {
    this.stopping = true;
    await this.elector?.stop(false);
    await this.halt();
  }

  /** isLeader tells whether this host reconciles (always, without leader election). */
  isLeader(): boolean {
    return this.elector ? this.elector.isLeader() : this.running;
  }

  /** controllerKinds lists the XR kinds with a running controller. */
  controllerKinds(): string[] {
    return [...this.controllers.values()].map((c) => kindKey(c.type.kind));
  }

  /** xrs lists the XRs of every running controller, as the watches last saw them, with their keys (for /graph). */
  xrs(): Array<{ key: string; xr: JsonObject }> {
    const out: Array<{ key: string; xr: JsonObject }> = [];
    for (const [xrd, c] of this.controllers)
      for (const o of this.watches.cached(c.type.kind) as unknown as JsonObject[]) {
        const m = metaOf(o);
        out.push({ key: `${xrd}|${keyOf(str(m["namespace"]), String(m["name"]))}`, xr: o });
      }
    return out.sort((a, b) => a.key.localeCompare(b.key));
  }

  /** graph is the resource graph of the XR at key (xrs), from its last reconcile, or undefined if there is none. */
  graph(key: string): GraphModel | undefined {
    const found = this.xrs().find((x) => x.key === key);
    if (!found) return undefined;
    const p = this.composer.picture(key);
    return graphOf(found.xr, p?.states ?? [], p?.context ?? {});
  }

  private controllerTypes(): XRType[] {
    return [...this.controllers.values()].map((c) => c.type);
  }

  // --- events --------------------------------------------------------------

  private onXRD(e: WatchEvent): void {
    this.queue.add(`${XRD_KEY}${String(metaOf(e.object)["name"])}`);
  }

  private onCRD(e: WatchEvent): void {
    if (e.type !== "delete") return;
    const name = String(metaOf(e.object)["name"]);
    for (const [xrd, c] of this.controllers) {
      if (`${c.type.kind.plural}.${c.type.kind.group}` !== name) continue;
      this.deletedCRDs.add(name);
      this.queue.add(`${XRD_KEY}${xrd}`);
    }
  }
  /**
   * CRDs of served XR kinds the watch saw deleted, until they are served
   * again. Only these are reported as deleted: a CRD the host has just
   * applied is also missing from the cache until the watch brings it.
   */
  private readonly deletedCRDs = new Set<string>();

  private onXR(xrd: string, e: WatchEvent): void {
    const m = metaOf(e.object);
    const key = `${xrd}|${keyOf(str(m["namespace"]), String(m["name"]))}`;
    if (e.type !== "delete") this.composer.track(String(m["uid"]), key);
    this.queue.add(key);
  }

  private onComposition(e: WatchEvent): void {
    const spec = ((e.object as unknown as JsonObject)["spec"] ?? {}) as JsonObject;
    const ref = (spec["compositeTypeRef"] ?? {}) as JsonObject;
    for (const c of this.controllers.values()) {
      if (ref["kind"] !== c.type.gvk.kind) continue;
      for (const o of this.watches.cached(c.type.kind))
        this.queue.add(`${c.type.xrd}|${keyOf(o.metadata?.namespace, o.metadata?.name ?? "")}`);
    }
  }

  // --- XRDs ----------------------------------------------------------------

  /** xrdObject returns the XRD as the informer last saw it (v2 preferred). */
  private xrdObject(name: string): JsonObject | undefined {
    for (const k of XRD_KINDS) {
      const found = (this.watches.cached(k) as unknown as JsonObject[]).find((x) => metaOf(x)["name"] === name);
      if (found) return found;
    }
    return undefined;
  }

  /**
   * reconcileXRD serves an XRD's XR kind, or, while the XRD is deleted,
   * deletes its XRs, then its CRD, then lets the XRD go, as Crossplane does.
   */
  private async reconcileXRD(name: string): Promise<{ requeueAfterMs?: number } | void> {
    const xrd = this.xrdObject(name);
    if (!xrd) return this.stopController(name);
    const m = metaOf(xrd);
    const t = xrType(xrd);
    const finalizers = Array.isArray(m["finalizers"]) ? (m["finalizers"] as string[]) : [];
    const xrdPath = { group: XRD_KINDS[0]!.group, version: String(xrd["apiVersion"]).split("/")[1]!, plural: XRD_KINDS[0]!.plural, name };
    if (!t) {
      this.o.log.error({ xrd: name }, "XRD has no group, names.kind, names.plural or served version; ignoring it");
      if (m["deletionTimestamp"] && finalizers.includes(XRD_FINALIZER))
        await this.custom.patchClusterCustomObject(
          { ...xrdPath, body: { metadata: { finalizers: finalizers.filter((f) => f !== XRD_FINALIZER) } } },
          merge,
        );
      return;
    }
    if (m["deletionTimestamp"]) {
      await this.writeXRDStatus(xrd, xrdPath, { terminating: true });
      // Its XRs first (the controller stays up to see their composed resources go).
      await this.startController(name, t);
      const left = await this.listXRs(t);
      if (left.length > 0) {
        for (const xr of left) {
          if (metaOf(xr)["deletionTimestamp"]) continue;
          await this.objects.delete(kubeObject(xr)).catch((err) => {
            if (errorCode(err) !== 404) throw err;
          });
          this.metrics.writes.inc({ what: "delete" });
        }
        this.o.log.info({ xrd: name, remaining: left.length }, "XRD deleted: deleting its XRs first");
        return { requeueAfterMs: 1000 };
      }
      await this.stopController(name);
      await this.objects
        .delete(kubeObject(xrCRDRef(t)))
        .then(() => this.metrics.writes.inc({ what: "delete" }))
        .catch((err) => {
          if (errorCode(err) !== 404) throw err;
        });
      if (finalizers.includes(XRD_FINALIZER))
        await this.custom.patchClusterCustomObject(
          { ...xrdPath, body: { metadata: { finalizers: finalizers.filter((f) => f !== XRD_FINALIZER) } } },
          merge,
        );
      this.o.log.info({ xrd: name, kind: t.gvk.kind }, "XRD deleted: its XRs and its CRD are gone");
      return;
    }
    if (!finalizers.includes(XRD_FINALIZER)) {
      await this.custom.patchClusterCustomObject({ ...xrdPath, body: { metadata: { finalizers: [...finalizers, XRD_FINALIZER] } } }, merge);
      this.metrics.writes.inc({ what: "xrd" });
    }
    let crd: JsonObject;
    try {
      crd = await this.ensureXRCRD(xrd, t);
    } catch (err) {
      this.o.log.error({ xrd: name, err: apiMessage(err) }, "cannot serve the XR kind");
      throw err;
    }
    // As Crossplane: the XR controller starts once the API server serves the kind.
    if (!isEstablished(crd)) {
      this.o.log.debug({ xrd: name, crd: metaOf(crd)["name"] }, "waiting for the XR kind's CRD to be established");
      return { requeueAfterMs: 1000 };
    }
    await this.startController(name, t);
    await this.writeXRDStatus(xrd, xrdPath, { serving: t.gvk });
    const claims = isObject(xrd["spec"]) ? xrd["spec"]["claimNames"] : undefined;
    if (isObject(claims) && !this.warnedClaims.has(name)) {
      this.warnedClaims.add(name);
      this.o.log.warn(
        { xrd: name, claimKind: claims["kind"] },
        "the XRD offers claims, which the host does not serve: create its XRs directly",
      );
    }
  }
  private readonly warnedClaims = new Set<string>();

  /**
   * ensureXRCRD serves the XR kind with the CRD Crossplane makes for the XRD
   * (engine/xcrd.ts; an XRD version without a schema is an XRDError, as in
   * Crossplane): applied when missing or different.
   */
  private async ensureXRCRD(xrd: JsonObject, t: XRType): Promise<JsonObject> {
    const want = forCompositeResource(xrd);
    const name = String(metaOf(want)["name"]);
    const current = (this.watches.cached(CRDS) as unknown as JsonObject[]).find((x) => metaOf(x)["name"] === name);
    if (current && !metaOf(current)["deletionTimestamp"] && holds(plain(current), want)) {
      this.metrics.skipped.inc({ what: "crd" });
      return plain(current);
    }
    if (current === undefined && this.deletedCRDs.delete(name))
      this.o.log.warn({ xrd: t.xrd, crd: name }, "the XR kind's CRD was deleted; creating it again");
    const applied = await this.objects.patch(kubeObject(want), undefined, undefined, "xfn-host", true, PatchStrategy.ServerSideApply);
    this.metrics.writes.inc({ what: "crd" });
    return plain(applied);
  }

  /** writeXRDStatus writes the XRD's Established (and Offered) conditions as Crossplane does, when they change (xrd-status.ts). */
  private async writeXRDStatus(
    xrd: JsonObject,
    path: { group: string; version: string; plural: string; name: string },
    phase: Parameters<typeof xrdStatusPatch>[1],
  ): Promise<void> {
    const body = xrdStatusPatch(xrd, phase, new Date().toISOString().replace(/\.\d+Z$/, "Z"));
    if (!body) return;
    await this.custom.patchClusterCustomObjectStatus({ ...path, body }, merge);
    this.metrics.writes.inc({ what: "xrd" });
  }

  private async startController(name: string, t: XRType): Promise<void> {
    if (this.controllers.has(name)) return;
    const handle = this.watches.ensure(t.kind, `xrd:${name}`, (ev) => this.onXR(name, ev));
    this.controllers.set(name, { type: t, handle });
    this.o.log.info({ xrd: name, kind: t.gvk.kind }, "started XR controller");
  }

  private async stopController(name: string): Promise<void> {
    const c = this.controllers.get(name);
    if (!c) return;
    this.controllers.delete(name);
    // Release only: never create or wait for an informer here (failure mode 1).
    await this.watches.release(c.handle);
    await this.composer.forgetKind(c.type);
    this.o.log.info({ xrd: name, kind: c.type.gvk.kind }, "stopped XR controller");
  }

  private async listXRs(t: XRType): Promise<JsonObject[]> {
    try {
      const list = (await this.custom.listClusterCustomObject({ group: t.kind.group, version: t.kind.version, plural: t.kind.plural })) as {
        items: JsonObject[];
      };
      return list.items;
    } catch (err) {
      if (errorCode(err) === 404) return []; // the kind is not served: no XRs
      throw err;
    }
  }

  // --- XRs -----------------------------------------------------------------

  private async reconcileXR(key: string): Promise<{ requeueAfterMs?: number } | void> {
    const [xrdName] = key.split("|") as [string, string];
    const c = this.controllers.get(xrdName);
    if (!c) return;
    const started = performance.now();
    try {
      const r = await this.composer.reconcile(c.type, key);
      this.metrics.reconciles.inc({ result: "success" });
      return r;
    } catch (err) {
      this.metrics.reconciles.inc({ result: "error" });
      throw err;
    } finally {
      this.metrics.reconcileSeconds.observe((performance.now() - started) / 1000);
    }
  }
}

export type { Kind };
