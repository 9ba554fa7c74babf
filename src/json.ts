// Reading Kubernetes objects held as plain JSON: the two checks every floor of
// xfn makes, kept in one place.
import type { JsonObject } from "@bufbuild/protobuf";

/** isObject is true for a JSON object: not null, not an array. */
export const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/** metaOf is an object's metadata, or a new empty object (not attached to it) when it has none. */
export const metaOf = (o: unknown): JsonObject => (isObject(o) && isObject(o["metadata"]) ? o["metadata"] : {});
