// Protobuf JSON form that keeps every key, for the local tools (xfn call,
// xfn test, recorded cases, unit tests).
//
// protobuf-es's fromJson and toJson write map entries and Struct fields by
// assignment, so an entry keyed __proto__ (a resource, Secret key or label of
// that name) turns into a prototype and is gone. These wrappers rename that
// key to a placeholder no input holds, let protobuf-es do the work, and put
// the name back as an own property. Key order is kept.
//
// These tools read and write YAML, whose parser and printer recurse: they run
// out of stack some 600 levels down. So a message in JSON form may nest at
// most MAX_JSON_FORM_DEPTH levels, counted over the whole document, and one
// deeper is refused with an error naming the limit, not a stack overflow. (The
// server itself takes 5,000 levels of JSON over the wire, as Crossplane does.)
import { fromJson, toJson, type DescMessage, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { setOwn } from "../own.js";
import { depthOf, MAX_JSON_FORM_DEPTH } from "./depth.js";

// The limit lives in depth.ts, which loads nothing: engine/docs.ts reads it without protobuf-es.
export { depthOf, MAX_JSON_FORM_DEPTH };

const PROTO = "__proto__";

/** checkDepth throws when v nests deeper than JSON form may. */
function checkDepth(v: unknown): void {
  if (depthOf(v) > MAX_JSON_FORM_DEPTH) {
    throw new Error(
      `the message nests more than ${MAX_JSON_FORM_DEPTH} levels deep, more than xfn's tools read or write in JSON or YAML form ` +
        "(the server takes up to 5,000 levels over the wire)",
    );
  }
}

/**
 * rekey deeply copies v, naming `to` every own key named `from`. A message
 * (an object with $typeName) keeps its prototype; any other object becomes a
 * plain one, so a lazily decoded value is read out. Byte arrays are shared,
 * not copied. seen records whether `to` was already a key somewhere.
 */
function rekey(v: unknown, from: string, to: string, seen: { clash: boolean }): unknown {
  if (typeof v !== "object" || v === null || ArrayBuffer.isView(v)) return v;
  if (Array.isArray(v)) return v.map((x) => rekey(x, from, to, seen));
  const o = v as Record<string, unknown>;
  const out: Record<string, unknown> = "$typeName" in o ? Object.create(Object.getPrototypeOf(o) as object) : {};
  for (const k of Object.keys(o)) {
    if (k === to) seen.clash = true;
    setOwn(out, k === from ? to : k, rekey(o[k], from, to, seen));
  }
  return out;
}

/** hasKey tells whether key is an own key of any object in v. */
function hasKey(v: unknown, key: string): boolean {
  if (typeof v !== "object" || v === null || ArrayBuffer.isView(v)) return false;
  if (Array.isArray(v)) return v.some((x) => hasKey(x, key));
  if (Object.hasOwn(v, key)) return true;
  for (const k of Object.keys(v)) if (hasKey((v as Record<string, unknown>)[k], key)) return true;
  return false;
}

/**
 * hide renames every key __proto__ in v to a placeholder that is no key of v,
 * returning the copy and the placeholder; v itself, and no placeholder, when
 * v has no such key (most inputs: they pass to protobuf-es uncopied).
 */
function hide(v: unknown): { copy: unknown; placeholder?: string } {
  if (!hasKey(v, PROTO)) return { copy: v };
  for (let placeholder = `${PROTO}\u0000xfn`; ; placeholder += "\u0000") {
    const seen = { clash: false };
    const copy = rekey(v, PROTO, placeholder, seen);
    if (!seen.clash) return { copy, placeholder };
  }
}

/** named puts __proto__ back for placeholder in an error's message. */
function named(err: unknown, placeholder: string | undefined): unknown {
  if (placeholder === undefined || !(err instanceof Error) || !err.message.includes(placeholder)) return err;
  const out = new Error(err.message.replaceAll(placeholder, PROTO), { cause: err });
  out.name = err.name;
  return out;
}

/**
 * copyMessage deeply copies a message, keeping every map and Struct key
 * (protobuf-es's clone drops __proto__). It refuses one nested deeper than
 * JSON form may be.
 */
export function copyMessage<T extends object>(msg: T): T {
  checkDepth(msg);
  return rekey(msg, PROTO, PROTO, { clash: false }) as T;
}

/** messageFromJson is protobuf-es's fromJson keeping every map and Struct key, __proto__ included. */
export function messageFromJson<Desc extends DescMessage>(schema: Desc, json: unknown): MessageShape<Desc> {
  checkDepth(json);
  const { copy, placeholder } = hide(json);
  let msg: MessageShape<Desc>;
  try {
    // protobuf-es counts nested messages and Values, one or more per level of
    // JSON, and stops at 100 unless told: short of a deep CRD schema.
    msg = fromJson(schema, copy as JsonValue, { recursionLimit: 4 * MAX_JSON_FORM_DEPTH });
  } catch (err) {
    throw named(err, placeholder);
  }
  return placeholder === undefined ? msg : (rekey(msg, placeholder, PROTO, { clash: false }) as MessageShape<Desc>);
}

/** messageToJson is protobuf-es's toJson keeping every map and Struct key, __proto__ included. */
export function messageToJson<Desc extends DescMessage>(schema: Desc, msg: MessageShape<Desc>): JsonValue {
  checkDepth(msg);
  const { copy, placeholder } = hide(msg);
  let json: JsonValue;
  try {
    json = toJson(schema, copy as MessageShape<Desc>);
  } catch (err) {
    throw named(err, placeholder);
  }
  return placeholder === undefined ? json : (rekey(json, placeholder, PROTO, { clash: false }) as JsonValue);
}
