// Leader election on a coordination.k8s.io/v1 Lease, as client-go's
// leaderelection does, so that of several `xfn host` replicas only one
// reconciles at a time. A candidate takes the Lease when it is free or its
// holder has not renewed it for leaseDuration (judged by when this candidate
// last saw it change, not by the holder's clock); the leader renews every
// retryPeriod and steps down if it cannot renew within renewDeadline. Writes
// carry the Lease's resourceVersion, so two candidates never both win.
//
// The step-down does not wait for a request to fail: a request to an API
// server that no longer answers could hang past leaseDuration, and the other
// replica would lead while this one still thought it did. A timer steps down
// at the deadline whatever the attempt in flight is doing, and each request
// is given up after renewDeadline (as client-go bounds each attempt).
import { CoordinationV1Api, type KubeConfig, type V1Lease } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { apiClient } from "./client.js";
import { apiMessage, errorCode } from "./kube.js";

/** LeaderElectionOptions configure a candidate. Defaults are client-go's: 15 s, 10 s, 2 s. */
export interface LeaderElectionOptions {
  namespace: string;
  name: string;
  /** This candidate's identity (hostname and a random part, by default in the CLI). */
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
}

/** Elector campaigns for a Lease and tells when it starts and stops leading. */
export class Elector {
  private readonly api: CoordinationV1Api;
  private leading = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  /** Armed at each renewal while leading: fires at the renew deadline. */
  private deadline: NodeJS.Timeout | undefined;
  private observed: { key: string; at: number } | undefined;
  private lastRenew = 0;
  private readonly leaseMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryMs: number;

  constructor(
    kc: KubeConfig,
    private readonly o: LeaderElectionOptions,
    private readonly log: Logger,
    private readonly on: { started(): void; stopped(): void },
    private readonly clock: () => number = Date.now,
  ) {
    this.leaseMs = o.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = o.renewDeadlineMs ?? 10_000;
    this.api = apiClient(kc, CoordinationV1Api, this.renewDeadlineMs);
    this.retryMs = o.retryPeriodMs ?? 2_000;
  }

  /** isLeader tells whether this candidate leads now. */
  isLeader(): boolean {
    return this.leading;
  }

  /** start campaigns until stop. */
  start(): void {
    this.log.info({ lease: `${this.o.namespace}/${this.o.name}`, identity: this.o.identity }, "campaigning for leadership");
    void this.tick();
  }

  /**
   * stop ends the campaign. With release, a leader gives the Lease up at once
   * (so another replica need not wait out its duration); without, it just
   * stops renewing, as a crashed one would.
   */
  async stop(release = true): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.deadline);
    if (this.leading && release) {
      try {
        const lease = await this.api.readNamespacedLease({ namespace: this.o.namespace, name: this.o.name });
        if (lease.spec?.holderIdentity === this.o.identity) {
          lease.spec = { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1, renewTime: micro(new Date(this.clock())) as never };
          await this.api.replaceNamespacedLease({ namespace: this.o.namespace, name: this.o.name, body: lease });
        }
      } catch (err) {
        this.log.warn({ err: apiMessage(err) }, "cannot release the leader lease");
      }
    }
    if (this.leading) this.lose("stopped");
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    let ok = false;
    try {
      ok = await this.tryAcquireOrRenew();
    } catch (err) {
      this.log.debug({ err: apiMessage(err) }, "leader election attempt failed");
    }
    if (this.stopped) return;
    if (ok) {
      this.lastRenew = this.clock();
      clearTimeout(this.deadline);
      this.deadline = setTimeout(() => this.overdue(), this.renewDeadlineMs);
      if (!this.leading) {
        this.leading = true;
        this.log.info({ identity: this.o.identity }, "became the leader");
        this.on.started();
      }
    } else if (this.leading && this.clock() - this.lastRenew > this.renewDeadlineMs) {
      this.lose(`could not renew the lease within ${this.renewDeadlineMs} ms`);
    }
    this.timer = setTimeout(() => void this.tick(), this.retryMs);
  }

  /** overdue runs at the renew deadline: a leader that has not renewed since steps down, whatever its attempt in flight is doing. */
  private overdue(): void {
    if (this.stopped || !this.leading) return;
    const since = this.clock() - this.lastRenew;
    if (since >= this.renewDeadlineMs) this.lose(`could not renew the lease within ${this.renewDeadlineMs} ms`);
    else this.deadline = setTimeout(() => this.overdue(), this.renewDeadlineMs - since);
  }

  private lose(why: string): void {
    clearTimeout(this.deadline);
    this.leading = false;
    this.log.warn({ identity: this.o.identity, why }, "stopped leading");
    this.on.stopped();
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity } = this.o;
    const now = new Date(this.clock());
    const spec = (held: V1Lease["spec"], taking: boolean) => ({
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(this.leaseMs / 1000),
      acquireTime: (taking ? micro(now) : (held?.acquireTime ?? micro(now))) as never,
      renewTime: micro(now) as never,
      leaseTransitions: (held?.leaseTransitions ?? 0) + (taking && held?.holderIdentity ? 1 : 0),
    });
    let lease: V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ namespace, name });
    } catch (err) {
      if (errorCode(err) !== 404) throw err;
      await this.api.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec: spec(undefined, true) } });
      return true;
    }
    const held = lease.spec;
    const holder = held?.holderIdentity ?? "";
    // When did this candidate last see the record change? A holder that keeps
    // renewing changes it every retryPeriod.
    const key = `${holder}\n${String(held?.renewTime ?? "")}\n${lease.metadata?.resourceVersion ?? ""}`;
    if (this.observed?.key !== key) this.observed = { key, at: this.clock() };
    const duration = (held?.leaseDurationSeconds ?? Math.ceil(this.leaseMs / 1000)) * 1000;
    if (holder !== "" && holder !== identity && this.observed.at + duration > this.clock()) return false;
    lease.spec = spec(held, holder !== identity);
    try {
      await this.api.replaceNamespacedLease({ namespace, name, body: lease });
    } catch (err) {
      if (errorCode(err) === 409) return false; // another candidate wrote first
      throw err;
    }
    return true;
  }
}

/** micro formats a time as a Kubernetes MicroTime (RFC 3339 with microseconds). */
function micro(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}
