// A CRD version's structural schema, compiled once when the CRD is
// established, and what kube-apiserver does with it on every write of a custom
// resource: defaulting, pruning of unknown fields, dropping nulls the schema
// does not allow, then validation (types, required, enum, formats, bounds,
// patterns, list types, and the x-kubernetes-validations CEL rules of cel.ts),
// with ratcheting on update: a value the write did not change is not refused
// for errors it already had.
//
// Read at kubernetes/apiextensions-apiserver 1aa2717a5
// (pkg/apiserver/schema/{defaulting,pruning,listtype},
// pkg/apiserver/validation/{validation,formats,ratcheting}.go,
// pkg/registry/customresource/{strategy,status_strategy,validator}.go) and
// kubernetes/kube-openapi d427ff9 (pkg/validation/validate, errors, strfmt),
// whose messages the errors here repeat. Differences kept are in
// docs/dev-cluster.md.
import { isDeepStrictEqual } from "node:util";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isObject } from "../json.js";
import { RE2JS } from "re2js";
import { find } from "./offthread.js";
import { compileRule, runRules, RuleError } from "./cel.js";
import { invalid, notSupported, required, tooLong, tooMany, type FieldError } from "./fielderr.js";
import { FORMATS } from "./formats.js";
import { isDNS1035Label } from "./names.js";
import { canonical, correlate, sameAsOld, type Node, type Old } from "./node.js";
import { messageOf } from "../sdk/errors.js";

const num = (v: JsonValue | undefined): number | undefined => (typeof v === "number" ? v : undefined);

/** compileNode reads a JSONSchemaProps object; rule texts that do not parse throw, naming where. */
export function compileNode(s: JsonValue | undefined, where: string, opts: { rules?: boolean } = {}): Node {
  const o = isObject(s) ? s : {};
  const intOrString = o["x-kubernetes-int-or-string"] === true;
  const types = intOrString ? ["integer", "string"] : typeof o["type"] === "string" && o["type"] !== "" ? [o["type"]] : [];
  const sub = (v: JsonValue | undefined, w: string) => compileNode(v, `${where}.${w}`, opts);
  const many = (v: JsonValue | undefined, w: string) => (Array.isArray(v) ? v.map((x, i) => sub(x, `${w}[${i}]`)) : []);
  const node: Node = {
    types,
    nullable: o["nullable"] === true,
    required: Array.isArray(o["required"]) ? o["required"].filter((x): x is string => typeof x === "string") : [],
    exclusiveMaximum: o["exclusiveMaximum"] === true,
    exclusiveMinimum: o["exclusiveMinimum"] === true,
    uniqueItems: o["uniqueItems"] === true,
    preserve: o["x-kubernetes-preserve-unknown-fields"] === true,
    intOrString,
    embedded: o["x-kubernetes-embedded-resource"] === true,
    allOf: many(o["allOf"], "allOf"),
    anyOf: many(o["anyOf"], "anyOf"),
    oneOf: many(o["oneOf"], "oneOf"),
    rules: [],
    anyDefault: false,
    anyRule: false,
    anyList: false,
  };
  if (isObject(o["properties"])) {
    node.props = new Map();
    for (const [k, v] of Object.entries(o["properties"])) node.props.set(k, sub(v, `properties[${k}]`));
  }
  const ap = o["additionalProperties"];
  if (isObject(ap)) node.additional = sub(ap, "additionalProperties");
  else if (ap === false) node.additional = false;
  if (typeof ap === "boolean") node.additionalBare = true;
  if (isObject(o["items"])) node.items = sub(o["items"], "items");
  if (Array.isArray(o["enum"])) node.enum = o["enum"];
  if (o["default"] !== undefined) node.default = o["default"];
  if (isObject(o["not"])) node.not = sub(o["not"], "not");
  for (const k of [
    "maximum",
    "minimum",
    "multipleOf",
    "maxLength",
    "minLength",
    "maxItems",
    "minItems",
    "maxProperties",
    "minProperties",
  ] as const) {
    const v = num(o[k]);
    if (v !== undefined) node[k] = v;
  }
  if (typeof o["pattern"] === "string") node.pattern = compilePattern(o["pattern"], where);
  const format = typeof o["format"] === "string" ? supportedFormat(o["format"], intOrString ? undefined : types[0]) : undefined;
  if (format) node.format = format;
  if (typeof o["x-kubernetes-list-type"] === "string") node.listType = o["x-kubernetes-list-type"];
  if (Array.isArray(o["x-kubernetes-list-map-keys"]))
    node.listMapKeys = o["x-kubernetes-list-map-keys"].filter((x): x is string => typeof x === "string");
  const rules = o["x-kubernetes-validations"];
  if (Array.isArray(rules) && opts.rules !== false)
    node.rules = rules.map((r, i) => compileRule(r, `${where}.x-kubernetes-validations[${i}]`));
  const children = [...(node.props?.values() ?? []), ...(node.additional ? [node.additional] : []), ...(node.items ? [node.items] : [])];
  node.anyDefault = node.default !== undefined || children.some((c) => c.anyDefault);
  node.anyRule = node.rules.length > 0 || children.some((c) => c.anyRule) || node.allOf.some((c) => c.anyRule);
  node.anyTransition =
    node.rules.some((r) => r.usesOldSelf) || children.some((c) => c.anyTransition) || node.allOf.some((c) => c.anyTransition);
  node.anyList = node.listType === "set" || node.listType === "map" || children.some((c) => c.anyList);
  return node;
}

/**
 * supportedFormat is the format kube-apiserver checks for a type, or undefined:
 * formats it does not support are dropped (StripUnsupportedFormatsPostProcess),
 * and int32/int64/float/double only bound numbers.
 */
function supportedFormat(format: string, type: string | undefined): string | undefined {
  if (type === undefined || type === "string") return FORMATS.has(format.replaceAll("-", "")) ? format : undefined;
  if (type === "integer") return format === "int32" || format === "int64" ? format : undefined;
  if (type === "number") return format === "float" || format === "double" ? format : undefined;
  return undefined;
}

/**
 * compilePattern compiles a pattern as kube-apiserver does, with RE2 (Go's
 * regexp; re2js here): matching takes time linear in the value, whatever the
 * pattern, so no value can hold the server. A pattern RE2 does not take (a
 * lookahead, a backreference) is refused where the CRD is written, as
 * apiextensions' ValidateCustomResourceDefinitionOpenAPISchema refuses it.
 */
function compilePattern(source: string, where: string): NonNullable<Node["pattern"]> {
  try {
    return { source, re: RE2JS.compile(source) };
  } catch (err) {
    throw new RuleError(invalid(`${where}.pattern`, source, `must be a valid regular expression, but isn't: ${messageOf(err)}`));
  }
}

// ---- defaulting and pruning (at decode, before validation) ----

const nonNullableNull = (v: JsonValue | undefined, s: Node | undefined) => v === null && s !== undefined && !s.nullable;

/** applyDefaults sets, in place, the default of each field that is absent or a null its schema does not allow. */
export function applyDefaults(x: JsonValue | undefined, s: Node | undefined): void {
  if (!s?.anyDefault || typeof x !== "object" || x === null) return;
  if (Array.isArray(x)) {
    for (let i = 0; i < x.length; i++) {
      if (s.items?.default !== undefined && nonNullableNull(x[i], s.items)) x[i] = structuredClone(s.items.default);
      applyDefaults(x[i], s.items);
    }
    return;
  }
  if (s.props)
    for (const [k, p] of s.props) {
      if (p.default === undefined || k === "__proto__") continue;
      if (!Object.hasOwn(x, k) || nonNullableNull(x[k], p)) x[k] = structuredClone(p.default);
    }
  for (const k of Object.keys(x)) {
    const p = s.props?.get(k);
    if (p) applyDefaults(x[k], p);
    else if (s.additional) {
      if (s.additional.default !== undefined && nonNullableNull(x[k], s.additional)) x[k] = structuredClone(s.additional.default);
      applyDefaults(x[k], s.additional);
    }
  }
}

const META = new Set(["apiVersion", "kind", "metadata"]);
/** OBJECT_META are metav1.ObjectMeta's fields: an embedded resource's metadata keeps these and loses the rest. */
const OBJECT_META = new Set([
  "name",
  "generateName",
  "namespace",
  "selfLink",
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "labels",
  "annotations",
  "ownerReferences",
  "finalizers",
  "managedFields",
]);

/** pruneEmbeddedMeta drops what an embedded resource's metadata has that ObjectMeta does not, as decoding it does. */
function pruneEmbeddedMeta(x: JsonObject, path: string, unknown: string[]): void {
  const m = x["metadata"];
  if (!isObject(m)) return;
  for (const k of Object.keys(m))
    if (!OBJECT_META.has(k)) {
      unknown.push(`${path}.metadata.${k}`);
      delete m[k];
    }
}

/**
 * prune drops, in place, every field the schema does not declare (below a
 * preserve-unknown-fields node only what a declared schema covers is pruned),
 * and the nulls it neither allows nor defaults, and returns the unknown
 * fields' paths, sorted, as kube-apiserver reports them.
 */
export function prune(obj: JsonObject, s: Node): string[] {
  return pruneValue(obj, s, true);
}

/**
 * pruneValue is prune for any JSON value (kube's PruneWithOptions): at a
 * resource's root (isResourceRoot) apiVersion, kind and metadata are the
 * resource's own, kept as an embedded resource's are.
 */
export function pruneValue(x: JsonValue, s: Node | undefined, isResourceRoot: boolean, opts: { objectMeta?: boolean } = {}): string[] {
  const unknown: string[] = [];
  walk(x, isResourceRoot ? { ...(s ?? compileNode({}, "")), embedded: true } : s, "", { unknown, meta: opts.objectMeta !== false });
  return unknown.sort();
}

/** Compiled schemas of pruneToSchema, by the schema object given (render and the host give the same one each time). */
const compiled = new WeakMap<JsonObject, Node>();

/**
 * pruneToSchema is prune for a schema given as JSON (a CRD version's or an
 * XRD's openAPIV3Schema): what xfn render and xfn host drop from an XR or a
 * composed resource is what the API server would drop, with the same pruner.
 */
export function pruneToSchema(obj: JsonObject, openAPIV3Schema: JsonObject): string[] {
  let node = compiled.get(openAPIV3Schema);
  if (!node) compiled.set(openAPIV3Schema, (node = compileNode(openAPIV3Schema, "openAPIV3Schema", { rules: false })));
  return prune(obj, node);
}

/** What a prune walk carries: the unknown fields' paths, and whether an embedded resource's metadata is coerced to ObjectMeta. */
interface Pruning {
  unknown: string[];
  /**
   * Drop what an embedded resource's metadata has beside ObjectMeta's fields:
   * kube-apiserver's decoding (objectmeta.Coerce) does it after the pruning
   * algorithm, which keeps metadata whole; the two report their paths alike.
   */
  meta: boolean;
}

/** declared is the schema of an object's key k, or undefined: kept with no schema (a bare additionalProperties), or pruned. */
function declared(s: Node, k: string): Node | undefined | null {
  const p = s.props?.get(k) ?? (s.additional || undefined);
  return p ?? (s.additionalBare ? undefined : null);
}

function walk(x: JsonValue | undefined, s: Node | undefined, path: string, w: Pruning): void {
  if (s?.preserve) return skip(x, s, path, w);
  if (Array.isArray(x)) {
    for (let i = 0; i < x.length; i++) if (typeof x[i] === "object" && x[i] !== null) walk(x[i], s?.items, `${path}[${i}]`, w);
    return;
  }
  if (!isObject(x)) return;
  if (s?.embedded && path !== "" && w.meta) pruneEmbeddedMeta(x, path, w.unknown);
  for (const k of Object.keys(x)) {
    if (s?.embedded && META.has(k)) continue;
    const p = s ? declared(s, k) : null;
    const v = x[k];
    if (p !== null) {
      // A null the schema neither allows nor defaults goes too (PruneNonNullableNullsWithoutDefaults).
      if (v === null) {
        if (p && !p.nullable && p.default === undefined) delete x[k];
      } else if (typeof v === "object") walk(v, p, path ? `${path}.${k}` : k, w);
    } else {
      if (!META.has(k) || path !== "") w.unknown.push(path ? `${path}.${k}` : k);
      delete x[k];
    }
  }
}

function skip(x: JsonValue | undefined, s: Node, path: string, w: Pruning): void {
  if (Array.isArray(x)) {
    if (s.items) for (let i = 0; i < x.length; i++) skip(x[i], s.items, `${path}[${i}]`, w);
    return;
  }
  if (!isObject(x)) return;
  if (s.embedded && path !== "" && w.meta) pruneEmbeddedMeta(x, path, w.unknown);
  for (const k of Object.keys(x)) {
    if (s.embedded && META.has(k)) continue;
    const p = declared(s, k);
    if (p === null) continue;
    const v = x[k];
    if (v === null) {
      if (p && !p.nullable && p.default === undefined) delete x[k];
    } else walk(v, p, path ? `${path}.${k}` : k, w);
  }
}

// ---- validation ----

function typeOf(v: JsonValue): string {
  if (typeof v === "boolean") return "boolean";
  if (typeof v === "string") return "string";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  if (Array.isArray(v)) return "array";
  return "object";
}

const said = (path: string) => path.replace(/^\./, "");

/**
 * validateValue checks v against s (kube-openapi's SchemaValidator): path is
 * the error's name as kube-openapi builds it, field what it is reported under.
 * With old (an update), a node whose value did not change has its errors
 * dropped, as CRD validation ratcheting does.
 */
export function validateValue(v: JsonValue, s: Node, path: string, prefix: string, old: Old): FieldError[] {
  const errs: FieldError[] = [];
  check(v, s, path, prefix, old, errs);
  return errs;
}

/**
 * fieldOf is the field an error at path is reported under: kube-openapi names
 * a value by its path (".key" under the root's additionalProperties); the field
 * error carries it without the dot, under prefix ("status" for a status
 * write), or "<nil>" at the root.
 */
function fieldOf(path: string, prefix: string): string {
  const p = said(path);
  return p ? (prefix ? `${prefix}.${p}` : p) : prefix || "<nil>";
}

const rel = (path: string, m: string) => `${path} in body ${m}`;

/**
 * embeddedErrors is what apiextensions' objectmeta validation refuses in an
 * x-kubernetes-embedded-resource value: apiVersion and kind must be there,
 * strings, not empty, a group/version and a kind-shaped name.
 */
function embeddedErrors(v: JsonObject, at: string): FieldError[] {
  const errs: FieldError[] = [];
  for (const k of ["apiVersion", "kind"]) {
    const x = v[k];
    if (x === undefined) errs.push(required(`${at}.${k}`, "must not be empty"));
    else if (typeof x !== "string") errs.push(invalid(`${at}.${k}`, x, "must be a string"));
    else if (x === "") errs.push(invalid(`${at}.${k}`, x, "must not be empty"));
    else if (k === "apiVersion" && (x.split("/").length > 2 || x.startsWith("/") || x.endsWith("/")))
      errs.push(invalid(`${at}.apiVersion`, x, `unexpected GroupVersion string: ${x}`));
    else if (k === "kind") {
      const bad = isDNS1035Label(x.toLowerCase());
      if (bad.length) errs.push(invalid(`${at}.kind`, x, `may have mixed case, but should otherwise match: ${bad.join(",")}`));
    }
  }
  return errs;
}

/**
 * typeMismatch is kube-openapi's type check (pkg/validation/validate/type.go at
 * 43fb72c5454a, Validate) of a value of JSON type t under s, as kube-apiserver
 * decodes it (a whole number an int64, others float64): under a format (as
 * supportedFormat leaves it), a
 * scalar of another type is refused naming the format and the value's Go
 * format (int64, float64, or none), and a string or a list is not checked
 * at all unless the schema is numeric (a list where a string of a format is
 * declared passes, as it does there); otherwise the types are compared.
 */
function typeMismatch(t: string, s: Node): { want: string; got: string } | undefined {
  const intFloat = t === "integer" && s.types.includes("number");
  const fits = s.types.includes(t) || intFloat;
  const f = s.format;
  if (f && t !== "string" && t !== "array") {
    const format = t === "integer" ? "int64" : t === "number" ? "float64" : "";
    if (!(fits || format === f)) return { want: f, got: format };
  }
  if (f && (t === "string" || t === "array") && !(s.types.includes("number") || s.types.includes("integer"))) return undefined;
  return fits ? undefined : { want: s.types.join(","), got: t };
}

/** check appends to errs what validateValue reports (one array for the whole walk). */
function check(v: JsonValue, s: Node, path: string, prefix: string, old: Old, errs: FieldError[]): void {
  const start = errs.length;
  if (v === null) {
    if (s.types.length && !s.nullable)
      errs.push({
        type: "FieldValueTypeInvalid",
        field: fieldOf(path, prefix),
        value: "null",
        detail: `${rel(path, `must be of type ${s.types.join(",")}`)}: "null"`,
      });
    if (s.enum) enumCheck(v, s, fieldOf(path, prefix), errs);
    return;
  }
  const t = typeOf(v);
  const wrong = s.types.length ? typeMismatch(t, s) : undefined;
  if (wrong)
    errs.push({
      type: "FieldValueTypeInvalid",
      field: fieldOf(path, prefix),
      value: wrong.got,
      detail: `${rel(path, `must be of type ${wrong.want}`)}: "${wrong.got}"`,
    });
  if (s.anyOf.length || s.oneOf.length || s.allOf.length || s.not) errs.push(...composite(v, s, path, prefix));
  if (typeof v === "string") {
    if (s.maxLength !== undefined || s.minLength !== undefined) {
      const runes = [...v].length;
      if (s.maxLength !== undefined && runes > s.maxLength) errs.push(tooLong(fieldOf(path, prefix), s.maxLength));
      else if (s.minLength !== undefined && runes < s.minLength)
        errs.push(invalid(fieldOf(path, prefix), v, rel(path, `should be at least ${s.minLength} chars long`)));
      else patternCheck(v, s, path, prefix, errs);
    } else patternCheck(v, s, path, prefix, errs);
    if (s.format) {
      const f = FORMATS.get(s.format.replaceAll("-", ""));
      if (f && !f(v))
        errs.push({
          type: "FieldValueTypeInvalid",
          field: fieldOf(path, prefix),
          value: v,
          detail: `${rel(path, `must be of type ${s.format}`)}: ${JSON.stringify(v)}`,
        });
    }
  } else if (typeof v === "number") {
    if (
      s.multipleOf !== undefined ||
      s.minimum !== undefined ||
      s.maximum !== undefined ||
      s.format ||
      (s.types[0] === "integer" && !Number.isInteger(v))
    )
      errs.push(...numberErrors(v, s, path, prefix));
  } else if (Array.isArray(v)) {
    if (s.items) {
      const olds = old && (s.listType === "map" || s.listType === "set") ? correlate(v, old, s) : undefined;
      for (let i = 0; i < v.length; i++) check(v[i]!, s.items, `${path}[${i}]`, prefix, olds?.[i], errs);
    }
    if (s.minItems !== undefined && v.length < s.minItems)
      errs.push(invalid(fieldOf(path, prefix), v.length, rel(path, `should have at least ${s.minItems} items`)));
    if (s.maxItems !== undefined && v.length > s.maxItems) errs.push(tooMany(fieldOf(path, prefix), v.length, s.maxItems));
    if (s.uniqueItems && new Set(v.map(canonical)).size !== v.length)
      errs.push(invalid(fieldOf(path, prefix), "", rel(path, "shouldn't contain duplicates")));
  }
  if (s.enum) enumCheck(v, s, fieldOf(path, prefix), errs);
  if (s.embedded && path !== "" && isObject(v)) errs.push(...embeddedErrors(v, fieldOf(path, prefix)));
  if (isObject(v)) {
    if (s.minProperties !== undefined || s.maxProperties !== undefined) {
      const n = Object.keys(v).length;
      if (s.minProperties !== undefined && n < s.minProperties)
        errs.push(invalid(fieldOf(path, prefix), n, rel(path, `should have at least ${s.minProperties} properties`)));
      if (s.maxProperties !== undefined && n > s.maxProperties) errs.push(tooMany(fieldOf(path, prefix), n, s.maxProperties));
    }
    const oldObj = old && isObject(old.value) ? old.value : undefined;
    if (s.additional !== undefined) {
      for (const k of Object.keys(v)) {
        if (s.props?.has(k)) continue;
        if (s.additional === false) errs.push(invalid(fieldOf(path, prefix), k, `${path}.${k} in body is a forbidden property`));
        else {
          const o: Old = oldObj && Object.hasOwn(oldObj, k) ? { value: oldObj[k]! } : undefined;
          check(v[k]!, s.additional, `${path}.${k}`, prefix, o, errs);
        }
      }
    }
    if (s.props)
      for (const [k, p] of s.props) {
        if (!Object.hasOwn(v, k)) continue;
        const typeMeta = path === "" && (k === "apiVersion" || k === "kind");
        const o: Old = !typeMeta && oldObj && Object.hasOwn(oldObj, k) ? { value: oldObj[k]! } : undefined;
        check(v[k]!, p, path ? `${path}.${k}` : k, prefix, o, errs);
      }
    for (const k of s.required) if (!Object.hasOwn(v, k)) errs.push(required(fieldOf(`${path}.${k}`, prefix)));
  }
  if (errs.length > start && old && sameAsOld(v, old.value, s)) errs.length = start;
}

function patternCheck(v: string, s: Node, path: string, prefix: string, errs: FieldError[]): void {
  const p = s.pattern;
  if (!p) return;
  if (!find(p.source, p.re, v)) errs.push(invalid(fieldOf(path, prefix), v, rel(path, `should match '${p.source}'`)));
}

/**
 * enumCheck refuses a value not in the schema's enum. A value that is a
 * string, number or boolean is looked up in a set, and the list of supported
 * values is written once per schema: 10,000 values refused by a 1,000-value
 * enum walked and wrote the list 10,000 times (seconds, gigabytes).
 */
function enumCheck(v: JsonValue, s: Node, field: string, errs: FieldError[]): void {
  if (!s.enum?.length) return;
  if (!s.enumSet) s.enumSet = new Set(s.enum.filter((e) => e === null || typeof e !== "object"));
  if (v === null || typeof v !== "object" ? s.enumSet.has(v) : s.enum.some((e) => isDeepStrictEqual(e, v))) return;
  s.enumDetail ??= notSupported(
    field,
    v,
    s.enum.map((e) => (typeof e === "string" ? e : JSON.stringify(e))),
  ).detail;
  errs.push({ type: "FieldValueNotSupported", field, value: v, detail: s.enumDetail });
}

function numberErrors(v: number, s: Node, path: string, prefix: string): FieldError[] {
  const top = prefix || "<nil>";
  const field = (p: string) => fieldOf(p, prefix);
  const rel = (m: string) => `${path} in body ${m}`;
  const errs: FieldError[] = [];
  const isInt = Number.isInteger(v);
  const show = (b: number) => (isInt ? String(Math.trunc(b)) : goNum(b));
  // kube-openapi's range check (validate/values.go IsValueValidAgainstRange): a value that is not an
  // int64 (or an int32 under format int32) where an integer is declared, one past float32 under format float.
  const only = s.types.length === 1 ? s.types[0] : undefined;
  const outOfRange =
    only === "integer"
      ? !isInt || Math.abs(v) >= 2 ** 63 || (s.format === "int32" && (v > 2147483647 || v < -2147483648))
      : only === "number" && s.format === "float" && Math.abs(v) > 3.4028234663852886e38;
  if (outOfRange)
    errs.push(
      invalid(top, "", `Checked value must be of type ${only} ${s.format ? `with format ${s.format}` : "(default format)"} in ${path}`),
    );
  if (s.multipleOf !== undefined) {
    const m = s.multipleOf;
    const ok = m <= 0 ? false : isInt && Number.isInteger(m) ? v % m === 0 : Number.isInteger(m < 1 ? (1 / m) * v : v / m);
    if (!ok)
      errs.push(
        m <= 0
          ? invalid(field(path), m, `factor MultipleOf declared for ${path} must be positive: ${goNum(m)}`)
          : invalid(field(path), v, rel(`should be a multiple of ${isInt && Number.isInteger(m) ? m : goNum(m)}`)),
      );
  }
  if (s.minimum !== undefined) {
    const b = isInt ? Math.trunc(s.minimum) : s.minimum;
    if (s.exclusiveMinimum ? v <= b : v < b)
      errs.push(invalid(field(path), v, rel(`should be greater than ${s.exclusiveMinimum ? "" : "or equal to "}${show(s.minimum)}`)));
  }
  if (s.maximum !== undefined) {
    const b = isInt ? Math.trunc(s.maximum) : s.maximum;
    if (s.exclusiveMaximum ? v >= b : v > b)
      errs.push(invalid(field(path), v, rel(`should be less than ${s.exclusiveMaximum ? "" : "or equal to "}${show(s.maximum)}`)));
  }
  return errs;
}

const goNum = (n: number) => (Number.isInteger(n) && Math.abs(n) < 1e21 ? String(n) : n.toString().replace(/e([+-])(\d)$/, "e$10$2"));

/** composite runs allOf, anyOf, oneOf and not, reporting as kube-openapi does (under no field). */
function composite(v: JsonValue, s: Node, path: string, prefix: string): FieldError[] {
  const errs: FieldError[] = [];
  const name = JSON.stringify(path);
  const run = (n: Node) => validateValue(v, n, path, prefix, undefined);
  const top = (m: string) => invalid(prefix || "<nil>", "", m);
  if (s.anyOf.length) {
    const results = s.anyOf.map(run);
    if (!results.some((r) => r.length === 0)) {
      errs.push(top(`${name} must validate at least one schema (anyOf)`));
      errs.push(...results.reduce((a, b) => (b.length < a.length ? b : a)));
    }
  }
  if (s.oneOf.length) {
    const results = s.oneOf.map(run);
    const valid = results.filter((r) => r.length === 0).length;
    if (valid !== 1) {
      errs.push(
        top(
          `${name} must validate one and only one schema (oneOf). ` +
            (valid === 0 ? "Found none valid" : `Found ${valid} valid alternatives`),
        ),
      );
      if (valid === 0) errs.push(...results.reduce((a, b) => (b.length < a.length ? b : a)));
    }
  }
  if (s.allOf.length) {
    const results = s.allOf.map(run);
    for (const r of results) errs.push(...r);
    const valid = results.filter((r) => r.length === 0).length;
    if (valid !== results.length) errs.push(top(`${name} must validate all the schemas (allOf)${valid === 0 ? ". None validated" : ""}`));
  }
  if (s.not && run(s.not).length === 0) errs.push(top(`${name} must not validate the schema (not)`));
  return errs;
}

/** listErrors reports duplicates in x-kubernetes-list-type set and map lists (listtype.ValidateListSetsAndMaps). */
export function listErrors(x: JsonValue | undefined, s: Node | undefined, path: string): FieldError[] {
  if (!s?.anyList || x === undefined || x === null) return [];
  const errs: FieldError[] = [];
  if (Array.isArray(x)) {
    if (s.listType === "set") {
      // By a canonical key, in time linear in the list (pairwise comparison is quadratic: a 3 MiB list
      // of short strings would hold the server for minutes).
      const seen = new Set<string>();
      x.forEach((v, i) => {
        const key = canonical(v);
        if (seen.has(key)) errs.push({ type: "FieldValueDuplicate", field: `${path}[${i}]`, value: v, detail: "" });
        seen.add(key);
      });
    } else if (s.listType === "map" && s.listMapKeys?.length) {
      const seen = new Set<string>();
      x.forEach((v, i) => {
        if (!isObject(v)) {
          errs.push(invalid(`${path}[${i}]`, v, "must be an object for an array of list-type map"));
          return;
        }
        const keys = s.listMapKeys!.map((k) => v[k] ?? s.items?.props?.get(k)?.default ?? null);
        const k = JSON.stringify(keys);
        if (seen.has(k)) {
          const shown: JsonObject =
            keys.length === 1 ? { [s.listMapKeys![0]!]: keys[0]! } : Object.fromEntries(s.listMapKeys!.map((n, j) => [n, keys[j]!]));
          errs.push({ type: "FieldValueDuplicate", field: `${path}[${i}]`, value: shown, detail: "" });
        }
        seen.add(k);
      });
    }
    x.forEach((v, i) => errs.push(...listErrors(v, s.items, `${path}[${i}]`)));
    return errs;
  }
  if (isObject(x))
    for (const [k, v] of Object.entries(x)) {
      const p = s.props?.get(k) ?? (s.additional || undefined);
      if (p) errs.push(...listErrors(v, p, path ? `${path}.${k}` : k));
    }
  return errs;
}

/** blocked tells whether errs hold one that stops CEL rules from running (kube runs them only on an object the schema takes). */
export const blocked = (errs: FieldError[]) => errs.some((e) => BLOCKING.has(e.type));

const BLOCKING = new Set([
  "FieldValueNotSupported",
  "FieldValueRequired",
  "FieldValueTooLong",
  "FieldValueTooMany",
  "FieldValueTypeInvalid",
]);

/** RULES_NOT_CHECKED is what kube says in place of the rules of an object the schema refused. */
export const RULES_NOT_CHECKED = invalid(
  "<nil>",
  null,
  "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
);

/** Schema is one served version's compiled schema. */
export class Schema {
  readonly root: Node;
  readonly hasRules: boolean;
  readonly hasTransitionRules: boolean;
  constructor(openAPIV3Schema: JsonObject, where = "openAPIV3Schema") {
    this.root = compileNode(openAPIV3Schema, where);
    this.hasRules = this.root.anyRule;
    this.hasTransitionRules = this.root.anyTransition === true;
  }

  /**
   * decode does what kube-apiserver does to a custom resource it reads from a
   * request: default, prune, drop disallowed nulls. It returns the unknown
   * fields' paths.
   */
  decode(obj: JsonObject): string[] {
    applyDefaults(obj, this.root);
    return prune(obj, this.root);
  }

  /**
   * validate is the field errors of writing obj (over old, on update);
   * status: a status subresource write. Warnings are pushed to warnings.
   */
  validate(obj: JsonObject, old: JsonObject | undefined, status: boolean, warnings: string[]): FieldError[] {
    const o: Old = old ? { value: old } : undefined;
    const errs: FieldError[] = [];
    if (status) {
      const st = this.root.props?.get("status");
      if (st && obj["status"] !== undefined)
        errs.push(
          ...validateValue(obj["status"]!, st, "", "status", old && old["status"] !== undefined ? { value: old["status"]! } : undefined),
        );
    } else errs.push(...validateValue(obj, this.root, "", "", o));
    const lists = listErrors(obj, this.root, "");
    if (lists.length && !(old && listErrors(old, this.root, "").length)) errs.push(...lists);
    if (this.hasRules) {
      if (blocked(errs)) errs.push(RULES_NOT_CHECKED);
      else errs.push(...runRules(obj, this.root, o, warnings));
    }
    return errs;
  }
}
