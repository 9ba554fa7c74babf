// Kubernetes Events about XRs: what the functions reported (their results) and
// what the host itself ran into, where `kubectl describe` shows them.
//
// An event is written when it is new for the XR, or again (its count raised,
// its message the latest) when it has been true for REFRESH_MS: a reconcile
// that finds nothing new writes none. Messages that differ only in their
// numbers ("blocked for 6m" then "for 7m") count as the same event. Events are
// core/v1 Events, named after the XR and a hash of what they say, in the XR's
// namespace ("default" for a cluster-scoped XR, as Kubernetes files events
// about cluster-scoped objects).
import { createHash } from "node:crypto";
import { hostname } from "node:os";
import type { JsonObject } from "@bufbuild/protobuf";
import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { apiClient } from "./client.js";
import { apiMessage, errorCode, metaOf, now } from "./kube.js";

/** HostEvent is one thing to say about an XR. */
export interface HostEvent {
  type: "Normal" | "Warning";
  reason: string;
  message: string;
}

/** REFRESH_MS is how long an event that stays true goes before it is written again. */
export const REFRESH_MS = 10 * 60_000;
const MAX_MESSAGE = 1024;
export const EVENT_SOURCE = "xfn-host";

interface Sent {
  name: string;
  namespace: string;
  count: number;
  at: number;
}

/** EventRecorder writes Events, each at most once per REFRESH_MS while it stays the same. */
export class EventRecorder {
  private readonly api: CoreV1Api;
  /** Per XR uid, what was written last, by event key. */
  private readonly sent = new Map<string, Map<string, Sent>>();
  private readonly instance = hostname();

  constructor(
    kc: KubeConfig,
    private readonly log: Logger,
    timeoutMs = 60_000,
    private readonly clock: () => number = Date.now,
  ) {
    this.api = apiClient(kc, CoreV1Api, timeoutMs);
  }

  /** record writes what is new (or due again) among events about xr. It never throws: a failed write is logged. */
  async record(xr: JsonObject, events: HostEvent[]): Promise<number> {
    const m = metaOf(xr);
    const uid = String(m["uid"]);
    const mine = this.sent.get(uid) ?? this.sent.set(uid, new Map()).get(uid)!;
    let written = 0;
    for (const e of events) {
      const message = e.message.length > MAX_MESSAGE ? `${e.message.slice(0, MAX_MESSAGE - 3)}...` : e.message;
      const key = `${e.type}\n${e.reason}\n${message.replace(/\d+/g, "#")}`;
      const last = mine.get(key);
      if (last && this.clock() - last.at < REFRESH_MS) continue;
      try {
        mine.set(key, last ? await this.bump(last, message) : await this.create(xr, e.type, e.reason, message, key));
        written++;
      } catch (err) {
        this.log.warn({ xr: m["name"], reason: e.reason, err: apiMessage(err) }, "cannot write an event");
      }
    }
    return written;
  }

  /** forget drops what was written about an XR that is gone. */
  forget(uid: string): void {
    this.sent.delete(uid);
  }

  private async create(xr: JsonObject, type: string, reason: string, message: string, key: string): Promise<Sent> {
    const m = metaOf(xr);
    const namespace = typeof m["namespace"] === "string" ? m["namespace"] : "default";
    const name = `${String(m["name"])}.${createHash("sha256")
      .update(`${String(m["uid"])}\n${key}`)
      .digest("hex")
      .slice(0, 16)}`;
    const at = now();
    const body = {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name, namespace },
      involvedObject: {
        apiVersion: String(xr["apiVersion"]),
        kind: String(xr["kind"]),
        name: String(m["name"]),
        ...(typeof m["namespace"] === "string" ? { namespace: m["namespace"] } : {}),
        uid: String(m["uid"]),
        resourceVersion: String(m["resourceVersion"] ?? ""),
      },
      type,
      reason,
      message,
      source: { component: EVENT_SOURCE },
      reportingComponent: EVENT_SOURCE,
      reportingInstance: this.instance,
      firstTimestamp: at,
      lastTimestamp: at,
      count: 1,
    };
    try {
      await this.api.createNamespacedEvent({ namespace, body: body as never });
      return { name, namespace, count: 1, at: this.clock() };
    } catch (err) {
      // Written before (by this host before a restart): count this one on it.
      if (errorCode(err) !== 409) throw err;
      const existing = await this.api.readNamespacedEvent({ name, namespace });
      return this.bump({ name, namespace, count: existing.count ?? 1, at: 0 }, message);
    }
  }

  private async bump(s: Sent, message: string): Promise<Sent> {
    const count = s.count + 1;
    await this.api.patchNamespacedEvent(
      { name: s.name, namespace: s.namespace, body: { count, message, lastTimestamp: now() } as never },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    return { ...s, count, at: this.clock() };
  }
}
