// Lists in pages, as kube-apiserver serves them from etcd: `limit` cuts a list
// and answers a `continue` token; the following pages come from the same
// snapshot (the resourceVersion of the first page), so a paged list is
// consistent however the objects change meanwhile; `remainingItemCount` says
// how many are left when the list has no selector. Read at
// kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/storage: continue.go
// (the token: base64 of {"v":"meta.k8s.io/v1","rv":N,"start":KEY}) and
// etcd3/store.go (GetList: limits, the 410 for an expired token with an
// inconsistent token to go on, remainingItemCount only without a predicate).
//
// etcd keeps old revisions until compaction (every 5 minutes); here a first
// page keeps its list (references to the stored objects, which are never
// changed in place) for as long, and at most MAX_SNAPSHOTS lists are kept: an
// older token is 410 Expired, with the token kube gives to go on inconsistently.
import type { JsonObject } from "@bufbuild/protobuf";
import { ApiError } from "./errors.js";

const MAX_SNAPSHOTS = 64;
const SNAPSHOT_MS = 5 * 60_000;

const EXPIRED =
  "The provided continue parameter is too old to display a consistent list result. You can start a new list without the " +
  "continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing " +
  "with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the " +
  "time the first chunk was returned and now may show up in the list.";

/** A page of a list: its items, and what the list's metadata says of the rest. */
export interface Page {
  items: JsonObject[];
  resourceVersion: number;
  continue?: string;
  remainingItemCount?: number;
}

interface Snapshot {
  items: JsonObject[];
  keys: string[];
  at: number;
}

/** encodeContinue is kube's continue token: where the next page starts, at which resourceVersion. */
export function encodeContinue(rv: number, start: string): string {
  return Buffer.from(JSON.stringify({ v: "meta.k8s.io/v1", rv, start })).toString("base64url");
}

/** decodeContinue reads a continue token as kube's DecodeContinue does, refusing one it did not make (400). */
export function decodeContinue(token: string): { rv: number; start: string } {
  const bad = (why: string) => new ApiError(400, "BadRequest", `invalid continue token: continue key is not valid: ${why}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
  } catch {
    throw bad("not a base64 encoded JSON object");
  }
  const t = parsed as { v?: unknown; rv?: unknown; start?: unknown };
  if (typeof t !== "object" || t === null || t.v !== "meta.k8s.io/v1")
    throw bad(`server does not recognize this encoded version "${String(t?.v)}"`);
  if (typeof t.rv !== "number" || !Number.isInteger(t.rv) || t.rv === 0)
    throw bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
  if (typeof t.start !== "string" || t.start === "") throw bad("encoded start key empty");
  return { rv: t.rv, start: t.start };
}

/** Pages keeps the lists paged lists are continued from. */
export class Pages {
  private readonly snapshots = new Map<string, Snapshot>();

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * page answers one page of a list. list is every item the request selects,
   * sorted by key, read at rv (called only for a first page, or an
   * inconsistent continuation); scope names the request's type, namespace and
   * selectors; exact: no selector narrows it (remainingItemCount is known).
   */
  page(opts: {
    scope: string;
    limit: number;
    token: string | null;
    rv: number;
    exact: boolean;
    list: () => { items: JsonObject[]; keys: string[] };
  }): Page {
    const { scope, limit, token, exact } = opts;
    let rv = opts.rv;
    let snap: Snapshot;
    let from = 0;
    if (token === null) {
      if (!(limit > 0)) return { items: opts.list().items, resourceVersion: rv };
      snap = { ...opts.list(), at: this.now() };
    } else {
      const at = decodeContinue(token);
      if (at.rv === -1) {
        // An inconsistent continuation: the list as it is now, from the key on (and the pages after it, from that).
        snap = { ...opts.list(), at: this.now() };
      } else {
        this.expire();
        const kept = this.snapshots.get(`${scope}\n${at.rv}`);
        if (!kept) {
          const err = new ApiError(410, "Expired", EXPIRED);
          err.metadata = { continue: encodeContinue(-1, at.start) };
          throw err;
        }
        snap = kept;
        rv = at.rv;
      }
      from = lowerBound(snap.keys, at.start);
    }
    const end = limit > 0 ? Math.min(snap.items.length, from + limit) : snap.items.length;
    const page: Page = { items: snap.items.slice(from, end).map((o) => structuredClone(o)), resourceVersion: rv };
    if (end < snap.items.length) {
      page.continue = encodeContinue(rv, `${snap.keys[end - 1]}\u0000`);
      if (exact) page.remainingItemCount = snap.items.length - end;
      this.keep(`${scope}\n${rv}`, snap);
    }
    return page;
  }

  private keep(key: string, snap: Snapshot): void {
    this.snapshots.delete(key);
    this.snapshots.set(key, snap);
    while (this.snapshots.size > MAX_SNAPSHOTS) this.snapshots.delete(this.snapshots.keys().next().value as string);
  }

  private expire(): void {
    const oldest = this.now() - SNAPSHOT_MS;
    for (const [k, s] of this.snapshots) if (s.at < oldest) this.snapshots.delete(k);
  }
}

/** lowerBound is the first index whose key is not before key (keys sorted). */
function lowerBound(keys: string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (keys[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
