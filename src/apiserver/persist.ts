// Durable state for the embedded API server: a snapshot file and a
// write-ahead log next to it (<file>.wal). Every change is appended to the log
// as one JSON line; the server answers a request, and watchers hear of a
// change, only once the log holding it is flushed to disk (fsync), so a
// write that was acknowledged survives kill -9 and a resourceVersion a client
// saw is never handed out again. Writes that arrive together share one flush
// (group commit). When the log grows past COMPACT_AFTER entries, the whole
// state is written as a new snapshot and the log starts again.
//
// Recovery: the snapshot, then the log's entries newer than it, in order. A
// torn last line (the process died while appending it) was never
// acknowledged; it is dropped and the log cut there.
import { closeSync, fsyncSync, ftruncateSync, readFileSync, statSync, writeSync } from "node:fs";
import type { JsonObject } from "@bufbuild/protobuf";
import { openAppendPrivate, readFileNoFollow, refuseSymlink, writeFilePrivate } from "./files.js";
import type { Store } from "./store.js";
import type { Snapshot, StoreEvent } from "./types.js";
import { messageOf } from "../sdk/errors.js";

/** COMPACT_AFTER is how many log entries make the journal write a new snapshot. */
export const COMPACT_AFTER = 20_000;

interface Entry {
  rv: number;
  t: string;
  k: string;
  o: JsonObject | null;
}

const objectKeyOf = (o: JsonObject) => {
  const m = (o["metadata"] ?? {}) as JsonObject;
  return `${typeof m["namespace"] === "string" ? m["namespace"] : ""}/${String(m["name"])}`;
};

/** Journal persists a Store. */
export class Journal {
  private fd: number;
  private pending: string[] = [];
  private pendingRv = 0;
  private cycle: Promise<void> | undefined;
  private entries = 0;
  private broken: Error | undefined;

  private constructor(
    private readonly file: string,
    private readonly store: Store,
    private readonly compactAfter: number,
  ) {
    this.fd = openAppendPrivate(`${file}.wal`, "dev-cluster log");
  }

  /**
   * open loads the state kept at file (snapshot and log) into an empty store
   * and journals the store's changes from then on.
   */
  static open(file: string, store: Store, compactAfter = COMPACT_AFTER): Journal {
    const wal = `${file}.wal`;
    const snap = readFileNoFollow(file, "dev-cluster state");
    if (snap) {
      try {
        store.restore(JSON.parse(snap.toString("utf8")) as Snapshot);
      } catch (err) {
        throw new Error(`cannot load dev-cluster state from ${file}: ${messageOf(err)}`);
      }
    }
    refuseSymlink(wal, "dev-cluster log");
    const log = readFileNoFollow(wal, "dev-cluster log");
    let replayed = 0;
    if (log && log.length > 0) {
      const { entries, validBytes } = parseLog(log);
      store.replay(entries.map((e) => ({ rv: e.rv, typeKey: e.t, key: e.k, object: e.o })));
      replayed = entries.length;
      if (validBytes < log.length) {
        // A torn last line: never acknowledged. Cut it off before appending more.
        const fd = openAppendPrivate(wal, "dev-cluster log");
        try {
          ftruncateSync(fd, validBytes);
          fsyncSync(fd);
        } finally {
          closeSync(fd);
        }
      }
    }
    const j = new Journal(file, store, compactAfter);
    j.entries = replayed;
    store.journal = (e) => j.add(e);
    store.holdEvents = true;
    return j;
  }

  private add(e: StoreEvent): void {
    const entry: Entry = { rv: e.rv, t: e.typeKey, k: objectKeyOf(e.object), o: e.type === "DELETED" ? null : e.object };
    this.pending.push(`${JSON.stringify(entry)}\n`);
    this.pendingRv = e.rv;
  }

  /**
   * flush resolves once every change made so far is on disk, and watchers
   * have been told of it. Changes made while a flush runs join the next one.
   */
  async flush(): Promise<void> {
    for (;;) {
      if (this.broken) throw this.broken;
      if (this.cycle) {
        await this.cycle;
        continue;
      }
      if (this.pending.length === 0) return;
      this.cycle = this.write().finally(() => (this.cycle = undefined));
    }
  }

  private async write(): Promise<void> {
    // Let the other requests of this turn add their changes: one fsync for all.
    await new Promise((r) => setImmediate(r));
    const batch = this.pending.join("");
    const rv = this.pendingRv;
    const n = this.pending.length;
    this.pending = [];
    try {
      const bytes = Buffer.from(batch);
      for (let off = 0; off < bytes.length;) off += writeSync(this.fd, bytes, off);
      fsyncSync(this.fd);
      this.entries += n;
      if (this.entries >= this.compactAfter) this.compact();
    } catch (err) {
      // What is in memory may now be ahead of the disk: refuse everything from here on.
      this.broken = new Error(`the dev-cluster cannot write ${this.file}.wal (${messageOf(err)}); restart it`);
      throw this.broken;
    }
    this.store.release(rv);
  }

  /** compact writes the whole state as a new snapshot and starts the log again. */
  private compact(): void {
    writeFilePrivate(this.file, JSON.stringify(this.store.snapshot()), "dev-cluster state");
    ftruncateSync(this.fd, 0);
    fsyncSync(this.fd);
    this.entries = 0;
  }

  /** close flushes, writes a final snapshot and closes the log. */
  async close(): Promise<void> {
    await this.flush().catch(() => {});
    if (!this.broken) this.compact();
    closeSync(this.fd);
  }

  /** size is how many bytes the log holds (for tests). */
  logBytes(): number {
    return statSync(`${this.file}.wal`).size;
  }
}

/** parseLog reads log lines up to the first one that is not a whole entry. */
function parseLog(log: Buffer): { entries: Entry[]; validBytes: number } {
  const entries: Entry[] = [];
  let at = 0;
  while (at < log.length) {
    const nl = log.indexOf(0x0a, at);
    if (nl < 0) break;
    let e: Entry;
    try {
      e = JSON.parse(log.toString("utf8", at, nl)) as Entry;
    } catch {
      break;
    }
    if (typeof e.rv !== "number" || typeof e.t !== "string" || typeof e.k !== "string") break;
    entries.push(e);
    at = nl + 1;
  }
  return { entries, validBytes: at };
}

/** readLog returns the entries of a log file (for tests). */
export function readLog(file: string): Entry[] {
  return parseLog(readFileSync(file)).entries;
}
