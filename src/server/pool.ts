// The function pool: the function runs on worker threads, so that one call
// cannot take the server down. The main thread keeps the gRPC server, health,
// admission (concurrency and queue bounds) and every deadline; workers run the
// function. A worker that crashes (an uncaught exception, an unhandled
// rejection, running out of memory) fails only the calls it held, and is
// replaced. A call past its deadline or the server's timeout is answered from
// here, and if the worker does not answer it soon after (a function stuck on
// the CPU), the worker is terminated and replaced: health and every other
// worker's calls go on. Request and response bytes are transferred between
// threads, not copied.
import { Worker } from "node:worker_threads";
import { status as Code } from "@grpc/grpc-js";
import type { Logger } from "pino";
import PQueue from "p-queue";
import { UNSETTLED_EXIT_CODE, unsettledMessage } from "../module/load.js";
import type { EarlyWorker } from "./early.js";
import { guardMemory } from "./guard.js";
import { v8HeapLimitMB } from "./memory.js";
import { refusals, REFUSED_REPORT_MS } from "./log.js";
import { deadlineDetails, runResponseHook, type CallInfo, type HandlerResult } from "./call.js";
import type { Handler, HandlerOptions } from "./handler.js";
import type * as codec from "../wire/codec.js";
import { exclusive, monotonicMs, type FromWorker, type ToWorker, type WorkerData } from "./protocol.js";
import { messageOf } from "../sdk/errors.js";

type Codec = Pick<typeof codec, "decodeRequest" | "decodeResponse">;

/**
 * SMALL_CALL_BYTES is the request size under which a call counts as small.
 * With three workers or more, one worker is kept for small calls, and the
 * others run below normal CPU priority (BUSY_NICE, Linux only), so that on
 * a machine whose cores are all busy with large calls a small one still
 * gets a core at once: large calls never take the kept worker, and when they
 * contend for the CPU the scheduler favours the small call's thread and the
 * main thread (which moves every call's bytes). Cost scales with the
 * request: a 256 KiB request is about 70 composed resources, a few ms.
 * (bench/pool.ts, 2 cores, small-call p99 beside N=1000 traffic: 4.1-4.4x
 * alone without this, 2.2-3.6x with nice 10, 1.4-1.5x with nice 19.)
 */
export const SMALL_CALL_BYTES = 256 * 1024;
const BUSY_NICE = 19;
const LANES_FROM = 3;

/**
 * A worker below normal priority is slow to pick calls up when the CPU it
 * would run on is taken by threads of normal priority: the main thread, the
 * kept worker, and anything else on the machine (measured on two busy cores:
 * bench/README.md, "Why the code is as it is"). So a small call goes to one
 * only while its recent pick-ups took at most SLOW_PICKUP_MS.
 * Only calls sent to a worker holding no other call are measured: a call
 * queued behind another waits for that call, which says nothing of the CPU.
 * A measure older than PICKUP_FRESH_MS no longer counts, so the worker is
 * tried again. On a machine with cores to spare, wake-ups are quick and small
 * calls still spread over every worker.
 */
const SLOW_PICKUP_MS = 2;
const PICKUP_FRESH_MS = 1000;

/** DEFAULT_TIMEOUT_SECONDS bounds one call when the caller sets no shorter deadline. */
export const DEFAULT_TIMEOUT_SECONDS = 55;

/** How long a worker may take to answer a call whose deadline passed before it is deemed stuck. */
const STUCK_GRACE_MS = 1_000;
/**
 * A worker holding a call for this long without a word from it (no answer, no
 * log line, none of the beats it sends while it holds calls) is stuck on the
 * CPU: a new call goes to another worker, or waits for one (a replacement
 * starting, or one speaking again), rather than queue behind the stuck call
 * and end with it when its worker is terminated at that call's deadline.
 */
const STALLED_MS = 1_000;

/** PoolOptions configure a pool. */
export interface PoolOptions {
  workers: number;
  /** The script each worker runs (it calls workerMain). */
  script: URL;
  /** Handed to every worker (xfnWorker, the module, logging). */
  workerData: WorkerData;
  maxConcurrency: number;
  maxQueue: number;
  /** The server's own bound on one call, in ms. */
  timeoutMs: number;
  now?: () => Date;
  onResponse?: HandlerOptions["onResponse"];
  /** Told each time a worker is replaced. */
  onWorkerRestart?: () => void;
  /** Each worker's old generation, in MB (--max-worker-heap); V8's own sizing when absent. */
  maxHeapMB?: number;
  /**
   * When the process's resident memory passes this many MB, the worker
   * holding the most of it is ended (see guardMemory). Off when absent.
   */
  memoryGuardMB?: number;
  /** The process's resident memory in bytes (tests). */
  rss?: () => number;
  /** A small call skips a low-priority worker whose pick-ups took longer than this (ms). Default 2; tests on a loaded machine raise it. */
  slowPickupMs?: number;
  /** How long a slow pick-up counts (ms). Default PICKUP_FRESH_MS; tests on a loaded machine raise it. */
  pickupFreshMs?: number;
  /** How often refusals for a full queue after the first are summed up in one line (ms). Default REFUSED_REPORT_MS. */
  refusedReportMs?: number;
  /**
   * A worker started on script before the server loaded (a bundle's, early.ts):
   * taken as the first worker when started with this pool's heap limit, else ended.
   */
  early?: EarlyWorker;
  /**
   * Workers started with the pool, the first included (1 to workers; default
   * 1). The others start, all at once, when calls overlap: a call comes while
   * another is running, or a large call comes while only the worker kept for
   * small calls is up. An idle function holds one worker's memory.
   */
  warmWorkers?: number;
}

/** notePickup records how long a call waited for its worker to pick it up. */
export function notePickup(slot: Pick<Slot, "pickupMs" | "pickupAt">, waited: number, now: number): void {
  const fresh = now - slot.pickupAt < PICKUP_FRESH_MS;
  slot.pickupMs = fresh ? 0.7 * slot.pickupMs + 0.3 * waited : waited;
  slot.pickupAt = now;
}

type Candidate = Pick<Slot, "gone" | "retiring" | "kept" | "low" | "pickupMs" | "pickupAt"> & { pending: { readonly size: number } };

/**
 * pickWorker chooses the worker with the fewest calls for a request of size
 * bytes. A large call never takes the worker kept for small calls (unless no
 * other is running); a small one takes it on a tie, and takes a worker below
 * normal priority (low) only while that worker picks calls up promptly (see
 * SLOW_PICKUP_MS). Without a kept worker, or with every other worker slow, a
 * small call still goes to the least busy one.
 */
export function pickWorker<S extends Candidate>(
  slots: readonly S[],
  size: number,
  now: number,
  slowMs = SLOW_PICKUP_MS,
  freshMs = PICKUP_FRESH_MS,
): S | undefined {
  const small = size < SMALL_CALL_BYTES;
  let best: S | undefined;
  let kept: S | undefined;
  let any: S | undefined;
  const fewer = (s: S, than: S | undefined) =>
    !than || s.pending.size < than.pending.size || (s.kept && s.pending.size === than.pending.size);
  for (const s of slots) {
    if (s.gone || s.retiring) continue;
    if (s.kept) kept = s;
    if (s.kept && !small) continue;
    if (fewer(s, any)) any = s;
    const slow = small && s.low && s.pickupMs > slowMs && now - s.pickupAt < freshMs;
    if (!slow && fewer(s, best)) best = s;
  }
  return best ?? any ?? kept;
}

interface Pending {
  resolve(r: HandlerResult): void;
  /** When the call was handed to the worker (ms, performance.now()). */
  started: number;
  /** Whether the server's timeout, not the caller's deadline, ends this call. */
  byTimeout: boolean;
  /** Whether the worker held no other call when this one was sent: then its wait to pick it up is the wait for the CPU. */
  idle: boolean;
}

interface Slot {
  n: number;
  worker: Worker;
  pending: Map<number, Pending>;
  gone: boolean;
  /** retiring: being terminated (stuck); it takes no new call. */
  retiring: boolean;
  /** Kept for small calls (runs at normal priority; large calls never go to it). */
  kept: boolean;
  /** Runs below normal priority (with three workers or more, every one but the kept one). */
  low: boolean;
  /** Why the pool is ending this worker, when it is (its calls fail saying so). */
  ending?: string;
  /** What the worker writes for the memory guard: bytes its thread holds, and when (worker.ts, MEMORY_REPORT_MS). */
  held: Float64Array;
  /** How long its recent calls waited to be picked up (ms, a moving average), and when that was last measured (performance.now()). */
  pickupMs: number;
  pickupAt: number;
  /** When the worker last said anything (an answer, a log line, ready; performance.now()). */
  heardAt: number;
}

/** stalled is whether slot holds a call it has been silent on for STALLED_MS (see there). */
function stalled(slot: Slot, now: number): boolean {
  if (now - slot.heardAt < STALLED_MS) return false;
  for (const p of slot.pending.values()) return now - p.started >= STALLED_MS;
  return false;
}

/** Pool is a Handler backed by worker threads. */
export interface Pool extends Handler {
  /** close terminates every worker. */
  close(): Promise<void>;
  /** Workers that have loaded the function and take calls (not ended, not being replaced). */
  ready(): number;
  /**
   * Resolves once the first worker has loaded the function; rejects with why
   * it could not (the pool has then ended its workers, and answers calls
   * UNAVAILABLE saying so).
   */
  readonly firstReady: Promise<void>;
  /** Resolves once the workers started with the pool (warmWorkers) have loaded the function (or failed to, and are being retried). */
  readonly allReady: Promise<void>;
  /** Resolves once every worker has loaded the function: after calls overlapped, or at once when all are warm. */
  readonly everyReady: Promise<void>;
}

/**
 * openPool starts the workers and returns at once: calls wait for the first
 * worker to load the function (see WorkerPool.start), and firstReady says
 * when it has, or why it could not.
 */
export function openPool(opts: PoolOptions, log: Logger): Pool {
  if (!(Number.isInteger(opts.workers) && opts.workers >= 1))
    throw new Error(`--workers must be a whole number of at least 1, got ${opts.workers}`);
  if (!(opts.timeoutMs > 0)) throw new Error(`--timeout must be a positive number of seconds, got ${opts.timeoutMs / 1000}`);
  const pool = new WorkerPool(opts, log);
  pool.start();
  return pool;
}

/** startPool starts the workers and resolves once the first has loaded the function. */
export async function startPool(opts: PoolOptions, log: Logger): Promise<Pool> {
  const pool = openPool(opts, log);
  await pool.firstReady;
  return pool;
}

/**
 * WorkerPool admits calls (a p-queue bounded by maxConcurrency and maxQueue),
 * hands each to a worker (pickWorker), answers deadlines from the main thread,
 * and replaces workers that end.
 */
/** heapLimitText names the heap limit a worker ran out of. */
const heapLimitText = (mb: number | undefined) => (mb ? `its heap is limited to ${mb} MB, --max-worker-heap` : "V8's own heap limit");

class WorkerPool implements Pool {
  private readonly queue: PQueue;
  /** Ready workers, in the order they became ready. */
  private readonly slots: Slot[] = [];
  /** Every worker started and not yet exited, ready or not: close ends them all. */
  private readonly all = new Set<Worker>();
  /** Calls waiting for a worker while every one is being replaced. */
  private readonly waiting: (() => void)[] = [];
  /** With three workers or more: one kept for small calls, the others below normal priority. */
  private readonly lanes: boolean;
  /** A full queue under a flood would otherwise write a line per refused call. */
  private readonly busy: ReturnType<typeof refusals>;
  private guard: ReturnType<typeof guardMemory> | undefined;
  private nextId = 1;
  private spawned = 0;
  private closing = false;
  /** Why the pool could not start (its first worker could not load the function): calls are answered with it. */
  private failed: string | undefined;
  /** Whether a worker has loaded the function (the first one is ready). */
  private loaded = false;
  /** Whether the workers beyond the warm ones were started (calls overlapped), or there are none. */
  private grown = false;
  /**
   * The decoder recording needs (--record-dir: protobuf-es, the generated
   * types), loaded as the pool starts only when calls are recorded: this
   * thread needs it for nothing else. Loaded long before the first worker is.
   */
  private codec: Codec | undefined;
  private codecLoading: Promise<Codec> | undefined;
  /** Workers started with the pool (warmWorkers, at least 1); the rest start when it grows. */
  private warm = 1;
  /** Of those, how many are still loading the function: a call that would queue behind another waits for one (dispatch). */
  private growing = 0;
  private resolveEvery: () => void = () => {};

  constructor(
    private readonly opts: PoolOptions,
    private readonly log: Logger,
  ) {
    this.queue = new PQueue({ concurrency: opts.maxConcurrency });
    this.lanes = opts.workers >= LANES_FROM;
    this.busy = refusals(log, opts.refusedReportMs ?? REFUSED_REPORT_MS);
  }

  /**
   * start brings the first worker up: calls wait for it (workerBefore), and
   * once it has loaded the function the other warm ones start behind it, and
   * the rest when calls overlap (grow; calls meanwhile go to the ones ready).
   * If the first cannot load the function, firstReady rejects with why, the
   * pool ends the others and answers every call, waiting or new, UNAVAILABLE
   * with that reason. One of the others that cannot start is retried as a
   * replacement is.
   */
  start(): void {
    const { opts } = this;
    if (opts.onResponse) this.codecLoading = import("../wire/codec.js").then((m) => (this.codec = m));
    this.firstReady = this.spawn(this.lanes, this.takeEarly()).then(
      () => void (this.loaded = true),
      async (err: Error) => {
        this.failed = err.message;
        this.closing = true;
        for (const w of this.waiting.splice(0)) w();
        await Promise.all([...this.all].map((w) => w.terminate()));
        throw err;
      },
    );
    const warm = Math.min(opts.workers, Math.max(1, opts.warmWorkers ?? 1));
    this.warm = warm;
    this.grown = warm === opts.workers;
    this.everyReady = new Promise((resolve) => (this.resolveEvery = resolve));
    this.allReady = this.firstReady.then(
      async () => {
        await this.startMore(warm - 1, false);
        if (warm < opts.workers)
          this.log.info({ workers: opts.workers, warm }, "function worker ready; the others start when calls overlap");
      },
      () => undefined,
    );
    if (opts.memoryGuardMB) this.guard = guardMemory(opts.memoryGuardMB, opts.rss ?? process.memoryUsage.rss, this.slots, this.log);
  }

  /**
   * grow starts the workers not started yet, once: calls overlap (size is the
   * new call's; running, the calls already running).
   */
  private grow(size: number, running: number): void {
    if (this.grown || this.closing) return;
    if (running === 0 && !(this.lanes && size >= SMALL_CALL_BYTES)) return;
    this.grown = true;
    // Counted at once: the call that made the pool grow is placed before the workers start (dispatch).
    const n = this.opts.workers - this.warm;
    this.growing += n;
    void this.allReady.then(() => this.startMore(n, true));
  }

  /** startMore starts n more workers (grown: counted in growing until each is up), and logs once every worker is up. */
  private async startMore(n: number, grown: boolean): Promise<void> {
    const { opts } = this;
    if (this.closing || this.failed !== undefined) {
      if (grown) this.growing -= n;
      return;
    }
    const rest = Array.from({ length: n }, () => this.spawn(false).finally(() => grown && this.growing--));
    await Promise.allSettled(rest).then((results) => {
      if (this.closing) return;
      for (const r of results) {
        if (r.status === "fulfilled") continue;
        this.log.error({ err: messageOf(r.reason) }, "cannot start a worker; retrying");
        this.respawn(false, 1);
      }
      // The warm ones are every worker only when all are warm; otherwise the growth's start completes the pool.
      if (!grown && this.warm < opts.workers) return;
      this.resolveEvery();
      this.log.info(
        {
          workers: opts.workers,
          ...(opts.maxHeapMB ? { maxWorkerHeapMB: opts.maxHeapMB } : {}),
          ...(opts.memoryGuardMB ? { memoryGuardMB: opts.memoryGuardMB } : {}),
          timeoutSeconds: opts.timeoutMs / 1000,
          ...(this.lanes ? { keptForSmallCalls: 1, smallCallBytes: SMALL_CALL_BYTES } : {}),
        },
        "function workers ready",
      );
    });
  }

  firstReady: Promise<void> = Promise.resolve();
  allReady: Promise<void> = Promise.resolve();
  everyReady: Promise<void> = Promise.resolve();

  async handle(bytes: Uint8Array, call: CallInfo): Promise<HandlerResult> {
    const { opts, queue } = this;
    if (queue.size >= opts.maxQueue) {
      const details = `server busy: ${queue.pending} requests running and ${queue.size} queued (limit ${opts.maxQueue}); retry later`;
      this.busy.refused({ code: "RESOURCE_EXHAUSTED" }, details);
      return { code: Code.RESOURCE_EXHAUSTED, details };
    }
    this.grow(bytes.byteLength, queue.pending);
    const limit = Date.now() + opts.timeoutMs;
    const byTimeout = limit < call.deadline;
    const deadline = Math.min(limit, call.deadline);
    const r = await queue.add(async () => {
      if (call.cancel?.cancelled) return { code: Code.CANCELLED, details: "call cancelled" } as HandlerResult;
      if (Date.now() >= deadline) return expired(byTimeout, opts.timeoutMs);
      return this.dispatch(bytes, call, deadline, byTimeout);
    });
    return r!;
  }

  inFlight(): number {
    return this.queue.size + this.queue.pending;
  }

  ready(): number {
    return this.slots.filter((s) => !s.gone && !s.retiring).length;
  }

  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.guard);
    this.busy.flush();
    await Promise.all([...this.all].map((w) => w.terminate()));
  }

  /**
   * takeEarly is the worker started before the server (opts.early) when it
   * can be this pool's first: started with the heap limit the pool would give
   * it, and still running. Otherwise it is ended, and the pool starts its own.
   */
  private takeEarly(): Worker | undefined {
    const early = this.opts.early;
    if (!early) return undefined;
    const ended = early.ended();
    if (ended === undefined && early.maxHeapMB === this.opts.maxHeapMB) {
      this.log.debug({ maxWorkerHeapMB: early.maxHeapMB }, "the first worker was started before the server loaded");
      return early.take();
    }
    early.discard();
    this.log.debug(
      ended === undefined ? { earlyHeapMB: early.maxHeapMB, maxWorkerHeapMB: this.opts.maxHeapMB } : { ended },
      "not using the worker started before the server loaded; starting the first worker now",
    );
    return undefined;
  }

  /**
   * spawn starts a worker and resolves when it is ready (or rejects with why
   * it is not). kept: the worker kept for small calls; the others run at
   * lower priority when there are lanes. early: a worker already started on
   * opts.script with this pool's heap limit (takeEarly), sent its data now.
   */
  private spawn(kept: boolean, early?: Worker): Promise<Slot> {
    const { opts } = this;
    const nice = this.lanes && !kept ? BUSY_NICE : 0;
    const logBacklog = new SharedArrayBuffer(4);
    // Written by the worker only for the memory guard: with the guard off it is never woken for it.
    const memory = opts.memoryGuardMB ? new SharedArrayBuffer(16) : undefined;
    const workerData = {
      ...opts.workerData,
      nice,
      logBacklog,
      ...(memory ? { memory } : {}),
      ...(opts.maxHeapMB ? { maxHeapMB: opts.maxHeapMB } : {}),
    } satisfies WorkerData;
    let worker: Worker;
    if (early) {
      worker = early;
      worker.postMessage({ type: "config", workerData } satisfies ToWorker);
    } else {
      worker = new Worker(opts.script, {
        workerData,
        ...(opts.maxHeapMB ? { resourceLimits: { maxOldGenerationSizeMb: v8HeapLimitMB(opts.maxHeapMB) } } : {}),
      });
    }
    this.all.add(worker);
    worker.once("exit", () => this.all.delete(worker));
    const slot: Slot = {
      n: ++this.spawned,
      worker,
      pending: new Map(),
      gone: false,
      retiring: false,
      kept,
      low: nice > 0,
      held: memory ? new Float64Array(memory) : new Float64Array(2),
      pickupMs: 0,
      pickupAt: -Infinity,
      heardAt: performance.now(),
    };
    return new Promise((resolve, reject) => this.watchWorker(slot, new Int32Array(logBacklog), resolve, reject));
  }

  /** watchWorker follows one worker: ready, its log lines, its answers, and its end (then it is replaced). */
  private watchWorker(slot: Slot, backlog: Int32Array, resolve: (s: Slot) => void, reject: (e: Error) => void): void {
    const { opts, log } = this;
    const worker = slot.worker;
    let ready = false;
    const replace = (why: string) => {
      if (slot.gone) return;
      slot.gone = true;
      const i = this.slots.indexOf(slot);
      if (i >= 0) this.slots.splice(i, 1);
      if (slot.pending.size > 0)
        log.error({ worker: slot.n, calls: slot.pending.size }, `a worker ended: ${why}; failing the calls it held`);
      failAll(
        slot,
        `the function's worker ended (${why}) while this call was on it, and the call ended with it (retry it); ` +
          "the worker was replaced, and calls on the other workers were not affected",
      );
      if (!ready) return reject(new Error(why));
      if (this.closing) return;
      log.warn({ worker: slot.n, reason: why }, "starting a replacement worker");
      opts.onWorkerRestart?.();
      this.respawn(slot.kept, 0);
    };
    worker.on("message", (m: FromWorker) => {
      slot.heardAt = performance.now();
      if (m.type === "ready") {
        ready = true;
        this.slots.push(slot);
        for (const w of this.waiting.splice(0)) w();
        resolve(slot);
      } else if (m.type === "log") {
        relog(log, m.line, slot.n);
        Atomics.sub(backlog, 0, m.line.length);
      } else if (m.type === "heap") {
        // Its live heap is over --max-worker-heap (worker.ts, watchHeap): ended, as V8 would end it there.
        if (slot.ending) return;
        log.error({ worker: slot.n, maxHeapMB: opts.maxHeapMB, heapMB: m.heapMB }, "a worker ran out of memory");
        slot.ending = `it ran out of memory (${heapLimitText(opts.maxHeapMB)})`;
        void worker.terminate();
      } else if (m.type === "failed") {
        slot.gone = true;
        void worker.terminate();
        reject(new Error(m.message, m.stack ? { cause: Object.assign(new Error(m.message), { stack: m.stack }) } : {}));
      } else if (m.type === "beat") {
        // Heard: heardAt above.
      } else {
        const p = slot.pending.get(m.id);
        if (!p) return; // already answered here (a deadline), or failed with the worker
        slot.pending.delete(m.id);
        // A call waiting for a worker with nothing to do (dispatch, while the pool grows) may take this one now.
        if (this.waiting.length > 0) for (const w of this.waiting.splice(0)) w();
        if (p.idle) notePickup(slot, m.waited, performance.now());
        if (m.type === "done")
          p.resolve(m.report ? { ok: new Uint8Array(m.buf, m.off, m.len), report: m.report } : { ok: new Uint8Array(m.buf, m.off, m.len) });
        else if (m.code === Code.DEADLINE_EXCEEDED && p.byTimeout) p.resolve(expired(true, opts.timeoutMs));
        else p.resolve({ code: m.code, details: m.details });
      }
    });
    worker.on("error", (err) => {
      if ((err as { code?: string }).code === "ERR_WORKER_OUT_OF_MEMORY") {
        log.error({ worker: slot.n, maxHeapMB: opts.maxHeapMB }, "a worker ran out of memory");
        return replace(`it ran out of memory (${heapLimitText(opts.maxHeapMB)})`);
      }
      log.error({ worker: slot.n, err: err.message }, "a worker crashed");
      replace(`it crashed: ${err.message}`);
    });
    worker.on("exit", (code) =>
      replace(slot.ending ?? (ready ? `process.exit(${code}) was called in it` : loadExit(code, opts.workerData))),
    );
  }

  /** respawn starts a replacement worker, trying again with a growing wait while it cannot start. */
  private respawn(kept: boolean, attempt: number): void {
    this.spawn(kept).catch((err: Error) => {
      const delay = Math.min(30_000, 500 * 2 ** attempt);
      this.log.error({ err: err.message, retryInMs: delay }, "cannot start a replacement worker");
      if (!this.closing) setTimeout(() => this.respawn(kept, attempt + 1), delay).unref();
    });
  }

  /** pick chooses a worker for a call of size bytes (pickWorker), passing over stalled ones (undefined: every one is). */
  private pick(size: number): Slot | undefined {
    const now = performance.now();
    const live = this.slots.some((s) => stalled(s, now)) ? this.slots.filter((s) => !stalled(s, now)) : this.slots;
    return pickWorker(live, size, now, this.opts.slowPickupMs, this.opts.pickupFreshMs);
  }

  /**
   * workerBefore resolves with a worker, waiting for a replacement if none is
   * running, or undefined at the deadline. idle: while workers are starting,
   * wait for one with no call (a worker starting, or a running call ending),
   * rather than queue behind a call that may be stuck.
   */
  private async workerBefore(deadline: number, size: number, idle = false): Promise<Slot | undefined> {
    for (;;) {
      const slot = this.pick(size);
      const free = slot && (!idle || slot.pending.size === 0 || this.growing === 0);
      if (free || this.failed !== undefined || Date.now() >= deadline) return slot;
      // Woken when a worker is ready, and now and then: a stalled worker may speak again.
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(STALLED_MS / 4, deadline - Date.now()));
        this.waiting.push(() => (clearTimeout(t), resolve()));
      });
    }
  }

  /** dispatch sends one admitted call to a worker and answers it: the worker's answer, or the deadline's. */
  private async dispatch(bytes: Uint8Array, call: CallInfo, deadline: number, byTimeout: boolean): Promise<HandlerResult> {
    const { opts, log } = this;
    // Taken at once when a worker is running, so that the call counts on it before the next call is placed.
    let slot = this.pick(bytes.byteLength) ?? (await this.workerBefore(deadline, bytes.byteLength));
    // While the pool grows, a call that would queue behind another waits for a worker with nothing to do.
    if (slot && slot.pending.size > 0 && this.growing > 0) slot = await this.workerBefore(deadline, bytes.byteLength, true);
    if (!slot && this.failed !== undefined)
      return { code: Code.UNAVAILABLE, details: `the function could not be loaded, and the server is stopping: ${this.failed}` };
    if (!slot && !this.loaded)
      return {
        code: Code.UNAVAILABLE,
        details: "the function was still loading at the call's deadline (no worker had loaded it yet); retry later",
      };
    if (!slot && this.ready() > 0)
      return {
        code: Code.UNAVAILABLE,
        details:
          `every function worker was stuck on the CPU (silent for over ${STALLED_MS / 1000} s while holding a call) ` +
          "until this call's deadline, so it was not run; retry later",
      };
    if (!slot)
      return { code: Code.UNAVAILABLE, details: "no function worker came up before the deadline (they are being restarted); retry later" };
    const at = (opts.now ?? (() => new Date()))().getTime();
    const id = this.nextId++;
    // Kept for --record-dir only: otherwise the bytes go to the worker.
    const kept = opts.onResponse ? Uint8Array.from(bytes) : undefined;
    const b = exclusive(bytes);
    return new Promise<HandlerResult>((resolve) => {
      const settle = (r: HandlerResult) => {
        clearTimeout(timer);
        call.cancel?.onCancel(undefined);
        resolve(r);
        // Recording never holds up or fails the call it records.
        if ("ok" in r && kept) {
          const record = ({ decodeRequest, decodeResponse }: Codec) =>
            runResponseHook(log, () => opts.onResponse!(decodeRequest(kept), decodeResponse(r.ok), new Date(at)));
          if (this.codec) record(this.codec);
          else void this.codecLoading?.then(record);
        }
      };
      slot.pending.set(id, { resolve: settle, byTimeout, started: performance.now(), idle: slot.pending.size === 0 });
      call.cancel?.onCancel(() => slot.worker.postMessage({ type: "cancel", id } satisfies ToWorker));
      // The worker answers a passed deadline itself; if it does not, its thread is stuck.
      // Declared after settle, which reads it only once a worker answers or the timer fires.
      const timer = setTimeout(
        () => {
          if (!slot.pending.has(id)) return;
          slot.pending.delete(id);
          log.error({ worker: slot.n }, "a call ran past its deadline and its worker did not answer; terminating the worker");
          settle(expired(byTimeout, opts.timeoutMs));
          slot.retiring = true;
          // Its exit is the pool's doing: say why, not what the exit code would suggest.
          const which = byTimeout ? ` (the server's --timeout of ${opts.timeoutMs / 1000} s)` : "";
          slot.ending ??= `it was stopped: a call on it ran past its deadline${which} and it did not answer`;
          void slot.worker.terminate();
        },
        Math.min(2 ** 31 - 1, Math.max(0, deadline - Date.now()) + STUCK_GRACE_MS),
      );
      slot.worker.postMessage(
        {
          type: "run",
          id,
          buf: b.buffer as ArrayBuffer,
          off: b.byteOffset,
          len: b.byteLength,
          version: call.version,
          deadline,
          ...(byTimeout ? { timeoutMs: opts.timeoutMs } : {}),
          at,
          sent: monotonicMs(),
          ...(call.trace ? { trace: true as const } : {}),
        } satisfies ToWorker,
        [b.buffer as ArrayBuffer],
      );
    });
  }
}

/** failAll fails every call a worker held, saying why. */
function failAll(slot: Slot, details: string): void {
  for (const p of slot.pending.values()) p.resolve({ code: Code.INTERNAL, details });
  slot.pending.clear();
}

const LEVELS = new Set(["trace", "debug", "info", "warn", "error", "fatal"]);

/** relog writes a worker's JSON log line through the server's logger, marked with the worker. */
function relog(log: Logger, line: string, worker: number): void {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    log.warn({ worker, line }, "a worker wrote a log line that is not JSON");
    return;
  }
  const { level, msg, time: _time, component: _component, ...rest } = entry;
  const at = typeof level === "string" && LEVELS.has(level) ? (level as "info") : "info";
  log[at]({ ...rest, worker }, typeof msg === "string" ? msg : "");
}

/** loadExit says why a worker that exited with code before it was ready could not start (naming the module as typed, its label). */
function loadExit(code: number, data: WorkerData): string {
  if (data.module === undefined) return `a worker exited with code ${code} while starting`;
  const module = data.label;
  if (code === UNSETTLED_EXIT_CODE) return unsettledMessage(module);
  const why = `a worker exited with code ${code} while loading it (does its top-level code end the process?)`;
  return `cannot load function module ${module}: ${why}`;
}

/** expired says which limit ended a call: the server's --timeout, or the caller's deadline (as the handler says it). */
function expired(byTimeout: boolean, timeoutMs: number): HandlerResult {
  return { code: Code.DEADLINE_EXCEEDED, details: deadlineDetails(byTimeout ? timeoutMs : undefined) };
}
