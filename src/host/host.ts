// The host loop: a thin controller that runs compositions without Crossplane.
//
// An XRD starts a controller for its XR kind (and the host serves the XR kind
// by creating its CRD); deleting the XRD stops it, releasing every watch it
// held without creating any. Each XR reconcile:
//   read the XR fresh -> read its composed resources fresh (no stale cache
//   hides new status) -> run the Composition's pipeline (context threaded,
//   requirements answered from the API, up to 5 passes) -> server-side apply
//   each desired composed resource with a field manager of its own for this XR,
//   owner reference with blockOwnerDeletion -> delete what was dropped ->
//   write the XR's resource references, status and conditions in the same
//   reconcile -> requeue at the TTL.
// Any change to a composed resource re-reconciles its XR at once (realtime).
// Unlike Crossplane, an XR being deleted still runs its pipeline, so the
// deletion step reports; its composed resources are deleted in the order the
// pipeline gives (foreground) and its finalizer goes only when all are gone.
import { createHash } from "node:crypto";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import {
  CustomObjectsApi,
  KubernetesObjectApi,
  loadYaml,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type KubernetesObject,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { Ready, ResourceSchema, type Resource } from "../gen/fn/v1/run_function_pb.js";
import {
  checkComposition,
  COMPOSITE_LABEL,
  COMPOSITION_RESOURCE_NAME,
  FatalResultError,
  runPipeline,
  type Fetch,
} from "../engine/pipeline.js";
import type { Runner } from "../engine/runner.js";
import { kubeTimestamp } from "../sdk/object.js";
import { WorkQueue } from "./queue.js";
import { kindKey, WatchManager, type Handle, type Kind, type WatchEvent } from "./watches.js";

export const XP_GROUP = "apiextensions.crossplane.io";
export const XR_FINALIZER = "composite.apiextensions.crossplane.io";
const XRD_KINDS: Kind[] = [
  { group: XP_GROUP, version: "v2", plural: "compositeresourcedefinitions" },
  { group: XP_GROUP, version: "v1", plural: "compositeresourcedefinitions" },
];
const COMPOSITIONS = { group: XP_GROUP, version: "v1", plural: "compositions" };

/** HostOptions configure the host loop. */
export interface HostOptions {
  kc: KubeConfig;
  runner: Runner;
  log: Logger;
  workers?: number;
  /** How often unused composed-kind watches are swept. Default 60 s. In-use watches are never swept. */
  watchGcIntervalMs?: number;
  /** Per-function call timeout. Default 30 s. */
  functionTimeoutMs?: number;
  /** Backoff for failed reconciles. */
  baseBackoffMs?: number;
  maxBackoffMs?: number;
}

interface XRType {
  xrd: string;
  kind: Kind;
  gvk: { apiVersion: string; kind: string };
  namespaced: boolean;
}

interface Controller {
  type: XRType;
  handle: Handle;
  /** Composed-kind watches by XR key, so each is released with its XR. */
  composed: Map<string, Map<string, Handle>>;
}

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
const metaOf = (o: KubernetesObject | JsonObject): JsonObject => ((o as JsonObject)["metadata"] ?? {}) as JsonObject;
const str = (v: JsonValue | undefined) => (typeof v === "string" ? v : undefined);
const conditionsOf = (o: JsonObject): JsonObject[] => {
  const s = o["status"];
  return isObject(s) && Array.isArray(s["conditions"]) ? (s["conditions"] as JsonObject[]) : [];
};
const keyOf = (namespace: string | undefined, name: string) => `${namespace ?? ""}/${name}`;
const errorCode = (err: unknown): number | undefined => (err as { code?: number }).code ?? (err as { statusCode?: number }).statusCode;
const now = () => kubeTimestamp(new Date());

/**
 * plain turns an object client-node deserialized (timestamps as Date) back into
 * the API's JSON, with timestamps as Kubernetes writes them.
 */
export function plain(o: unknown): JsonObject {
  return JSON.parse(
    JSON.stringify(o, function (this: Record<string, unknown>, key, value: unknown) {
      const raw = this[key];
      return raw instanceof Date ? kubeTimestamp(raw) : value;
    }),
  ) as JsonObject;
}

// An XRD's scope defaults by the version it is written in, as in Crossplane's
// own CRD: Namespaced in v2, LegacyCluster in v1. The API server stores the
// default, so every version then reads the same scope.
const XRD_SCOPE_DEFAULT: Record<string, string> = { v2: "Namespaced", v1: "LegacyCluster" };

/**
 * kubeObject readies a plain JSON object for client-node's KubernetesObjectApi.
 * For kinds it has models of (CustomResourceDefinition, Deployment, ...) that
 * API writes the model's fields by their TypeScript names, so fields whose JSON
 * names differ (`x-kubernetes-preserve-unknown-fields`, `default`, `enum`,
 * `$ref`) would be dropped without a word: a CRD would lose what keeps its
 * objects from being pruned. client-node's own loader turns JSON into its model.
 */
export function kubeObject(o: JsonObject): KubernetesObject {
  return loadYaml(JSON.stringify(o));
}

/** The minimal CRDs the host needs to read XRDs and Compositions on a bare API server. */
export function crossplaneCRDs(): JsonObject[] {
  const schema = (kind: string, v: string): JsonObject => ({
    type: "object",
    "x-kubernetes-preserve-unknown-fields": true,
    ...(kind === "CompositeResourceDefinition"
      ? {
          properties: {
            spec: {
              type: "object",
              "x-kubernetes-preserve-unknown-fields": true,
              properties: { scope: { type: "string", default: XRD_SCOPE_DEFAULT[v]! } },
            },
          },
        }
      : {}),
  });
  const mk = (kind: string, plural: string, versions: string[]) => ({
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${XP_GROUP}` },
    spec: {
      group: XP_GROUP,
      names: {
        kind,
        plural,
        singular: kind.toLowerCase(),
        listKind: `${kind}List`,
        ...(kind === "CompositeResourceDefinition" ? { shortNames: ["xrd", "xrds"] } : { shortNames: ["comp"] }),
      },
      scope: "Cluster",
      versions: versions.map((v, i) => ({
        name: v,
        served: true,
        storage: i === 0,
        subresources: { status: {} },
        schema: { openAPIV3Schema: schema(kind, v) },
      })),
    },
  });
  return [mk("CompositeResourceDefinition", "compositeresourcedefinitions", ["v2", "v1"]), mk("Composition", "compositions", ["v1"])];
}

export class Host {
  private readonly objects: KubernetesObjectApi;
  private readonly custom: CustomObjectsApi;
  readonly watches: WatchManager;
  readonly queue: WorkQueue;
  private readonly controllers = new Map<string, Controller>();
  private xrdHandles: Handle[] = [];
  private gcTimer: NodeJS.Timeout | undefined;
  /** XR uid -> controller + key, to route composed events to their XR. */
  private readonly byUid = new Map<string, { xrd: string; key: string }>();

  constructor(private readonly o: HostOptions) {
    this.objects = KubernetesObjectApi.makeApiClient(o.kc);
    this.custom = o.kc.makeApiClient(CustomObjectsApi);
    this.watches = new WatchManager(o.kc, o.log, { initialBackoffMs: 200, maxBackoffMs: 10_000 });
    this.queue = new WorkQueue(
      (k) => this.reconcile(k),
      { workers: o.workers ?? 4, baseBackoffMs: o.baseBackoffMs ?? 200, maxBackoffMs: o.maxBackoffMs ?? 30_000 },
      (key, err, retry) => o.log.warn({ xr: key, err: (err as Error).message, retryInMs: retry }, "reconcile failed; retrying"),
    );
  }

  /** start installs the Crossplane kinds the host reads if missing, then watches XRDs. */
  async start(): Promise<void> {
    for (const c of crossplaneCRDs()) {
      try {
        await this.objects.create(kubeObject(c));
      } catch (err) {
        if (errorCode(err) !== 409) throw new Error(`cannot install CRD ${String(metaOf(c)["name"])}: ${(err as Error).message}`);
      }
    }
    // Composition changes re-reconcile every XR of their kind.
    this.watches.ensure(COMPOSITIONS, "host", (e) => this.onComposition(e));
    for (const k of XRD_KINDS) this.xrdHandles.push(this.watches.ensure(k, "host", (e) => void this.onXRD(e)));
    this.gcTimer = setInterval(() => void this.collectWatches(), this.o.watchGcIntervalMs ?? 60_000);
    this.o.log.info("host started: watching CompositeResourceDefinitions");
  }

  async stop(): Promise<void> {
    clearInterval(this.gcTimer);
    this.queue.stop();
    await this.watches.stopAll();
    this.controllers.clear();
    this.o.runner.close();
  }

  /** controllerKinds lists the XR kinds with a running controller. */
  controllerKinds(): string[] {
    return [...this.controllers.values()].map((c) => kindKey(c.type.kind));
  }

  // --- XRDs ----------------------------------------------------------------

  private xrType(xrd: JsonObject): XRType | undefined {
    const spec = isObject(xrd["spec"]) ? xrd["spec"] : {};
    const names = isObject(spec["names"]) ? spec["names"] : {};
    const group = str(spec["group"]);
    const kind = str(names["kind"]);
    const plural = str(names["plural"]);
    const versions = Array.isArray(spec["versions"]) ? (spec["versions"] as JsonObject[]) : [];
    const version = str((versions.find((v) => v["referenceable"] === true) ?? versions.find((v) => v["served"] !== false))?.["name"]);
    if (!group || !kind || !plural || !version) return undefined;
    // The API server stores the scope's default (see crossplaneCRDs); without
    // one, the version the XRD is read in decides, as its default would.
    const scope = str(spec["scope"]) ?? (String(xrd["apiVersion"]).endsWith("/v2") ? "Namespaced" : "LegacyCluster");
    const namespaced = scope === "Namespaced";
    return {
      xrd: String(metaOf(xrd)["name"]),
      kind: { group, version, plural },
      gvk: { apiVersion: `${group}/${version}`, kind },
      namespaced,
    };
  }

  private async onXRD(e: WatchEvent): Promise<void> {
    const xrd = e.object as unknown as JsonObject;
    const name = String(metaOf(xrd)["name"]);
    if (e.type === "delete" || metaOf(xrd)["deletionTimestamp"]) return this.stopController(name);
    if (this.controllers.has(name)) return;
    const t = this.xrType(xrd);
    if (!t) {
      this.o.log.error({ xrd: name }, "XRD has no group, names.kind, names.plural or served version; ignoring it");
      return;
    }
    try {
      await this.ensureXRCRD(xrd, t);
    } catch (err) {
      this.o.log.error({ xrd: name, err: (err as Error).message }, "cannot serve the XR kind");
      return;
    }
    if (this.controllers.has(name)) return;
    const handle = this.watches.ensure(t.kind, `xrd:${name}`, (ev) => this.onXR(name, ev));
    this.controllers.set(name, { type: t, handle, composed: new Map() });
    this.o.log.info({ xrd: name, kind: t.gvk.kind }, "started XR controller");
    const claims = isObject(xrd["spec"]) ? xrd["spec"]["claimNames"] : undefined;
    if (isObject(claims)) {
      this.o.log.warn(
        { xrd: name, claimKind: claims["kind"] },
        "the XRD offers claims, which the host does not serve: create its XRs directly",
      );
    }
  }

  /** ensureXRCRD serves the XR kind, as Crossplane does for an XRD. */
  private async ensureXRCRD(xrd: JsonObject, t: XRType): Promise<void> {
    const spec = xrd["spec"] as JsonObject;
    const crd = {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: `${t.kind.plural}.${t.kind.group}` },
      spec: {
        group: t.kind.group,
        names: {
          ...(spec["names"] as JsonObject),
          listKind: `${t.gvk.kind}List`,
          singular: String((spec["names"] as JsonObject)["singular"] ?? t.gvk.kind.toLowerCase()),
        },
        scope: t.namespaced ? "Namespaced" : "Cluster",
        versions: (spec["versions"] as JsonObject[]).map((v) => ({
          name: v["name"],
          served: v["served"] !== false,
          storage: v["referenceable"] === true || (spec["versions"] as JsonObject[]).length === 1,
          subresources: { status: {} },
          schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
        })),
      },
    };
    await this.objects.patch(kubeObject(crd as JsonObject), undefined, undefined, "xfn-host", true, PatchStrategy.ServerSideApply);
  }

  private async stopController(name: string): Promise<void> {
    const c = this.controllers.get(name);
    if (!c) return;
    this.controllers.delete(name);
    // Release only: never create or wait for an informer here (failure mode 1).
    await this.watches.release(c.handle);
    for (const handles of c.composed.values()) for (const h of handles.values()) await this.watches.release(h);
    this.o.log.info({ xrd: name, kind: c.type.gvk.kind }, "stopped XR controller");
  }

  // --- events --------------------------------------------------------------

  private onXR(xrd: string, e: WatchEvent): void {
    const m = metaOf(e.object);
    const key = `${xrd}|${keyOf(str(m["namespace"]), String(m["name"]))}`;
    if (e.type === "delete") {
      this.byUid.delete(String(m["uid"]));
      this.queue.add(key); // cleans up its watches
      return;
    }
    this.byUid.set(String(m["uid"]), { xrd, key });
    this.queue.add(key);
  }

  private onComposed(e: WatchEvent): void {
    const refs = metaOf(e.object)["ownerReferences"];
    if (!Array.isArray(refs)) return;
    for (const r of refs) {
      if (!isObject(r) || r["controller"] !== true) continue;
      const owner = this.byUid.get(String(r["uid"]));
      if (owner) this.queue.add(owner.key);
    }
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

  /**
   * collectWatches releases composed-kind watches held for XRs that no longer
   * exist. A watch still in use is never released; XR-kind watches belong to
   * their controller and live exactly as long as it does.
   */
  private async collectWatches(): Promise<void> {
    for (const c of this.controllers.values()) {
      const live = new Set(
        this.watches.cached(c.type.kind).map((o) => `${c.type.xrd}|${keyOf(o.metadata?.namespace, o.metadata?.name ?? "")}`),
      );
      for (const [xrKey, handles] of c.composed) {
        if (live.has(xrKey)) continue;
        c.composed.delete(xrKey);
        for (const h of handles.values()) await this.watches.release(h);
      }
    }
  }

  private async watchComposed(c: Controller, xrKey: string, apiVersion: string, kind: string): Promise<void> {
    const handles = c.composed.get(xrKey) ?? c.composed.set(xrKey, new Map()).get(xrKey)!;
    const id = `${apiVersion}/${kind}`;
    if (handles.has(id)) return;
    const plural = await this.pluralOf(apiVersion, kind);
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
    if (!group) return; // core kinds are not composed here
    handles.set(
      id,
      this.watches.ensure({ group, version: version!, plural }, `xr:${xrKey}`, (e) => this.onComposed(e)),
    );
  }

  private readonly plurals = new Map<string, string>();
  /** pluralOf resolves a kind's plural through discovery (client-node's own cached lookup). */
  private async pluralOf(apiVersion: string, kind: string): Promise<string> {
    const k = `${apiVersion}/${kind}`;
    const hit = this.plurals.get(k);
    if (hit) return hit;
    // KubernetesObjectApi.resource is protected in the types but is the discovery lookup we want.
    const lookup = this.objects as unknown as { resource(av: string, k: string): Promise<{ name: string } | undefined> };
    const r = await lookup.resource(apiVersion, kind);
    if (!r) throw new Error(`the API server does not serve ${kind} in ${apiVersion}`);
    this.plurals.set(k, r.name);
    return r.name;
  }

  // --- reconcile -----------------------------------------------------------

  private async reconcile(key: string): Promise<{ requeueAfterMs?: number } | void> {
    const [xrdName, nsName] = key.split("|") as [string, string];
    const c = this.controllers.get(xrdName);
    if (!c) return;
    const [ns, name] = nsName.split("/") as [string, string];
    const namespace = ns || undefined;
    const log = this.o.log.child({ xr: `${c.type.gvk.kind}/${nsName.replace(/^\//, "")}` });

    let xr: JsonObject;
    try {
      xr = plain(
        await this.objects.read({
          apiVersion: c.type.gvk.apiVersion,
          kind: c.type.gvk.kind,
          metadata: { name, ...(namespace ? { namespace } : {}) },
        }),
      );
    } catch (err) {
      if (errorCode(err) !== 404) throw err;
      // Gone: release the watches held for it; they may be needed by nobody now.
      const handles = c.composed.get(key);
      c.composed.delete(key);
      for (const h of handles?.values() ?? []) await this.watches.release(h);
      this.queue.forget(key);
      return;
    }
    const m = metaOf(xr);
    const deleting = Boolean(m["deletionTimestamp"]);
    const finalizers = Array.isArray(m["finalizers"]) ? (m["finalizers"] as string[]) : [];
    if (!deleting && !finalizers.includes(XR_FINALIZER)) {
      await this.patchXR(c, xr, { metadata: { finalizers: [...finalizers, XR_FINALIZER] } });
      return { requeueAfterMs: 0 };
    }

    // Observed: the XR's composed resources, read fresh.
    const observed: Record<string, Resource> = {};
    const observedObjects = new Map<string, JsonObject>();
    for (const ref of this.resourceRefs(xr)) {
      try {
        const o = plain(
          await this.objects.read({
            apiVersion: ref.apiVersion,
            kind: ref.kind,
            metadata: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) },
          }),
        );
        const rn = str((metaOf(o)["annotations"] as JsonObject | undefined)?.[COMPOSITION_RESOURCE_NAME]);
        if (!rn) continue;
        observed[rn] = create(ResourceSchema, { resource: o });
        observedObjects.set(rn, o);
        await this.watchComposed(c, key, ref.apiVersion, ref.kind);
      } catch (err) {
        const code = errorCode(err);
        if (code !== 404) log.warn({ ref: `${ref.kind}/${ref.name}`, err: (err as Error).message }, "cannot read composed resource");
      }
    }

    if (deleting && observedObjects.size === 0) {
      await this.patchXR(c, xr, { metadata: { finalizers: finalizers.filter((f) => f !== XR_FINALIZER) } });
      log.info("all composed resources are gone; XR deleted");
      return;
    }

    let composition: JsonObject;
    try {
      const chosen = this.composition(c, xr);
      composition = chosen.obj;
      // Record the choice on the XR, as Crossplane does, so that it holds when
      // other Compositions for the kind come (or the XRD's default changes).
      const name = String(metaOf(composition)["name"]);
      if (!deleting && chosen.recorded !== name) await this.patchXR(c, xr, { spec: { crossplane: { compositionRef: { name } } } });
    } catch (err) {
      const message = `cannot select a Composition: ${(err as Error).message}`;
      await this.writeStatus(c, xr, {}, [
        { type: "Synced", status: "False", reason: "ReconcileError", message, lastTransitionTime: now() },
      ]);
      throw new Error(message);
    }
    let result;
    try {
      result = await runPipeline(
        {
          steps: checkComposition(
            { obj: xr, source: `${c.type.gvk.kind} ${name}` },
            { obj: composition, source: `Composition ${String(metaOf(composition)["name"])}` },
          ),
          xr,
          observed,
          context: undefined,
          credentials: [],
          fetch: this.fetcher(),
        },
        this.o.runner,
        Date.now() + (this.o.functionTimeoutMs ?? 30_000),
      );
    } catch (err) {
      const message = err instanceof FatalResultError ? err.message : `cannot run the composition pipeline: ${(err as Error).message}`;
      await this.writeStatus(c, xr, {}, [
        { type: "Synced", status: "False", reason: "ReconcileError", message, lastTransitionTime: now() },
      ]);
      throw new Error(message);
    }

    // While the XR is deleted, what the pipeline still desires is what it wants
    // kept for now: the deletion step drops resources in dependency order and
    // says so (Ready=False, reason Deleting). A pipeline without such a step
    // desires everything still; then, as in Crossplane, everything goes.
    const ordered = deleting && result.conditions.some((fc) => fc["type"] === "Ready" && fc["reason"] === "Deleting");
    const desiredResources = deleting && !ordered ? {} : result.desired.resources;

    // Apply desired composed resources; delete the dropped ones.
    const refs: Array<{ apiVersion: string; kind: string; name: string; namespace?: string }> = [];
    const unready: string[] = [];
    for (const rn of Object.keys(desiredResources).sort()) {
      const d = desiredResources[rn]!;
      const obj = this.composedObject(xr, rn, d.resource ?? {}, observedObjects.get(rn));
      const applied = plain(
        await this.objects.patch(kubeObject(obj), undefined, undefined, `xfn/${String(m["uid"])}`, true, PatchStrategy.ServerSideApply),
      );
      const am = metaOf(applied);
      refs.push({
        apiVersion: String(applied["apiVersion"]),
        kind: String(applied["kind"]),
        name: String(am["name"]),
        ...(am["namespace"] ? { namespace: String(am["namespace"]) } : {}),
      });
      await this.watchComposed(c, key, String(applied["apiVersion"]), String(applied["kind"]));
      const ready =
        d.ready === Ready.TRUE ||
        (d.ready === Ready.UNSPECIFIED && conditionsOf(applied).some((x) => x["type"] === "Ready" && x["status"] === "True"));
      if (!ready) unready.push(rn);
    }
    for (const [rn, o] of observedObjects) {
      if (Object.hasOwn(desiredResources, rn)) continue;
      const om = metaOf(o);
      if (!om["deletionTimestamp"]) {
        await this.objects
          .delete(o as KubernetesObject, undefined, undefined, undefined, undefined, deleting ? "Foreground" : "Background")
          .catch((err) => {
            if (errorCode(err) !== 404) throw err;
          });
        log.info({ resource: rn }, deleting ? "deleting composed resource" : "deleted dropped composed resource");
      }
      // Still there until it is gone: keep the reference so it stays observed.
      refs.push({
        apiVersion: String(o["apiVersion"]),
        kind: String(o["kind"]),
        name: String(om["name"]),
        ...(om["namespace"] ? { namespace: String(om["namespace"]) } : {}),
      });
    }

    // Resource references, then status and conditions, in this same reconcile.
    const current = JSON.stringify(this.resourceRefs(xr));
    if (JSON.stringify(refs) !== current) await this.patchXR(c, xr, { spec: { crossplane: { resourceRefs: refs } } });
    const conds: JsonObject[] = [{ type: "Synced", status: "True", reason: "ReconcileSuccess", lastTransitionTime: now() }];
    const xrReady = result.desired.composite?.ready ?? Ready.UNSPECIFIED;
    if (!deleting) {
      if (xrReady === Ready.TRUE || (xrReady === Ready.UNSPECIFIED && unready.length === 0))
        conds.push({ type: "Ready", status: "True", reason: "Available", lastTransitionTime: now() });
      else
        conds.push({
          type: "Ready",
          status: "False",
          reason: "Creating",
          ...(unready.length ? { message: `Unready resources: ${unready.join(", ")}` } : {}),
          lastTransitionTime: now(),
        });
    }
    if (deleting && !ordered) {
      // Name what is left and what holds it, as the deletion step does.
      const left = [...observedObjects.keys()].sort().map((rn) => {
        const f = metaOf(observedObjects.get(rn)!)["finalizers"];
        return Array.isArray(f) && f.length > 0 ? `${rn} (finalizers: ${f.join(", ")})` : rn;
      });
      conds.push({
        type: "Ready",
        status: "False",
        reason: "Deleting",
        message: `deleting ${left.length} composed resource${left.length === 1 ? "" : "s"}: ${left.join(", ")}`,
        lastTransitionTime: now(),
      });
    }
    for (const fc of result.conditions) {
      // Functions may not override system conditions, except Ready while the XR is deleted (the deletion step's report).
      if (fc["type"] === "Synced" || (fc["type"] === "Ready" && !ordered)) continue;
      conds.push({ ...fc, lastTransitionTime: now() });
    }
    const desiredStatus = isObject(result.desired.composite?.resource?.["status"])
      ? (result.desired.composite!.resource!["status"] as JsonObject)
      : {};
    await this.writeStatus(c, xr, desiredStatus, conds);
    const ttl = deleting ? Math.min(result.ttlSeconds ?? 2, 2) : (result.ttlSeconds ?? 60);
    return { requeueAfterMs: ttl * 1000 };
  }

  private resourceRefs(xr: JsonObject): Array<{ apiVersion: string; kind: string; name: string; namespace?: string }> {
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
   * composition picks the XR's Composition as Crossplane does: the XRD's
   * enforcedCompositionRef; else the XR's compositionRef; else, when the XR has
   * no compositionSelector either, the XRD's defaultCompositionRef; else the
   * Compositions for the XR's kind whose labels match the selector (all of
   * them without one). Where Crossplane would pick one of several at random
   * and record it on the XR, the host asks for a choice instead. recorded is
   * the XR's own compositionRef, if any.
   */
  private composition(c: Controller, xr: JsonObject): { obj: JsonObject; recorded: string | undefined } {
    const spec = isObject(xr["spec"]) ? xr["spec"] : {};
    const cp = isObject(spec["crossplane"]) ? spec["crossplane"] : {};
    const field = (k: string) => cp[k] ?? spec[k]; // v2 XRs keep these under spec.crossplane, v1 XRs at spec
    const xrd = XRD_KINDS.flatMap((k) => this.watches.cached(k) as unknown as JsonObject[]).find((x) => metaOf(x)["name"] === c.type.xrd);
    const xrdSpec = xrd && isObject(xrd["spec"]) ? xrd["spec"] : {};
    const nameOf = (ref: JsonValue | undefined) => (isObject(ref) ? str(ref["name"]) : undefined);
    const all = this.watches.cached(COMPOSITIONS) as unknown as JsonObject[];
    const { apiVersion, kind } = c.type.gvk;
    const typeOf = (x: JsonObject) => {
      const t = isObject(x["spec"]) && isObject(x["spec"]["compositeTypeRef"]) ? x["spec"]["compositeTypeRef"] : {};
      return `${String(t["apiVersion"])} ${String(t["kind"])}`;
    };
    const forKind = (x: JsonObject) => typeOf(x) === `${apiVersion} ${kind}`;

    // What the XR says must be well formed (Crossplane's schema would refuse it otherwise).
    const rawSelector = field("compositionSelector");
    const rawRef = field("compositionRef");
    if (rawSelector !== undefined && rawSelector !== null) {
      const labels = isObject(rawSelector) ? rawSelector["matchLabels"] : undefined;
      if (
        !isObject(rawSelector) ||
        (labels !== undefined && labels !== null && !(isObject(labels) && Object.values(labels).every((v) => typeof v === "string")))
      ) {
        throw new Error(`compositionSelector must be {matchLabels: {key: "value", ...}}, got ${JSON.stringify(rawSelector)}`);
      }
    }
    if (rawRef !== undefined && rawRef !== null && !nameOf(rawRef))
      throw new Error(`compositionRef must be {name: "..."}, got ${JSON.stringify(rawRef)}`);
    const selector = isObject(rawSelector) ? rawSelector : undefined;
    const enforced = nameOf(xrdSpec["enforcedCompositionRef"]);
    const own = nameOf(rawRef);
    const ref = enforced ?? own ?? (selector ? undefined : nameOf(xrdSpec["defaultCompositionRef"]));
    if (ref) {
      const found = all.find((x) => metaOf(x)["name"] === ref);
      const why = enforced ? " (the XRD's enforcedCompositionRef)" : own ? "" : " (the XRD's defaultCompositionRef)";
      if (!found) throw new Error(`Composition ${JSON.stringify(ref)}${why} not found`);
      if (!forKind(found)) throw new Error(`Composition ${JSON.stringify(ref)}${why} composes ${typeOf(found)}, not ${apiVersion} ${kind}`);
      return { obj: found, recorded: own };
    }
    const want = selector && isObject(selector["matchLabels"]) ? selector["matchLabels"] : {};
    const matching = all.filter((x) => {
      if (!forKind(x)) return false;
      const labels = isObject(metaOf(x)["labels"]) ? (metaOf(x)["labels"] as JsonObject) : {};
      return Object.entries(want).every(([k, v]) => labels[k] === v);
    });
    const what = `for ${apiVersion} ${kind}${selector ? ` with labels ${JSON.stringify(want)}` : ""}`;
    if (matching.length === 0) throw new Error(`no Composition ${what}`);
    if (matching.length > 1) {
      const names = matching.map((x) => String(metaOf(x)["name"])).sort();
      const choose = selector
        ? "compositionRef, or narrow compositionSelector"
        : "compositionRef or compositionSelector, or give the XRD a defaultCompositionRef";
      throw new Error(`${matching.length} Compositions ${what} (${names.join(", ")}): set the XR's ${choose}`);
    }
    return { obj: matching[0]!, recorded: own };
  }

  /** composedObject gives a desired resource the identity Crossplane gives composed resources. */
  private composedObject(xr: JsonObject, rn: string, desired: JsonObject, observed: JsonObject | undefined): JsonObject {
    const xm = metaOf(xr);
    const o: JsonObject = structuredClone(desired);
    delete o["status"];
    const m: JsonObject = isObject(o["metadata"]) ? o["metadata"] : {};
    o["metadata"] = m;
    const om = observed ? metaOf(observed) : undefined;
    // A deterministic name: a crash between create and recording the reference never makes a second object.
    m["name"] =
      str(om?.["name"]) ??
      str(m["name"]) ??
      `${String(xm["name"])}-${createHash("sha256")
        .update(`${String(xm["uid"])}/${rn}`)
        .digest("hex")
        .slice(0, 5)}`;
    delete m["generateName"];
    if (xm["namespace"]) m["namespace"] = xm["namespace"]!;
    m["annotations"] = { ...((m["annotations"] as JsonObject | undefined) ?? {}), [COMPOSITION_RESOURCE_NAME]: rn };
    m["labels"] = {
      ...((m["labels"] as JsonObject | undefined) ?? {}),
      [COMPOSITE_LABEL]: String(((xm["labels"] as JsonObject | undefined)?.[COMPOSITE_LABEL] as string | undefined) ?? xm["name"]),
    };
    m["ownerReferences"] = [
      {
        apiVersion: String(xr["apiVersion"]),
        kind: String(xr["kind"]),
        name: String(xm["name"]),
        uid: String(xm["uid"]),
        controller: true,
        blockOwnerDeletion: true,
      },
    ];
    return o;
  }

  private fetcher(): Fetch {
    return async (s) => {
      const sel =
        s.match.case === "matchLabels"
          ? Object.entries(s.match.value.labels)
              .map(([k, v]) => `${k}=${v}`)
              .join(",")
          : undefined;
      const list = await this.objects.list(
        s.apiVersion,
        s.kind,
        s.namespace,
        undefined,
        undefined,
        undefined,
        s.match.case === "matchName" ? `metadata.name=${s.match.value}` : undefined,
        sel,
      );
      return {
        $typeName: "apiextensions.fn.proto.v1.Resources",
        items: list.items.map((i) => create(ResourceSchema, { resource: plain(i) })),
      };
    };
  }

  /** patchXR merge-patches the XR itself (finalizers, resource references). */
  private async patchXR(c: Controller, xr: JsonObject, patch: JsonObject): Promise<void> {
    const m = metaOf(xr);
    const base = {
      group: c.type.kind.group,
      version: c.type.kind.version,
      plural: c.type.kind.plural,
      name: String(m["name"]),
      body: patch,
    };
    const opts = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
    if (m["namespace"]) await this.custom.patchNamespacedCustomObject({ ...base, namespace: String(m["namespace"]) }, opts);
    else await this.custom.patchClusterCustomObject(base, opts);
  }

  /**
   * writeStatus server-side applies the XR's status: the pipeline's desired
   * status plus conditions set by type (transition times kept when unchanged).
   * Apply, not a merge patch, so status fields the pipeline stops writing are
   * removed (a merge patch can only add).
   */
  private async writeStatus(c: Controller, xr: JsonObject, desired: JsonObject, conds: JsonObject[]): Promise<void> {
    const existing = conditionsOf(xr);
    const merged = [...existing];
    for (const n of conds) {
      const i = merged.findIndex((x) => x["type"] === n["type"]);
      const old = i >= 0 ? merged[i]! : undefined;
      const next =
        old && old["status"] === n["status"] && old["reason"] === n["reason"]
          ? { ...n, lastTransitionTime: old["lastTransitionTime"] ?? n["lastTransitionTime"]! }
          : n;
      if (i >= 0) merged[i] = next;
      else merged.push(next);
    }
    const m = metaOf(xr);
    const body = {
      apiVersion: c.type.gvk.apiVersion,
      kind: c.type.gvk.kind,
      metadata: { name: String(m["name"]), ...(m["namespace"] ? { namespace: String(m["namespace"]) } : {}) },
      status: { ...desired, conditions: merged },
    };
    const base = {
      group: c.type.kind.group,
      version: c.type.kind.version,
      plural: c.type.kind.plural,
      name: String(m["name"]),
      body,
      fieldManager: `xfn-status/${String(m["uid"])}`,
      force: true,
    };
    const opts = setHeaderOptions("Content-Type", PatchStrategy.ServerSideApply);
    if (m["namespace"]) await this.custom.patchNamespacedCustomObjectStatus({ ...base, namespace: String(m["namespace"]) }, opts);
    else await this.custom.patchClusterCustomObjectStatus(base, opts);
  }
}
