// The host's way to the API server: client-node's API clients and watches,
// bounded in time, so that an API server (or a network path) that stops
// answering never holds the host for ever.
//
// client-node sets no deadline of its own: a request on a connection that has
// gone silent (a NAT entry or load balancer that dropped it, a node that went
// away without a reset) waits for ever, and a watch on one never delivers
// another event. client-go has the same exposure and closes it with HTTP/2
// health pings and watch timeouts; client-node speaks HTTP/1.1 and has neither.
// So here:
// - every request is given up after a deadline, with an error that says so;
// - every watch asks the server to end it after a random 5 to 10 minutes, as
//   client-go's reflector does, with bookmarks so that it resumes where it was;
//   a watch still open a grace period after that has a dead connection and is
//   given up with an error, so the informer restarts it;
// - once the server has sent bookmarks on a kind's watch (kube-apiserver sends
//   one about every minute), a watch of that kind that stays silent much longer
//   than that is taken for dead too, which finds a dead connection in minutes
//   rather than at the watch's timeout.
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from "node:https";
import {
  createConfiguration,
  IsomorphicFetchHttpLibrary,
  KubernetesObjectApi,
  ServerConfiguration,
  Watch,
  wrapHttpLibrary,
  type Configuration,
  type KubeConfig,
  type RequestContext,
  type ResponseContext,
} from "@kubernetes/client-node";

/** seconds renders a duration in ms as seconds for a message ("0.5 s", "60 s"). */
const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

/** TimeoutError is a request the API server did not answer in time. */
export class TimeoutError extends Error {
  override name = "TimeoutError";
}

/**
 * bounded sends requests as client-node does, each given up after ms: the
 * caller gets a TimeoutError naming the request, and the request's
 * connections are closed. The deadline covers the response body too.
 *
 * client-node gives every request an HTTP agent of its own: a new connection
 * each time, and over TLS a handshake each time (to a TLS API server, xfn
 * dev-cluster's included, the host took 2.5 times as long and as much CPU).
 * Requests go instead through one kept-alive agent per TLS setting (keptAlive),
 * and a request past its deadline is aborted with its AbortSignal, which closes
 * its connection alone. The caller does not depend on it: the TimeoutError
 * comes at the deadline whatever the connection does.
 */
function bounded(ms: number) {
  const inner = new IsomorphicFetchHttpLibrary();
  return wrapHttpLibrary({
    async send(req: RequestContext): Promise<ResponseContext> {
      const own = req.getAgent();
      if (own) req.setAgent(keptAlive(own));
      const abort = new AbortController();
      req.setSignal(abort.signal);
      let expire = (_: Error) => {};
      const expired = new Promise<never>((_, reject) => (expire = reject));
      expired.catch(() => {}); // rejected at the deadline even when no race waits on it any more
      // setTimeout takes at most 2^31 - 1 ms (24.8 days); a longer wait would fire at once.
      const timer = setTimeout(
        () => {
          const path = new URL(req.getUrl()).pathname;
          expire(new TimeoutError(`${req.getHttpMethod()} ${path}: the API server did not answer within ${seconds(ms)}`));
          abort.abort();
        },
        Math.min(ms, 2 ** 31 - 1),
      );
      timer.unref();
      const settled = <T>(v: T) => (clearTimeout(timer), v);
      const failed = (err: unknown): never => {
        clearTimeout(timer);
        throw err;
      };
      const res = await Promise.race([inner.send(req).toPromise(), expired]).catch(failed);
      const body = res.body;
      res.body = {
        text: () => Promise.race([body.text(), expired]).then(settled, failed),
        binary: () => Promise.race([body.binary(), expired]).then(settled, failed),
      };
      return res;
    },
  });
}

/** Kept-alive agents by the TLS settings of the per-request agents client-node makes. */
const AGENTS = new Map<string, HttpAgent>();

/**
 * keptAlive is a kept-alive agent with the same TLS settings as own (CA,
 * client certificate, verification, server name), shared by every request
 * that has them. An agent of another kind (a proxy's) is left as it is.
 */
export function keptAlive(own: unknown): HttpAgent {
  const tls = own instanceof HttpsAgent && own.constructor === HttpsAgent;
  if (!tls && !(own instanceof HttpAgent && own.constructor === HttpAgent)) return own as HttpAgent;
  const o = ((own as { options?: Record<string, unknown> }).options ?? {}) as Record<string, unknown>;
  const picked = tls
    ? {
        ca: o["ca"],
        cert: o["cert"],
        key: o["key"],
        pfx: o["pfx"],
        passphrase: o["passphrase"],
        rejectUnauthorized: o["rejectUnauthorized"],
        servername: o["servername"],
      }
    : {};
  const key = JSON.stringify([tls, picked], (_k, v: unknown) => (Buffer.isBuffer(v) ? v.toString("base64") : v));
  let agent = AGENTS.get(key);
  if (!agent) {
    const settings = Object.fromEntries(Object.entries(picked).filter(([, v]) => v !== undefined));
    agent = tls ? new HttpsAgent({ ...settings, keepAlive: true }) : new HttpAgent({ keepAlive: true });
    AGENTS.set(key, agent);
  }
  return agent;
}

/** configuration is what kc.makeApiClient gives an API client, with requests bounded by timeoutMs. */
function configuration(kc: KubeConfig, timeoutMs: number): Configuration {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("the kubeconfig has no current cluster");
  return createConfiguration({
    baseServer: new ServerConfiguration(cluster.server, {}),
    authMethods: { default: kc },
    httpApi: bounded(timeoutMs),
  });
}

/** apiClient makes a client-node API client (CustomObjectsApi, CoreV1Api, ...) whose requests end within timeoutMs. */
export function apiClient<T>(kc: KubeConfig, Api: new (c: Configuration) => T, timeoutMs: number): T {
  return new Api(configuration(kc, timeoutMs));
}

/** objectClient is KubernetesObjectApi.makeApiClient with requests that end within timeoutMs. */
export function objectClient(kc: KubeConfig, timeoutMs: number): KubernetesObjectApi {
  return new Objects(configuration(kc, timeoutMs), kc);
}

class Objects extends KubernetesObjectApi {
  constructor(c: Configuration, kc: KubeConfig) {
    super(c);
    this.setDefaultNamespace(kc);
  }
}

/** WatchTiming sets how long watches last. */
export interface WatchTiming {
  /** The range (ms) each watch's timeoutSeconds is drawn from. Default 5 to 10 minutes, as client-go's reflector. */
  timeoutMs?: readonly [number, number] | undefined;
  /** How long past its timeout a watch may stay open before it is taken for dead. Default 30 s. */
  graceMs?: number | undefined;
  /**
   * How long a watch may go without a byte once the server has shown that it
   * sends bookmarks on this kind's watches. Default 150 s: kube-apiserver's
   * watch cache sends each watch a bookmark about every minute.
   */
  idleMs?: number | undefined;
}

type Done = (err: unknown) => void;
type Callback = (phase: string, apiObj: unknown, watchObj?: unknown) => void;

/**
 * BoundedWatch is client-node's Watch (ListWatch uses it) with a deadline: it
 * asks the server for bookmarks and to end the watch after timeoutSeconds, and
 * gives the watch up with an error if it is still open graceMs after that.
 * Aborting it (ListWatch does when it stops) ends it without calling done.
 *
 * One BoundedWatch serves every watch of one kind, one after the other. Once
 * a bookmark has come on one of them, the server is known to send them, and
 * every watch after that is also given up if nothing at all comes on it for
 * idleMs. The Kubernetes API does not promise bookmarks at any interval, or
 * at all, so until one is seen nothing is assumed; and a watch given up for
 * silence makes the next watch learn again, so a server that stops sending
 * them costs one restart, not one per idleMs.
 */
export class BoundedWatch extends Watch {
  private readonly range: readonly [number, number];
  private readonly graceMs: number;
  private readonly idleMs: number;
  /** Whether the server has sent a bookmark on a watch of this kind since the last one given up for silence. */
  private beats = false;

  constructor(
    kc: KubeConfig,
    private readonly what: string,
    t: WatchTiming = {},
  ) {
    super(kc);
    this.range = t.timeoutMs ?? [300_000, 600_000];
    this.graceMs = t.graceMs ?? 30_000;
    this.idleMs = t.idleMs ?? 150_000;
  }

  override async watch(path: string, queryParams: Record<string, unknown>, callback: Callback, done: Done): Promise<AbortController> {
    const controller = new AbortController();
    const [lo, hi] = this.range;
    const secs = Math.max(1, Math.round((lo + Math.random() * (hi - lo)) / 1000));
    let ended = false;
    let req: ReturnType<typeof httpRequest> | undefined;
    let idle: NodeJS.Timeout | undefined;
    const end = (err: unknown) => {
      if (ended) return;
      ended = true;
      clearTimeout(deadline);
      clearTimeout(idle);
      req?.destroy();
      done(err);
    };
    const silent = () => {
      if (ended) return;
      this.beats = false;
      end(
        new TimeoutError(
          `the watch of ${this.what} has been silent for ${seconds(this.idleMs)}, though the server sends bookmarks on it; ` +
            "its connection seems dead",
        ),
      );
    };
    const listen = () => {
      idle = setTimeout(silent, this.idleMs);
      idle.unref();
    };
    const deadline = setTimeout(
      () =>
        end(
          new TimeoutError(
            `the watch of ${this.what} is still open ${seconds(this.graceMs)} past the ${secs} s the server was asked to end it in; ` +
              "its connection seems dead",
          ),
        ),
      secs * 1000 + this.graceMs,
    );
    deadline.unref();
    controller.signal.addEventListener("abort", () => {
      ended = true;
      clearTimeout(deadline);
      clearTimeout(idle);
      req?.destroy();
    });
    try {
      const cluster = this.config.getCurrentCluster();
      if (!cluster) throw new Error("the kubeconfig has no current cluster");
      const url = new URL(cluster.server + path);
      url.searchParams.set("watch", "true");
      for (const [k, v] of Object.entries(queryParams)) if (v !== undefined) url.searchParams.set(k, String(v));
      url.searchParams.set("allowWatchBookmarks", "true");
      url.searchParams.set("timeoutSeconds", String(secs));
      const opts: RequestOptions = {};
      await this.config.applyToHTTPSOptions(opts);
      if (ended) return controller;
      req = (url.protocol === "https:" ? httpsRequest : httpRequest)(url, { ...opts, method: "GET" });
      req.on("error", end);
      // Armed before the answer: a watch whose request is never answered is silent too.
      if (this.beats) listen();
      req.on("response", (res: IncomingMessage) => {
        res.setEncoding("utf8");
        if (res.statusCode !== 200) {
          // The Status that says why; an answer that is not one is read no further than 64 KiB.
          let text = "";
          res.on("data", (c: string) => {
            if (text.length < 65_536) text += c;
          });
          res.on("close", () => end(statusError(res.statusCode ?? 0, text)));
          return;
        }
        let rest = "";
        res.on("data", (chunk: string) => {
          idle?.refresh();
          let from = 0;
          for (let nl = chunk.indexOf("\n"); nl >= 0; nl = chunk.indexOf("\n", from)) {
            const line = rest + chunk.slice(from, nl);
            rest = "";
            from = nl + 1;
            if (!ended && deliver(line, callback) === "BOOKMARK" && !idle) {
              this.beats = true;
              listen();
            }
          }
          rest += chunk.slice(from);
        });
        res.on("end", () => {
          if (!ended && rest) deliver(rest, callback);
          end(null);
        });
        res.on("error", end);
        res.on("close", () => end(res.complete ? null : new Error(`the watch of ${this.what} was cut off`)));
      });
      req.end();
    } catch (err) {
      end(err);
    }
    return controller;
  }
}

/** deliver passes one line of a watch on as an event, and returns its type. */
function deliver(line: string, callback: Callback): string | undefined {
  if (!line.trim()) return undefined;
  let data: { type?: string; object?: unknown };
  try {
    data = JSON.parse(line) as typeof data;
  } catch {
    return undefined; // as client-node's Watch: a line that is not JSON is skipped
  }
  const type = String(data.type);
  callback(type, data.object, data);
  return type;
}

/** statusError is the error for a watch the server refused, with the code ListWatch looks for (410 Gone). */
function statusError(code: number, body: string): Error {
  let message = `the API server answered ${code}`;
  try {
    const s = JSON.parse(body) as { message?: string };
    if (s.message) message += `: ${s.message}`;
  } catch {
    // not a Status
  }
  return Object.assign(new Error(message), { statusCode: code });
}
