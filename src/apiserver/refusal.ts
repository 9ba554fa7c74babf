// The 422 Invalid answer of a write whose object has field errors, as kube-apiserver words it.
import { ApiError } from "./errors.js";
import { body, message, text, type FieldError } from "../schema/fielderr.js";

/**
 * MAX_REFUSAL_BYTES bounds what a refusal's errors may write, in its message
 * and its causes each: a create with 10,000 values a 1,000-value enum refuses
 * made a 341 MB answer (and froze the server building it). Past the bound, the
 * errors are counted, not written.
 */
export const MAX_REFUSAL_BYTES = 1024 * 1024;

/** refusal is the 422 Invalid a write with errs gets, with one cause per error (as many as MAX_REFUSAL_BYTES holds). */
export function refusal(group: string, kind: string, name: string, errs: FieldError[]): ApiError {
  const qualified = group ? `${kind}.${group}` : kind;
  let shown = errs.length;
  let bytes = 0;
  for (let i = 0; i < errs.length; i++) {
    bytes += text(errs[i]!).length + 2;
    if (bytes > MAX_REFUSAL_BYTES) {
      shown = Math.max(1, i);
      break;
    }
  }
  const kept = shown < errs.length ? errs.slice(0, shown) : errs;
  const more = errs.length - kept.length;
  const rest = more ? ` (and ${more} more errors, not shown: the answer holds at most 1 MiB of them)` : "";
  const msg = message(qualified, name, kept) + rest;
  return Object.assign(new ApiError(422, "Invalid", msg), {
    details: {
      name,
      group,
      kind,
      causes: kept.map((e) => ({ reason: e.type, message: body(e), field: e.field })),
    },
  });
}
