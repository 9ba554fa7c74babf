// Secrets out of a RunFunction request or response, wherever one is written
// down or sent on: recorded cases (--record-dir), a Pipeline Inspector's
// emits and the cases it writes, and what xfn test --update writes. Credentials,
// connection details and the data and stringData of Secrets become
// "[REDACTED]" (xfn test matches it against any value); keys are kept.
import type { JsonObject } from "@bufbuild/protobuf";
import type { RunFunctionRequest, RunFunctionResponse, State } from "../gen/fn/v1/run_function_pb.js";
import { copyMessage } from "./protojson.js";

/** REDACTED_TEXT replaces every secret string value; REDACTED, every secret byte value. */
const REDACTED_TEXT = "[REDACTED]";
export const REDACTED = new TextEncoder().encode(REDACTED_TEXT);

const redactMap = (m: Record<string, Uint8Array>) => {
  for (const k of Object.keys(m)) m[k] = REDACTED;
};

/**
 * redactSecret replaces the values of a Secret's data and stringData (a
 * function may write either) with "[REDACTED]", keeping the keys, as
 * Crossplane's pipeline inspector does.
 */
function redactSecret(resource: JsonObject | undefined): void {
  if (!resource || resource["apiVersion"] !== "v1" || resource["kind"] !== "Secret") return;
  for (const field of ["data", "stringData"]) {
    const d = resource[field];
    if (d && typeof d === "object" && !Array.isArray(d)) for (const k of Object.keys(d)) (d as JsonObject)[k] = REDACTED_TEXT;
  }
}

function redactState(s: State | undefined): void {
  if (!s) return;
  if (s.composite) redactMap(s.composite.connectionDetails);
  for (const r of Object.values(s.resources)) {
    redactMap(r.connectionDetails);
    redactSecret(r.resource);
  }
}

/** redactRequest returns a copy of req with credentials, connection details and Secrets' data redacted. */
export function redactRequest(req: RunFunctionRequest): RunFunctionRequest {
  const out = copyMessage(req);
  for (const c of Object.values(out.credentials)) if (c.source.case === "credentialData") redactMap(c.source.value.data);
  redactState(out.observed);
  redactState(out.desired);
  for (const rs of [...Object.values(out.requiredResources), ...Object.values(out.extraResources)])
    for (const r of rs.items) {
      redactMap(r.connectionDetails);
      redactSecret(r.resource);
    }
  return out;
}

/** redactResponse returns a copy of rsp with connection details and Secrets' data redacted. */
export function redactResponse(rsp: RunFunctionResponse): RunFunctionResponse {
  const out = copyMessage(rsp);
  redactState(out.desired);
  return out;
}
