// The contract between xfn and a composition function.
//
// A function is a plain (possibly async) function from request to response.
// A module served by `xfn serve <module>` exports one as its default export,
// or as a named export `runFunction`. Wrapping it in defineFunction only adds
// type checking.
import type { Logger } from "pino";
import type { RunFunctionRequest, RunFunctionResponse } from "./gen/fn/v1/run_function_pb.js";

/**
 * RunContext is what the server hands a function with each request. The
 * server's signal and log are getters, made when first read (most functions
 * read neither): read or destructure them; spreading the context does not copy them.
 */
export interface RunContext {
  /** Aborted when the caller's deadline passes, it cancels, or the server stops. */
  readonly signal: AbortSignal;
  /** A structured logger already carrying the request's tag. Never log credentials. */
  readonly log: Logger;
  /** The clock. Functions read time only from here, so tests can fix it. */
  readonly now: () => Date;
}

/** RunFunction computes one pipeline step's response. */
export type RunFunction = (req: RunFunctionRequest, ctx: RunContext) => RunFunctionResponse | Promise<RunFunctionResponse>;

/** defineFunction returns fn unchanged; it exists for type inference in function modules. */
export function defineFunction(fn: RunFunction): RunFunction {
  return fn;
}
