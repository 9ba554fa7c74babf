// Prometheus metrics for `xfn host` and `xfn serve` (prom-client), each on a
// registry of its own, served at /metrics on an address of their own. xfn
// serve exposes them only when asked (--metrics-address), as function-sdk-go
// does; xfn host, like Crossplane, by default.
import type { Logger } from "pino";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import { startHttpServer, type HttpServer, type Routes } from "./http.js";

/** HostMetrics are what the host loop reports. */
export interface HostMetrics {
  registry: Registry;
  reconciles: Counter<"result">;
  reconcileSeconds: Histogram;
  writes: Counter<"what">;
  skipped: Counter<"what">;
  functionCalls: Counter<"function" | "result">;
  functionSeconds: Histogram<"function">;
  errors: Counter<"where">;
  watchRestarts: Counter;
  leader: Gauge;
}

/** hostMetrics makes the host's metrics; queueDepth and watches are read when scraped. */
export function hostMetrics(queueDepth: () => number, watches: () => number): HostMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const r = [registry];
  new Gauge({
    name: "xfn_host_queue_depth",
    help: "XRs and XRDs waiting to be reconciled",
    registers: r,
    collect() {
      this.set(queueDepth());
    },
  });
  new Gauge({
    name: "xfn_host_watches",
    help: "kinds the host is watching",
    registers: r,
    collect() {
      this.set(watches());
    },
  });
  return {
    registry,
    reconciles: new Counter({
      name: "xfn_host_reconciles_total",
      help: "reconciles, by result (success, error)",
      labelNames: ["result"],
      registers: r,
    }),
    reconcileSeconds: new Histogram({
      name: "xfn_host_reconcile_duration_seconds",
      help: "how long one XR reconcile took",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: r,
    }),
    writes: new Counter({
      name: "xfn_host_api_writes_total",
      help: "writes to the API server, by what was written",
      labelNames: ["what"],
      registers: r,
    }),
    skipped: new Counter({
      name: "xfn_host_api_writes_skipped_total",
      help: "writes not made because they would change nothing, by what",
      labelNames: ["what"],
      registers: r,
    }),
    functionCalls: new Counter({
      name: "xfn_host_function_calls_total",
      help: "calls to composition functions, by function and result (ok, fatal, error)",
      labelNames: ["function", "result"],
      registers: r,
    }),
    functionSeconds: new Histogram({
      name: "xfn_host_function_call_duration_seconds",
      help: "how long a call to a composition function took",
      labelNames: ["function"],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers: r,
    }),
    errors: new Counter({ name: "xfn_host_errors_total", help: "errors, by where they happened", labelNames: ["where"], registers: r }),
    watchRestarts: new Counter({ name: "xfn_host_watch_restarts_total", help: "watches restarted after they failed", registers: r }),
    leader: new Gauge({
      name: "xfn_host_leader",
      help: "1 while this host holds the leader lease (or runs without leader election)",
      registers: r,
    }),
  };
}

/** ServeMetrics are what `xfn serve` reports. */
export interface ServeMetrics {
  registry: Registry;
  requests: Counter<"code">;
  requestSeconds: Histogram;
  workerRestarts: Counter;
}

/** serveMetrics makes the function server's metrics; inFlight is read when scraped. */
export function serveMetrics(inFlight: () => number): ServeMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const r = [registry];
  new Gauge({
    name: "xfn_function_requests_in_flight",
    help: "RunFunction calls running or queued",
    registers: r,
    collect() {
      this.set(inFlight());
    },
  });
  return {
    registry,
    requests: new Counter({
      name: "xfn_function_requests_total",
      help: "RunFunction calls answered, by gRPC status code (OK, INVALID_ARGUMENT, ...)",
      labelNames: ["code"],
      registers: r,
    }),
    requestSeconds: new Histogram({
      name: "xfn_function_request_duration_seconds",
      help: "how long a RunFunction call took, from its start to its answer",
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30],
      registers: r,
    }),
    workerRestarts: new Counter({
      name: "xfn_function_worker_restarts_total",
      help: "function worker threads replaced after they ended",
      registers: r,
    }),
  };
}

/** metricsRoute is the /metrics route of an HTTP server (http.ts) for registry. */
export function metricsRoute(registry: Registry): Routes {
  return { "/metrics": async () => ({ status: 200, type: registry.contentType, body: await registry.metrics() }) };
}

/** startMetricsServer serves registry at http://address/metrics, with more routes if given. It rejects naming the address if it cannot listen. */
export function startMetricsServer(address: string, registry: Registry, log: Logger, more: Routes = {}): Promise<HttpServer> {
  return startHttpServer(address, { ...metricsRoute(registry), ...more }, log, "metrics");
}
