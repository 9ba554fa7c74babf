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
 * redactSecrets replaces the values of the data and stringData (a function may
 * write either) of every Secret in value, keeping the keys, as Crossplane's
 * pipeline inspector does: the resource itself, and a Secret nested anywhere
 * in it, such as the manifest of provider-kubernetes' Object
 * (spec.forProvider.manifest), the items of a List, or a template. Walked
 * without recursion, so no nesting depth can overflow the stack.
 */
function redactSecrets(value: JsonObject | undefined): void {
  const todo: unknown[] = value ? [value] : [];
  while (todo.length > 0) {
    const v = todo.pop();
    if (typeof v !== "object" || v === null) continue;
    if (Array.isArray(v)) {
      for (const x of v) if (typeof x === "object" && x !== null) todo.push(x);
      continue;
    }
    const o = v as JsonObject;
    if (o["apiVersion"] === "v1" && o["kind"] === "Secret")
      for (const field of ["data", "stringData"]) {
        const d = o[field];
        if (d && typeof d === "object" && !Array.isArray(d)) for (const k of Object.keys(d)) (d as JsonObject)[k] = REDACTED_TEXT;
      }
    for (const x of Object.values(o)) if (typeof x === "object" && x !== null) todo.push(x);
  }
}

function redactState(s: State | undefined): void {
  if (!s) return;
  if (s.composite) {
    redactMap(s.composite.connectionDetails);
    redactSecrets(s.composite.resource);
  }
  for (const r of Object.values(s.resources)) {
    redactMap(r.connectionDetails);
    redactSecrets(r.resource);
  }
}

/**
 * redactRequest returns a copy of req with credentials, connection details and
 * Secrets' data (in its state, input, context and required resources) redacted.
 */
export function redactRequest(req: RunFunctionRequest): RunFunctionRequest {
  const out = copyMessage(req);
  for (const c of Object.values(out.credentials)) if (c.source.case === "credentialData") redactMap(c.source.value.data);
  redactState(out.observed);
  redactState(out.desired);
  // A Secret written in the step's input (a template of provider-kubernetes' Object, a base of patch-and-transform) or
  // carried in the context is as secret there.
  redactSecrets(out.input);
  redactSecrets(out.context);
  for (const rs of [...Object.values(out.requiredResources), ...Object.values(out.extraResources)])
    for (const r of rs.items) {
      redactMap(r.connectionDetails);
      redactSecrets(r.resource);
    }
  return out;
}

/** redactResponse returns a copy of rsp with connection details and Secrets' data redacted. */
export function redactResponse(rsp: RunFunctionResponse): RunFunctionResponse {
  const out = copyMessage(rsp);
  redactState(out.desired);
  redactSecrets(out.context);
  return out;
}
