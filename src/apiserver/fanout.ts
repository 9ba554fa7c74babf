// Watches of the embedded API server: every change goes out to the watches it
// concerns (a selector's transitions as ADDED and DELETED, as the API server
// does), is kept in a bounded history that a watch can resume from, and, while
// persistence holds events, waits until it is durable.
import type { JsonObject } from "@bufbuild/protobuf";
import { isObject, metaOf } from "../json.js";
import { fieldsMatch, matches } from "./selector.js";
import type { StoreEvent, Watcher } from "./types.js";

/** Fanout keeps the watches and the event history they resume from. */
export class Fanout {
  private history: StoreEvent[] = [];
  private readonly watchers = new Set<Watcher>();
  /** While true, events wait in held until release says they are durable. */
  holdEvents = false;
  private held: StoreEvent[] = [];
  /** Kinds whose watches end once the held events up to rv (their objects' DELETED events) are sent. */
  private closing: Array<{ typeKey: string; rv: number }> = [];
  /** The version the history was last emptied at: no watch resumes from before it. */
  private compactedAt = 0;

  constructor(private readonly historySize: number) {}

  /** oldest is the oldest version a watch can resume after. */
  oldest(): number {
    return this.history.length === this.historySize ? this.history[0]!.rv : 0;
  }

  /** forgetHistory empties the history (compaction, a restart): no watch resumes from before rv. */
  forgetHistory(rv: number): void {
    this.history = [];
    this.compactedAt = rv;
  }

  /** add sends an event to the watches it concerns, or holds it until it is durable. */
  add(e: StoreEvent): void {
    if (this.holdEvents) this.held.push(e);
    else this.publish(e);
  }

  /** release sends every held event up to rv (inclusive), in order. */
  release(rv: number): void {
    let n = 0;
    while (n < this.held.length && this.held[n]!.rv <= rv) n++;
    for (const e of this.held.splice(0, n)) this.publish(e);
    let m = 0;
    while (m < this.closing.length && this.closing[m]!.rv <= rv) m++;
    for (const c of this.closing.splice(0, m)) this.closeNow(c.typeKey);
  }

  private publish(e: StoreEvent): void {
    this.history.push(e);
    if (this.history.length > this.historySize) this.history.shift();
    for (const w of [...this.watchers]) deliver(w, e);
  }

  /**
   * watch subscribes w from resourceVersion `from` (exclusive); without one it
   * is first sent every current object (list) as ADDED. A version older than
   * the history is 410 Gone: an ERROR event, then the stream ends.
   */
  watch(w: Watcher, from: string | undefined, rv: number, list: () => JsonObject[]): () => void {
    const start = from === undefined || from === "" || from === "0" ? undefined : Number(from);
    if (start !== undefined && (Number.isNaN(start) || start < Math.max(this.oldest(), this.compactedAt))) {
      w.send("ERROR", {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: `too old resource version: ${from} (${rv})`,
        reason: "Expired",
        code: 410,
      });
      w.close();
      return () => {};
    }
    if (start === undefined) {
      for (const o of list()) w.send("ADDED", o);
    } else {
      for (const e of this.history) if (e.rv > start) deliver(w, e);
    }
    this.watchers.add(w);
    return () => this.watchers.delete(w);
  }

  /**
   * closeKind ends the watches of one kind (its CRD is gone) once they have
   * been sent every event up to rv: its objects' DELETED events, which wait
   * while events are held until durable.
   */
  closeKind(typeKey: string, rv: number): void {
    if (this.held.length > 0) this.closing.push({ typeKey, rv });
    else this.closeNow(typeKey);
  }

  private closeNow(typeKey: string): void {
    for (const w of [...this.watchers]) if (w.typeKey === typeKey) w.close();
  }

  /** closeAll ends every watch stream. */
  closeAll(): void {
    for (const w of [...this.watchers]) w.close();
    this.watchers.clear();
  }
}

const labelsOf = (o: JsonObject): Record<string, string> => {
  const l = metaOf(o)["labels"];
  return isObject(l) ? (Object.fromEntries(Object.entries(l).filter(([, v]) => typeof v === "string")) as Record<string, string>) : {};
};

function inScope(w: Watcher, o: JsonObject | undefined): boolean {
  if (!o) return false;
  if (w.namespace !== undefined && metaOf(o)["namespace"] !== w.namespace) return false;
  if (!fieldsMatch(w.fields, o)) return false;
  return matches(w.labels, labelsOf(o));
}

/** deliver sends an event to a watcher, turning selector transitions into ADDED/DELETED as the API server does. */
function deliver(w: Watcher, e: StoreEvent): void {
  if (e.typeKey !== w.typeKey) return;
  const now = inScope(w, e.object);
  if (e.type !== "MODIFIED") {
    if (now) w.send(e.type, e.object);
    return;
  }
  const before = inScope(w, e.previous);
  if (now && before) w.send("MODIFIED", e.object);
  else if (now) w.send("ADDED", e.object);
  // Out of scope now: DELETED with the object as it was when it last matched, at the event's
  // resourceVersion (kube's cacheWatcher.convertToWatchEvent, apiserver v0.36.3 cache_watcher.go).
  else if (before) w.send("DELETED", withVersionOf(e.previous!, e.object));
}

/** withVersionOf is prev with next's resourceVersion (a copy: prev is the stored previous version). */
function withVersionOf(prev: JsonObject, next: JsonObject): JsonObject {
  const out = structuredClone(prev);
  metaOf(out)["resourceVersion"] = metaOf(next)["resourceVersion"] ?? metaOf(out)["resourceVersion"]!;
  return out;
}
