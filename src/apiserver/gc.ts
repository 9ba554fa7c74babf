// Garbage collection by owner references, as kube-apiserver's garbage
// collector settles it: an object deleting with no finalizers left goes; a
// foreground owner deletes its dependents and loses its foregroundDeletion
// finalizer once no dependent blocks it; an object whose owners are all gone is
// deleted in the background.
//
// The collector keeps its own indexes (uid -> object, owner uid -> dependents)
// and a set of objects to look at again, fed by the store on every write
// (track), so that settling costs what a write touched, not what is stored.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isObject, metaOf } from "../json.js";

export const FOREGROUND = "foregroundDeletion";

/** What the collector asks of the store it settles. */
export interface Settling {
  /** The stored object (not a copy) at typeKey and key, if any. */
  objectAt(typeKey: string, key: string): JsonObject | undefined;
  /** remove takes an object out for good (its finalizers are gone). */
  remove(typeKey: string, o: JsonObject): void;
  /** deleteBackground starts deleting an object as a background cascade would. */
  deleteBackground(typeKey: string, o: JsonObject): void;
  /** replace writes a new version of an object. */
  replace(typeKey: string, next: JsonObject): void;
  /** held says whether an object past its finalizers is still kept by its kind's own rule (a namespace's spec.finalizers). */
  held(typeKey: string, o: JsonObject): boolean;
}

/** A reference to one stored object: its type and its namespace/name key. */
interface Ref {
  typeKey: string;
  key: string;
}
const refId = (typeKey: string, key: string) => `${typeKey}\n${key}`;
const refOf = (id: string): Ref => {
  const i = id.indexOf("\n");
  return { typeKey: id.slice(0, i), key: id.slice(i + 1) };
};
const uidOf = (o: JsonObject | undefined): JsonValue | undefined => (o ? metaOf(o)["uid"] : undefined);
/** ownerUids lists the uids an object's ownerReferences name. */
const ownerUids = (o: JsonObject | undefined): string[] => {
  const refs = o ? metaOf(o)["ownerReferences"] : undefined;
  return Array.isArray(refs) ? refs.flatMap((r) => (isObject(r) && typeof r["uid"] === "string" ? [r["uid"]] : [])) : [];
};
const stringList = (v: JsonValue | undefined): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);

export class Collector {
  private readonly byUid = new Map<string, Ref>();
  private readonly dependents = new Map<string, Set<string>>();
  /** Objects to look at again (refIds): those a write touched, and their owners and dependents. */
  private readonly pending = new Set<string>();
  private collecting = false;

  constructor(private readonly store: Settling) {}

  /** busy says whether something is marked to be settled. */
  get busy(): boolean {
    return this.pending.size > 0;
  }

  /**
   * track is told of every change the store makes at typeKey and key (next
   * undefined: removed). It keeps the indexes and marks what the change may
   * concern: the object, its owners before and after, and its dependents.
   */
  track(typeKey: string, key: string, previous: JsonObject | undefined, next: JsonObject | undefined): void {
    const id = refId(typeKey, key);
    const prevUid = uidOf(previous);
    const nextUid = uidOf(next);
    if (typeof prevUid === "string" && prevUid !== nextUid) this.byUid.delete(prevUid);
    if (typeof nextUid === "string") this.byUid.set(nextUid, { typeKey, key });
    const before = ownerUids(previous);
    const after = ownerUids(next);
    for (const u of before) {
      if (after.includes(u)) continue;
      const set = this.dependents.get(u);
      set?.delete(id);
      if (set?.size === 0) this.dependents.delete(u);
    }
    for (const u of after) (this.dependents.get(u) ?? this.dependents.set(u, new Set()).get(u)!).add(id);
    for (const u of [...before, ...after]) {
      const owner = this.byUid.get(u);
      if (owner) this.pending.add(refId(owner.typeKey, owner.key));
    }
    for (const u of [prevUid, nextUid]) {
      if (typeof u !== "string") continue;
      for (const d of this.dependents.get(u) ?? []) this.pending.add(d);
    }
    if (next) this.pending.add(id);
  }

  /** dependentsOf copies the objects whose ownerReferences name uid, with where each is stored. */
  dependentsOf(uid: string): Array<{ typeKey: string; key: string; object: JsonObject }> {
    const out: Array<{ typeKey: string; key: string; object: JsonObject }> = [];
    for (const id of this.dependents.get(uid) ?? []) {
      const { typeKey, key } = refOf(id);
      const o = this.store.objectAt(typeKey, key);
      if (o) out.push({ typeKey, key, object: structuredClone(o) });
    }
    return out;
  }

  /**
   * collect settles what writes marked until nothing more is marked. Deleting
   * collects too; the outermost call does the work.
   */
  collect(): void {
    if (this.collecting) return;
    this.collecting = true;
    try {
      while (this.pending.size > 0) {
        const id = this.pending.values().next().value as string;
        this.pending.delete(id);
        this.settle(refOf(id));
      }
    } finally {
      this.collecting = false;
    }
  }

  /** settle looks at one object as it is now: earlier steps may have replaced or removed it. */
  private settle({ typeKey, key }: Ref): void {
    const o = this.store.objectAt(typeKey, key);
    if (!o) return;
    const m = metaOf(o);
    if (m["deletionTimestamp"]) {
      const fins = stringList(m["finalizers"]);
      if (fins.length === 0) {
        if (!this.store.held(typeKey, o)) this.store.remove(typeKey, o);
      } else if (fins.includes(FOREGROUND)) this.foreground(typeKey, o, fins);
      return;
    }
    const refs = m["ownerReferences"];
    if (
      Array.isArray(refs) &&
      refs.length > 0 &&
      refs.every((r) => isObject(r) && typeof r["uid"] === "string" && !this.byUid.has(r["uid"]))
    ) {
      this.store.deleteBackground(typeKey, o);
    }
  }

  /** foreground deletes an owner's dependents, and lets the owner go once none blocks it. */
  private foreground(typeKey: string, o: JsonObject, fins: string[]): void {
    const uid = String(metaOf(o)["uid"]);
    for (const d of this.dependentsOf(uid)) {
      // Still there: deleting one dependent may have taken another with it.
      if (this.store.objectAt(d.typeKey, d.key) && !metaOf(d.object)["deletionTimestamp"]) this.store.deleteBackground(d.typeKey, d.object);
    }
    const blocking = this.dependentsOf(uid).filter((d) =>
      (metaOf(d.object)["ownerReferences"] as JsonObject[]).some((r) => r["uid"] === uid && r["blockOwnerDeletion"] === true),
    );
    if (blocking.length > 0) return;
    const next = structuredClone(o);
    const nm = metaOf(next);
    nm["finalizers"] = fins.filter((f) => f !== FOREGROUND);
    if ((nm["finalizers"] as JsonValue[]).length === 0) delete nm["finalizers"];
    this.store.replace(typeKey, next);
  }
}
