// xfn trace: an XR and everything it composes, as a tree, with what
// `crossplane beta trace` shows (SYNCED, READY, STATUS; crossplane/cli
// 3d72f93, cmd/crossplane/trace/internal/printer/default.go) and what xfn's
// lifecycle steps record in the XR's status: which composed resource waits
// for which field (status.waiting), the external names
// (status.externalNames), and, while the XR is deleted, what each remaining
// resource waits for (its finalizers, or the dependents still there before
// it, from status.deletion.order).
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isObject } from "../json.js";
import { printable } from "../terminal.js";
import { ApiFailure, pathOf, type Api, Discovery, type Resource } from "./api.js";
import { messageOf } from "../sdk/errors.js";

/** Node is one row of the tree: an object (or a resource not created yet, or one that could not be read). */
export interface Node {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  /** Its name in its XR's pipeline (crossplane.io/composition-resource-name). */
  resource?: string;
  synced: string;
  ready: string;
  /** Crossplane's STATUS: a reason, and the message that goes with it. */
  status: string;
  /** Seconds since creation, if it exists. */
  ageSeconds?: number;
  externalName?: string;
  /** The fields it waits for before it is created (the dependencies step). */
  waitingFor?: string[];
  /** While its XR is deleted: what it waits for (finalizers, or dependents still there). */
  deletion?: string;
  /** Why it could not be read. */
  error?: string;
  children: Node[];
  /** The object as read (json and yaml output). */
  object?: JsonObject;
}

const COMPOSITION_RESOURCE_NAME = "crossplane.io/composition-resource-name";
const EXTERNAL_NAME = "crossplane.io/external-name";
const MAX_DEPTH = 16;

const obj = (v: JsonValue | undefined): JsonObject => (isObject(v) ? v : {});
const strOf = (v: JsonValue | undefined): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

function condition(o: JsonObject, type: string): JsonObject {
  const cs = obj(o["status"])["conditions"];
  return (Array.isArray(cs) ? cs.filter(isObject) : []).find((c) => c["type"] === type) ?? {};
}

/** statusOf is Crossplane trace's STATUS for an object (getResourceStatus), the message cut to its last 64 characters unless wide. */
export function statusOf(o: JsonObject, wide: boolean): { synced: string; ready: string; status: string } {
  const ready = condition(o, "Ready");
  const synced = condition(o, "Synced");
  const s = (c: JsonObject) => strOf(c["status"]) ?? "";
  const r = (c: JsonObject) => strOf(c["reason"]) ?? "";
  const m = (c: JsonObject) => strOf(c["message"]) ?? "";
  let status: string;
  let message = "";
  if (strOf(obj(o["metadata"])["deletionTimestamp"])) status = "Deleting";
  else if (s(ready) === "True" && s(synced) === "True") status = r(ready);
  else if (s(synced) !== "True" && (r(synced) || m(synced))) {
    status = r(synced);
    message = m(synced);
  } else if (s(ready) !== "True" && (r(ready) || m(ready))) {
    status = r(ready);
    message = m(ready);
  } else {
    status = r(ready);
    message = m(ready);
  }
  if (!wide && message.length > 64) message = `...${message.slice(-64)}`;
  return { synced: s(synced) || "-", ready: s(ready) || "-", status: message ? `${status}: ${message}` : status };
}

/** refsOf are an XR's composed resource references (spec.crossplane.resourceRefs, or spec.resourceRefs for a legacy XR). */
function refsOf(o: JsonObject): JsonObject[] {
  const spec = obj(o["spec"]);
  const v2 = obj(spec["crossplane"])["resourceRefs"];
  const refs = Array.isArray(v2) ? v2 : spec["resourceRefs"];
  return Array.isArray(refs) ? refs.filter(isObject) : [];
}

/** Tracer reads a tree from an API server. */
export class Tracer {
  readonly discovery: Discovery;
  constructor(
    private readonly api: Api,
    private readonly opts: { wide: boolean; now?: () => Date } = { wide: false },
  ) {
    this.discovery = new Discovery(api);
  }

  /** trace reads the object type/name (in namespace) and what it composes, all the way down. */
  async trace(type: string, name: string, namespace?: string): Promise<Node> {
    const r = await this.discovery.find(type);
    if (r.namespaced && !namespace) namespace = "default";
    let root: JsonObject;
    try {
      root = await this.api.get(pathOf(r, name, namespace));
    } catch (err) {
      if (err instanceof ApiFailure && err.code === 404)
        throw new Error(`${r.plural}.${r.group || "core"} "${name}" not found${r.namespaced ? ` in namespace "${namespace}"` : ""}`);
      throw err;
    }
    return this.node(root, r, 0, new Set());
  }

  private async node(o: JsonObject, r: Resource, depth: number, seen: Set<string>): Promise<Node> {
    const m = obj(o["metadata"]);
    const name = String(m["name"] ?? "");
    const namespace = strOf(m["namespace"]);
    const created = Date.parse(String(m["creationTimestamp"] ?? ""));
    const now = (this.opts.now ?? (() => new Date()))().getTime();
    const n: Node = {
      apiVersion: String(o["apiVersion"] ?? `${r.group ? `${r.group}/` : ""}${r.version}`),
      kind: r.kind,
      name,
      ...(namespace ? { namespace } : {}),
      ...(strOf(obj(m["annotations"])[COMPOSITION_RESOURCE_NAME])
        ? { resource: strOf(obj(m["annotations"])[COMPOSITION_RESOURCE_NAME])! }
        : {}),
      ...statusOf(o, this.opts.wide),
      ...(Number.isNaN(created) ? {} : { ageSeconds: Math.max(0, Math.floor((now - created) / 1000)) }),
      ...(strOf(obj(m["annotations"])[EXTERNAL_NAME]) ? { externalName: strOf(obj(m["annotations"])[EXTERNAL_NAME])! } : {}),
      children: [],
      object: o,
    };
    const key = `${n.apiVersion}/${n.kind}/${namespace ?? ""}/${name}`;
    const refs = refsOf(o);
    if (seen.has(key) || depth >= MAX_DEPTH || refs.length === 0) return n;
    seen.add(key);
    n.children = await Promise.all(refs.map((ref) => this.child(ref, namespace, depth, seen)));
    this.annotate(o, n);
    return n;
  }

  private async child(ref: JsonObject, parentNamespace: string | undefined, depth: number, seen: Set<string>): Promise<Node> {
    const apiVersion = String(ref["apiVersion"] ?? "");
    const kind = String(ref["kind"] ?? "");
    const name = String(ref["name"] ?? "");
    const namespace = strOf(ref["namespace"]) ?? parentNamespace;
    const failed = (error: string): Node => ({
      apiVersion,
      kind,
      name,
      ...(namespace ? { namespace } : {}),
      synced: "-",
      ready: "-",
      status: `Error: ${error}`,
      error,
      children: [],
    });
    let r: Resource | undefined;
    try {
      r = await this.discovery.forKind(apiVersion, kind);
    } catch (err) {
      return failed(messageOf(err));
    }
    if (!r) return failed(`the server doesn't serve ${kind} in ${apiVersion}`);
    try {
      const o = await this.api.get(pathOf(r, name, namespace));
      return await this.node(o, r, depth + 1, seen);
    } catch (err) {
      if (err instanceof ApiFailure && err.code === 404) {
        const gone = failed(`${r.plural}.${r.group || "core"} "${name}" not found`);
        if (!r.namespaced) delete gone.namespace;
        return gone;
      }
      return failed(messageOf(err));
    }
  }

  /**
   * annotate puts what the XR's status records on the children it concerns:
   * external names, creation waits (with a row for each resource that waits
   * and does not exist yet), and, while the XR is deleted, deletion waits.
   */
  private annotate(xr: JsonObject, n: Node): void {
    const status = obj(xr["status"]);
    const byResource = new Map(n.children.filter((c) => c.resource).map((c) => [c.resource!, c]));
    const names = obj(status["externalNames"]);
    for (const [rn, ext] of Object.entries(names)) {
      const c = byResource.get(rn);
      if (c && typeof ext === "string" && !c.externalName) c.externalName = ext;
    }
    const waiting = obj(status["waiting"]);
    for (const [rn, w] of Object.entries(waiting).sort(([a], [b]) => a.localeCompare(b))) {
      const wanted = Array.isArray(obj(w)["for"]) ? (obj(w)["for"] as JsonValue[]).map(String) : [];
      const since = strOf(obj(w)["since"]);
      const c = byResource.get(rn);
      if (c) {
        c.waitingFor = wanted;
        continue;
      }
      const waitingNode: Node = {
        apiVersion: "",
        kind: "",
        name: rn,
        resource: rn,
        synced: "-",
        ready: "-",
        status: `Waiting: not created until ${wanted.join(", ") || "its dependencies are ready"}${since ? ` (since ${since})` : ""}`,
        waitingFor: wanted,
        children: [],
      };
      n.children.push(waitingNode);
    }
    if (!strOf(obj(xr["metadata"])["deletionTimestamp"])) return;
    const order = obj(status["deletion"])["order"];
    const waves = Array.isArray(order) ? order.filter(Array.isArray).map((w) => (w as JsonValue[]).map(String)) : [];
    const present = new Set(n.children.filter((c) => c.object).map((c) => c.resource ?? ""));
    for (const c of n.children) {
      if (!c.object) continue;
      const finalizers = obj(c.object["metadata"])["finalizers"];
      const fs = Array.isArray(finalizers) ? finalizers.map(String) : [];
      if (strOf(obj(c.object["metadata"])["deletionTimestamp"])) {
        c.deletion = fs.length ? `deleting: held by finalizers ${fs.join(", ")}` : "deleting";
        continue;
      }
      const wave = waves.findIndex((w) => w.includes(c.resource ?? ""));
      const before =
        wave > 0
          ? waves
              .slice(0, wave)
              .flat()
              .filter((x) => present.has(x))
          : [];
      c.deletion = before.length ? `deleted after ${before.join(", ")}` : "to be deleted";
    }
  }
}

/** age renders seconds as kubectl does (45s, 3m12s, 5h3m, 2d4h). */
export function age(s: number | undefined): string {
  if (s === undefined) return "-";
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? `${s % 60}s` : ""}`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60) ? `${Math.floor((s % 3600) / 60)}m` : ""}`;
  return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600) ? `${Math.floor((s % 86400) / 3600)}h` : ""}`;
}

/**
 * table renders the tree as crossplane trace does (the tree in NAME, columns
 * padded as Go's tabwriter pads them: at least 6 wide, 3 spaces after the
 * longest cell; the last column as is), with AGE, and with -o wide the
 * RESOURCE column and xfn's EXTERNAL-NAME and WAITS. Without wide, what a
 * resource waits for follows its STATUS.
 */
export function table(root: Node, opts: { wide: boolean; age?: boolean; xfn?: boolean }): string {
  const { wide } = opts;
  const withAge = opts.age !== false;
  const xfn = opts.xfn !== false;
  const head = [
    "NAME",
    ...(wide ? ["RESOURCE"] : []),
    "SYNCED",
    "READY",
    ...(withAge ? ["AGE"] : []),
    ...(wide && xfn ? ["EXTERNAL-NAME", "WAITS"] : []),
    "STATUS",
  ];
  const rows: string[][] = [head];
  const walk = (n: Node, prefix: string, last: boolean, depth: number) => {
    const branch = depth === 0 ? "" : `${prefix}${last ? "└─ " : "├─ "}`;
    const label = n.kind ? `${n.kind}/${n.name}${n.namespace ? ` (${n.namespace})` : ""}` : `(${n.name})`;
    const waits = [...(n.waitingFor?.length ? [`for ${n.waitingFor.join(", ")}`] : []), ...(n.deletion ? [n.deletion] : [])];
    let status = n.status;
    if (!wide && xfn && n.kind && !n.error) {
      if (n.waitingFor?.length) status = `${status}${status ? "; " : ""}waiting for ${n.waitingFor.join(", ")}`;
      if (n.deletion) status = `${status}${status ? "; " : ""}${n.deletion}`;
    }
    rows.push([
      branch + label,
      ...(wide ? [n.resource ?? ""] : []),
      n.synced,
      n.ready,
      ...(withAge ? [age(n.ageSeconds)] : []),
      ...(wide && xfn ? [n.externalName ?? "", waits.join("; ") || "-"] : []),
      status,
    ]);
    const childPrefix = depth === 0 ? "" : `${prefix}${last ? "   " : "│  "}`;
    n.children.forEach((c, i) => walk(c, childPrefix, i === n.children.length - 1, depth + 1));
  };
  walk(root, "", true, 0);
  // Every cell is text from the cluster, shown with its control characters escaped (src/terminal.ts).
  for (const r of rows) r.forEach((c, i) => (r[i] = printable(c)));
  const len = (c: string) => [...c].length;
  const widths = head.map((_, i) => Math.max(6, Math.max(...rows.map((r) => len(r[i] ?? ""))) + 3));
  return `${rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c + " ".repeat(widths[i]! - len(c)))).join("")).join("\n")}\n`;
}

/** plainTree is the tree for -o json and -o yaml: every field of every node, the objects as read. */
export function plainTree(n: Node): JsonObject {
  const { children, ...rest } = n;
  return { ...(rest as unknown as JsonObject), children: children.map(plainTree) };
}

/** withoutAges is the tree with no ages (what a watch compares). */
export function withoutAges(n: Node): Node {
  const { ageSeconds: _age, ...rest } = n;
  return { ...rest, children: n.children.map(withoutAges) };
}
