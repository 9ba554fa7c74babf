// Refusing process.exit and process.abort from function code that runs in a
// process it shares: xfn serve --workers 1, xfn test, xfn render.
//
// A function that called process.exit(0) in the server's own thread ended the
// server with exit code 0 and nothing logged, dropping every call in flight;
// under xfn test it ended the run mid-way, with no summary. Now the call fails
// with a Fatal result naming what was called, in the same words everywhere, so
// a case recorded from a server replays unchanged. On a worker thread
// process.exit ends only that worker, which the pool replaces (pool.ts).

/**
 * refuseExit makes process.exit and process.abort throw, naming the call, and
 * returns the real process.exit for xfn's own use.
 */
export function refuseExit(): (code?: number) => never {
  const exit = process.exit.bind(process);
  const refuse = (call: string) => () => {
    throw new Error(
      `${call} was called by the function: it would end the process the function runs in, and every call there, so it is refused`,
    );
  };
  process.exit = ((code?: number | string | null) => refuse(`process.exit(${code ?? ""})`)()) as typeof process.exit;
  process.abort = refuse("process.abort()") as typeof process.abort;
  return exit;
}
