// The embedded API server's state: resource types (built-in, builtin.ts, and
// from CRDs), objects, one resourceVersion counter and finalizers. Garbage
// collection by owner references is in gc.ts; watches and the event history
// they resume from are in fanout.ts.
//
// It behaves like a real API server for what the xfn host uses: every write
// is checked as kube-apiserver checks it (metadata in meta.ts; a custom
// resource against its CRD's schema in schema.ts and cel.ts; refusals are 422
// Invalid with field causes, fielderr.ts). Known differences are listed in
// docs/dev-cluster.md: no admission, no version conversion (every served
// version of a CRD sees the same stored object), lists in server-side apply
// are atomic, and only appliers own fields.
import { randomBytes, randomUUID } from "node:crypto";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { kubeTimestamp } from "../sdk/object.js";
import { fieldsMatch, matches, type FieldRequirement, type Requirement } from "./selector.js";
import { isObject } from "../json.js";
import { BUILTIN } from "./builtin.js";
import { Fanout } from "./fanout.js";
import { Collector, FOREGROUND } from "./gc.js";
import { forbidden, type FieldError } from "../schema/fielderr.js";
import { refusal } from "./refusal.js";
import { dataErrors, metaErrors } from "./meta.js";
import { Schema } from "../schema/schema.js";
import { checkDeferred } from "../schema/offthread.js";
import { RuleError } from "../schema/cel.js";
import { ApiError } from "./errors.js";
import { crdErrors, prepareCRD, schemaWhere } from "./crd.js";
import { builtinNode, customNode, recordUpdate } from "./patch.js";

/** Writer is who makes a write that is not an apply: its field manager, and the subresource it writes through. */
export type Writer = { manager: string; subresource?: string };
import { ensureMeta, generationChanged, type ResourceType, type Snapshot, type StoreEvent, type Watcher } from "./types.js";
import {
  admitCreate,
  NamespaceController,
  NAMESPACES_KEY,
  labelName,
  prepareCreate,
  prepareUpdate,
  specErrors,
  specFinalizers,
  startDeleting,
} from "./namespace.js";

const labelsOf = (o: JsonObject): Record<string, string> => {
  const l = ensureMeta(o)["labels"];
  return isObject(l) ? (Object.fromEntries(Object.entries(l).filter(([, v]) => typeof v === "string")) as Record<string, string>) : {};
};

export const typeKeyOf = (group: string, plural: string) => `${group}/${plural}`;
const objectKey = (namespace: string | undefined, name: string) => `${namespace ?? ""}/${name}`;

export const CRD_KEY = typeKeyOf("apiextensions.k8s.io", "customresourcedefinitions");
export { FOREGROUND };
export const ORPHAN = "orphan";

/** StoreOptions tune history and the clock. */
export interface StoreOptions {
  /** How many events watches can resume from; older resourceVersions get 410 Gone. Default 1000. */
  historySize?: number;
  now?: () => Date;
}

export class Store {
  rv = 0;
  readonly types = new Map<string, ResourceType>();
  private readonly objects = new Map<string, Map<string, JsonObject>>();
  /** Garbage collection, told of every change (stored) so that it costs what a write touched. */
  private readonly gc = new Collector({
    objectAt: (typeKey, key) => this.objects.get(typeKey)?.get(key),
    remove: (typeKey, o) => this.remove(typeKey, o),
    deleteBackground: (typeKey, o) =>
      this.delete(typeKey, ensureMeta(o)["namespace"] as string | undefined, String(ensureMeta(o)["name"]), "Background"),
    replace: (typeKey, next) => this.replace(typeKey, next),
    held: (typeKey, o) => this.namespaces.held(typeKey, o),
  });
  /** The namespace controller: a terminating namespace's contents deleted, then the namespace (namespace.ts). */
  private readonly namespaces = new NamespaceController({
    namespacedTypes: () => [...this.types.entries()].filter(([, t]) => t.namespaced).map(([typeKey, t]) => ({ typeKey, ...t })),
    objectsIn: (typeKey, namespace) => {
      const out: JsonObject[] = [];
      for (const o of this.objects.get(typeKey)?.values() ?? []) if (ensureMeta(o)["namespace"] === namespace) out.push(o);
      return out;
    },
    namespace: (name) => this.objects.get(NAMESPACES_KEY)?.get(objectKey(undefined, name)),
    deleteBackground: (typeKey, o) =>
      this.delete(typeKey, ensureMeta(o)["namespace"] as string | undefined, String(ensureMeta(o)["name"]), "Background"),
    replace: (typeKey, next) => this.replace(typeKey, next),
    remove: (typeKey, o) => this.remove(typeKey, o),
    timestamp: () => this.timestamp(),
  });
  private settling = false;
  /**
   * The volatileFree JSON of the objects written last (stored objects are never
   * changed in place), for their next write's no-op check: bounded, so that it
   * costs memory for what is being written now, not for everything stored.
   */
  private readonly texts = new Map<JsonObject, string>();

  /** remember keeps o's volatileFree JSON, forgetting the oldest past TEXTS_KEPT. */
  private remember(o: JsonObject, text: string): void {
    this.texts.set(o, text);
    if (this.texts.size > TEXTS_KEPT) this.texts.delete(this.texts.keys().next().value as JsonObject);
  }

  /** textOf is a stored object's volatileFree JSON, remembered or made. */
  private textOf(o: JsonObject): string {
    return this.texts.get(o) ?? volatileFree(o);
  }
  /** Watches, and the event history they resume from. */
  private readonly fanout: Fanout;
  private readonly now: () => Date;
  /**
   * journal, when set, is told of every change as it is made (persistence
   * writes it to its log). With holdEvents, watchers are sent a change only
   * once release(rv) says it is durable, so no client ever sees a version a
   * crash could take back.
   */
  journal: ((e: StoreEvent) => void) | undefined;
  get holdEvents(): boolean {
    return this.fanout.holdEvents;
  }
  set holdEvents(hold: boolean) {
    this.fanout.holdEvents = hold;
  }

  constructor(opts: StoreOptions = {}) {
    this.fanout = new Fanout(opts.historySize ?? 1000);
    this.now = opts.now ?? (() => new Date());
    for (const t of BUILTIN) this.addType(t);
    for (const ns of ["default", "kube-system", "crossplane-system"]) {
      this.create(typeKeyOf("", "namespaces"), undefined, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
    }
  }

  private addType(t: ResourceType): void {
    const key = typeKeyOf(t.group, t.plural);
    this.types.set(key, t);
    if (!this.objects.has(key)) this.objects.set(key, new Map());
  }

  /** findType resolves group, version and plural to a served type. */
  findType(group: string, version: string, plural: string): ResourceType | undefined {
    const t = this.types.get(typeKeyOf(group, plural));
    return t && t.versions.includes(version) ? t : undefined;
  }

  /** typeForKind finds the type serving apiVersion/kind, if any. */
  typeForKind(apiVersion: string, kind: string): ResourceType | undefined {
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
    for (const t of this.types.values()) if (t.group === group && t.kind === kind && t.versions.includes(version!)) return t;
    return undefined;
  }

  /** compact forgets the event history, as etcd compaction does (tests use it to force 410 Gone). */
  compact(): void {
    this.fanout.forgetHistory(this.rv);
  }

  // --- reading -------------------------------------------------------------

  /** find is the object at typeKey, namespace and name (a copy), or undefined: a get that does not throw. */
  find(typeKey: string, namespace: string | undefined, name: string): JsonObject | undefined {
    const o = this.objects.get(typeKey)?.get(objectKey(namespace, name));
    return o ? structuredClone(o) : undefined;
  }

  get(typeKey: string, namespace: string | undefined, name: string): JsonObject {
    const o = this.objects.get(typeKey)?.get(objectKey(namespace, name));
    if (!o) throw new ApiError(404, "NotFound", `${this.types.get(typeKey)?.plural ?? typeKey} "${name}" not found`);
    return structuredClone(o);
  }

  list(typeKey: string, namespace: string | undefined, labels: Requirement[], fields: FieldRequirement[] = []): JsonObject[] {
    return this.listKeyed(typeKey, namespace, labels, fields).items.map((o) => structuredClone(o));
  }

  /**
   * listKeyed is what list selects, not copied (stored objects are never
   * changed in place: every write stores a new one), with each one's key,
   * ordered by key as etcd orders them (code units, not locale).
   */
  listKeyed(
    typeKey: string,
    namespace: string | undefined,
    labels: Requirement[],
    fields: FieldRequirement[] = [],
  ): { items: JsonObject[]; keys: string[] } {
    const found: Array<[string, JsonObject]> = [];
    for (const [key, o] of this.objects.get(typeKey) ?? []) {
      const m = ensureMeta(o);
      if (namespace !== undefined && m["namespace"] !== namespace) continue;
      if (!fieldsMatch(fields, o)) continue;
      if (!matches(labels, labelsOf(o))) continue;
      found.push([key, o]);
    }
    found.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return { items: found.map(([, o]) => o), keys: found.map(([k]) => k) };
  }

  // --- writing -------------------------------------------------------------

  private bump(): string {
    this.rv++;
    return String(this.rv);
  }

  private record(ev: Omit<StoreEvent, "rv">): void {
    const e: StoreEvent = { ...ev, rv: this.rv };
    this.journal?.(e);
    this.fanout.add(e);
  }

  /** release sends watchers every held change up to rv (inclusive), in order. */
  release(rv: number): void {
    this.fanout.release(rv);
  }

  /**
   * replay applies changes read back from a log after restore: each puts an
   * object (a CRD serves its kind again) or, with object null, removes it. Nothing
   * is journaled or sent to watchers; resourceVersions are the log's.
   */
  replay(entries: Iterable<{ rv: number; typeKey: string; key: string; object: JsonObject | null }>): void {
    for (const e of entries) {
      if (e.rv <= this.rv) continue; // already in the snapshot
      this.rv = e.rv;
      if (!this.objects.has(e.typeKey)) continue; // a CR whose CRD is gone
      const previous = this.objects.get(e.typeKey)!.get(e.key);
      this.stored(e.typeKey, e.key, e.object === null ? undefined : structuredClone(e.object));
      if (e.typeKey !== CRD_KEY) continue;
      if (e.object) this.establishCRD(e.object);
      else if (previous) this.forgetType(previous);
    }
    this.fanout.forgetHistory(this.rv);
  }

  /** checkNamespace refuses a create in a namespace that is absent (404) or being deleted (403), as kube's NamespaceLifecycle does. */
  private checkNamespace(t: ResourceType, namespace: string | undefined, name: string): void {
    if (t.namespaced && !namespace) throw new ApiError(400, "BadRequest", `${t.plural} is namespaced: a namespace is required`);
    if (!t.namespaced && namespace) throw new ApiError(404, "NotFound", `${t.plural} is not namespaced`);
    if (!t.namespaced) return;
    const ns = this.objects.get(NAMESPACES_KEY)!.get(objectKey(undefined, namespace!));
    if (!ns) throw new ApiError(404, "NotFound", `namespaces "${namespace}" not found`);
    admitCreate(t, name, ns, namespace!);
  }

  /**
   * create stores a new object. With dryRun, everything but the storing is
   * done (kube-apiserver's DryRunnableStorage): it is checked, defaulted and
   * answered as it would be stored, with no resourceVersion, and nothing is
   * kept, sent to watchers or journaled.
   */
  create(
    typeKey: string,
    namespace: string | undefined,
    body: JsonObject,
    opts: { warnings?: string[]; dryRun?: boolean; manager?: Writer } = {},
  ): JsonObject {
    const t = this.mustType(typeKey);
    const obj = structuredClone(body);
    const m = ensureMeta(obj);
    this.checkNamespace(t, namespace, typeof m["name"] === "string" ? m["name"] : "");
    if (m["namespace"] !== undefined && m["namespace"] !== namespace) {
      throw new ApiError(
        400,
        "BadRequest",
        `the namespace of the object (${String(m["namespace"])}) does not match the namespace on the request (${namespace})`,
      );
    }
    if (!m["name"]) {
      if (typeof m["generateName"] !== "string" || m["generateName"] === "")
        throw refusal(t.group, t.kind, "", [
          { type: "FieldValueRequired", field: "metadata.name", detail: "name or generateName is required" },
        ]);
      m["name"] = `${m["generateName"]}${randomBytes(4).toString("hex").slice(0, 5)}`;
    }
    const name = String(m["name"]);
    // A custom resource's status comes only through its status subresource, a CRD's from the server (PrepareForCreate).
    if ((t.crd && t.statusSubresource) || typeKey === CRD_KEY) delete obj["status"];
    // What the writer sent owns its fields; what the strategy sets after (a namespace's spec.finalizers and
    // status.phase) is no one's, as kube's field manager runs before PrepareForCreate.
    // (Its kubernetes.io/metadata.name label is a default, set before: the writer owns it.)
    if (typeKey === NAMESPACES_KEY) labelName(obj);
    const written = typeKey === NAMESPACES_KEY && opts.manager ? structuredClone(obj) : obj;
    if (typeKey === NAMESPACES_KEY) prepareCreate(obj);
    this.admit(t, obj, undefined, false, opts.warnings);
    const map = this.objects.get(typeKey)!;
    if (map.has(objectKey(namespace, name)))
      throw new ApiError(409, "AlreadyExists", `${t.group ? `${t.plural}.${t.group}` : t.plural} "${name}" already exists`);
    if (namespace) m["namespace"] = namespace;
    m["uid"] = randomUUID();
    m["creationTimestamp"] = this.timestamp();
    if (opts.manager)
      setManaged(m, recordUpdate(undefined, written, opts.manager, m["creationTimestamp"], t.crd ? customNode : builtinNode));
    // Only kinds whose strategy keeps a generation have one: CRDs and custom resources, not core kinds.
    if (t.crd || typeKey === CRD_KEY) m["generation"] = 1;
    delete m["deletionTimestamp"];
    const crdSchemas = typeKey === CRD_KEY ? this.validateCRD(obj) : undefined;
    const text = volatileFree(obj);
    checkSize(obj, text);
    if (opts.dryRun) return obj;
    // Remembered for the object's next write, which compares against it.
    if (typeKey !== CRD_KEY) this.remember(obj, text);
    m["resourceVersion"] = this.bump();
    this.stored(typeKey, objectKey(namespace, name), obj);
    this.record({ type: "ADDED", typeKey, object: structuredClone(obj) });
    if (crdSchemas) this.establishCRD(obj, crdSchemas);
    this.collectGarbage();
    return structuredClone(map.get(objectKey(namespace, name)) ?? obj);
  }

  /**
   * update replaces an object. With status, only .status changes (the status
   * subresource); otherwise .status is kept as is when the type has a status
   * subresource. A stale resourceVersion is a 409 Conflict.
   */
  update(
    typeKey: string,
    namespace: string | undefined,
    name: string,
    body: JsonObject,
    opts: { status?: boolean; applied?: boolean; warnings?: string[]; dryRun?: boolean; finalize?: boolean; manager?: Writer } = {},
  ): JsonObject {
    const { t, map, key, current } = this.existing(typeKey, namespace, name);
    const bm = isObject(body["metadata"]) ? body["metadata"] : {};
    if (bm["name"] !== undefined && bm["name"] !== name)
      throw new ApiError(400, "BadRequest", `the name of the object (${String(bm["name"])}) does not match the name on the URL (${name})`);
    if (
      bm["resourceVersion"] !== undefined &&
      bm["resourceVersion"] !== "" &&
      bm["resourceVersion"] !== ensureMeta(current)["resourceVersion"]
    ) {
      throw new ApiError(
        409,
        "Conflict",
        `Operation cannot be fulfilled on ${t.plural} "${name}": the object has been modified; ` +
          "please apply your changes to the latest version and try again",
      );
    }
    let next: JsonObject;
    if (opts.status) {
      next = structuredClone(current);
      if (body["status"] === undefined) delete next["status"];
      else next["status"] = structuredClone(body["status"]!);
    } else {
      next = structuredClone(body);
      if (t.statusSubresource) {
        if (current["status"] === undefined) delete next["status"];
        else next["status"] = structuredClone(current["status"]!);
      }
    }
    if (typeKey === NAMESPACES_KEY && !opts.status) prepareUpdate(next, current, opts.finalize === true);
    const nm = ensureMeta(next);
    const cm = ensureMeta(current);
    // Server-owned fields never come from the client; managedFields only from apply.
    const serverOwned = [
      "uid",
      "creationTimestamp",
      "deletionTimestamp",
      "namespace",
      "name",
      "generation",
      ...(opts.applied ? [] : ["managedFields"]),
    ];
    if (opts.applied && opts.status) nm["managedFields"] = structuredClone(ensureMeta(body)["managedFields"] ?? []);
    for (const k of serverOwned) {
      if (cm[k] === undefined) delete nm[k];
      else nm[k] = structuredClone(cm[k]!);
    }
    // Once deleting, finalizers may only be removed.
    if (cm["deletionTimestamp"]) {
      const before = new Set(stringList(cm["finalizers"]));
      const added = stringList(nm["finalizers"]).filter((f) => !before.has(f));
      if (added.length) {
        // kube-apiserver v1.36.3's words; the error twice among the causes, as its generic update and the kind's
        // strategy both validate the metadata (the differential tier's kubectl/finalizers).
        const found = `[]string{${added.map((f) => JSON.stringify(f)).join(", ")}}`;
        const err = forbidden(
          "metadata.finalizers",
          `no new finalizers can be added if the object is being deleted, found new finalizers ${found}`,
        );
        throw refusal(t.group, t.kind, name, [err, err]);
      }
    }
    if (!opts.status && cm["generation"] !== undefined && generationChanged(t, current, next))
      nm["generation"] = Number(cm["generation"]) + 1;
    // A write that changes nothing is a no-op: no new version, and validated (as kube validates
    // before it finds so) only for transition rules: ratcheting passes all else that did not change.
    const nextText = volatileFree(next);
    if (this.textOf(current) === nextText) {
      if (this.schemaOf(t, next)?.hasTransitionRules) this.admit(t, next, current, opts.status === true, opts.warnings);
      return structuredClone(current);
    }
    // A write that is not an apply takes the fields it changed (kube's field manager, operation Update).
    if (opts.manager && !opts.applied)
      setManaged(nm, recordUpdate(current, next, opts.manager, this.timestamp(), t.crd ? customNode : builtinNode));
    this.admit(t, next, current, opts.status === true, opts.warnings);
    const crdSchemas = typeKey === CRD_KEY ? this.validateCRD(next, current) : undefined;
    checkSize(next, typeKey === CRD_KEY ? undefined : nextText);
    if (typeKey !== CRD_KEY) this.remember(next, nextText);
    // A dry run answers with the object as it would be stored, at the version it replaces.
    if (opts.dryRun) return ((nm["resourceVersion"] = cm["resourceVersion"]!), next);
    nm["resourceVersion"] = this.bump();
    this.stored(typeKey, key, next);
    this.record({ type: "MODIFIED", typeKey, object: structuredClone(next), previous: current });
    if (crdSchemas) this.establishCRD(next, crdSchemas);
    this.collectGarbage();
    return structuredClone(map.get(key) ?? next);
  }

  /** existing is the stored object at typeKey, namespace and name, with its type and where it is kept; 404 NotFound if none. */
  private existing(typeKey: string, namespace: string | undefined, name: string) {
    const t = this.mustType(typeKey);
    const map = this.objects.get(typeKey)!;
    const key = objectKey(namespace, name);
    const current = map.get(key);
    if (!current) throw new ApiError(404, "NotFound", `${t.plural} "${name}" not found`);
    return { t, map, key, current };
  }

  /** delete starts deleting an object, honouring finalizers and the propagation policy. */
  delete(
    typeKey: string,
    namespace: string | undefined,
    name: string,
    propagation: "Foreground" | "Background" | "Orphan" = "Background",
    preconditionUid?: string,
    opts: { dryRun?: boolean } = {},
  ): JsonObject {
    const { map, key, current } = this.existing(typeKey, namespace, name);
    const m = ensureMeta(current);
    if (preconditionUid && m["uid"] !== preconditionUid)
      throw new ApiError(
        409,
        "Conflict",
        `Precondition failed: UID in precondition: ${preconditionUid}, UID in object meta: ${String(m["uid"])}`,
      );
    // A namespace is first marked Terminating; the namespace controller empties and removes it (namespace.ts).
    const terminating = typeKey === NAMESPACES_KEY ? startDeleting(current, propagation, this.timestamp()) : undefined;
    if (typeKey === NAMESPACES_KEY && !terminating && specFinalizers(current).length) return structuredClone(current);
    if (opts.dryRun) return terminating ?? this.wouldDelete(current, propagation);
    if (propagation === "Orphan") {
      for (const d of this.gc.dependentsOf(String(m["uid"]))) {
        const dm = ensureMeta(d.object);
        dm["ownerReferences"] = (dm["ownerReferences"] as JsonObject[]).filter((r) => r["uid"] !== m["uid"]);
        if ((dm["ownerReferences"] as JsonValue[]).length === 0) delete dm["ownerReferences"];
        this.replace(d.typeKey, d.object);
      }
    }
    if (terminating) {
      this.replace(typeKey, terminating);
      this.collectGarbage();
      return structuredClone(terminating);
    }
    const finalizers = stringList(m["finalizers"]);
    if (propagation === "Foreground" && !finalizers.includes(FOREGROUND)) finalizers.push(FOREGROUND);
    if (finalizers.length === 0) {
      this.remove(typeKey, current);
      this.collectGarbage();
      return structuredClone(current);
    }
    if (!m["deletionTimestamp"] || JSON.stringify(stringList(m["finalizers"])) !== JSON.stringify(finalizers)) {
      const next = structuredClone(current);
      const nm = ensureMeta(next);
      nm["deletionTimestamp"] ??= this.timestamp();
      nm["deletionGracePeriodSeconds"] = 0;
      nm["finalizers"] = finalizers;
      this.replace(typeKey, next);
    }
    this.collectGarbage();
    return structuredClone(map.get(key) ?? current);
  }

  /**
   * wouldDelete is what delete answers, without doing it: the object as it is
   * removed, or, when finalizers hold it, as it stays, being deleted. Nothing
   * is orphaned or collected.
   */
  private wouldDelete(current: JsonObject, propagation: "Foreground" | "Background" | "Orphan"): JsonObject {
    const m = ensureMeta(current);
    const finalizers = stringList(m["finalizers"]);
    if (propagation === "Foreground" && !finalizers.includes(FOREGROUND)) finalizers.push(FOREGROUND);
    const out = structuredClone(current);
    if (finalizers.length === 0) return out;
    const om = ensureMeta(out);
    om["deletionTimestamp"] ??= this.timestamp();
    om["deletionGracePeriodSeconds"] = 0;
    om["finalizers"] = finalizers;
    return out;
  }

  private replace(typeKey: string, next: JsonObject): void {
    const m = ensureMeta(next);
    const key = objectKey(m["namespace"] as string | undefined, String(m["name"]));
    const previous = this.objects.get(typeKey)!.get(key);
    m["resourceVersion"] = this.bump();
    this.stored(typeKey, key, next);
    this.record({ type: "MODIFIED", typeKey, object: structuredClone(next), ...(previous ? { previous } : {}) });
  }

  private remove(typeKey: string, obj: JsonObject): void {
    const m = ensureMeta(obj);
    this.stored(typeKey, objectKey(m["namespace"] as string | undefined, String(m["name"])), undefined);
    const gone = structuredClone(obj);
    ensureMeta(gone)["resourceVersion"] = this.bump();
    this.record({ type: "DELETED", typeKey, object: gone });
    if (typeKey === CRD_KEY) this.retireCRD(obj);
  }

  /** collectGarbage settles deletion (gc.ts) and terminating namespaces (namespace.ts); every write ends with it. */
  collectGarbage(): void {
    if (this.settling) return;
    this.settling = true;
    try {
      do {
        this.gc.collect();
        this.namespaces.settle();
      } while (this.gc.busy || this.namespaces.busy);
    } finally {
      this.settling = false;
    }
  }

  /**
   * stored puts next (or, with next undefined, removes what is at typeKey and
   * key) and tells garbage collection.
   */
  private stored(typeKey: string, key: string, next: JsonObject | undefined): void {
    const map = this.objects.get(typeKey);
    if (!map) return;
    const previous = map.get(key);
    if (next) map.set(key, next);
    else map.delete(key);
    this.gc.track(typeKey, key, previous, next);
    this.namespaces.track(typeKey, previous, next);
  }

  /** schemaOf is the compiled schema of obj's version of a custom resource kind, if it has one. */
  private schemaOf(t: ResourceType, obj: JsonObject): Schema | undefined {
    const version = typeof obj["apiVersion"] === "string" ? obj["apiVersion"].slice(obj["apiVersion"].indexOf("/") + 1) : "";
    return t.schemas?.[version];
  }

  /**
   * admit refuses, with kube-apiserver's 422 Invalid, a write whose metadata,
   * data (ConfigMaps, Secrets) or, for a custom resource, schema and rules do
   * not hold. old is the object before an update; status, a status write.
   */
  private admit(t: ResourceType, obj: JsonObject, old: JsonObject | undefined, status: boolean, warnings: string[] = []): void {
    const errs: FieldError[] = metaErrors(obj, t.group === "" && t.plural === "namespaces");
    if (t.group === "" && t.plural === "namespaces") errs.push(...specErrors(obj));
    if (t.group === "" && (t.kind === "ConfigMap" || t.kind === "Secret")) errs.push(...dataErrors(t.kind, obj));
    const schema = this.schemaOf(t, obj);
    if (schema) errs.push(...schema.validate(obj, old, status, warnings));
    // A long match answered provisionally (offthread.ts): the write runs again once it is answered.
    checkDeferred();
    if (errs.length) throw refusal(t.group, t.kind, String(ensureMeta(obj)["name"] ?? ""), errs);
  }

  // --- CRDs ----------------------------------------------------------------

  /** validateCRD refuses a CRD kube-apiserver would refuse (old: what an update replaces); answers its versions' compiled schemas. */
  private validateCRD(crd: JsonObject, old?: JsonObject): Record<string, Schema> {
    prepareCRD(crd);
    const name = String(ensureMeta(crd)["name"] ?? "");
    const errs = crdErrors(crd, old);
    if (errs.length) throw refusal("apiextensions.k8s.io", "CustomResourceDefinition", name, errs);
    // Each version's schema must compile (its CEL rules parse), as kube-apiserver refuses a CRD whose rules do not.
    return compileSchemas((crd["spec"] as JsonObject)["versions"] as JsonValue[], name);
  }

  /** establishCRD serves a CRD's kind and marks it Established; schemas are its compiled ones (compiled here for a stored CRD). */
  private establishCRD(crd: JsonObject, schemas?: Record<string, Schema>): void {
    const spec = crd["spec"] as JsonObject;
    const names = spec["names"] as JsonObject;
    const versions = (spec["versions"] as JsonObject[]).filter((v) => v["served"] !== false);
    const t: ResourceType = {
      group: String(spec["group"]),
      versions: versions.map((v) => String(v["name"])),
      kind: String(names["kind"]),
      listKind: String(names["listKind"] ?? `${String(names["kind"])}List`),
      plural: String(names["plural"]),
      singular: String(names["singular"] ?? String(names["kind"]).toLowerCase()),
      namespaced: spec["scope"] !== "Cluster",
      statusSubresource: versions.some((v) => isObject(v["subresources"]) && isObject((v["subresources"] as JsonObject)["status"])),
      shortNames: stringList(names["shortNames"]),
      categories: stringList(names["categories"]),
      crd: String(ensureMeta(crd)["name"]),
      ...storageOf(spec["versions"]),
      schemas: schemas ?? compiledOrNone(versions),
      openAPI: Object.fromEntries(
        versions.flatMap((v) => {
          const schema = isObject(v["schema"]) ? v["schema"]["openAPIV3Schema"] : undefined;
          return isObject(schema) ? [[String(v["name"]), schema]] : [];
        }),
      ),
      columns: Object.fromEntries(
        versions.map((v) => [
          String(v["name"]),
          Array.isArray(v["additionalPrinterColumns"]) ? v["additionalPrinterColumns"].filter(isObject) : [],
        ]),
      ),
    };
    if (ensureMeta(crd)["deletionTimestamp"]) return;
    this.addType(t);
    const status = isObject(crd["status"]) ? crd["status"] : {};
    const established =
      Array.isArray(status["conditions"]) &&
      status["conditions"].some((c) => isObject(c) && c["type"] === "Established" && c["status"] === "True");
    const acceptedNames = {
      kind: t.kind,
      listKind: t.listKind,
      plural: t.plural,
      singular: t.singular,
      ...(t.shortNames.length ? { shortNames: t.shortNames } : {}),
      ...(t.categories?.length ? { categories: t.categories } : {}),
    };
    const stored = this.objects.get(CRD_KEY)!.get(objectKey(undefined, String(ensureMeta(crd)["name"])))!;
    if (established && JSON.stringify(status["acceptedNames"]) !== JSON.stringify(acceptedNames)) {
      // New names (a category, a short name) are accepted at once: nothing here can conflict with them.
      this.replace(CRD_KEY, { ...structuredClone(stored), status: { ...structuredClone(status), acceptedNames } });
    }
    if (!established) {
      const next = structuredClone(stored);
      const at = this.timestamp();
      next["status"] = {
        acceptedNames,
        conditions: [
          { type: "NamesAccepted", status: "True", reason: "NoConflicts", message: "no conflicts found", lastTransitionTime: at },
          {
            type: "Established",
            status: "True",
            reason: "InitialNamesAccepted",
            message: "the initial names have been accepted",
            lastTransitionTime: at,
          },
        ],
        storedVersions: structuredClone(status["storedVersions"] ?? []),
      };
      this.replace(CRD_KEY, next);
    }
  }

  /** retireCRD deletes a CRD's objects, ends watches on its kind, and stops serving it. */
  private retireCRD(crd: JsonObject): void {
    const spec = crd["spec"] as JsonObject;
    const key = typeKeyOf(String(spec["group"]), String((spec["names"] as JsonObject)["plural"]));
    const map = this.objects.get(key);
    if (!map) return;
    for (const o of [...map.values()]) {
      this.stored(key, objectKey(ensureMeta(o)["namespace"] as string | undefined, String(ensureMeta(o)["name"])), undefined);
      const gone = structuredClone(o);
      ensureMeta(gone)["resourceVersion"] = this.bump();
      this.record({ type: "DELETED", typeKey: key, object: gone });
    }
    this.fanout.closeKind(key, this.rv);
    this.forgetType(crd);
  }

  /** forgetType stops serving a CRD's kind. */
  private forgetType(crd: JsonObject): void {
    const spec = crd["spec"] as JsonObject;
    const key = typeKeyOf(String(spec["group"]), String((spec["names"] as JsonObject)["plural"]));
    this.types.delete(key);
    this.objects.delete(key);
  }

  // --- watching ------------------------------------------------------------

  /**
   * watch subscribes w from resourceVersion `from` (exclusive). Without one, it
   * first sends every current object as ADDED. A version older than the
   * history is 410 Gone: an ERROR event, then the stream ends.
   */
  watch(w: Watcher, from: string | undefined): () => void {
    return this.fanout.watch(w, from, this.rv, () => this.list(w.typeKey, w.namespace, w.labels, w.fields));
  }

  bookmark(w: Watcher, apiVersion: string, kind: string): void {
    w.send("BOOKMARK", { apiVersion, kind, metadata: { resourceVersion: String(this.rv) } });
  }

  /** closeAllWatches ends every watch stream (an API server restart, or a test cutting watches). */
  closeAllWatches(): void {
    this.fanout.closeAll();
  }

  private mustType(typeKey: string): ResourceType {
    const t = this.types.get(typeKey);
    if (!t) throw new ApiError(404, "NotFound", `the server could not find the requested resource (${typeKey})`);
    return t;
  }

  private timestamp(): string {
    return kubeTimestamp(this.now());
  }

  // --- persistence ---------------------------------------------------------

  snapshot(): Snapshot {
    const objects: Snapshot["objects"] = [];
    // CRDs first, so loading serves their kinds before their objects arrive.
    for (const o of this.objects.get(CRD_KEY)!.values()) objects.push({ typeKey: CRD_KEY, object: o });
    for (const [typeKey, map] of this.objects) if (typeKey !== CRD_KEY) for (const o of map.values()) objects.push({ typeKey, object: o });
    return { rv: this.rv, objects };
  }

  /** restore loads a snapshot into an empty store, keeping every object's identity and version. */
  restore(s: Snapshot): void {
    for (const { typeKey, object } of s.objects) {
      if (!this.objects.has(typeKey)) continue; // a CR whose CRD is gone
      const m = ensureMeta(object);
      this.stored(typeKey, objectKey(m["namespace"] as string | undefined, String(m["name"])), structuredClone(object));
      if (typeKey === CRD_KEY) this.establishCRD(object);
    }
    this.rv = Math.max(this.rv, s.rv);
    // Watches cannot resume across a restart from history we no longer have.
    this.fanout.forgetHistory(this.rv);
  }
}

/** storageOf is a CRD's storage version, as a ResourceType field (none if no version says storage). */
function storageOf(versions: JsonValue | undefined): { storageVersion?: string } {
  const v = Array.isArray(versions) ? versions.find((x) => isObject(x) && x["storage"] === true) : undefined;
  return isObject(v) ? { storageVersion: String(v["name"]) } : {};
}

/** compileSchemas compiles each version's openAPIV3Schema; a rule that does not parse is a 422 naming it. */
function compileSchemas(versions: JsonValue[], crdName: string): Record<string, Schema> {
  const out: Record<string, Schema> = {};
  versions.forEach((v, i) => {
    if (!isObject(v)) return;
    const schema = isObject(v["schema"]) ? v["schema"]["openAPIV3Schema"] : undefined;
    if (!isObject(schema)) return;
    try {
      out[String(v["name"])] = new Schema(schema, schemaWhere(versions, i));
    } catch (err) {
      if (err instanceof RuleError) throw refusal("apiextensions.k8s.io", "CustomResourceDefinition", crdName, [err.error]);
      throw err;
    }
  });
  return out;
}

/** compiledOrNone compiles a stored CRD's schemas; one that no longer compiles (an older server took it) is served without a schema. */
function compiledOrNone(versions: JsonObject[]): Record<string, Schema> {
  try {
    return compileSchemas(versions, "");
  } catch {
    return {};
  }
}

/**
 * MAX_OBJECT_BYTES is etcd's default --max-request-bytes (1.5 MiB): kube-apiserver
 * can store no object larger, and answers a write of one with etcd's error (a
 * 500 without a reason, as it answers errors that are not API statuses).
 */
export const MAX_OBJECT_BYTES = 1.5 * 1024 * 1024;

/** TEXTS_KEPT is how many recently written objects' JSON the store keeps for no-op checks. */
const TEXTS_KEPT = 4096;

/** checkSize refuses to store an object past MAX_OBJECT_BYTES, as etcd refuses the request. */
function checkSize(o: JsonObject, text?: string): void {
  // text: the object's JSON without resourceVersion and managedFields, when the write has it already.
  const size =
    text === undefined
      ? Buffer.byteLength(JSON.stringify(o))
      : Buffer.byteLength(text) + JSON.stringify(ensureMeta(o)["managedFields"] ?? "").length + 64;
  if (size > MAX_OBJECT_BYTES) throw new ApiError(500, "", "etcdserver: request is too large");
}

function stringList(v: JsonValue | undefined): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

/**
 * volatileFree is o's JSON without its resourceVersion and managedFields
 * (what a no-op write may differ in), without copying o: JSON leaves out the
 * undefined of a shallow copy.
 */
function volatileFree(o: JsonObject): string {
  const m = isObject(o["metadata"]) ? o["metadata"] : {};
  return JSON.stringify({ ...o, metadata: { ...m, resourceVersion: undefined, managedFields: undefined } });
}

/**
 * setManaged records entries as metadata's managedFields; none is no managedFields at all, as kube
 * leaves it (an object with no field owned).
 */
function setManaged(meta: JsonObject, entries: JsonValue): void {
  if (Array.isArray(entries) && entries.length === 0) delete meta["managedFields"];
  else meta["managedFields"] = entries;
}
