// peek: one value deep inside a value not read yet, by walking its bytes.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { UNPEEKED } from "./base.js";
import { lazyOf, pending } from "./lazy.js";
import { valueAt } from "./read.js";

export { UNPEEKED };

/**
 * peek reads o[keys[0]][keys[1]]... when o[keys[0]] is a value not read yet,
 * walking its bytes to the value at the end and decoding only that. Reading one
 * annotation of an observed object so costs a scan, not the decoding of its
 * whole metadata (the lifecycle steps read a few such fields of every observed
 * resource on every call). The object stays unread.
 *
 * The answer is undefined when a key on the way is absent, and UNPEEKED when
 * there is no o, when o[keys[0]] was already read (or was never lazy), when a value on the way is
 * not an object, or when the bytes on the way do not decode: the caller then
 * reads the object as usual, which gives the same value or names the problem.
 */
export function peek(o: JsonObject | undefined, keys: readonly string[]): JsonValue | undefined | typeof UNPEEKED {
  if (o === undefined) return UNPEEKED;
  const lazy = lazyOf(o);
  if (!lazy || keys.length === 0) return UNPEEKED;
  const i = pending(o, lazy, keys[0]!);
  if (i < 0) return UNPEEKED;
  return valueAt(lazy.src, lazy.e[i + 1] as number, lazy.e[i + 2] as number, lazy.depth, keys);
}
