// Errors the SDK throws, by kind, so that a function can tell them apart
// (instanceof) and see what caused them (cause, as in ES2022). A function that
// lets one escape gets a Fatal result carrying its message and its causes'.

/** XfnError is the base of every error the SDK throws. */
export class XfnError extends Error {
  override readonly name: string = "XfnError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** UsageError: a call the SDK cannot honour as made (a condition type Crossplane reserves, readiness of a resource not desired). */
export class UsageError extends XfnError {
  override readonly name: string = "UsageError";
}

/** EncodingError: a value handed to a response setter that the wire cannot carry; path says where in it. */
export class EncodingError extends XfnError {
  override readonly name: string = "EncodingError";
  constructor(
    message: string,
    /** Where in the value, e.g. `.spec.when` or `[2]`; empty for the value itself. */
    readonly path: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * InputError: input that does not parse or make sense: a function's input (the
 * parser's error is the cause), or the files and flags given to an xfn command.
 */
export class InputError extends XfnError {
  override readonly name: string = "InputError";
}

/**
 * describeError gives err's message followed by those of its causes not
 * already part of it ("cannot parse input: ...: ..."), for a Fatal result or a
 * log line. Whatever was thrown, it never throws.
 */
export function describeError(err: unknown): string {
  let text = messageOf(err);
  const seen = new Set<unknown>([err]);
  try {
    let cause = err instanceof Error ? err.cause : undefined;
    while (cause !== undefined && !seen.has(cause) && seen.size < 8) {
      seen.add(cause);
      const m = messageOf(cause);
      if (m && !text.includes(m)) text += `: ${m}`;
      cause = cause instanceof Error ? cause.cause : undefined;
    }
  } catch {
    // A cause whose getter throws: what we have is the message.
  }
  return text;
}

/**
 * messageOf says what was thrown, whatever it is: an Error whose message
 * getter throws, an object with no prototype (String() throws on it), a
 * Symbol. Describing a failure must never fail.
 */
export function messageOf(err: unknown): string {
  try {
    if (err instanceof Error) return String(err.message);
    // An error from another realm (a vm context) is no instanceof Error here, but says what it is all the same.
    if (typeof err === "object" && err !== null && typeof (err as { message?: unknown }).message === "string")
      return (err as { message: string }).message;
    return String(err);
  } catch {
    try {
      const name = Object.prototype.toString.call(err);
      return `a thrown ${name} that cannot be shown as text`;
    } catch {
      return "a thrown value that cannot be shown as text";
    }
  }
}
