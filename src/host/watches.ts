// The host's watch engine: one client-node informer per kind, shared by every
// owner that needs it, counted by owner.
//
// The guarantees that failure modes 1 and 3 need:
// - Releasing never creates: releasing a kind nobody watches is a no-op, so
//   stopping a controller whose composed CRD is already gone cannot block on an
//   informer that can never sync.
// - An informer with at least one owner is never stopped; the last release
//   stops it. Nothing else collects watches.
// - Handlers are removed through the handle ensure() returned, never by identity.
// - client-node's informer restarts itself only after a 410 Gone; on any other
//   error it stops. Here a failed informer is restarted with exponential
//   backoff until it connects again or its last owner leaves.
// - A watch whose connection went silent is given up once it outlives the
//   timeout it asked the server for (client.ts), and restarted as a failed one,
//   from the resourceVersion it had reached; a list has a deadline too.
import {
  CustomObjectsApi,
  ListWatch,
  type Informer,
  type KubeConfig,
  type KubernetesObject,
  type KubernetesObjectApi,
  type ObjectCache,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { apiClient, BoundedWatch, objectClient } from "./client.js";
import { messageOf } from "../sdk/errors.js";

/** Kind identifies a watched resource type by group, version and plural. */
export interface Kind {
  group: string;
  version: string;
  plural: string;
  /** The kind's name (ConfigMap): a core kind (group "") is listed by it. */
  kind?: string | undefined;
}

export type WatchEventType = "add" | "update" | "delete";

/** WatchEvent is what handlers receive. Handlers must return fast (queue the work). */
export interface WatchEvent {
  type: WatchEventType;
  kind: Kind;
  object: KubernetesObject;
}

export type WatchHandler = (e: WatchEvent) => void;

/** Handle is one owner's registration; pass it to release(). */
export interface Handle {
  readonly kind: Kind;
  readonly owner: string;
  readonly id: number;
}

/** WatchOptions tune restarts. */
export interface WatchOptions {
  /** First restart delay after an informer fails. Default 200 ms. */
  initialBackoffMs?: number;
  /** Longest restart delay. Default 30 s. */
  maxBackoffMs?: number;
  /** How long an informer must run without an error before its backoff starts over. Default 10 s. */
  healthyAfterMs?: number;
  /** Told of each restart (metrics). */
  onRestart?: () => void;
  /** The range (ms) each watch's server-side timeout is drawn from. Default 5 to 10 minutes, as client-go's reflector. */
  watchTimeoutMs?: readonly [number, number] | undefined;
  /** How long past that timeout a watch may stay open before it is taken for dead. Default 30 s. */
  watchGraceMs?: number | undefined;
  /** How long a watch may stay silent once the server has sent bookmarks on the kind's watches. Default 150 s. */
  watchIdleMs?: number | undefined;
  /** Deadline for each list. Default 60 s. */
  requestTimeoutMs?: number;
}

export const kindKey = (k: Kind) => `${k.group}/${k.version}/${k.plural}`;
const objectKey = (k: Kind, name: string, namespace: string | undefined) => `${kindKey(k)}|${namespace ?? ""}/${name}`;

interface Entry {
  kind: Kind;
  informer: Informer<KubernetesObject> & ObjectCache<KubernetesObject>;
  handlers: Map<number, { owner: string; fn: WatchHandler }>;
  stopping: boolean;
  backoffMs: number;
  restart?: NodeJS.Timeout;
  started: Promise<void>;
  lastError?: string;
  /** Set while an informer runs after a connect; when it fires, the watch counts as healthy again. */
  healthy?: NodeJS.Timeout;
  /** The informer has listed since it last failed: its cache is a view of the kind, behind by a watch's delay. */
  synced: boolean;
  /** Failures so far (client-node's start() resolves after a failed list too, having said "error"). */
  failures: number;
}

/** How long the host's own write of an object keeps get() from the informer's copy, at most (a watch that skipped it). */
const WRITE_WAIT_MS = 30_000;

export class WatchManager {
  private readonly entries = new Map<string, Entry>();
  /** The resourceVersions of the host's own last writes, by kind and object, not yet seen by the informer. */
  private readonly written = new Map<string, { rv: string; at: number }>();
  private nextId = 1;
  private readonly api: CustomObjectsApi;
  private readonly objects: KubernetesObjectApi;

  constructor(
    private readonly kc: KubeConfig,
    private readonly log: Logger,
    private readonly opts: WatchOptions = {},
  ) {
    this.api = apiClient(kc, CustomObjectsApi, opts.requestTimeoutMs ?? 60_000);
    this.objects = objectClient(kc, opts.requestTimeoutMs ?? 60_000);
  }

  /** ensure registers handler for owner, starting the kind's informer if it is not running. */
  ensure(kind: Kind, owner: string, handler: WatchHandler): Handle {
    // Once stopped, nothing starts again (a reconcile still running when the host stopped).
    if (this.closed) return { kind, owner, id: -1 };
    const key = kindKey(kind);
    let e = this.entries.get(key);
    if (!e) {
      e = this.start(kind);
      this.entries.set(key, e);
    }
    const id = this.nextId++;
    e.handlers.set(id, { owner, fn: handler });
    // A late owner learns what is already there.
    for (const o of e.informer.list()) handler({ type: "add", kind, object: o });
    return { kind, owner, id };
  }

  /** release removes one registration; the last one stops the informer. Never creates anything. */
  async release(h: Handle): Promise<void> {
    const key = kindKey(h.kind);
    const e = this.entries.get(key);
    if (!e || !e.handlers.delete(h.id)) return;
    if (e.handlers.size > 0) return;
    this.entries.delete(key);
    await this.stop(e);
  }

  /** owners lists who holds a kind's watch (empty if it is not watched). */
  owners(kind: Kind): string[] {
    return [...new Set([...(this.entries.get(kindKey(kind))?.handlers.values() ?? [])].map((h) => h.owner))];
  }

  /** watching lists the kinds with a running informer. */
  watching(): Kind[] {
    return [...this.entries.values()].map((e) => e.kind);
  }

  /** synced resolves once a kind's informer has listed (or rejects if not watched). */
  async synced(kind: Kind): Promise<void> {
    const e = this.entries.get(kindKey(kind));
    if (!e) {
      if (this.closed) return;
      throw new Error(`${kindKey(kind)} is not watched`);
    }
    await e.started;
  }

  /**
   * get is the informer's copy of an object, as controller-runtime's cached
   * client reads, for the host not to ask the API server for what a watch
   * already told it: undefined when the kind is not watched or not listed
   * yet, when the object is not in the cache (only the API server says an
   * object is gone), and while the host's own last write of it has not come
   * back through the watch (a reconcile requeued at once after a write reads
   * what it wrote). The copy is the cache's own: not to be changed.
   */
  get(kind: Kind, name: string, namespace?: string): KubernetesObject | undefined {
    const e = this.entries.get(kindKey(kind));
    if (!e?.synced) return undefined;
    const o = e.informer.get(name, namespace);
    if (!o) return undefined;
    const key = objectKey(kind, name, namespace);
    const w = this.written.get(key);
    if (w) {
      if (o.metadata?.resourceVersion !== w.rv && Date.now() - w.at < WRITE_WAIT_MS) return undefined;
      this.written.delete(key);
    }
    return o;
  }

  /** wrote records the host's own write of an object (the API server's answer): get() leaves it out until the watch brings it. */
  wrote(kind: Kind, o: KubernetesObject | undefined): void {
    const rv = o?.metadata?.resourceVersion;
    if (!rv || !o.metadata?.name || !this.entries.has(kindKey(kind))) return;
    if (this.written.size >= 100_000) this.written.clear(); // bounded: reads go to the API server a moment longer
    this.written.set(objectKey(kind, o.metadata.name, o.metadata.namespace), { rv, at: Date.now() });
  }

  /** cached returns the informer's view of a kind (empty if not watched). */
  cached(kind: Kind): readonly KubernetesObject[] {
    return this.entries.get(kindKey(kind))?.informer.list() ?? [];
  }

  private closed = false;

  /** stopAll stops every informer, for good: ensure starts none after it. */
  async stopAll(): Promise<void> {
    this.closed = true;
    const all = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(all.map((e) => this.stop(e)));
  }

  private start(kind: Kind): Entry {
    // Core kinds (ConfigMaps, Secrets: what functions often require) live under /api, and are listed by kind.
    const core = kind.group === "";
    const path = core ? `/api/${kind.version}/${kind.plural}` : `/apis/${kind.group}/${kind.version}/${kind.plural}`;
    const list = core
      ? () => this.objects.list(kind.version, kind.kind ?? "") as never
      : () => this.api.listClusterCustomObject({ group: kind.group, version: kind.version, plural: kind.plural }) as never;
    const watch = new BoundedWatch(this.kc, kindKey(kind), {
      timeoutMs: this.opts.watchTimeoutMs,
      graceMs: this.opts.watchGraceMs,
      idleMs: this.opts.watchIdleMs,
    });
    const informer = new ListWatch<KubernetesObject>(path, watch, list, false);
    const e: Entry = {
      kind,
      informer,
      handlers: new Map(),
      stopping: false,
      backoffMs: this.opts.initialBackoffMs ?? 200,
      started: Promise.resolve(),
      synced: false,
      failures: 0,
    };
    /** run starts the informer; it counts as listed only if that start said no error. */
    const run = async () => {
      const failures = e.failures;
      await informer.start();
      if (e.failures === failures && !e.stopping) e.synced = true;
    };
    const emit = (type: WatchEventType) => (object: KubernetesObject) => {
      // The host's own write come back: reads take the cache again.
      const m = object.metadata;
      if (m?.name && this.written.size > 0) {
        const key = objectKey(kind, m.name, m.namespace);
        if (type === "delete" || this.written.get(key)?.rv === m.resourceVersion) this.written.delete(key);
      }
      for (const h of [...e.handlers.values()]) {
        try {
          h.fn({ type, kind, object });
        } catch (err) {
          this.log.error({ kind: kindKey(kind), owner: h.owner, err: messageOf(err) }, "watch handler threw");
        }
      }
    };
    informer.on("add", emit("add"));
    informer.on("update", emit("update"));
    informer.on("delete", emit("delete"));
    // client-node says "connect" before it lists, so a connect is no sign of
    // health (a kind whose CRD is gone connects, then fails to list, for ever):
    // the backoff starts over only once the informer has run without an error
    // for healthyAfterMs. A failure is logged once when it starts and again
    // only when its message changes; recovery is logged once.
    informer.on("connect", () => {
      clearTimeout(e.healthy);
      e.healthy = setTimeout(() => {
        e.backoffMs = this.opts.initialBackoffMs ?? 200;
        if (e.lastError) this.log.info({ kind: kindKey(kind) }, "watch recovered");
        delete e.lastError;
      }, this.opts.healthyAfterMs ?? 10_000);
      e.healthy.unref();
    });
    informer.on("error", (err: unknown) => {
      e.synced = false;
      e.failures++;
      if (e.stopping) return;
      clearTimeout(e.healthy);
      const message = err instanceof Error ? err.message : String(err);
      const delay = e.backoffMs;
      e.backoffMs = Math.min(e.backoffMs * 2, this.opts.maxBackoffMs ?? 30_000);
      const fields = { kind: kindKey(kind), err: message, retryInMs: delay };
      if (message !== e.lastError) this.log.warn(fields, "watch failed; restarting with backoff");
      else this.log.debug(fields, "watch failed again; restarting with backoff");
      e.lastError = message;
      this.opts.onRestart?.();
      clearTimeout(e.restart);
      e.restart = setTimeout(() => {
        // A failure arrives as another "error".
        if (!e.stopping) run().catch(() => {});
      }, delay);
    });
    // Errors are handled by the "error" listener.
    e.started = run().catch(() => {});
    return e;
  }

  private async stop(e: Entry): Promise<void> {
    e.stopping = true;
    clearTimeout(e.restart);
    clearTimeout(e.healthy);
    try {
      await e.informer.stop();
    } catch {
      // Stopping a watch whose kind is gone is not an error.
    }
  }
}
