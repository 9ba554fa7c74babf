// One node of a CRD's compiled structural schema, as the validator reads it
// (schema.ts compiles it, cel.ts runs its rules), and how a list's items are
// matched to the old list's for ratcheting and oldSelf. Its own module, so
// that neither of those two needs the other to say what a node is.
import { isDeepStrictEqual } from "node:util";
import type { JsonValue } from "@bufbuild/protobuf";
import type { ParseResult } from "@marcbachmann/cel-js";
import type { RE2JS } from "re2js";
import { isObject } from "../json.js";

/** Rule is one compiled x-kubernetes-validations entry. */
export interface Rule {
  rule: string;
  message: string;
  messageExpression?: ParseResult;
  /** The messageExpression's text, for the error that stops it. */
  messageExpressionText?: string;
  reason?: string;
  fieldPath?: string;
  optionalOldSelf: boolean;
  usesOldSelf: boolean;
  run: ParseResult;
}

/** Node is one schema node, as the validator reads it. */
export interface Node {
  types: string[];
  nullable: boolean;
  props?: Map<string, Node>;
  /** additionalProperties: a schema, or false (true is the same as absent to validation). */
  additional?: Node | false;
  /**
   * additionalProperties true or false, with no schema: kube's pruner keeps
   * the keys properties do not declare and prunes their values as with no
   * schema (an object's fields all go; a scalar stays).
   */
  additionalBare?: boolean;
  items?: Node;
  required: string[];
  enum?: JsonValue[];
  /** The enum's values that are strings, numbers or booleans, for a lookup that does not walk the list (enumCheck). */
  enumSet?: Set<JsonValue>;
  /** "supported values: ...", made once for every value the enum refuses. */
  enumDetail?: string;
  format?: string;
  maximum?: number;
  exclusiveMaximum: boolean;
  minimum?: number;
  exclusiveMinimum: boolean;
  multipleOf?: number;
  maxLength?: number;
  minLength?: number;
  pattern?: { source: string; re: RE2JS };
  maxItems?: number;
  minItems?: number;
  uniqueItems: boolean;
  maxProperties?: number;
  minProperties?: number;
  preserve: boolean;
  intOrString: boolean;
  embedded: boolean;
  default?: JsonValue;
  allOf: Node[];
  anyOf: Node[];
  oneOf: Node[];
  not?: Node;
  listType?: string;
  listMapKeys?: string[];
  rules: Rule[];
  /** Whether a default is declared here or below (defaulting skips subtrees without one). */
  anyDefault: boolean;
  /** Whether a rule is declared here or below (rules are looked for only where there are some). */
  anyRule: boolean;
  /** A transition rule (one reading oldSelf) here or below: not ratcheted, so a write changing nothing is still checked. */
  anyTransition?: boolean;
  /** Whether a set or map list is declared here or below (duplicates are looked for only there). */
  anyList: boolean;
}

/** Old is the value a node had before the write, when the write's value can be matched to it (ratcheting, transition rules). */
export type Old = { value: JsonValue } | undefined;

/** typeOf is the JSON schema type of a value, as kube-openapi's type validator sees it. */

/** canonical is a value's JSON with every object's keys sorted: equal values, equal text. */
export function canonical(v: JsonValue): string {
  return JSON.stringify(v, (_k, x: JsonValue) =>
    isObject(x) && !Array.isArray(x)
      ? Object.fromEntries(
          Object.keys(x)
            .sort()
            .map((k) => [k, x[k]]),
        )
      : x,
  );
}

/** correlate matches a list's items to the old list's: by key fields for a map list, by value for a set (atomic lists are not matched). */
export function correlate(items: JsonValue[], old: Old, s: Node): Old[] {
  if (!old || !Array.isArray(old.value)) return [];
  const before = old.value;
  if (s.listType === "set") {
    const had = new Set(before.map(canonical));
    return items.map((x) => (had.has(canonical(x)) ? { value: x } : undefined));
  }
  const keys = s.listMapKeys ?? [];
  const keyOf = (x: JsonValue) =>
    isObject(x) ? JSON.stringify(keys.map((k) => x[k] ?? s.items?.props?.get(k)?.default ?? null)) : undefined;
  const byKey = new Map<string, JsonValue>();
  for (const y of before) {
    const k = keyOf(y);
    if (k !== undefined && !byKey.has(k)) byKey.set(k, y);
  }
  return items.map((x) => {
    const k = keyOf(x);
    return k !== undefined && byKey.has(k) ? { value: byKey.get(k)! } : undefined;
  });
}

/**
 * sameAsOld is whether a value is unchanged from old, as ratcheting asks
 * (k8s.io/apiserver pkg/cel/common/equality.go CachedDeepEqual): a map list
 * is unchanged when each item equals the old item of its keys, whatever their
 * order; any other value is compared whole, in order.
 */
export function sameAsOld(v: JsonValue, old: JsonValue, s: Node | undefined): boolean {
  if (!s?.anyList) return isDeepStrictEqual(v, old);
  if (Array.isArray(v)) {
    if (!Array.isArray(old) || v.length !== old.length) return false;
    if (s.listType !== "map") return isDeepStrictEqual(v, old);
    const olds = correlate(v, { value: old }, s);
    return v.every((x, i) => olds[i] !== undefined && sameAsOld(x, olds[i]!.value, s.items));
  }
  if (isObject(v) && isObject(old)) {
    const keys = Object.keys(v);
    if (keys.length !== Object.keys(old).length) return false;
    return keys.every((k) => Object.hasOwn(old, k) && sameAsOld(v[k]!, old[k]!, s.props?.get(k) ?? (s.additional || undefined)));
  }
  return isDeepStrictEqual(v, old);
}
