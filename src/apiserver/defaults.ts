// Structural-schema defaulting for custom resources, as the API server does on
// write: a property absent from the object takes the `default` its
// openAPIV3Schema declares, at every depth the object reaches (properties,
// additionalProperties, array items). Only absent fields are filled; null is
// left alone.
import type { JsonValue } from "@bufbuild/protobuf";
import { isObject } from "../json.js";

/** applyDefaults fills in v, in place, the defaults schema declares for fields v lacks. */
export function applyDefaults(v: JsonValue | undefined, schema: JsonValue | undefined): void {
  if (!isObject(schema) || typeof v !== "object" || v === null) return;
  if (Array.isArray(v)) {
    for (const x of v) applyDefaults(x, schema["items"]);
    return;
  }
  const props = isObject(schema["properties"]) ? schema["properties"] : {};
  for (const [k, ps] of Object.entries(props)) {
    if (!isObject(ps) || k === "__proto__") continue;
    if (!(k in v) && ps["default"] !== undefined) v[k] = structuredClone(ps["default"]);
    applyDefaults(v[k], ps);
  }
  const extra = schema["additionalProperties"];
  if (isObject(extra)) for (const k of Object.keys(v)) if (!(k in props)) applyDefaults(v[k], extra);
}
