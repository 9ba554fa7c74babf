// Patches the embedded API server accepts: JSON merge patch (RFC 7386; also
// used for strategic merge patch, without list merge keys), JSON patch (RFC
// 6902: add, remove, replace, test), and server-side apply with per-manager
// field ownership, where every list is atomic.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { ApiError } from "./errors.js";
import { ensureMeta } from "./types.js";
import { isObject } from "../json.js";

/** mergePatch applies an RFC 7386 merge patch. */
export function mergePatch(target: JsonValue | undefined, patch: JsonValue): JsonValue {
  if (!isObject(patch)) return structuredClone(patch);
  const out: JsonObject = isObject(target) ? structuredClone(target) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function pointer(path: string): string[] {
  if (path === "") return [];
  if (!path.startsWith("/")) throw new ApiError(422, "Invalid", `json patch path ${JSON.stringify(path)} must start with "/"`);
  return path
    .slice(1)
    .split("/")
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
}

/** jsonPatch applies RFC 6902 operations add, remove, replace and test. */
export function jsonPatch(doc: JsonObject, ops: JsonValue): JsonObject {
  if (!Array.isArray(ops)) throw new ApiError(400, "BadRequest", "a json patch must be a list of operations");
  const out = structuredClone(doc);
  for (const [i, raw] of ops.entries()) {
    if (!isObject(raw) || typeof raw["op"] !== "string" || typeof raw["path"] !== "string")
      throw new ApiError(400, "BadRequest", `json patch operation ${i}: op and path are required`);
    const parts = pointer(raw["path"]);
    const last = parts.pop();
    let parent: JsonValue = out;
    for (const p of parts) {
      parent = Array.isArray(parent) ? parent[Number(p)]! : isObject(parent) ? parent[p]! : undefined!;
      if (parent === undefined) throw new ApiError(422, "Invalid", `json patch operation ${i}: path ${raw["path"]} does not exist`);
    }
    if (last === undefined) throw new ApiError(422, "Invalid", `json patch operation ${i}: cannot ${raw["op"]} the whole document`);
    const container = parent as JsonObject | JsonValue[];
    const idx = Array.isArray(container) ? (last === "-" ? container.length : Number(last)) : last;
    const present = Array.isArray(container) ? (idx as number) < container.length : Object.hasOwn(container, last);
    switch (raw["op"]) {
      case "add":
        if (Array.isArray(container)) container.splice(idx as number, 0, structuredClone(raw["value"]!));
        else container[last] = structuredClone(raw["value"]!);
        break;
      case "replace":
        if (!present) throw new ApiError(422, "Invalid", `json patch operation ${i}: path ${raw["path"]} does not exist`);
        if (Array.isArray(container)) container[idx as number] = structuredClone(raw["value"]!);
        else container[last] = structuredClone(raw["value"]!);
        break;
      case "remove":
        if (!present) throw new ApiError(422, "Invalid", `json patch operation ${i}: path ${raw["path"]} does not exist`);
        if (Array.isArray(container)) container.splice(idx as number, 1);
        else delete container[last];
        break;
      case "test": {
        const v = Array.isArray(container) ? container[idx as number] : container[last];
        if (JSON.stringify(v) !== JSON.stringify(raw["value"]))
          throw new ApiError(422, "Invalid", `json patch test failed at ${raw["path"]}`);
        break;
      }
      default:
        throw new ApiError(
          422,
          "Invalid",
          `json patch operation ${i}: op ${JSON.stringify(raw["op"])} is not supported (add, remove, replace, test)`,
        );
    }
  }
  return out;
}

// --- server-side apply -------------------------------------------------------

type Path = string[];
const IDENTITY = new Set(["apiVersion", "kind"]);
// The metadata an apply sets (name and namespace say which object it is); a
// generateName an apply gives is stored, as kube-apiserver stores it.
const META_OWNED = new Set(["labels", "annotations", "finalizers", "ownerReferences", "generateName"]);

/** leafPaths lists the fields an applied configuration sets; lists and scalars are leaves. */
export function leafPaths(v: JsonValue, prefix: Path = []): Path[] {
  if (!isObject(v) || (Object.keys(v).length === 0 && prefix.length > 0)) return [prefix];
  const out: Path[] = [];
  for (const [k, child] of Object.entries(v)) {
    if (prefix.length === 0 && IDENTITY.has(k)) continue;
    if (prefix.length === 1 && prefix[0] === "metadata" && !META_OWNED.has(k)) continue;
    out.push(...leafPaths(child, [...prefix, k]));
  }
  return out;
}

const enc = (p: Path) => JSON.stringify(p);
/**
 * PathIndex answers whether a path overlaps (is, is under, or is above) any
 * of a set of paths, in time proportional to the path's length.
 */
class PathIndex {
  private readonly leaves = new Set<string>();
  private readonly inner = new Set<string>();
  constructor(paths: Path[]) {
    for (const p of paths) this.add(p);
  }
  add(p: Path): void {
    this.leaves.add(enc(p));
    for (let i = 0; i < p.length; i++) this.inner.add(enc(p.slice(0, i)));
  }
  overlaps(p: Path): boolean {
    if (this.inner.has(enc(p))) return true;
    for (let i = 0; i <= p.length; i++) if (this.leaves.has(enc(p.slice(0, i)))) return true;
    return false;
  }
}

function getAt(o: JsonValue | undefined, p: Path): JsonValue | undefined {
  let cur = o;
  for (const k of p) {
    if (!isObject(cur)) return undefined;
    cur = cur[k];
  }
  return cur;
}

function deleteAt(o: JsonObject, p: Path): void {
  const stack: JsonObject[] = [o];
  let cur: JsonValue | undefined = o;
  for (const k of p.slice(0, -1)) {
    cur = isObject(cur) ? cur[k] : undefined;
    if (!isObject(cur)) return;
    stack.push(cur);
  }
  delete stack[stack.length - 1]![p[p.length - 1]!];
  // Drop objects the removal left empty.
  for (let i = stack.length - 1; i > 0; i--) {
    if (Object.keys(stack[i]!).length === 0) delete stack[i - 1]![p[i - 1]!];
    else break;
  }
}

function deepMerge(target: JsonValue | undefined, src: JsonValue): JsonValue {
  if (!isObject(src) || !isObject(target)) return structuredClone(src);
  const out = structuredClone(target);
  for (const [k, v] of Object.entries(src)) out[k] = deepMerge(out[k], v);
  return out;
}

interface ManagedEntry {
  manager: string;
  operation: string;
  apiVersion?: string;
  time?: string;
  fieldsType: "FieldsV1";
  fieldsV1: JsonObject;
  subresource?: string;
}

/**
 * An owner of fields, as kube keys managedFields entries: a manager, with the
 * operation (Apply or Update) and the subresource it wrote through. One
 * manager that both applies and updates owns two sets.
 */
const ownerKey = (e: { manager: string; operation: string; subresource?: string | undefined }) =>
  JSON.stringify([e.manager, e.operation, e.subresource ?? ""]);
const ownerOf = (key: string) => {
  const [manager, operation, subresource] = JSON.parse(key) as [string, string, string];
  return { manager, operation, ...(subresource ? { subresource } : {}) };
};

/** entriesOf reads an object's managedFields. */
function entriesOf(o: JsonObject | undefined): ManagedEntry[] {
  const m = o ? ensureMeta(o)["managedFields"] : undefined;
  return (Array.isArray(m) ? (m.filter(isObject) as unknown as ManagedEntry[]) : []).map((e) => structuredClone(e));
}

/** entriesFrom writes owners' fields back as managedFields, each owner's entry kept as it was unless it is the writer's. */
function entriesFrom(owned: Map<string, Path[]>, before: ManagedEntry[], writer: string, apiVersion: string, time: string): ManagedEntry[] {
  return [...owned]
    .filter(([, ps]) => ps.length > 0)
    .map(([key, ps]) => {
      const prior = before.find((e) => ownerKey(e) === key);
      return {
        ...ownerOf(key),
        apiVersion: key === writer ? apiVersion : (prior?.apiVersion ?? apiVersion),
        time: key === writer ? time : (prior?.time ?? time),
        fieldsType: "FieldsV1" as const,
        fieldsV1: toFieldsV1(ps),
      };
    })
    .map(({ subresource, ...e }) => ({ ...e, ...(subresource ? { subresource } : {}) }));
}

/** conflictWith names an owner in a conflict as kube does: an Update's manager with the version it wrote. */
function conflictWith(key: string, before: ManagedEntry[]): string {
  const o = ownerOf(key);
  if (o.operation === "Apply") return JSON.stringify(o.manager);
  const prior = before.find((e) => ownerKey(e) === key);
  return `${JSON.stringify(o.manager)} using ${prior?.apiVersion ?? "v1"}`;
}

/**
 * recordUpdate is the managedFields of a write that is not an apply (create,
 * update, patch) by manager, as kube's field manager keeps them: the writer
 * takes the fields whose values it set or changed from whoever owned them,
 * fields it removed are no one's, the rest stay with their owners. A later
 * apply of a field an updater owns, to another value, conflicts with it.
 */
export function recordUpdate(
  current: JsonObject | undefined,
  next: JsonObject,
  writer: { manager: string; subresource?: string },
  time: string,
): JsonValue {
  const before = entriesOf(current);
  const owned = new Map(before.map((e) => [ownerKey(e), fromFieldsV1(e.fieldsV1)]));
  const changed: Path[] = [];
  const removed: Path[] = [];
  diffPaths(current, next, [], changed, removed);
  const key = ownerKey({ manager: writer.manager, operation: "Update", subresource: writer.subresource });
  const taken = new PathIndex([...changed, ...removed]);
  for (const [k, ps] of owned)
    owned.set(
      k,
      ps.filter((q) => !taken.overlaps(q)),
    );
  owned.set(key, [...(owned.get(key) ?? []), ...changed]);
  return entriesFrom(owned, before, key, String(next["apiVersion"] ?? ""), time) as unknown as JsonValue;
}

/** diffPaths lists the leaf paths next sets to a new value, and the paths it no longer has, against old. */
function diffPaths(old: JsonValue | undefined, next: JsonValue, prefix: Path, changed: Path[], removed: Path[]): void {
  if (!isObject(next) || !isObject(old)) {
    if (JSON.stringify(old) !== JSON.stringify(next)) changed.push(...leafPaths(next, prefix));
    return;
  }
  for (const [k, v] of Object.entries(next)) {
    if (prefix.length === 0 && IDENTITY.has(k)) continue;
    if (prefix.length === 1 && prefix[0] === "metadata" && !META_OWNED.has(k)) continue;
    if (!Object.hasOwn(old, k)) changed.push(...leafPaths(v, [...prefix, k]));
    else diffPaths(old[k], v, [...prefix, k], changed, removed);
  }
  for (const k of Object.keys(old)) {
    if (prefix.length === 0 && IDENTITY.has(k)) continue;
    if (prefix.length === 1 && prefix[0] === "metadata" && !META_OWNED.has(k)) continue;
    if (!Object.hasOwn(next, k)) removed.push([...prefix, k]);
  }
}

function toFieldsV1(paths: Path[]): JsonObject {
  const root: JsonObject = {};
  for (const p of paths) {
    let cur = root;
    for (const k of p) cur = (cur[`f:${k}`] ??= {}) as JsonObject;
  }
  return root;
}

function fromFieldsV1(f: JsonValue | undefined, prefix: Path = []): Path[] {
  if (!isObject(f)) return [];
  const keys = Object.keys(f).filter((k) => k.startsWith("f:"));
  if (keys.length === 0) return prefix.length ? [prefix] : [];
  return keys.flatMap((k) => fromFieldsV1(f[k], [...prefix, k.slice(2)]));
}

/**
 * apply merges an applied configuration into current (undefined: create) for
 * manager. Fields the manager applied before and leaves out now are removed
 * unless another manager owns them. A field another manager owns with a
 * different value is a 409 Conflict unless force, which takes it over.
 * Only the paths under `scope` (e.g. ["status"] for the status subresource)
 * are applied.
 */
export function apply(
  current: JsonObject | undefined,
  applied: JsonObject,
  manager: string,
  force: boolean,
  scope: (p: Path) => boolean,
  time: string,
  subresource = "",
): JsonObject {
  const base: JsonObject = current
    ? structuredClone(current)
    : { apiVersion: applied["apiVersion"]!, kind: applied["kind"]!, metadata: {} };
  const managed = entriesOf(base);
  const owned = new Map(managed.map((e) => [ownerKey(e), fromFieldsV1(e.fieldsV1)]));
  const self = ownerKey({ manager, operation: "Apply", subresource: subresource || undefined });
  const paths = leafPaths(applied).filter(scope);
  const conflicts: string[] = [];
  // Each owner's fields indexed, so that a conflict costs the path's length, not the owner's field count.
  let indexes = new Map([...owned].map(([k, ps]) => [k, new PathIndex(ps)]));
  const forced = new PathIndex([]);
  for (const p of paths) {
    if (JSON.stringify(getAt(base, p)) === JSON.stringify(getAt(applied, p))) continue;
    for (const [other, idx] of indexes) {
      if (other === self || !idx.overlaps(p)) continue;
      if (force) forced.add(p);
      else conflicts.push(`conflict with ${conflictWith(other, managed)}: .${p.join(".")}`);
    }
  }
  if (force) {
    for (const [other, ps] of owned)
      if (other !== self)
        owned.set(
          other,
          ps.filter((x) => !forced.overlaps(x)),
        );
    indexes = new Map([...owned].map(([k, ps]) => [k, new PathIndex(ps)]));
  }
  if (conflicts.length)
    throw new ApiError(
      409,
      "Conflict",
      `Apply failed with ${conflicts.length} conflict${conflicts.length > 1 ? "s" : ""}: ${[...new Set(conflicts)].join("; ")}`,
    );
  const previous = (owned.get(self) ?? []).filter(scope);
  const kept = new Set(paths.map(enc));
  for (const p of previous) {
    if (kept.has(enc(p))) continue;
    if ([...indexes].some(([other, idx]) => other !== self && idx.overlaps(p))) continue;
    deleteAt(base, p);
  }
  // The applied fields (in scope), gathered into one object and merged in once.
  const fields: JsonObject = {};
  for (const p of paths) {
    let at = fields;
    for (const k of p.slice(0, -1)) at = (isObject(at[k]) ? at[k] : (at[k] = {})) as JsonObject;
    if (p.length) at[p[p.length - 1]!] = structuredClone(getAt(applied, p)!);
  }
  const merged = deepMerge(base, fields) as JsonObject;
  owned.set(self, [...(owned.get(self) ?? []).filter((q) => !scope(q)), ...paths]);
  ensureMeta(merged)["managedFields"] = entriesFrom(owned, managed, self, String(applied["apiVersion"]), time) as unknown as JsonValue;
  return merged;
}
