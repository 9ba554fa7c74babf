// Query parameters read as kube-apiserver's parameter codec reads them: a
// malformed number or resourceVersion is refused with Go's words instead of
// being taken as absent.
import { ApiError } from "./errors.js";

const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

/**
 * int64Param reads an integer parameter (limit, timeoutSeconds) as
 * strconv.ParseInt does: 400 BadRequest with its message when it is not one.
 * Absent: undefined.
 */
export function int64Param(q: URLSearchParams, name: string): number | undefined {
  const v = q.get(name);
  if (v === null) return undefined;
  if (!/^[+-]?\d+$/.test(v)) throw new ApiError(400, "BadRequest", `strconv.ParseInt: parsing ${JSON.stringify(v)}: invalid syntax`);
  const n = BigInt(v);
  if (n > INT64_MAX || n < -INT64_MAX - 1n)
    throw new ApiError(400, "BadRequest", `strconv.ParseInt: parsing ${JSON.stringify(v)}: value out of range`);
  return Number(n);
}

/**
 * resourceVersionParam reads a resourceVersion as the storage layer parses
 * one (ParseUint). kube-apiserver 1.31 answers a malformed one with a 500
 * (kubernetes#139485, to be a 400 by #139525); it is the client's fault, and
 * here a 400 BadRequest, with the same message.
 */
export function resourceVersionParam(q: URLSearchParams): string | null {
  const v = q.get("resourceVersion");
  if (v === null || v === "") return v;
  const bad = (why: string) =>
    new ApiError(
      400,
      "BadRequest",
      `resourceVersion: Invalid value: ${JSON.stringify(v)}: strconv.ParseUint: parsing ${JSON.stringify(v)}: ${why}`,
    );
  if (!/^\d+$/.test(v)) throw bad("invalid syntax");
  if (BigInt(v) > UINT64_MAX) throw bad("value out of range");
  return v;
}

/**
 * MAX_DEPTH is how deeply a request's JSON may nest here. kube-apiserver's
 * decoder allows 10,000 levels (Go's encoding/json); this server copies and
 * walks objects recursively, and past about 1,500 levels the JavaScript stack
 * runs out, so it refuses deeper bodies plainly, with room to spare
 * (docs/dev-cluster.md lists the difference).
 */
export const MAX_DEPTH = 1000;

export { MAX_REQUEST_BODY_BYTES } from "../schema/celsize.js";

/** checkDepth refuses (400) a value nested deeper than MAX_DEPTH, counting without recursion. */
export function checkDepth(v: unknown, what = "the request body"): void {
  const stack: Array<[unknown, number]> = [[v, 1]];
  while (stack.length) {
    const [x, d] = stack.pop()!;
    if (x === null || typeof x !== "object") continue;
    if (d > MAX_DEPTH)
      throw new ApiError(
        400,
        "BadRequest",
        `${what} nests deeper than ${MAX_DEPTH} levels, the most this server takes (kube-apiserver's is 10000)`,
      );
    for (const c of Array.isArray(x) ? x : Object.values(x)) if (c !== null && typeof c === "object") stack.push([c, d + 1]);
  }
}
