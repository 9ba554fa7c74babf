// What a pipeline tells an observer of each step it runs: a Pipeline
// Inspector (inspect/emitter.ts, for xfn host --inspector-socket), or a test.
// The engine calls it; what observes sits above the engine and implements it.
import type { RunFunctionRequest, RunFunctionResponse } from "../gen/fn/v1/run_function_pb.js";

/** What a pipeline tells its inspector of one step. */
export interface StepInfo {
  traceId: string;
  stepIndex: number;
  stepName: string;
  functionName: string;
  /** The Composition and XR, for a composition's pipeline; the Operation, for an operation's. */
  composition?: { name: string; xr: { apiVersion: string; kind: string; name: string; namespace: string; uid: string } };
  operation?: { name: string; uid: string };
}

/** StepObserver is told of each step: its request before the call, its response or error after. */
export interface StepObserver {
  /** begin is called before the step's call; the function it returns, after it. */
  begin(step: StepInfo, req: RunFunctionRequest): Promise<(rsp: RunFunctionResponse | undefined, err: Error | undefined) => Promise<void>>;
  close(): void;
}
