// Refusing process.exit, process.abort and process.kill of its own process
// from function code that runs in a process it shares: xfn serve --workers 1,
// xfn test, xfn render, and process.kill on the pool's workers.
//
// A function that called process.exit(0) in the server's own thread ended the
// server with exit code 0 and nothing logged, dropping every call in flight;
// under xfn test it ended the run mid-way, with no summary. Now the call fails
// with a Fatal result naming what was called, in the same words everywhere, so
// a case recorded from a server replays unchanged. On a worker thread
// process.exit ends only that worker, which the pool replaces (pool.ts).

const refuse = (call: string): never => {
  throw new Error(
    `${call} was called by the function: it would end the process the function runs in, and every call there, so it is refused`,
  );
};

/**
 * refuseExit makes process.exit and process.abort throw, naming the call, and
 * process.kill too when it signals this process (refuseKill). It returns the
 * real process.exit for xfn's own use.
 */
export function refuseExit(): (code?: number) => never {
  const exit = process.exit.bind(process);
  process.exit = ((code?: number | string | null) => refuse(`process.exit(${code ?? ""})`)) as typeof process.exit;
  process.abort = (() => refuse("process.abort()")) as typeof process.abort;
  refuseKill();
  return exit;
}

/**
 * refuseKill makes process.kill throw when it would signal the process the
 * function runs in: its own pid, 0 (its process group), -1 (every process it
 * may signal) or its own group by number. On a worker thread too: the pid is
 * the whole server's, and process.kill(process.pid, "SIGTERM") from a worker
 * shut the server down. Signal 0 (is it alive?) and other processes are the
 * function's own business. xfn is no sandbox (a child process can still send
 * the signal); this stops the mistake, not an attack.
 */
export function refuseKill(): void {
  const kill = process.kill.bind(process);
  process.kill = ((pid: number, signal?: string | number) => {
    const n = Number(pid);
    if (signal !== 0 && (n === process.pid || n === 0 || n === -1 || n === -process.pid)) {
      // Named without the number a pid has in this process, so a case recorded from one replays in another.
      const who = n === process.pid ? "process.pid" : n === -process.pid ? "-process.pid" : String(n);
      refuse(`process.kill(${who}${signal === undefined ? "" : `, ${JSON.stringify(signal)}`})`);
    }
    return kill(pid, signal);
  }) as typeof process.kill;
}
