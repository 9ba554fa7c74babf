// The sizes a CRD's schema lets a CEL rule's values have, and the types the
// cost estimate (celcost.ts) infers: kube's DeclType with its MaxElements and
// MinSerializedSize, as k8s.io/apiserver/pkg/cel/common/schemas.go builds it
// from a structural schema (read as kro repeats it, and limits.go), property
// names escaped as apiserver's cel.Escape does, and cel-go's saturating
// uint64 arithmetic on size and cost ranges (checker/cost.go at cel-go
// 14f6746a).
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isObject } from "../json.js";
/**
 * MAX_REQUEST_BODY_BYTES is kube-apiserver's limit on a request body (3 MiB):
 * the largest object a write can bring, which bounds a list's or a string's
 * size in the cost estimate. The API server refuses a larger body with it.
 */
export const MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024;

export const MAX_REQUEST = MAX_REQUEST_BODY_BYTES;
/** uint64's largest value, where cel-go's sums and products saturate. */
export const MAX = 2 ** 64;
export const TRAVERSAL = 0.1;
export const REGEX_FACTOR = 0.25;

// --- sizes and costs (cel-go's SizeEstimate and CostEstimate) ------------------

export interface Range {
  min: number;
  max: number;
}
export const add = (x: number, y: number) => (y > 0 && x > MAX - y ? MAX : x + y);
export const mul = (x: number, y: number) => (y !== 0 && x > MAX / y ? MAX : x * y);
const byFactor = (x: number, f: number) => (x > 0 && f > 0 && x > MAX / f ? MAX : Math.min(MAX, Math.ceil(x * f)));
export const fixed = (n: number): Range => ({ min: n, max: n });
export const sum = (a: Range, b: Range): Range => ({ min: add(a.min, b.min), max: add(a.max, b.max) });
export const times = (a: Range, b: Range): Range => ({ min: mul(a.min, b.min), max: mul(a.max, b.max) });
export const factor = (a: Range, f: number): Range => ({ min: byFactor(a.min, f), max: byFactor(a.max, f) });
export const union = (a: Range, b: Range): Range => ({ min: Math.min(a.min, b.min), max: Math.max(a.max, b.max) });
export const UNKNOWN: Range = { min: 0, max: MAX };
export const ZERO = fixed(0);

// --- types ------------------------------------------------------------------------

export type Kind =
  | "bool"
  | "int"
  | "uint"
  | "double"
  | "string"
  | "bytes"
  | "timestamp"
  | "duration"
  | "null"
  | "list"
  | "map"
  | "object"
  | "optional"
  | "opaque"
  | "dyn";

/**
 * Decl is a type as kube's DeclType has it: what a schema node is in CEL, the
 * most elements (characters, items, properties) a value of it can have and the
 * fewest bytes it takes in JSON. Types the estimate infers for what a rule
 * computes are Decls without sizes.
 */
export interface Decl {
  kind: Kind;
  max: number;
  min: number;
  elem?: Decl;
  key?: Decl;
  fields?: Map<string, Decl>;
  /** An opaque type's name: which of Kubernetes' library types it is (quantity, ip, cidr, url, semver). */
  name?: string;
}
export const t = (kind: Kind, elem?: Decl, key?: Decl): Decl => ({ kind, max: 0, min: 0, ...(elem && { elem }), ...(key && { key }) });
export const DYN = t("dyn");
export const BOOL = t("bool");
export const INT = t("int");
const STRING: Decl = { kind: "string", max: 0, min: 2 };
export const SCALAR: ReadonlySet<Kind> = new Set(["bool", "double", "duration", "int", "timestamp", "uint"]);

/** estimateMaxStringLengthPerRequest: the longest string of a format a request can hold. */
function longestString(o: JsonObject): number {
  if (o["x-kubernetes-int-or-string"] === true) return MAX_REQUEST - 2;
  switch (o["format"]) {
    case "duration":
    case "date-time":
      return 32;
    case "date":
      return 12;
    default:
      return MAX_REQUEST - 2;
  }
}
export const nonNegative = (v: JsonValue | undefined) => Math.max(0, Number(v));

const RESERVED = new Set(
  "true false null in as break const continue else for function if import let loop package namespace return var void while".split(" "),
);

/** escape is a property's name as a rule reads it (apiserver's cel.Escape); undefined for a name CEL cannot read. */
export function escape(name: string): string | undefined {
  if (!name || /^[0-9]/.test(name)) return undefined;
  if (RESERVED.has(name)) return `__${name}__`;
  let ok = true;
  const out = name.replace(/__|[-./]|[^a-zA-Z0-9_]/g, (s) => {
    const r = ({ __: "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__" } as Record<string, string>)[s];
    if (r === undefined) ok = false;
    return r ?? "";
  });
  return ok ? out : undefined;
}

/**
 * declOf is SchemaDeclType: the type of a schema node in CEL with its sizes,
 * or undefined for a node rules cannot see (no type). root is a resource's
 * root (the CRD's, an embedded resource's): apiVersion, kind and metadata's
 * name and generateName are always there.
 */
export function declOf(s: JsonValue | undefined, root: boolean): Decl | undefined {
  if (!isObject(s)) return undefined;
  if (s["x-kubernetes-int-or-string"] === true)
    return { kind: "dyn", min: 1, max: s["maxLength"] !== undefined ? nonNegative(s["maxLength"]) * 4 : longestString(s) };
  let o = s;
  if (root) {
    const str = { type: "string" };
    o = {
      ...s,
      properties: {
        ...(isObject(s["properties"]) ? s["properties"] : {}),
        kind: str,
        apiVersion: str,
        metadata: { type: "object", properties: { name: str, generateName: str } },
      },
    };
  }
  switch (o["type"]) {
    case "array": {
      const items = isObject(o["items"]) ? declOf(o["items"], o["items"]["x-kubernetes-embedded-resource"] === true) : undefined;
      if (!items) return undefined;
      const max = o["maxItems"] !== undefined ? nonNegative(o["maxItems"]) : Math.floor((MAX_REQUEST - 2) / (items.min + 1));
      return { kind: "list", elem: items, max, min: 2 };
    }
    case "object": {
      const extra = o["additionalProperties"];
      if (isObject(extra)) {
        const values = declOf(extra, extra["x-kubernetes-embedded-resource"] === true);
        if (!values) return { kind: "map", key: STRING, elem: DYN, max: Number.MAX_SAFE_INTEGER, min: 2 };
        const max = o["maxProperties"] !== undefined ? nonNegative(o["maxProperties"]) : Math.floor((MAX_REQUEST - 2) / (values.min + 6));
        return { kind: "map", key: STRING, elem: values, max, min: 2 };
      }
      const fields = new Map<string, Decl>();
      const required = new Set(Array.isArray(o["required"]) ? o["required"].filter((r): r is string => typeof r === "string") : []);
      let min = 2;
      for (const [name, prop] of Object.entries(isObject(o["properties"]) ? o["properties"] : {})) {
        const d = isObject(prop) ? declOf(prop, prop["x-kubernetes-embedded-resource"] === true) : undefined;
        if (!d) continue;
        const as = escape(name);
        if (as !== undefined) fields.set(as, d);
        if (required.has(name) && isObject(prop) && prop["default"] === undefined) min += name.length + d.min + 4;
      }
      return { kind: "object", fields, max: 0, min };
    }
    case "string": {
      const maxLength = o["maxLength"] !== undefined ? nonNegative(o["maxLength"]) : undefined;
      switch (o["format"]) {
        case "byte":
          return { kind: "bytes", min: 2, max: maxLength ?? longestString(o) };
        case "duration":
          return { kind: "duration", min: 3, max: longestString(o) };
        case "date":
          return { kind: "timestamp", min: 12, max: longestString(o) };
        case "date-time":
          return { kind: "timestamp", min: 21, max: longestString(o) };
      }
      const enums = Array.isArray(o["enum"]) ? o["enum"].filter((e): e is string => typeof e === "string") : [];
      const max =
        maxLength !== undefined ? maxLength * 4 : enums.length ? Math.max(0, ...enums.map((e) => Buffer.byteLength(e))) : longestString(o);
      return { kind: "string", min: 2, max };
    }
    case "boolean":
      return { kind: "bool", min: 4, max: 0 };
    case "number":
      return { kind: "double", min: 1, max: 0 };
    case "integer":
      return { kind: "int", min: 1, max: 0 };
    default:
      return undefined;
  }
}

export function literalType(v: unknown): Decl {
  if (typeof v === "string") return STRING;
  if (typeof v === "bigint") return INT;
  if (typeof v === "number") return t("double");
  if (typeof v === "boolean") return BOOL;
  if (v === null) return t("null");
  if (v instanceof Uint8Array) return t("bytes");
  return t("uint");
}

const STRING_RESULTS = new Set(
  "lowerAscii upperAscii substring trim replace charAt reverse join format string find strings.quote".split(" "),
);
const INT_RESULTS = new Set(
  (
    "size indexOf lastIndexOf int getFullYear getMonth getDayOfYear getDayOfMonth getDate getDayOfWeek " +
    "getHours getMinutes getSeconds getMilliseconds sign asInteger compareTo prefixLength family"
  ).split(" "),
);
const BOOL_RESULTS = new Set(
  (
    "contains startsWith endsWith matches isSorted hasValue isQuantity isInteger isGreaterThan isLessThan " +
    "isURL isIP isCIDR containsIP containsCIDR isUnspecified isLoopback isLinkLocalMulticast " +
    "isLinkLocalUnicast isCanonical sets.contains sets.intersects sets.equivalent"
  ).split(" "),
);

/** resultType is what a function call gives, as far as the estimate needs to know it. */
export function resultType(name: string, target: Decl | undefined, args: Decl[]): Decl {
  if (STRING_RESULTS.has(name)) return STRING;
  if (INT_RESULTS.has(name)) return INT;
  if (BOOL_RESULTS.has(name)) return BOOL;
  switch (name) {
    case "split":
    case "findAll":
      return t("list", STRING);
    case "double":
    case "asApproximateFloat":
      return t("double");
    case "uint":
      return t("uint");
    case "bytes":
      return t("bytes");
    case "timestamp":
      return t("timestamp");
    case "duration":
      return t("duration");
    case "sum":
    case "min":
    case "max":
      return target?.elem ?? DYN;
    case "value":
    case "orValue":
      return target?.kind === "optional" ? (target.elem ?? DYN) : (args[0] ?? DYN);
    case "optional.of":
    case "optional.ofNonZeroValue":
      return t("optional", args[0]);
    case "quantity":
    case "add":
    case "sub":
      return { ...t("opaque"), name: "quantity" };
    case "url":
    case "ip":
    case "cidr":
    case "semver":
      return { ...t("opaque"), name };
    case "masked":
      return { ...t("opaque"), name: "cidr" };
    default:
      return DYN;
  }
}

/** The lists extension's calls on a list whose estimate listExtensionCost gives. */
export const LIST_EXTENSION = new Set(["sort", "distinct", "reverse", "flatten"]);

/**
 * listExtensionCost is the estimate of a lists-extension call on a list of
 * size n, elements of kind elem (cel-go v0.26.0 ext/lists.go): sort() and
 * distinct() compare every element with every other, twice (plus a traversal
 * for strings and bytes), reverse() and flatten() touch each once; each
 * dispatches (1) and makes a list (10); the result is as long as the list.
 */
export function listExtensionCost(name: string, n: Range, elem: Decl | undefined): { cost: Range; size: Range } {
  const quadratic = name === "sort" || name === "distinct";
  const perItem = quadratic ? 2 + (name === "sort" && (elem?.kind === "string" || elem?.kind === "bytes") ? TRAVERSAL : 0) : 1;
  const work = factor(quadratic ? times(n, n) : n, perItem);
  return { cost: sum(work, fixed(11)), size: n };
}

/** The names a rule writes a type with: the plain ones, and the dotted ones' first part (google.protobuf.Duration, net.IP). */
const TYPE_NAMES = new Set(["int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type", "dyn"]);
const TYPE_ROOTS = new Set(["google", "net", "kubernetes"]);

/**
 * isTypeValue is whether a cel-js tree node is a type: type(x), or a type's name. Types compare in O(1)
 * (cel-go's estimate sizes them 1), where an operand of unknown size would be charged its whole size.
 */
function isTypeValue(n: { op: string; args: unknown }): boolean {
  if (n.op === "call" && Array.isArray(n.args) && n.args[0] === "type") return true;
  if (n.op === "id") return TYPE_NAMES.has(n.args as string);
  let root = n;
  while (root.op === "." && Array.isArray(root.args)) root = root.args[0] as { op: string; args: unknown };
  return root !== n && root.op === "id" && TYPE_ROOTS.has(root.args as string);
}

/** Kubernetes' library types whose equality kube's estimate charges 1. */
const O1_EQUAL = new Set(["quantity", "ip", "cidr", "semver"]);

/** equalsInO1 is whether == of l (of type lt) and r (rt) is charged 1: two values of one such library type, or types. */
export function equalsInO1(lt: Decl, rt: Decl, l: { op: string; args: unknown }, r: { op: string; args: unknown }): boolean {
  if (lt.kind === "opaque" && rt.kind === "opaque" && lt.name && lt.name === rt.name && O1_EQUAL.has(lt.name)) return true;
  return isTypeValue(l) || isTypeValue(r);
}
