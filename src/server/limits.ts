// The serving defaults that size a worker's heap (memory.ts), in a module of
// their own: a bundled function's launcher (cli/launch.ts) works the heap
// out from them before the server's code has loaded, to start the first
// worker early, and must work it out as `xfn serve` does.
import { usableCores } from "./cpus.js";

/**
 * DEFAULT_WORKERS is one worker per core the process may use (a container's
 * CPU limit counts, cpus.ts), plus one: with every core's worker busy on a
 * long call, a short one still finds a free worker instead of queueing behind
 * a long one (bench/pool.ts, 2 cores: small-call
 * p99 beside N=1000 traffic 3.2x alone with 3 workers, 4.9x with 2).
 */
export const DEFAULT_WORKERS = usableCores() + 1;

/** --max-concurrency, --max-queue and --max-recv-message-size (MB) when not given. */
export const DEFAULT_MAX_CONCURRENCY = 16;
export const DEFAULT_MAX_QUEUE = 128;
export const DEFAULT_MAX_RECV_MB = 4;

/**
 * STREAM_WINDOW and CONNECTION_WINDOW are the HTTP/2 receive windows the
 * server grants. grpc-js leaves Node's default of 64 KiB for both, so a
 * caller sending a 3.5 MiB request waits for a window update every 64 KiB
 * (55 round trips), and all calls on one connection share one 64 KiB window.
 * grpc-go's server grows its windows up to 16 MiB as it measures the link;
 * these are fixed instead. A call waiting for a body slot (see serve) holds at
 * most one stream window of unread bytes, and the window is below the largest
 * request, so the memory bound in docs/serving.md is unchanged.
 */
export const STREAM_WINDOW = 1024 * 1024;
export const CONNECTION_WINDOW = 16 * 1024 * 1024;
