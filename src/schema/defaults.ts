// Structural-schema defaulting for offline use (xfn render and xfn test), the
// same as the embedded API server's on write (schema.ts): a field that is
// absent, or a null its schema does not allow, takes the schema's default, at
// every depth the object reaches.
import type { JsonValue } from "@bufbuild/protobuf";
import { applyDefaults as defaultByNode, compileNode } from "./schema.js";

/** applyDefaults fills in v, in place, the defaults schema (an openAPIV3Schema) declares. */
export function applyDefaults(v: JsonValue | undefined, schema: JsonValue | undefined): void {
  defaultByNode(v, compileNode(schema, "openAPIV3Schema", { rules: false }));
}
