// Patches the embedded API server accepts: JSON merge patch (RFC 7386; also
// used for strategic merge patch, without list merge keys), JSON patch (RFC
// 6902, as kube-apiserver's json-patch library applies it), and server-side apply with per-manager
// field ownership, where every list is atomic.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { ApiError } from "./errors.js";
import { MAX_REQUEST_BODY_BYTES } from "./query.js";
import { ensureMeta } from "./types.js";
import { isObject } from "../json.js";
import { messageOf } from "../sdk/errors.js";

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

/** The most operations one JSON patch may have (apiserver's maxJSONPatchOperations), and the most bytes its copies may add. */
const MAX_JSON_PATCH_OPERATIONS = 10_000;
const MAX_COPY_BYTES = MAX_REQUEST_BODY_BYTES;

type Container = JsonObject | JsonValue[];
const isContainer = (v: JsonValue | undefined): v is Container => Array.isArray(v) || isObject(v);

/** PatchFailure is an operation that does not apply, in json-patch's words. */
class PatchFailure extends Error {}

/** atoi is Go's strconv.Atoi, with its errors. */
function atoi(s: string): number {
  if (!/^[+-]?[0-9]+$/.test(s)) throw new PatchFailure(`strconv.Atoi: parsing ${JSON.stringify(s)}: invalid syntax`);
  const n = Number(s);
  if (!Number.isSafeInteger(n)) throw new PatchFailure(`strconv.Atoi: parsing ${JSON.stringify(s)}: value out of range`);
  return n;
}
const badIndex = (i: number) => new PatchFailure(`Unable to access invalid index: ${i}: invalid index referenced`);

/** An element of a container: json-patch's get, set, add and remove (negative indices count from the end). */
function get(c: Container, key: string): JsonValue | undefined {
  if (!Array.isArray(c)) return Object.hasOwn(c, key) ? c[key] : undefined;
  let i = atoi(key);
  if (i < 0) {
    if (i < -c.length) throw badIndex(i);
    i += c.length;
  }
  if (i >= c.length) throw badIndex(i);
  return c[i];
}
function set(c: Container, key: string, v: JsonValue): void {
  if (!Array.isArray(c)) return void (c[key] = v);
  let i = atoi(key);
  if (i < 0) i += c.length;
  c[i] = v;
}
function insert(c: Container, key: string, v: JsonValue): void {
  if (!Array.isArray(c)) return void (c[key] = v);
  if (key === "-") return void c.push(v);
  let i: number;
  try {
    i = atoi(key);
  } catch (err) {
    throw new PatchFailure(`value was not a proper array index: '${key}': ${messageOf(err)}`);
  }
  if (i >= c.length + 1) throw badIndex(i);
  if (i < 0) {
    if (i < -(c.length + 1)) throw badIndex(i);
    i += c.length + 1;
  }
  c.splice(i, 0, v);
}
function remove(c: Container, key: string): void {
  if (!Array.isArray(c)) {
    if (!Object.hasOwn(c, key)) throw new PatchFailure(`Unable to remove nonexistent key: ${key}: missing value`);
    return void delete c[key];
  }
  let i = atoi(key);
  if (i >= c.length) throw badIndex(i);
  if (i < 0) {
    if (i < -c.length) throw badIndex(i);
    i += c.length;
  }
  c.splice(i, 1);
}

/** decodeKey undoes RFC 6901's escapes (~1 is /, ~0 is ~). */
const decodeKey = (k: string) => k.replace(/~[01]/g, (m) => (m === "~1" ? "/" : "~"));

/** findObject is json-patch's: the container a path's last step is in, and that step (undefined: none). */
function findObject(doc: Container, path: string): [Container, string] | undefined {
  const split = path.split("/");
  if (split.length < 2) return undefined;
  let c: Container = doc;
  for (const part of split.slice(1, -1)) {
    let next: JsonValue | undefined;
    try {
      next = get(c, decodeKey(part));
    } catch {
      return undefined;
    }
    if (!isContainer(next)) return undefined;
    c = next;
  }
  return [c, decodeKey(split.at(-1)!)];
}

/** jsonEqual is json-patch's equality of two values (objects by their keys, whatever the order). */
function jsonEqual(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (Array.isArray(a) || Array.isArray(b))
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  if (isObject(a) || isObject(b)) {
    if (!isObject(a) || !isObject(b)) return false;
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
  }
  return (a ?? null) === (b ?? null);
}

/**
 * jsonPatch applies an RFC 6902 patch (add, remove, replace, move, copy,
 * test) as kube-apiserver does, with the json-patch library it uses
 * (gopkg.in/evanphx/json-patch.v4, read at evanphx/json-patch 84a4bb10:
 * patch.go) and its messages: a patch that is not a list is a 400; one with
 * more than 10,000 operations a 413; an operation that does not apply a 422
 * "the server rejected our request due to an error in our request", the
 * library's words in its cause (as apiserver's patch handler wraps them,
 * NewGenericServerResponse). Its quirks are kept: replace sets a missing
 * object key, a missing value tests equal to null, negative indices count
 * from the end; copies may add at most 3 MiB (JSONPatchMaxCopyBytes).
 */
export function jsonPatch(doc: JsonObject, ops: JsonValue): JsonObject {
  if (!Array.isArray(ops))
    throw new ApiError(400, "BadRequest", `json: cannot unmarshal ${goType(ops)} into Go value of type jsonpatch.Patch`);
  const bad = ops.find((o) => !isObject(o));
  if (bad !== undefined)
    throw new ApiError(400, "BadRequest", `json: cannot unmarshal ${goType(bad)} into Go value of type jsonpatch.Operation`);
  if (ops.length > MAX_JSON_PATCH_OPERATIONS)
    throw new ApiError(
      413,
      "RequestEntityTooLarge",
      `The allowed maximum operations in a JSON patch is ${MAX_JSON_PATCH_OPERATIONS}, got ${ops.length}`,
    );
  let out: Container = structuredClone(doc);
  const copied = { bytes: 0 };
  try {
    for (const op of ops as JsonObject[]) out = applyOne(out, op, copied);
  } catch (err) {
    if (!(err instanceof PatchFailure)) throw err;
    // kube-apiserver says no more than this: which operation failed, and why, is not in its answer (k8s.io/apiserver
    // v0.36.3 endpoints/handlers/patch.go: NewGenericServerResponse(422, ..., isUnexpectedResponse false) has no causes).
    // What failed stays on the error as its cause, for this server's own log and tests; it is not sent.
    throw Object.assign(new ApiError(422, "Invalid", "the server rejected our request due to an error in our request"), {
      details: {},
      cause: err,
    });
  }
  if (!isObject(out)) throw new ApiError(400, "BadRequest", "json: cannot unmarshal array into Go value of type map[string]interface {}");
  return out;
}

/** goType is how encoding/json names a JSON value's type in its errors. */
function goType(v: JsonValue): string {
  return v === null ? "null" : Array.isArray(v) ? "array" : typeof v === "object" ? "object" : typeof v === "boolean" ? "bool" : typeof v;
}

/** applyOne is one operation on doc (the new document: a replace of the root makes one). */
function applyOne(doc: Container, op: JsonObject, copied: { bytes: number }): Container {
  const kind = typeof op["op"] === "string" ? op["op"] : "unknown";
  const field = (name: "path" | "from"): string => {
    const v = op[name];
    if (v === undefined || v === null)
      throw new PatchFailure(
        name === "path" ? "operation missing path field: missing value" : "operation, missing from field: missing value",
      );
    if (typeof v !== "string") throw new PatchFailure(`json: cannot unmarshal ${goType(v)} into Go value of type string`);
    return v;
  };
  const decoded = (what: string, name: "path" | "from", missing = false): string => {
    try {
      return field(name);
    } catch (err) {
      throw new PatchFailure(`${what} operation failed to decode ${name}: ${missing ? "missing value" : messageOf(err)}`);
    }
  };
  const value = (): JsonValue => structuredClone(op["value"] ?? null);
  const at = (path: string, why: (p: string) => string): [Container, string] => {
    const found = findObject(doc, path);
    if (!found) throw new PatchFailure(why(path));
    return found;
  };
  const wrap = <T>(f: () => T, why: string): T => {
    try {
      return f();
    } catch (err) {
      if (err instanceof PatchFailure) throw new PatchFailure(`${why}: ${err.message}`);
      throw err;
    }
  };
  switch (kind) {
    case "add": {
      const path = decoded("add", "path", true);
      const [c, key] = at(path, (p) => `add operation does not apply: doc is missing path: "${p}": missing value`);
      wrap(() => insert(c, key, value()), `error in add for path: '${path}'`);
      return doc;
    }
    case "remove": {
      const path = decoded("remove", "path", true);
      const [c, key] = at(path, (p) => `remove operation does not apply: doc is missing path: "${p}": missing value`);
      wrap(() => remove(c, key), `error in remove for path: '${path}'`);
      return doc;
    }
    case "replace": {
      const path = decoded("replace", "path");
      if (path === "") {
        const v = value();
        if (!isContainer(v)) throw new PatchFailure("replace operation value must be object or array: %!w(<nil>)");
        return v;
      }
      const [c, key] = at(path, (p) => `replace operation does not apply: doc is missing path: ${p}: missing value`);
      try {
        get(c, key);
      } catch {
        throw new PatchFailure(`replace operation does not apply: doc is missing key: ${path}: missing value`);
      }
      wrap(() => set(c, key, value()), `error in remove for path: '${path}'`);
      return doc;
    }
    case "move": {
      const from = decoded("move", "from");
      const [fc, fkey] = at(from, (p) => `move operation does not apply: doc is missing from path: ${p}: missing value`);
      const v = wrap(() => get(fc, fkey), `error in move for path: '${fkey}'`);
      wrap(() => remove(fc, fkey), `error in move for path: '${fkey}'`);
      const path = decoded("move", "path");
      const [c, key] = at(path, (p) => `move operation does not apply: doc is missing destination path: ${p}: missing value`);
      wrap(() => insert(c, key, v ?? null), `error in move for path: '${path}'`);
      return doc;
    }
    case "copy": {
      const from = decoded("copy", "from");
      const [fc, fkey] = at(from, (p) => `copy operation does not apply: doc is missing from path: ${p}: missing value`);
      const v = wrap(() => get(fc, fkey), `error in copy for from: '${from}'`);
      const path = decoded("copy", "path", true);
      const [c, key] = at(path, (p) => `copy operation does not apply: doc is missing destination path: ${p}: missing value`);
      copied.bytes += v === undefined ? 0 : JSON.stringify(v).length;
      if (copied.bytes > MAX_COPY_BYTES)
        throw new PatchFailure(
          `Unable to complete the copy, the accumulated size increase of copy is ${copied.bytes}, exceeding the limit ${MAX_COPY_BYTES}`,
        );
      wrap(() => insert(c, key, structuredClone(v ?? null)), "error while adding value during copy");
      return doc;
    }
    case "test": {
      const path = decoded("test", "path");
      const want = op["value"];
      if (path === "") {
        if (jsonEqual(doc, want)) return doc;
        throw new PatchFailure(`testing value ${path} failed: test failed`);
      }
      const [c, key] = at(path, (p) => `test operation does not apply: is missing path: ${p}: missing value`);
      const v = wrap(() => get(c, key), `error in test for path: '${path}'`);
      // A missing (or null) value tests equal to a missing or null one.
      if (v === undefined || v === null ? want === undefined || want === null : want !== undefined && jsonEqual(v, want)) return doc;
      throw new PatchFailure(`testing value ${path} failed: test failed`);
    }
    default:
      throw new PatchFailure(`Unexpected kind: ${kind}`);
  }
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
    return this.above(p);
  }
  /** above is whether p itself or a path above it is in the set (not one below it). */
  above(p: Path): boolean {
    for (let i = 0; i <= p.length; i++) if (this.leaves.has(enc(p.slice(0, i)))) return true;
    return false;
  }
  /**
   * conflicts is whether a change at p in base takes a field of this set: p
   * itself, one under it, or a value above it that is not an object. An
   * object above (an empty map applied: structured-merge-diff's member of the
   * map itself) is not taken by a change to one of its children.
   */
  conflicts(p: Path, base: JsonValue | undefined): boolean {
    if (this.inner.has(enc(p)) || this.leaves.has(enc(p))) return true;
    for (let i = 0; i < p.length; i++) if (this.leaves.has(enc(p.slice(0, i))) && !isObject(getAt(base, p.slice(0, i)))) return true;
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
    .map(({ subresource, ...e }) => ({ ...e, ...(subresource ? { subresource } : {}) }))
    .sort(entryOrder);
}

/**
 * entryOrder is the order kube-apiserver keeps managedFields in (apimachinery v0.36.3
 * util/managedfields/internal/managedfields.go sortEncodedManagedFields): by operation
 * (Apply first), time to the second, manager, subresource, then apiVersion.
 */
function entryOrder(p: ManagedEntry, q: ManagedEntry): number {
  const seconds = (e: ManagedEntry) => (e.time ? Math.floor(Date.parse(e.time) / 1000) : 0);
  const by = (a: string | number | undefined, b: string | number | undefined) => (a === b ? 0 : (a ?? "") < (b ?? "") ? -1 : 1);
  return (
    by(p.operation, q.operation) ||
    by(seconds(p), seconds(q)) ||
    by(p.manager, q.manager) ||
    by(p.subresource ?? "", q.subresource ?? "") ||
    by(p.apiVersion, q.apiVersion)
  );
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
  nodes: (p: Path) => boolean = builtinNode,
): JsonValue {
  const before = entriesOf(current);
  const owned = new Map(before.map((e) => [ownerKey(e), fromFieldsV1(e.fieldsV1, [], current)]));
  const changed: Path[] = [];
  const removed: Path[] = [];
  diffPaths(current, next, [], changed, removed, nodes);
  const key = ownerKey({ manager: writer.manager, operation: "Update", subresource: writer.subresource });
  const taken = new PathIndex([...changed, ...removed]);
  // A node another writer owns (an object, or an empty map: fieldsV1's "." or a member without
  // fields) is not taken by a change under it, only by one to it or above it, as
  // structured-merge-diff keeps a map's owner when keys are added to the map.
  const node = (q: Path) => q[q.length - 1] === "." || isObject(getAt(next, q));
  for (const [k, ps] of owned)
    owned.set(
      k,
      ps.filter((q) => !(node(q) ? taken.above(q[q.length - 1] === "." ? q.slice(0, -1) : q) : taken.overlaps(q))),
    );
  owned.set(key, [...(owned.get(key) ?? []), ...changed]);
  return entriesFrom(owned, before, key, String(next["apiVersion"] ?? ""), time) as unknown as JsonValue;
}

/**
 * A map or object a write adds is owned as a node of its own besides its fields (fieldsV1's "."
 * member), as structured-merge-diff records a value added where the old object had none: in a custom
 * resource every object (customNode); in a built-in kind a map or a pointer to a struct, whose zero
 * value is absent (builtinNode: labels and annotations, ConfigMap's and Secret's data maps, a CRD's
 * spec.conversion; read from the Go types of k8s.io/api and apiextensions v0.36.3), while a struct
 * held by value is there, empty, in the old object already.
 */
const metaMap = (p: Path) => p.length === 2 && p[0] === "metadata" && (p[1] === "labels" || p[1] === "annotations");
const BUILTIN_NODES = new Set(["data", "binaryData", "stringData", "spec.conversion"]);
export const builtinNode = (p: Path) => metaMap(p) || BUILTIN_NODES.has(p.join("."));
export const customNode = (p: Path) => metaMap(p) || p[0] !== "metadata";

/** addedPaths are the paths a value added at prefix owns: its leaves, and the nodes that are owned themselves. */
function addedPaths(v: JsonValue, prefix: Path, nodes: (p: Path) => boolean): Path[] {
  const out = leafPaths(v, prefix);
  const walk = (x: JsonValue | undefined, p: Path) => {
    if (!isObject(x) || Object.keys(x).length === 0) return;
    if (p.length && nodes(p)) out.push([...p, "."]);
    for (const [k, c] of Object.entries(x)) {
      if (p.length === 0 && IDENTITY.has(k)) continue;
      if (p.length === 1 && p[0] === "metadata" && !META_OWNED.has(k)) continue;
      walk(c, [...p, k]);
    }
  };
  walk(v, prefix);
  return out;
}

/** diffPaths lists the paths next sets to a new value (addedPaths for what it adds), and the paths it no longer has, against old. */
function diffPaths(
  old: JsonValue | undefined,
  next: JsonValue,
  prefix: Path,
  changed: Path[],
  removed: Path[],
  nodes: (p: Path) => boolean,
): void {
  if (!isObject(next) || !isObject(old)) {
    if (JSON.stringify(old) !== JSON.stringify(next)) changed.push(...addedPaths(next, prefix, nodes));
    return;
  }
  for (const [k, v] of Object.entries(next)) {
    if (prefix.length === 0 && IDENTITY.has(k)) continue;
    if (prefix.length === 1 && prefix[0] === "metadata" && !META_OWNED.has(k)) continue;
    if (!Object.hasOwn(old, k)) changed.push(...addedPaths(v, [...prefix, k], nodes));
    else diffPaths(old[k], v, [...prefix, k], changed, removed, nodes);
  }
  for (const k of Object.keys(old)) {
    if (prefix.length === 0 && IDENTITY.has(k)) continue;
    if (prefix.length === 1 && prefix[0] === "metadata" && !META_OWNED.has(k)) continue;
    if (!Object.hasOwn(next, k)) removed.push([...prefix, k]);
  }
}

/**
 * toFieldsV1 writes paths as fieldsV1: f:<name> for a field, "." for a node owned itself (a path
 * ending in ".") beside fields of it; a node owned with none of its fields is written {} alone, as
 * structured-merge-diff writes a member without children.
 */
function toFieldsV1(paths: Path[]): JsonObject {
  const root: JsonObject = {};
  for (const p of paths) {
    let cur = root;
    for (const k of p) cur = (cur[k === "." ? "." : `f:${k}`] ??= {}) as JsonObject;
  }
  const lone = (o: JsonObject): void => {
    for (const [k, v] of Object.entries(o)) {
      if (!isObject(v)) continue;
      lone(v);
      if (Object.keys(v).length === 1 && isObject(v["."]) && Object.keys(v["."]).length === 0) o[k] = {};
    }
  };
  lone(root);
  return root;
}

/**
 * fromFieldsV1 reads fieldsV1 back as paths. A member without fields ({}) that is a non-empty
 * object in obj is the node owned itself (as "."): it owns none of the fields another writer sets
 * in it.
 */
function fromFieldsV1(f: JsonValue | undefined, prefix: Path = [], obj?: JsonValue): Path[] {
  if (!isObject(f)) return [];
  const keys = Object.keys(f).filter((k) => k.startsWith("f:") || k === ".");
  if (keys.length === 0) return prefix.length ? [isObject(obj) && Object.keys(obj).length ? [...prefix, "."] : prefix] : [];
  const at = (k: string) => (isObject(obj) ? obj[k] : undefined);
  return keys.flatMap((k) => (k === "." ? [[...prefix, "."]] : fromFieldsV1(f[k], [...prefix, k.slice(2)], at(k.slice(2)))));
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
  const owned = new Map(managed.map((e) => [ownerKey(e), fromFieldsV1(e.fieldsV1, [], current)]));
  const self = ownerKey({ manager, operation: "Apply", subresource: subresource || undefined });
  const paths = leafPaths(applied).filter(scope);
  const conflicts: { with: string; field: string }[] = [];
  // Each owner's fields indexed, so that a conflict costs the path's length, not the owner's field count.
  let indexes = new Map([...owned].map(([k, ps]) => [k, new PathIndex(ps)]));
  const forced = new PathIndex([]);
  for (const p of paths) {
    const was = getAt(base, p);
    const now = getAt(applied, p);
    if (JSON.stringify(was) === JSON.stringify(now)) continue;
    // An empty object merged into an object changes nothing (its keys stay, whoever owns them).
    if (isObject(now) && Object.keys(now).length === 0 && isObject(was)) continue;
    for (const [other, idx] of indexes) {
      if (other === self || !idx.conflicts(p, base)) continue;
      if (force) forced.add(p);
      else conflicts.push({ with: `conflict with ${conflictWith(other, managed)}`, field: `.${p.join(".")}` });
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
  if (conflicts.length) {
    // One cause per field and owner, as kube's field manager lists them (reason FieldManagerConflict).
    const said = [...new Map(conflicts.map((c) => [`${c.with}: ${c.field}`, c])).values()];
    const listed = said.map((c) => `${c.with}: ${c.field}`).join("; ");
    throw Object.assign(
      new ApiError(409, "Conflict", `Apply failed with ${conflicts.length} conflict${conflicts.length > 1 ? "s" : ""}: ${listed}`),
      { details: { causes: said.map((c) => ({ reason: "FieldManagerConflict", message: c.with, field: c.field })) } },
    );
  }
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
