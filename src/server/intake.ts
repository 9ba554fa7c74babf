// One RunFunction call from its start to its answer, before and around the
// function: admission (a place among --max-concurrency + --max-queue, fairly
// between connections: shares.ts), waiting for a body slot, reading the body
// within its deadlines, then handing the request to the handler or the pool.
// server.ts builds one Intake per server and registers its handle for v1 and
// v1beta1.
import { status as Code, type Metadata, type ServerReadableStream, type sendUnaryData } from "@grpc/grpc-js";
import { whenTooLarge } from "./frames.js";
import { Cancel, type CallInfo } from "./call.js";
import type { Refusals } from "./log.js";
import type { Shares, Ticket } from "./shares.js";
import type { CallTracer } from "../telemetry/calls.js";

/** WAIT_SLACK_MS: a call past its caller's deadline is answered this much before it, so the caller reads why. */
const WAIT_SLACK_MS = 100;

type Call = ServerReadableStream<Buffer, Uint8Array>;

/** What answers a request once it is in: the in-process handler or the worker pool. */
export interface Answerer {
  handle(
    request: Buffer,
    info: CallInfo & { deadline: number; cancel: Cancel; timeoutMs?: number },
  ): Promise<{ ok: Uint8Array } | { code: Code; details: string }>;
}

/** IntakeOptions are what every call of one server shares. */
export interface IntakeOptions {
  answerer: Answerer;
  /** Whether a worker pool answers (it applies --timeout itself). */
  pooled: boolean;
  shares: Shares;
  admitLimit: number;
  maxRecvMB: number;
  timeoutMs: number;
  bodyTimeoutMs: number;
  headers: Metadata | undefined;
  onCall: ((code: keyof typeof Code, seconds: number) => void) | undefined;
  busy: Refusals;
  /** Logs a request refused for what it holds (undecodable, over the size limit), with its peer. */
  refuseRequest: (call: Call, fields: Record<string, unknown>, details: string) => void;
  /** Calls in flight, cancelled on a forced stop so functions still running see their signal fire. */
  live: Set<Cancel>;
  /** When traces are exported: each call handed to the function gets a span (telemetry/calls.ts). */
  tracer?: CallTracer;
}

/** Intake serves RunFunction calls for one server. */
export class Intake {
  constructor(private readonly o: IntakeOptions) {}

  /** handler is the grpc-js handler of RunFunction for an API version. */
  handler(version: CallInfo["version"]): (call: Call, answer: sendUnaryData<Uint8Array>) => void {
    return (call, answer) => new IncomingCall(this.o, call, version, answer).start();
  }
}

/** connectionOf is what shares places: the call's HTTP/2 session (its TCP connection), or its peer. */
function connectionOf(call: Call): unknown {
  let c = (call as unknown as { call?: unknown }).call as { stream?: { session?: object }; nextCall?: unknown } | undefined;
  for (let i = 0; i < 4 && c; i++) {
    if (c.stream?.session) return c.stream.session;
    c = c.nextCall as typeof c;
  }
  return call.getPeer();
}

function deadlineOf(call: Call): number {
  const d = call.getDeadline();
  return d instanceof Date ? d.getTime() : d;
}

/** IncomingCall is one call, from admission to its answer. */
class IncomingCall {
  private readonly started = performance.now();
  private readonly callback: sendUnaryData<Uint8Array>;
  private readonly cancel = new Cancel();
  private readonly messages: Buffer[] = [];
  private ticket!: Ticket;
  private finished = false;
  private handed = false;
  private reading = false;
  private waitTimer: NodeJS.Timeout | undefined;
  private bodyTimer: NodeJS.Timeout | undefined;
  /** When the request must be in, and (in process) answered. */
  private readBy = Infinity;
  private callerDeadline = Infinity;

  constructor(
    private readonly o: IntakeOptions,
    private readonly call: Call,
    private readonly version: CallInfo["version"],
    answer: sendUnaryData<Uint8Array>,
  ) {
    const onCall = o.onCall;
    this.callback = onCall
      ? (err, value) => {
          onCall(
            err ? ((Code[err.code ?? Code.UNKNOWN] as keyof typeof Code | undefined) ?? "UNKNOWN") : "OK",
            (performance.now() - this.started) / 1000,
          );
          answer(err, value);
        }
      : answer;
  }

  start(): void {
    const { o, call, version } = this;
    const ticket = o.shares.admit(connectionOf(call), (held, limit) => {
      const details =
        `server busy: this connection holds ${held} of the ${limit} requests the server admits ` +
        `(--max-concurrency + --max-queue), and another connection's call took this one's place; retry later`;
      o.busy.refused({ code: "RESOURCE_EXHAUSTED", version, peer: call.getPeer() }, details);
      this.finish();
      this.callback({ code: Code.RESOURCE_EXHAUSTED, details });
    });
    if (!ticket) {
      const details =
        `server busy: ${o.shares.inFlight()} requests running or waiting ` +
        `(limit ${o.admitLimit}: --max-concurrency + --max-queue); retry later`;
      o.busy.refused({ code: "RESOURCE_EXHAUSTED", version }, details);
      this.callback({ code: Code.RESOURCE_EXHAUSTED, details });
      return;
    }
    this.ticket = ticket;
    // A request over --max-recv-message-size is refused by grpc-js as its length prefix
    // arrives; this has it said in the server's words, and logged, instead of silently.
    whenTooLarge(call, (size, max) => {
      const details =
        `request is ${size} bytes, larger than this function's limit of ${max} bytes ` +
        `(xfn serve --max-recv-message-size ${o.maxRecvMB}, in MB)`;
      o.refuseRequest(call, { code: "RESOURCE_EXHAUSTED", version, bytes: size, limit: max }, details);
      o.onCall?.("RESOURCE_EXHAUSTED", (performance.now() - this.started) / 1000);
      return details;
    });
    call.once("cancelled", this.onCancelled);
    o.live.add(this.cancel);
    this.callerDeadline = deadlineOf(call);
    // The request must be in by the caller's deadline, and within --timeout of the call's
    // start: a caller that sends no deadline and stops sending (or vanishes mid-body on a
    // half-open connection) would otherwise hold its admission and body slot for ever.
    this.readBy = Math.min(this.callerDeadline, Date.now() + o.timeoutMs);
    call.on("error", () => this.finish());
    ticket.acquire(this.readBody);
    if (Number.isFinite(this.readBy)) {
      const byTimeout = this.readBy < this.callerDeadline;
      this.waitTimer = setTimeout(
        () =>
          this.timedOut(
            byTimeout
              ? `the request did not arrive within the server's --timeout of ${o.timeoutMs / 1000} s`
              : this.reading
                ? "the deadline passed while the request was arriving"
                : "the deadline passed while the request waited to be read",
          ),
        // A little before the deadline, so that the caller reads why rather than its own timer's bare "deadline exceeded".
        Math.min(2 ** 31 - 1, Math.max(0, this.readBy - Date.now() - (byTimeout ? 0 : WAIT_SLACK_MS))),
      );
    }
  }

  private readonly finish = (): void => {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.waitTimer);
    clearTimeout(this.bodyTimer);
    this.ticket.release();
    this.call.removeListener("cancelled", this.onCancelled);
    this.o.live.delete(this.cancel);
    // A request answered before it was read (given up for another connection's call, or past its deadline):
    // what has arrived of it is read and dropped, not left in its stream (docs/serving.md, "Fairness").
    if (!this.handed) this.call.resume();
  };

  private readonly onCancelled = (): void => {
    this.cancel.cancel();
    // Once handed to the handler, the call finishes when the handler is done with
    // it; before that (waiting for a body slot, or mid-body), it finishes now.
    if (!this.handed) this.finish();
  };

  private timedOut(details: string): void {
    if (this.handed || this.finished) return;
    this.finish();
    this.callback({ code: Code.DEADLINE_EXCEEDED, details });
  }

  /**
   * readBody reads the body once a body slot is free: a call waiting for one
   * holds an HTTP/2 flow-control window of its bytes, not the whole request.
   * Once reading, it must be in within bodyTimeoutMs, so a caller trickling
   * its bytes gives its slot back to callers that send theirs.
   */
  private readonly readBody = (): void => {
    if (this.finished) return;
    this.reading = true;
    const { bodyTimeoutMs } = this.o;
    if (bodyTimeoutMs < this.readBy - Date.now())
      this.bodyTimer = setTimeout(
        () => this.timedOut(`the request did not finish arriving within ${bodyTimeoutMs / 1000} s of the server starting to read it`),
        bodyTimeoutMs,
      );
    this.call.on("data", (m: Buffer) => this.messages.push(m));
    this.call.on("end", this.onEnd);
  };

  /** onEnd hands the request, once whole, to the handler or the pool, and answers with what it says. */
  private readonly onEnd = (): void => {
    const { o, call, version } = this;
    clearTimeout(this.waitTimer);
    clearTimeout(this.bodyTimer);
    if (this.finished) return; // answered already: its time ran out while the body was arriving
    if (this.cancel.cancelled) return this.finish();
    if (this.messages.length !== 1) {
      this.finish();
      const details = `expected one RunFunctionRequest, got ${this.messages.length} messages`;
      o.refuseRequest(call, { code: "INVALID_ARGUMENT", version }, details);
      this.callback({ code: Code.INVALID_ARGUMENT, details });
      return;
    }
    this.handed = true;
    this.ticket.handed();
    if (o.headers) call.sendMetadata(o.headers.clone()); // admitted: refused calls return before onEnd can be registered
    // In process the function must also be done by readBy; the pool applies --timeout itself, naming it when it ends a call.
    const deadline = o.pooled ? this.callerDeadline : this.readBy;
    const span = o.tracer?.start(call.metadata, version, this.messages[0]!.length);
    o.answerer
      .handle(this.messages[0]!, {
        version,
        deadline,
        cancel: this.cancel,
        ...(!o.pooled && this.readBy < this.callerDeadline ? { timeoutMs: o.timeoutMs } : {}),
        ...(span ? { trace: true } : {}),
      })
      .then((res) => {
        span?.end(res);
        if ("ok" in res) return this.callback(null, res.ok);
        // The handler answers INVALID_ARGUMENT only for a request it cannot decode.
        if (res.code === Code.INVALID_ARGUMENT) o.refuseRequest(call, { code: "INVALID_ARGUMENT", version }, res.details);
        this.callback({ code: res.code, details: res.details });
      })
      .catch((err: unknown) => {
        const details = err instanceof Error ? err.message : String(err);
        span?.end({ code: Code.INTERNAL, details });
        this.callback({ code: Code.INTERNAL, details });
      })
      .finally(this.finish);
  };
}
