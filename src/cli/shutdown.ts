// How every long-running command (serve, host, dev-cluster, inspect) ends: on
// SIGTERM or SIGINT, or, when npm started it (`npx xfn host &`), once npm is
// gone. Each says why it stops in one log line, stops what it runs, and exits
// 0; a stop that fails exits 1, naming why.
import type { Logger } from "pino";
import { messageOf } from "../sdk/errors.js";

/** How often a command started by npm looks whether npm is still its parent. */
export const PARENT_POLL_MS = 250;

export interface ShutdownOptions {
  /** Ends the process (default process.exit; serve passes the one a function cannot call from the server's thread). */
  exit?: (code: number) => void;
  /** The line logged once stopped (with what stop() returned), if the command logs none of its own. */
  stoppedMsg?: string;
  /** Whether npm started this process, whose end should end it too (default: npm's npm_command is set). */
  underNpm?: boolean;
}

export interface Shutdown {
  /** stopping is true once a signal came or the parent went. */
  readonly stopping: boolean;
  /**
   * ready hands over how to stop gracefully, once there is something to stop.
   * Before it is called a stop exits at once: nothing has started that could
   * be left half done.
   */
  ready(stop: () => Promise<Record<string, unknown> | void>): void;
}

/**
 * onShutdown installs the stop of a long-running command. npx does not pass
 * a signal on to the command it runs: in a script, `kill %1` of `npx xfn host
 * &` ended npx and left xfn running, orphaned, on its port. A command npm
 * started therefore also stops when its parent process ends.
 */
export function onShutdown(log: Logger, opts: ShutdownOptions = {}): Shutdown {
  const exit = opts.exit ?? ((code: number) => process.exit(code));
  let stop: (() => Promise<Record<string, unknown> | void>) | undefined;
  let stopping = false;
  const begin = (fields: Record<string, unknown>, msg: string) => {
    if (stopping) return;
    stopping = true;
    clearInterval(watch);
    if (!stop) {
      log.info(fields, `${msg} before start-up finished; exiting`);
      exit(0);
      return;
    }
    log.info(fields, msg);
    stop().then(
      (said) => {
        if (opts.stoppedMsg) log.info(said ?? {}, opts.stoppedMsg);
        exit(0);
      },
      (err: unknown) => {
        log.error({ err: messageOf(err) }, "cannot stop cleanly");
        exit(1);
      },
    );
  };
  process.once("SIGTERM", () => begin({ signal: "SIGTERM" }, "signal received"));
  process.once("SIGINT", () => begin({ signal: "SIGINT" }, "signal received"));
  const parent = process.ppid;
  const watch =
    (opts.underNpm ?? process.env["npm_command"] !== undefined)
      ? setInterval(() => {
          if (process.ppid !== parent) begin({ parent }, "the npm process that started this one ended (npx passes on no signal); stopping");
        }, PARENT_POLL_MS).unref()
      : undefined;
  return {
    get stopping() {
      return stopping;
    },
    ready(s) {
      stop = s;
    },
  };
}
