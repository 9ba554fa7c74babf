// A work queue of keys: deduplicated, never two workers on one key, per-key
// exponential backoff on failure, delayed requeue. A key added while it is
// being processed runs once more afterwards, so no event is lost and none loops.

export interface QueueOptions {
  workers?: number;
  baseBackoffMs?: number;
  maxBackoffMs?: number;
}

/** Process handles one key; it returns when to look again (or nothing), or throws to retry with backoff. */
export type Process = (key: string) => Promise<{ requeueAfterMs?: number } | void>;

export class WorkQueue {
  private readonly ready: string[] = [];
  private readonly queued = new Set<string>();
  private readonly active = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly timers = new Map<string, { at: number; t: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private running = 0;
  private stopped = false;
  /** How many times each key was processed (tests count reconciles with it). */
  readonly processed = new Map<string, number>();

  constructor(
    private readonly process: Process,
    private readonly opts: QueueOptions = {},
    private readonly onError: (key: string, err: unknown, retryInMs: number) => void = () => {},
  ) {}

  add(key: string): void {
    if (this.stopped) return;
    if (this.active.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.ready.push(key);
    this.pump();
  }

  /** addAfter adds key after ms, keeping the earliest of several requests. */
  addAfter(key: string, ms: number): void {
    if (this.stopped) return;
    if (ms <= 0) return this.add(key);
    const at = Date.now() + ms;
    const cur = this.timers.get(key);
    if (cur && cur.at <= at) return;
    if (cur) clearTimeout(cur.t);
    const t = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    this.timers.set(key, { at, t });
  }

  /** forget drops a key's pending retries and timers (the object is gone). */
  forget(key: string): void {
    const cur = this.timers.get(key);
    if (cur) clearTimeout(cur.t);
    this.timers.delete(key);
    this.failures.delete(key);
  }

  stop(): void {
    this.stopped = true;
    for (const { t } of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }

  /** depth is how many keys are queued or running (timers aside). */
  depth(): number {
    return this.ready.length + this.running;
  }

  /** idle resolves when nothing is queued or running (timers aside). */
  async idle(): Promise<void> {
    while (this.running > 0 || this.ready.length > 0) await new Promise((r) => setTimeout(r, 10));
  }

  private pump(): void {
    const workers = this.opts.workers ?? 4;
    while (!this.stopped && this.running < workers && this.ready.length > 0) {
      const key = this.ready.shift()!;
      this.queued.delete(key);
      this.active.add(key);
      this.running++;
      void this.run(key);
    }
  }

  private async run(key: string): Promise<void> {
    this.processed.set(key, (this.processed.get(key) ?? 0) + 1);
    try {
      const r = await this.process(key);
      this.failures.delete(key);
      if (r && r.requeueAfterMs !== undefined) this.addAfter(key, r.requeueAfterMs);
    } catch (err) {
      const n = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, n);
      const delay = Math.min((this.opts.baseBackoffMs ?? 100) * 2 ** (n - 1), this.opts.maxBackoffMs ?? 60_000);
      this.onError(key, err, delay);
      this.addAfter(key, delay);
    } finally {
      this.active.delete(key);
      this.running--;
      if (this.dirty.delete(key)) this.add(key);
      this.pump();
    }
  }
}
