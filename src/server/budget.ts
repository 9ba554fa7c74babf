// A response's size against the limit its caller accepts (Crossplane's
// client: grpc-go's default 4 MiB): which parts of it are largest, said where
// a response is refused for its size, and warned of from WARN_SHARE of the
// limit, so that a pipeline about to outgrow it is seen before it does
// (crossplane #6392, function-sdk-go #194).
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { RunFunctionResponseSchema, StateSchema, type RunFunctionResponse } from "../gen/fn/v1/run_function_pb.js";
import { encodeResponse } from "../wire/codec.js";
import { DEFAULT_MAX_RESPONSE_BYTES } from "./call.js";

/** WARN_SHARE of the limit is where a response is warned of. */
export const WARN_SHARE = 0.8;

/** How many of the largest parts a message names. */
const NAMED = 3;

/** Part is one part of a response and its encoded size. */
export interface Part {
  what: string;
  bytes: number;
}

/** largestParts encodes each desired composed resource, and the composite resource, alone: the largest first. */
export function largestParts(rsp: RunFunctionResponse, n = NAMED): Part[] {
  const parts: Part[] = [];
  const alone = (state: MessageInitShape<typeof StateSchema>) =>
    encodeResponse(create(RunFunctionResponseSchema, { desired: create(StateSchema, state) })).length;
  const d = rsp.desired;
  if (d?.composite) parts.push({ what: "the composite resource", bytes: alone({ composite: d.composite }) });
  for (const [name, r] of Object.entries(d?.resources ?? {}))
    parts.push({ what: JSON.stringify(name), bytes: alone({ resources: { [name]: r } }) });
  return parts.sort((a, b) => b.bytes - a.bytes).slice(0, n);
}

/** sizeOf says a byte count as people read it, with the exact count. */
export function sizeOf(bytes: number): string {
  const mib = bytes / (1024 * 1024);
  const human = mib >= 1 ? `${mib.toFixed(2)} MiB` : `${(bytes / 1024).toFixed(1)} KiB`;
  return `${human} (${bytes} bytes)`;
}

/** partsText names the largest parts of rsp, or nothing when it has none. */
export function partsText(rsp: RunFunctionResponse): string {
  const parts = largestParts(rsp);
  return parts.length ? `; largest: ${parts.map((p) => `${p.what} ${sizeOf(p.bytes)}`).join(", ")}` : "";
}

/** nearLimitText says a response of bytes is at WARN_SHARE of limit or more (and within it), naming its largest parts. */
export function nearLimitText(bytes: number, limit: number, rsp: RunFunctionResponse, whose = "Crossplane"): string {
  return (
    `response is ${sizeOf(bytes)}, ${Math.floor((bytes / limit) * 100)}% of the ${limit}-byte limit ${whose} accepts` +
    `${partsText(rsp)}: a little more and the call fails`
  );
}

/**
 * sizeWarnings warns of a step's request or response at WARN_SHARE of the
 * 4 MiB a cluster accepts or more: Crossplane's client refuses a larger
 * response, and a function's server (function-sdk-go's, xfn serve's by
 * default) a larger request.
 */
export function sizeWarnings(step: string | undefined, request: number, response: number, rsp: RunFunctionResponse): string[] {
  const limit = DEFAULT_MAX_RESPONSE_BYTES;
  const out: string[] = [];
  // A pipeline's warnings name the step; a request case has one function, and nothing to name.
  const at = step === undefined ? "" : `step ${JSON.stringify(step)}: `;
  if (response > limit)
    out.push(
      `${at}response is ${sizeOf(response)}, larger than the ${limit}-byte limit Crossplane accepts` +
        `${partsText(rsp)}: Crossplane would fail this call`,
    );
  else if (response >= WARN_SHARE * limit) out.push(`${at}${nearLimitText(response, limit, rsp)}`);
  if (request >= WARN_SHARE * limit)
    out.push(
      `${at}request is ${sizeOf(request)}, ${Math.floor((request / limit) * 100)}% of the ${limit}-byte limit a function ` +
        "accepts by default (function-sdk-go's, and xfn serve's --max-recv-message-size): the observed and desired state it carries " +
        "grows with the XR",
    );
  return out;
}
