// Namespaces as kube-apiserver and its namespace controller keep them. Read at
// kubernetes/kubernetes: pkg/registry/core/namespace/strategy.go (04a46264),
// storage/storage.go (94341df3), pkg/controller/namespace/deletion/
// namespaced_resources_deleter.go (023feb4a) and status_condition_utils.go
// (0355f448), and apiserver's admission/plugin/namespace/lifecycle (04791b49).
//
// - A namespace is created Active with the `kubernetes` finalizer in
//   spec.finalizers and the kubernetes.io/metadata.name label; an update keeps
//   spec.finalizers and status (only PUT .../finalize changes the finalizers).
// - Deleting it marks it Terminating (deletionTimestamp, status.phase); the
//   namespace controller then deletes its contents in the background, each
//   object's finalizers honoured, reports what remains in status conditions,
//   takes `kubernetes` out of spec.finalizers once nothing remains, and
//   deletes the namespace once no finalizer of either kind is left.
// - Nothing new may be created in a terminating namespace (403, the
//   NamespaceLifecycle admission plugin); default, kube-system and kube-public
//   may not be deleted.
//
// The controller's work is done here in the same turn as the write that calls
// for it (as garbage collection is, gc.ts), and only for namespaces a write
// touched, so it costs what the write touched.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isObject, metaOf } from "../json.js";
import { ApiError } from "./errors.js";
import { invalid, type FieldError } from "../schema/fielderr.js";
import { isQualifiedName } from "./meta.js";

export const NAMESPACES_KEY = "/namespaces";
/** KUBERNETES is the finalizer the namespace controller owns (core.FinalizerKubernetes). */
export const KUBERNETES = "kubernetes";
/** METADATA_NAME is the label every namespace carries with its own name (v1.LabelMetadataName). */
export const METADATA_NAME = "kubernetes.io/metadata.name";
/** IMMORTAL are the namespaces the NamespaceLifecycle plugin will not let go. */
const IMMORTAL = new Set(["default", "kube-system", "kube-public"]);
/** Finalizer names that need no domain (helper.IsStandardFinalizerName). */
const STANDARD = new Set([KUBERNETES, "orphan", "foregroundDeletion"]);

/** The condition types the namespace controller keeps, with what each says when all is well. */
const CONDITIONS: Array<[type: string, reason: string, message: string]> = [
  ["NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered", "All resources successfully discovered"],
  ["NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions", "All legacy kube types successfully parsed"],
  ["NamespaceDeletionContentFailure", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"],
  ["NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"],
  ["NamespaceFinalizersRemaining", "ContentRemoved", "All content successfully removed"],
];

/** What the namespace controller asks of the store. */
export interface NamespaceSettling {
  /** The namespaced types served now: their keys, plural and group. */
  namespacedTypes(): Array<{ typeKey: string; plural: string; group: string }>;
  /** The stored objects (not copies) of a type in a namespace. */
  objectsIn(typeKey: string, namespace: string): JsonObject[];
  /** The stored namespace (not a copy), if any. */
  namespace(name: string): JsonObject | undefined;
  deleteBackground(typeKey: string, o: JsonObject): void;
  replace(typeKey: string, next: JsonObject): void;
  remove(typeKey: string, o: JsonObject): void;
  timestamp(): string;
}

const strings = (v: JsonValue | undefined): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);
const specOf = (ns: JsonObject): JsonObject => (isObject(ns["spec"]) ? ns["spec"] : ((ns["spec"] = {}), ns["spec"] as JsonObject));
const statusOf = (ns: JsonObject): JsonObject =>
  isObject(ns["status"]) ? ns["status"] : ((ns["status"] = {}), ns["status"] as JsonObject);
/** specFinalizers is a namespace's spec.finalizers. */
export const specFinalizers = (ns: JsonObject): string[] => strings(isObject(ns["spec"]) ? ns["spec"]["finalizers"] : undefined);
/** terminating says whether a namespace is being deleted (as the lifecycle plugin reads it: its phase). */
export const terminating = (ns: JsonObject | undefined): boolean =>
  ns !== undefined && isObject(ns["status"]) && ns["status"]["phase"] === "Terminating";

/** prepareCreate is the namespace strategy's PrepareForCreate and defaulting: Active, the kubernetes finalizer, the name label. */
export function prepareCreate(ns: JsonObject): void {
  ns["status"] = { phase: "Active" };
  const spec = specOf(ns);
  const fins = specFinalizers(ns);
  if (!fins.includes(KUBERNETES)) spec["finalizers"] = [...fins, KUBERNETES];
  labelName(ns);
}

/** prepareUpdate is PrepareForUpdate: spec.finalizers and status stay as they are (finalize and status change them). */
export function prepareUpdate(next: JsonObject, current: JsonObject, finalize: boolean): void {
  if (finalize) {
    // PUT .../finalize: the finalizers from the request, everything else as it is.
    const fins = specFinalizers(next);
    for (const k of Object.keys(next)) delete next[k];
    Object.assign(next, structuredClone(current));
    if (fins.length) specOf(next)["finalizers"] = fins;
    else if (isObject(next["spec"])) delete next["spec"]["finalizers"];
  } else {
    const fins = isObject(current["spec"]) ? current["spec"]["finalizers"] : undefined;
    if (fins === undefined) {
      if (isObject(next["spec"])) delete next["spec"]["finalizers"];
    } else specOf(next)["finalizers"] = structuredClone(fins);
  }
  labelName(next);
}

/** labelName sets the label naming the namespace (Canonicalize), over anything a client put there. */
export function labelName(ns: JsonObject): void {
  const m = isObject(ns["metadata"]) ? ns["metadata"] : ((ns["metadata"] = {}), ns["metadata"] as JsonObject);
  if (typeof m["name"] !== "string" || m["name"] === "") return;
  m["labels"] = { ...(isObject(m["labels"]) ? m["labels"] : {}), [METADATA_NAME]: m["name"] };
}

/** specErrors is ValidateNamespace's check of spec.finalizers: qualified names, a bare one only if standard. */
export function specErrors(ns: JsonObject): FieldError[] {
  const errs: FieldError[] = [];
  for (const f of specFinalizers(ns)) {
    const bad = isQualifiedName(f);
    if (bad.length) for (const msg of bad) errs.push(invalid("spec.finalizers", f, msg));
    else if (!f.includes("/") && !STANDARD.has(f))
      errs.push(invalid("spec.finalizers", f, "name is neither a standard finalizer name nor is it fully qualified"));
  }
  return errs;
}

/** forbidden is kube's NewForbidden Status for a resource and name (name may be empty). */
export function forbidden(resource: { plural: string; group: string }, name: string, why: string, causes?: JsonObject[]): ApiError {
  const qualified = resource.group ? `${resource.plural}.${resource.group}` : resource.plural;
  const err = new ApiError(403, "Forbidden", `${qualified}${name ? ` ${JSON.stringify(name)}` : ""} is forbidden: ${why}`);
  err.details = { name, group: resource.group, kind: resource.plural, ...(causes ? { causes } : {}) };
  return err;
}

/** admitCreate refuses a create in a terminating namespace, as the NamespaceLifecycle admission plugin does. */
export function admitCreate(
  resource: { plural: string; group: string },
  name: string,
  ns: JsonObject | undefined,
  namespace: string,
): void {
  if (!terminating(ns)) return;
  throw forbidden(resource, name, `unable to create new content in namespace ${namespace} because it is being terminated`, [
    { reason: "NamespaceTerminating", message: `namespace ${namespace} is being terminated`, field: "metadata.namespace" },
  ]);
}

/**
 * startDeleting is the namespace storage's first Delete: the namespace, still
 * stored, marked Terminating with a deletionTimestamp, and the orphan or
 * foregroundDeletion finalizer as the propagation policy says. Undefined: it
 * is being deleted already, and the generic delete goes on (when no spec
 * finalizer is left) or the namespace is answered as it is.
 */
export function startDeleting(
  current: JsonObject,
  propagation: "Foreground" | "Background" | "Orphan",
  now: string,
): JsonObject | undefined {
  const name = String(metaOf(current)["name"]);
  if (IMMORTAL.has(name)) throw forbidden({ plural: "namespaces", group: "" }, name, "this namespace may not be deleted");
  if (metaOf(current)["deletionTimestamp"]) return undefined;
  const next = structuredClone(current);
  const m = next["metadata"] as JsonObject;
  m["deletionTimestamp"] = now;
  statusOf(next)["phase"] = "Terminating";
  // Orphaning is done at once by the store (no orphan finalizer waits for it); foreground waits on dependents.
  const fins = strings(m["finalizers"]).filter((f) => f !== "orphan" && f !== "foregroundDeletion");
  if (propagation === "Foreground") fins.push("foregroundDeletion");
  if (fins.length) m["finalizers"] = fins;
  else delete m["finalizers"];
  return next;
}

/**
 * NamespaceController does the namespace controller's work for the namespaces
 * writes marked: a terminating namespace's contents deleted, its conditions
 * kept, its `kubernetes` finalizer taken off once it is empty, and the
 * namespace removed once nothing holds it.
 */
export class NamespaceController {
  /** Terminating namespaces to look at again. */
  private readonly pending = new Set<string>();
  /** Every terminating namespace, so that a change inside one marks it. */
  private readonly deleting = new Set<string>();

  constructor(private readonly store: NamespaceSettling) {}

  get busy(): boolean {
    return this.pending.size > 0;
  }

  /** track is told of every change the store makes (next undefined: removed). */
  track(typeKey: string, previous: JsonObject | undefined, next: JsonObject | undefined): void {
    if (typeKey === NAMESPACES_KEY) {
      const name = String(metaOf(next ?? previous)["name"]);
      if (next && metaOf(next)["deletionTimestamp"]) {
        this.deleting.add(name);
        this.pending.add(name);
      } else {
        this.deleting.delete(name);
        this.pending.delete(name);
      }
      return;
    }
    if (this.deleting.size === 0) return;
    const ns = metaOf(next ?? previous)["namespace"];
    if (typeof ns === "string" && this.deleting.has(ns)) this.pending.add(ns);
  }

  /** held says whether a namespace past its metadata finalizers still waits on spec.finalizers. */
  held(typeKey: string, o: JsonObject): boolean {
    return typeKey === NAMESPACES_KEY && specFinalizers(o).length > 0;
  }

  /** settle works through the marked namespaces once each (what it deletes marks them again, for the caller's next round). */
  settle(): void {
    const names = [...this.pending];
    this.pending.clear();
    for (const name of names) this.settleOne(name);
  }

  private settleOne(name: string): void {
    const ns = this.store.namespace(name);
    if (!ns || !metaOf(ns)["deletionTimestamp"]) return;
    const fins = specFinalizers(ns);
    // Finalized (or finalized for it by a client): the namespace goes, its contents or not, as kube's controller does.
    if (fins.length === 0) {
      if (strings(metaOf(ns)["finalizers"]).length === 0) this.store.remove(NAMESPACES_KEY, ns);
      return;
    }
    if (!fins.includes(KUBERNETES)) return;
    const remaining = new Map<string, number>();
    const byFinalizer = new Map<string, number>();
    for (const t of this.store.namespacedTypes()) {
      for (const o of [...this.store.objectsIn(t.typeKey, name)])
        if (!metaOf(o)["deletionTimestamp"]) this.store.deleteBackground(t.typeKey, o);
      const left = this.store.objectsIn(t.typeKey, name);
      if (left.length === 0) continue;
      remaining.set(`${t.plural}.${t.group}`, left.length);
      for (const o of left) for (const f of strings(metaOf(o)["finalizers"])) byFinalizer.set(f, (byFinalizer.get(f) ?? 0) + 1);
    }
    const current = this.store.namespace(name);
    if (!current) return;
    const next = structuredClone(current);
    const changed = this.conditions(next, remaining, byFinalizer);
    if (remaining.size === 0) {
      // Empty: the controller's token comes off (PUT .../finalize).
      const left = specFinalizers(next).filter((f) => f !== KUBERNETES);
      if (left.length) specOf(next)["finalizers"] = left;
      else delete specOf(next)["finalizers"];
      this.store.replace(NAMESPACES_KEY, next);
    } else if (changed) this.store.replace(NAMESPACES_KEY, next);
  }

  /** conditions sets the controller's five conditions on a namespace as status_condition_utils.go does; true if any changed. */
  private conditions(ns: JsonObject, remaining: Map<string, number>, byFinalizer: Map<string, number>): boolean {
    const failing = new Map<string, [reason: string, message: string]>();
    if (remaining.size) {
      const parts = [...remaining].map(([r, n]) => `${r} has ${n} resource instances`).sort();
      failing.set("NamespaceContentRemaining", ["SomeResourcesRemain", `Some resources are remaining: ${parts.join(", ")}`]);
    }
    if (byFinalizer.size) {
      const parts = [...byFinalizer].map(([f, n]) => `${f} in ${n} resource instances`).sort();
      failing.set("NamespaceFinalizersRemaining", ["SomeFinalizerRemain", `Some finalizers are remaining: ${parts.join(", ")}`]);
    }
    const status = statusOf(ns);
    const list = Array.isArray(status["conditions"]) ? (status["conditions"].filter(isObject) as JsonObject[]) : [];
    let changed = false;
    for (const [type, okReason, okMessage] of CONDITIONS) {
      const bad = failing.get(type);
      const want = { status: bad ? "True" : "False", reason: bad ? bad[0] : okReason, message: bad ? bad[1] : okMessage };
      const old = list.find((c) => c["type"] === type);
      if (!old) {
        list.push({ type, ...want, lastTransitionTime: this.store.timestamp() });
        changed = true;
      } else if (old["status"] !== want.status || old["reason"] !== want.reason || old["message"] !== want.message) {
        if (old["status"] !== want.status) old["lastTransitionTime"] = this.store.timestamp();
        Object.assign(old, want);
        changed = true;
      }
    }
    status["conditions"] = list;
    return changed;
  }
}
