// The watches of composed kinds, held per XR: a kind is watched while some XR
// composes it and released when the last one is gone (failure mode 3: a watch
// in use is never collected); an event on a composed resource brings its
// controlling XR back to the queue. The same for the kinds XRs' functions
// required (core kinds too): a change to a required object brings back every
// XR that required it, by name or by labels, as Crossplane's dependency
// tracker does (dependencies.ts). Also what discovery says of each kind (its
// plural, and whether it is namespaced), asked once.
import type { KubernetesObjectApi } from "@kubernetes/client-node";
import type { JsonObject } from "@bufbuild/protobuf";
import { errorCode, isObject, metaOf, str } from "./kube.js";
import { DependencyTracker, kindOf, referenceOf, type Requirement } from "./dependencies.js";
import type { Kind, WatchEvent, WatchManager } from "./watches.js";
import type { PipelineResult } from "../engine/composition.js";

interface KindWatch {
  kind: Kind;
  handle: ReturnType<WatchManager["ensure"]>;
  users: Set<string>;
}

export interface ComposedWatchesDeps {
  objects: KubernetesObjectApi;
  watches: () => WatchManager;
  /** enqueue brings an XR (by its queue key) back for a reconcile. */
  enqueue: (key: string) => void;
}

/** ComposedWatches keeps the composed kinds each XR watches, and which XR a composed resource's events go to. */
export class ComposedWatches {
  /** XR uid -> its queue key, to send composed resources' events to their XR; and back. */
  private readonly byUid = new Map<string, string>();
  private readonly uidOf = new Map<string, string>();
  /** Composed kinds watched, and which XRs use each; each XR's kinds. */
  private readonly kinds = new Map<string, KindWatch>();
  private readonly xrKinds = new Map<string, Set<string>>();
  /** Discovery, asked once per kind: its plural, and whether it is namespaced. */
  private readonly plurals = new Map<string, string>();
  private readonly namespacedKinds = new Map<string, boolean>();
  /** What each XR's functions required; and the watches of the required kinds (by kindOf), with the XRs that use each. */
  private readonly tracker = new DependencyTracker();
  private readonly requiredKinds = new Map<string, KindWatch>();

  constructor(private readonly d: ComposedWatchesDeps) {}

  /** track notes an XR's uid, so its composed resources' events reach it. */
  track(uid: string, key: string): void {
    this.byUid.set(uid, key);
    this.uidOf.set(key, uid);
  }

  /** keys are the XRs that hold watches. */
  keys(): string[] {
    return [...this.xrKinds.keys()];
  }

  /** reset forgets every XR and watch (the host stopped reconciling); discovery is kept. */
  reset(): void {
    for (const m of [this.byUid, this.uidOf, this.kinds, this.xrKinds, this.requiredKinds]) (m as Map<string, unknown>).clear();
    for (const key of [...this.tracker.xrs()]) this.tracker.forget(key);
  }

  /** release lets go of an XR: the watches no other XR uses are released. It returns the uid the XR had. */
  async release(key: string): Promise<string | undefined> {
    for (const kk of this.xrKinds.get(key) ?? []) {
      const w = this.kinds.get(kk);
      if (!w) continue;
      w.users.delete(key);
      if (w.users.size > 0) continue;
      this.kinds.delete(kk);
      await this.d.watches().release(w.handle);
    }
    this.xrKinds.delete(key);
    await this.require(key, {});
    const uid = this.uidOf.get(key);
    if (uid) this.byUid.delete(uid);
    this.uidOf.delete(key);
    return uid;
  }

  /** watch makes sure a composed kind is watched, counting the XR among its users; it resolves with the kind. */
  async watch(key: string, apiVersion: string, kind: string): Promise<Kind | undefined> {
    if (!apiVersion.includes("/")) return undefined; // core kinds are not composed here
    const k = await this.kindFor(apiVersion, kind);
    const kk = `${k.group}/${k.version}/${k.plural}`;
    let w = this.kinds.get(kk);
    if (!w) {
      w = { kind: k, handle: this.d.watches().ensure(k, "composed", (ev) => this.onComposed(ev)), users: new Set() };
      this.kinds.set(kk, w);
    }
    w.users.add(key);
    (this.xrKinds.get(key) ?? this.xrKinds.set(key, new Set()).get(key)!).add(kk);
    return k;
  }

  /**
   * require records what an XR's steps required (by step, under the names the
   * functions used), replacing what it required before; the kinds no XR
   * requires any more stop being watched, and each new one is watched. A kind
   * discovery does not know is not watched (fetching it failed too, and the
   * XR's next reconcile tries again).
   */
  async require(key: string, required: PipelineResult["required"]): Promise<void> {
    const reqs: Requirement[] = Object.entries(required).flatMap(([step, rs]) =>
      rs.map((r) => ({ step, name: r.name, reference: referenceOf(r.selector) })),
    );
    const before = this.tracker.kindsOf(key);
    this.tracker.track(key, reqs);
    const after = this.tracker.kindsOf(key);
    for (const kk of after) {
      if (before.has(kk) && this.requiredKinds.get(kk)?.users.has(key)) continue;
      const r = reqs.find((x) => kindOf(x.reference.apiVersion, x.reference.kind) === kk)!.reference;
      let w = this.requiredKinds.get(kk);
      if (!w) {
        let k: Kind;
        try {
          k = await this.kindFor(r.apiVersion, r.kind);
        } catch {
          continue;
        }
        if (this.requiredKinds.has(kk)) w = this.requiredKinds.get(kk)!;
        else {
          const handle = this.d.watches().ensure(k, "required", (ev) => this.onRequired(r.apiVersion, r.kind, ev));
          w = { kind: k, handle, users: new Set() };
          this.requiredKinds.set(kk, w);
        }
      }
      w.users.add(key);
    }
    for (const kk of before) {
      if (after.has(kk)) continue;
      const w = this.requiredKinds.get(kk);
      if (!w || !w.users.delete(key) || w.users.size > 0) continue;
      this.requiredKinds.delete(kk);
      await this.d.watches().release(w.handle);
    }
  }

  private onRequired(apiVersion: string, kind: string, e: WatchEvent): void {
    const m = metaOf(e.object);
    const labels = isObject(m["labels"]) ? (m["labels"] as Record<string, string>) : {};
    const changed = { apiVersion, kind, namespace: str(m["namespace"]) ?? "", name: String(m["name"] ?? ""), labels };
    for (const key of this.tracker.dependants(changed)) this.d.enqueue(key);
  }

  /** kindFor is the watchable kind of an apiVersion and kind, its plural from discovery. */
  private async kindFor(apiVersion: string, kind: string): Promise<Kind> {
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
    return { group: group!, version: version!, plural: await this.pluralOf(apiVersion, kind), kind };
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

  /** scopes tells, for each desired resource's kind, whether it is namespaced (absent where discovery does not know the kind). */
  async scopes(desired: Record<string, { resource?: JsonObject | undefined }>): Promise<Map<string, boolean>> {
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
}
