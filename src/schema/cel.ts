// x-kubernetes-validations: CEL rules on a CRD's schema, run on every write
// of a custom resource as kube-apiserver runs them. A rule sees `self` (the
// value at its node, typed by the schema: integer fields are CEL ints, number
// fields doubles) and, in a transition rule, `oldSelf` (the value before the
// write; such a rule is skipped on create, or given an optional with
// optionalOldSelf). A rule that is false is the error its message,
// messageExpression, reason and fieldPath describe; one that fails to run is
// an error naming the rule. Errors of a value the write did not change are
// warnings instead (ratcheting), unless the rule reads oldSelf.
//
// Read at kubernetes/apiextensions-apiserver 1aa2717a5,
// pkg/apiserver/schema/cel/validation.go. The evaluator is
// @marcbachmann/cel-js (as in steps/cel.ts) with Kubernetes' list and string
// library functions added where it lacks them.
//
// Cost: kube-apiserver stops a rule past a per-call cost (celconfig.PerCallLimit,
// 1,000,000) and a request's rules past a budget (RuntimeCELCostBudget,
// 10,000,000), with the errors of pkg/apiserver/schema/cel/validation.go.
// cel-js counts no cost, so celmeter.ts counts every evaluation step of a rule
// and charges equality, concatenation, `in`, matches(), contains() and sets.*
// by their operands' sizes as cel-go's runtime cost does; a string function
// charges for its result before making it: a rule cannot hold the event loop
// for long, nor grow the heap without bound. Maps reach a rule as Maps (their
// size and first entry are then O(1) to cel-js, which walks a plain object's
// keys for both).
import { isDeepStrictEqual } from "node:util";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Environment, Optional } from "@marcbachmann/cel-js";
import { onRE2, re2, RE2_DECLARATIONS } from "../re2.js";
import { find } from "./offthread.js";
import { isObject } from "../json.js";
import { OMIT, forbidden, invalid, required, type FieldError } from "./fielderr.js";
import { correlate, sameAsOld, type Node, type Old, type Rule } from "./node.js";
import { canonical, NAMESPACES, withKubernetesLibraries } from "./cellibs.js";
import { withOptionalMaps, withTwoVarComprehensions } from "./celcomprehensions.js";
import { durationText, format, timestampText } from "./celformat.js";
import { withListsLibrary } from "./cellists.js";
import { messageOf } from "../sdk/errors.js";
import { charge, CostExceeded, metered, REQUEST_BUDGET, withMeter } from "./celmeter.js";
import { escape } from "./celsize.js";

export { PER_CALL_LIMIT, REQUEST_BUDGET } from "./celmeter.js";

/** Rule is one compiled x-kubernetes-validations entry. */
/** ruleMatches is CEL's matches() in a rule: whether the pattern is found in s (offthread.ts find). */
const ruleMatches = (s: string, pattern: string): boolean => find(pattern, re2(pattern), s);

/** HAS_FIELD is what has(e.f) is run as when e is not a chain of fields (hasAfterIndex). */
const HAS_FIELD = "xfnHasField";

const cmp = (a: unknown, b: unknown) => ((a as number) < (b as number) ? -1 : (a as number) > (b as number) ? 1 : 0);
/** RULE_ENV is the environment every CRD rule is compiled and run in (celcheck.ts checks rules against it). */
export const RULE_ENV = withListsLibrary(
  withOptionalMaps(
    withTwoVarComprehensions(
      withKubernetesLibraries(
        new Environment({ unlistedVariablesAreDyn: true, homogeneousAggregateLiterals: false, enableOptionalTypes: true }),
      ),
    )
      // Kubernetes' CEL list library (k8s.io/apiserver/pkg/cel/library/lists.go).
      .registerFunction("list.isSorted(): bool", (l: unknown[]) => l.every((x, i) => i === 0 || cmp(l[i - 1], x) <= 0))
      .registerFunction("list<T>.sum(): T", (l: unknown[]) =>
        l.reduce(
          (a: unknown, b) => (typeof a === "bigint" && typeof b === "bigint" ? a + b : Number(a) + Number(b)),
          l.length && typeof l[0] === "number" ? 0 : 0n,
        ),
      )
      .registerFunction("list<T>.min(): T", (l: unknown[]) => {
        if (!l.length) throw new Error("min called on empty list");
        return l.reduce((a, b) => (cmp(b, a) < 0 ? b : a));
      })
      .registerFunction("list<T>.max(): T", (l: unknown[]) => {
        if (!l.length) throw new Error("max called on empty list");
        return l.reduce((a, b) => (cmp(b, a) > 0 ? b : a));
      })
      .registerFunction("list.indexOf(dyn): int", (l: unknown[], x: unknown) => BigInt(l.findIndex((y) => isDeepStrictEqual(x, y))))
      .registerFunction("list.lastIndexOf(dyn): int", (l: unknown[], x: unknown) => BigInt(l.findLastIndex((y) => isDeepStrictEqual(x, y))))
      // The strings extension functions cel-js lacks (cel-go ext/strings.go).
      .registerFunction("string.charAt(int): string", (s: string, i: bigint) => {
        const runes = [...s];
        if (i < 0n || i > BigInt(runes.length)) throw new Error(`index out of range: ${i}`);
        return runes[Number(i)] ?? "";
      })
      .registerFunction("string.replace(string, string): string", (s: string, a: string, b: string) => replaced(s, a, b).join(b))
      .registerFunction("string.replace(string, string, int): string", (s: string, a: string, b: string, n: bigint) => {
        if (n < 0n) return replaced(s, a, b).join(b);
        const parts = replaced(s, a, b);
        return parts.slice(0, Number(n) + 1).join(b) + (parts.length > Number(n) + 1 ? a + parts.slice(Number(n) + 1).join(a) : "");
      })
      // format(), as kube's strings library version has it (celformat.ts).
      .registerFunction("string.format(list): string", (s: string, args: Iterable<unknown>) => format(s, args))
      // Kubernetes' regex library (library/regex.go), and matches(): on RE2, as cel-go's, in time linear in the string.
      .registerFunction("string.find(string): string", (s: string, re: string) => {
        const m = re2(re).matcher(s);
        return m.find() ? (m.group() ?? "") : "";
      })
      .registerFunction("string.findAll(string): list<string>", (s: string, re: string) => findAll(s, re, -1n))
      .registerFunction("string.findAll(string, int): list<string>", (s: string, re: string, n: bigint) => findAll(s, re, n))
      // Conversions cel-js lacks (cel-go common/types: int.go, timestamp.go, duration.go ConvertToType).
      .registerFunction("int(uint): int", (u: { value: bigint }) => {
        if (u.value > INT64_MAX) throw new Error("integer overflow");
        return u.value;
      })
      .registerFunction("int(google.protobuf.Timestamp): int", (t: Date) => BigInt(Math.floor(t.getTime() / 1000)))
      .registerFunction("string(google.protobuf.Timestamp): string", (t: Date) => timestampText(t))
      .registerFunction("string(google.protobuf.Duration): string", (d: { seconds: bigint; nanos: number }) => durationText(d))
      .registerFunction("duration(google.protobuf.Duration): google.protobuf.Duration", (d: unknown) => d)
      .registerFunction("timestamp(google.protobuf.Timestamp): google.protobuf.Timestamp", (t: Date) => t)
      // Bytes order byte by byte (cel-go common/types/bytes.go Compare).
      .registerOperator("bytes < bytes", (a: Uint8Array, b: Uint8Array) => Buffer.compare(a, b) < 0)
      .registerOperator("bytes <= bytes", (a: Uint8Array, b: Uint8Array) => Buffer.compare(a, b) <= 0)
      .registerOperator("bytes > bytes", (a: Uint8Array, b: Uint8Array) => Buffer.compare(a, b) > 0)
      .registerOperator("bytes >= bytes", (a: Uint8Array, b: Uint8Array) => Buffer.compare(a, b) >= 0)
      .registerFunction(`${HAS_FIELD}(dyn, string): bool`, (o: unknown, k: string) =>
        o instanceof Map ? o.has(k) : typeof o === "object" && o !== null && !Array.isArray(o) && Object.hasOwn(o, k),
      )
      // matches(): a long one, in a write, runs off the serving thread (offthread.ts).
      .registerFunction(RE2_DECLARATIONS[0], ruleMatches)
      .registerFunction(RE2_DECLARATIONS[1], ruleMatches),
  ),
);

const INT64_MAX = 2n ** 63n - 1n;

/** findAll is kube's regex library's findAll: the first n matches of re in s (all when n < 0). */
function findAll(s: string, re: string, n: bigint): string[] {
  const m = re2(re).matcher(s);
  const out: string[] = [];
  while ((n < 0n || BigInt(out.length) < n) && m.find()) out.push(m.group() ?? "");
  return out;
}

/** replaced splits s on a, first charging for the string replacing every a with b would make. */
function replaced(s: string, a: string, b: string): string[] {
  // An empty a matches before every rune and at the end, as Go's strings.Replace.
  const parts = a === "" ? ["", ...s, ""] : s.split(a);
  charge(Math.ceil((s.length + (parts.length - 1) * (b.length - a.length)) / 10));
  return parts;
}

/**
 * hasAfterIndex rewrites has(e.f) where e is not a plain chain of fields (an
 * index, a call: has(self.items[0].name)), which cel-go takes and cel-js's
 * has() macro refuses, into a call that tests e for the field f.
 */
export function hasAfterIndex(text: string): string {
  let out = "";
  let quote = "";
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quote) {
      out += ch;
      if (ch === "\\") out += text[++i] ?? "";
      else if (ch === quote) quote = "";
      continue;
    }
    if (ch === "'" || ch === '"') {
      quote = ch;
      out += ch;
      continue;
    }
    const call = /^has\s*\(/.exec(text.slice(i, i + 12));
    if (!call || (i > 0 && /[A-Za-z0-9_.]/.test(text[i - 1]!))) {
      out += ch;
      continue;
    }
    const open = i + call[0].length - 1;
    const end = closing(text, open);
    if (end < 0) return out + text.slice(i);
    const inner = text.slice(open + 1, end).trim();
    const m = /^(.*)\.\s*([A-Za-z_][A-Za-z0-9_]*)$/s.exec(inner);
    out += m && /[[(]/.test(m[1]!) ? `${HAS_FIELD}(${hasAfterIndex(m[1]!)}, '${m[2]}')` : text.slice(i, end + 1);
    i = end;
  }
  return out;
}

/** closing is where the bracket at open closes, outside string literals (-1: it does not). */
function closing(text: string, open: number): number {
  let depth = 0;
  let quote = "";
  for (let j = open; j < text.length; j++) {
    const ch = text[j]!;
    if (quote) {
      if (ch === "\\") j++;
      else if (ch === quote) quote = "";
    } else if (ch === "'" || ch === '"') quote = ch;
    else if (ch === "(" || ch === "[") depth++;
    else if ((ch === ")" || ch === "]") && --depth === 0) return j;
  }
  return -1;
}

/** RuleError is a rule that cannot be used, as the field error a CRD with it is refused with. */
export class RuleError extends Error {
  constructor(readonly error: FieldError) {
    super(`${error.field}: ${error.detail}`);
  }
}

/**
 * ruleValue is an x-kubernetes-validations entry as kube shows it in a refusal: its internal
 * ValidationRule (apiextensions-apiserver v0.36.3 pkg/apis/apiextensions/types_jsonschema.go),
 * which the field error marshals to JSON with Go's field names.
 */
export function ruleValue(r: JsonObject): JsonValue {
  const text = (k: string) => (typeof r[k] === "string" ? r[k] : "");
  return {
    Rule: text("rule"),
    Message: text("message"),
    MessageExpression: text("messageExpression"),
    Reason: typeof r["reason"] === "string" ? r["reason"] : null,
    FieldPath: text("fieldPath"),
    OptionalOldSelf: typeof r["optionalOldSelf"] === "boolean" ? r["optionalOldSelf"] : null,
  };
}

/** compileRule reads one x-kubernetes-validations entry; a rule that does not parse throws, naming where, as a CRD with it is refused. */
export function compileRule(r: JsonValue, where: string): Rule {
  if (!isObject(r) || typeof r["rule"] !== "string" || r["rule"].trim() === "") throw new RuleError(required(`${where}.rule`));
  const text = r["rule"];
  const parse = (src: string, field: string) => {
    try {
      const parsed = RULE_ENV.parse(hasAfterIndex(src));
      onRE2((parsed as unknown as { ast: unknown }).ast);
      metered((parsed as unknown as { ast: object }).ast);
      return parsed;
    } catch (err) {
      const prefix = field === "rule" ? "compilation failed" : "messageExpression compilation failed";
      throw new RuleError(invalid(`${where}.${field}`, ruleValue(r), `${prefix}: ${messageOf(err).split("\n")[0]}`));
    }
  };
  const rule: Rule = {
    rule: text,
    message: typeof r["message"] === "string" ? r["message"] : "",
    optionalOldSelf: r["optionalOldSelf"] === true,
    usesOldSelf: /\boldSelf\b/.test(text),
    run: parse(text, "rule"),
  };
  if (typeof r["messageExpression"] === "string" && r["messageExpression"].trim()) {
    rule.messageExpression = parse(r["messageExpression"], "messageExpression");
    rule.messageExpressionText = r["messageExpression"];
  }
  if (typeof r["reason"] === "string") rule.reason = r["reason"];
  if (typeof r["fieldPath"] === "string" && r["fieldPath"]) rule.fieldPath = normalizeFieldPath(r["fieldPath"]);
  return rule;
}

/** normalizeFieldPath turns a rule's fieldPath (".spec.x", "['a.b']") into the field path it reports under. */
function normalizeFieldPath(p: string): string {
  const parts: string[] = [];
  const re = /\.([^.[\]]+)|\['((?:[^'\\]|\\.)*)'\]/y;
  let m: RegExpExecArray | null;
  while ((m = re.exec(p))) parts.push(m[1] ?? m[2]!.replace(/\\(.)/g, "$1"));
  return parts.join(".");
}

/** How a string of a format is read into CEL, as kube's UnstructuredToVal reads it; a value that does not read stays a string. */
const FORMATTED: Record<string, (v: string) => unknown> = {
  "date-time": (v) => RULE_ENV.evaluate("timestamp(v)", { v }),
  date: (v) => RULE_ENV.evaluate("timestamp(v)", { v: `${v}T00:00:00Z` }),
  duration: (v) => RULE_ENV.evaluate("duration(v)", { v }),
  byte: (v) => new Uint8Array(Buffer.from(v, "base64")),
};

/**
 * celValue is v as a rule sees it under schema s: integers as CEL ints,
 * strings of format date-time and date as timestamps, duration as durations
 * and byte as bytes, null fields of an object as absent, a set of scalars
 * as a set (equal to another whatever the order), everything else as is; at the root, only the metadata rules may read.
 */
export function celValue(v: JsonValue | undefined, s: Node | undefined, root = false): unknown {
  const bad = s ? misfit(v, s) : undefined;
  if (bad) return invalidData(bad);
  if (typeof v === "string" && s?.format && Object.hasOwn(FORMATTED, s.format)) {
    try {
      return FORMATTED[s.format]!(v);
    } catch {
      return v;
    }
  }
  if (typeof v === "number") {
    const int = s && s.types.length ? s.types.includes("integer") && !s.types.includes("number") : true;
    return int && Number.isSafeInteger(v) ? BigInt(v) : v;
  }
  if (Array.isArray(v)) {
    const items = v.map((x) => celValue(x, s?.items));
    // A set list, or a map list, compares whatever its order, element by element as values (kube's
    // unstructuredSetList and unstructuredMapList equality); cel-js takes a Set as a list.
    if (s?.listType === "set" || s?.listType === "map") return valueSet(items);
    return items;
  }
  if (isObject(v) && s?.props === undefined && !root) {
    // A map (additionalProperties) or an object of no declared fields: a Map, whose size cel-js reads
    // in O(1) (a plain object's keys it would walk on every size(), equality and type check).
    const out = new Map<string, unknown>();
    for (const [k, x] of Object.entries(v)) out.set(k, celValue(x, s?.additional || undefined));
    return out;
  }
  if (isObject(v)) {
    const out: Record<string, unknown> = {};
    // In an object of declared properties (not a map), a null field is as absent to a rule: has() is
    // false and reading it is no such key (kube's unstructuredMap).
    const fields = s?.props !== undefined;
    for (const [k, x] of Object.entries(v)) {
      if (x === null && fields) continue;
      if (root && k === "metadata" && isObject(x)) {
        const md: Record<string, unknown> = {};
        if (typeof x["name"] === "string") md["name"] = x["name"];
        if (typeof x["generateName"] === "string") md["generateName"] = x["generateName"];
        out[k] = md;
        continue;
      }
      const c = celValue(x, s?.props?.get(k) ?? (s?.additional || undefined));
      // A key named __proto__ is an own property, not the object's prototype.
      if (k === "__proto__") Object.defineProperty(out, k, { value: c, enumerable: true, writable: true, configurable: true });
      else out[k] = c;
      // A declared field is read by its escaped name too (self.__namespace__, self.a__dash__b), as kube
      // declares it; not enumerable, so that equality and iteration see the object's own keys.
      const escaped = fields ? escapedName(k) : undefined;
      if (escaped !== undefined && escaped !== k && !Object.hasOwn(v, escaped))
        Object.defineProperty(out, escaped, { value: c, enumerable: false, writable: true, configurable: true });
    }
    return out;
  }
  return v;
}

/** Escaped names of declared properties, by name (the names a schema declares: few, read on every write). */
const ESCAPED = new Map<string, string | undefined>();
function escapedName(k: string): string | undefined {
  if (ESCAPED.has(k)) return ESCAPED.get(k);
  const e = escape(k);
  if (ESCAPED.size < 10_000) ESCAPED.set(k, e);
  return e;
}

/** goType is the Go type kube's decoder gives a JSON value, as %T prints it. */
const goType = (v: JsonValue): string =>
  typeof v === "string"
    ? "string"
    : typeof v === "number"
      ? Number.isInteger(v)
        ? "int64"
        : "float64"
      : typeof v === "boolean"
        ? "bool"
        : Array.isArray(v)
          ? "[]interface {}"
          : "map[string]interface {}";

/**
 * misfit is why v cannot be read under s, in the words of kube's
 * UnstructuredToVal (k8s.io/apiserver v0.36.3 pkg/cel/common/valuesunstructured.go),
 * or undefined. Only an object the schema refused has one: `xfn validate`
 * runs rules on it, as crossplane's validate does (kube-apiserver does not).
 */
function misfit(v: JsonValue | undefined, s: Node): string | undefined {
  if (v === undefined) return undefined;
  if (v === null) return s.nullable ? undefined : "invalid data, got null for schema with nullable=false";
  if (s.intOrString)
    return typeof v === "string" || Number.isInteger(v)
      ? undefined
      : "invalid data, expected XIntOrString value to be either a string or integer";
  switch (s.types[0]) {
    case "object":
      return isObject(v) ? undefined : "invalid data, expected a map for the provided schema with type=object";
    case "array":
      return Array.isArray(v) ? undefined : "invalid data, expected an array for the provided schema with type=array";
    case "string":
      return typeof v === "string" ? undefined : `invalid data, expected string, got ${goType(v)}`;
    case "number":
      return typeof v === "number" ? undefined : `invalid data, expected float, got ${goType(v)}`;
    case "integer":
      return Number.isInteger(v) ? undefined : `invalid data, expected int, got ${goType(v)}`;
    case "boolean":
      return typeof v === "boolean" ? undefined : `invalid data, expected bool, got ${goType(v)}`;
  }
  return undefined;
}

/** The first invalid value a running rule touched (its misfit), or undefined. */
let touched: string | undefined;

/**
 * invalidData stands for a value that cannot be read under its schema: cel-go
 * holds an error value there, and a rule that reads it fails with that error.
 * A read of this stand-in (a field, an index, its size) records the error,
 * and the rule is then reported failed with it, whatever cel-js made of it.
 */
function invalidData(why: string): object {
  const look =
    <A extends unknown[], R>(f: (...a: A) => R) =>
    (...a: A): R => {
      // cel-js names a value's type for its messages and infers a list's or a map's type from its
      // first element: those looks are not reads (cel-go reads an element only when a rule does).
      if (touched === undefined && !/debugType|firstMapElement/.test(new Error().stack ?? "")) touched = why;
      return f(...a);
    };
  return new Proxy(
    {},
    {
      get: look(Reflect.get),
      has: look(Reflect.has),
      ownKeys: look(Reflect.ownKeys),
      getPrototypeOf: look(Reflect.getPrototypeOf),
      getOwnPropertyDescriptor: look(Reflect.getOwnPropertyDescriptor),
    },
  );
}

/**
 * valueSet is a list that compares as a set: cel-js's list equality and `in`
 * ask a Set has(), which this one answers by value (objects, lists and sets
 * too), not by identity. (A plain Set with its own has(): cel-js knows a
 * value's type by its constructor.)
 */
function valueSet(items: unknown[]): Set<unknown> {
  const set = new Set(items);
  let canon: Set<string> | undefined;
  set.has = (v: unknown) => (canon ??= new Set(items.map(canonical))).has(canonical(v));
  return set;
}

/** runRules evaluates every rule of the schema under root over obj (old: before the write); ratcheted errors go to warnings. */
export function runRules(obj: JsonObject, root: Node, old: Old, warnings: string[]): FieldError[] {
  const errs: FieldError[] = [];
  budget = REQUEST_BUDGET;
  try {
    walk(obj, root, "", old, () => false, true, errs, warnings);
  } catch (err) {
    // Out of cost: the error is in errs; no further rule runs.
    if (!(err instanceof OutOfCost)) throw err;
  }
  return errs;
}

/** What is left of the running request's cost budget. */
let budget = REQUEST_BUDGET;

/** OutOfCost stops a request's rules: its error has been recorded. */
class OutOfCost extends Error {}

/**
 * metering runs fn as one metered CEL call: its cost comes off the request's
 * budget. A call past the per-call limit, or past what is left, records
 * kube's error (what: "rule" or "messageExpression") and stops every rule.
 */
function metering<T>(fn: () => T, onStop: (detail: string) => void, what: string): T {
  const cost = { used: 0 };
  try {
    const out = withMeter(fn, cost);
    if (cost.used > budget) {
      onStop(
        what === "rule"
          ? "validation failed due to running out of cost budget, no further validation rules will be run"
          : "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run",
      );
      throw new OutOfCost();
    }
    return out;
  } catch (err) {
    if (err instanceof CostExceeded) {
      onStop(what);
      throw new OutOfCost();
    }
    throw err;
  } finally {
    budget -= cost.used;
  }
}

const NIL = "<nil>";
const child = (path: string, k: string) => (path ? `${path}.${k}` : k);

function walk(
  v: JsonValue | undefined,
  s: Node,
  path: string,
  old: Old,
  parentSame: () => boolean,
  root: boolean,
  errs: FieldError[],
  warnings: string[],
): void {
  if (v === undefined || v === null || !s.anyRule) return;
  // Ratcheting: a value matched to an unchanged old one, or (with no match of
  // its own) under an unchanged parent, reports its rules' errors as warnings.
  // Whether it changed is asked only when a rule fails.
  let memo: boolean | undefined;
  const same = () => (memo ??= old ? sameAsOld(v, old.value, s) : false);
  if (s.rules.length) expressions(v, s, path, old, old ? same : parentSame, root, errs, warnings);
  for (const a of s.allOf) walk(v, a, path, undefined, same, root, errs, warnings);
  if (Array.isArray(v)) {
    if (!s.items) return;
    const olds = correlate(v, old, s);
    v.forEach((x, i) => walk(x, s.items!, `${path}[${i}]`, olds[i], same, false, errs, warnings));
    return;
  }
  if (!isObject(v)) return;
  const before = old && isObject(old.value) ? old.value : undefined;
  const at = (k: string): Old => (before && Object.hasOwn(before, k) ? { value: before[k]! } : undefined);
  if (s.additional) for (const [k, x] of Object.entries(v)) walk(x, s.additional, `${path}[${k}]`, at(k), same, false, errs, warnings);
  if (s.props)
    for (const [k, x] of Object.entries(v)) {
      const p = s.props.get(k);
      if (p) walk(x, p, child(path, k), root && (k === "apiVersion" || k === "kind") ? undefined : at(k), same, false, errs, warnings);
    }
}

function expressions(
  v: JsonValue,
  s: Node,
  path: string,
  old: Old,
  ratchet: () => boolean,
  root: boolean,
  errs: FieldError[],
  warnings: string[],
): void {
  const type = s.types[0] ?? (Array.isArray(v) ? "array" : isObject(v) ? "object" : "");
  const self = celValue(v, s, root);
  const oldSelf = old ? celValue(old.value, s, root) : undefined;
  const here = path || NIL;
  for (const rule of s.rules) {
    if (rule.usesOldSelf && old === undefined && !rule.optionalOldSelf) continue;
    // format, sets and strings name the namespaces of library functions (format.dns1123Label(),
    // sets.contains(...)): cel-js has no namespaced functions.
    const vars: Record<string, unknown> = { ...NAMESPACES, self };
    if (rule.usesOldSelf) vars["oldSelf"] = rule.optionalOldSelf ? (old ? Optional.of(oldSelf) : Optional.none()) : oldSelf;
    let result: unknown;
    const stop = (detail: string) => errs.push(invalid(here, type, detail));
    touched = undefined;
    try {
      result = metering(
        () => rule.run(vars as Record<string, JsonValue>),
        (why) =>
          stop(
            why === "rule" ? `'${CostExceeded.TEXT}': ${NO_FURTHER} due to call cost exceeds limit for rule: ${errorString(rule)}` : why,
          ),
        "rule",
      );
    } catch (err) {
      if (err instanceof OutOfCost) throw err;
      errs.push(invalid(here, type, touched ? `${touched} evaluating rule: ${errorString(rule)}` : runError(err, rule)));
      continue;
    }
    if (touched) {
      errs.push(invalid(here, type, `${touched} evaluating rule: ${errorString(rule)}`));
      continue;
    }
    if (result === true) continue;
    if (typeof result !== "boolean") {
      errs.push(invalid(here, type, `rule did not evaluate to a bool (gave ${typeof result}) evaluating rule: ${errorString(rule)}`));
      continue;
    }
    const at = rule.fieldPath ? (path ? `${path}.${rule.fieldPath}` : rule.fieldPath) : here;
    let detail = rule.message.trim() ? rule.message.trim() : `failed rule: ${errorString(rule)}`;
    if (rule.messageExpression) {
      const expr = rule.messageExpression;
      try {
        const m = metering(
          () => expr(vars as Record<string, JsonValue>),
          (why) =>
            stop(why === "messageExpression" ? `${NO_FURTHER} due to call cost exceeds limit for messageExpression: ${quoted(rule)}` : why),
          "messageExpression",
        );
        if (typeof m === "string" && m.trim() && !/\n/.test(m.trim()) && m.trim().length <= 5120) detail = m.trim();
      } catch (err) {
        if (err instanceof OutOfCost) throw err;
        // A messageExpression that fails otherwise falls back to the message, as kube-apiserver does.
      }
    }
    const value = type === "object" || type === "array" ? OMIT : v;
    const e: FieldError =
      rule.reason === "FieldValueForbidden"
        ? forbidden(at, detail)
        : rule.reason === "FieldValueRequired"
          ? required(at, detail)
          : rule.reason === "FieldValueDuplicate"
            ? { type: "FieldValueDuplicate", field: at, value: value === OMIT ? OMIT : v, detail: "" }
            : invalid(at, value, detail);
    if (!rule.usesOldSelf && ratchet()) warnings.push(`${e.field}: ${detail}`);
    else errs.push(e);
  }
}

const NO_FURTHER = "no further validation rules will be run";

/** quoted is a rule's messageExpression as Go's %q prints it. */
const quoted = (rule: Rule): string => JSON.stringify(rule.messageExpressionText ?? "");

function errorString(rule: Rule): string {
  return rule.message.trim() || rule.rule.trim();
}

/** runError is a rule that could not run, in kube-apiserver's words (cel-go's error texts where cel-js's differ). */
function runError(err: unknown, rule: Rule): string {
  const msg = (messageOf(err) ?? String(err)).split("\n")[0]!;
  if (/^found no matching overload|^no such overload/i.test(msg))
    return `'no such overload: ${msg.replace(/^found no matching overload for /i, "").replace(/^no such overload: /i, "")}': call arguments did not match a supported operator, function or macro signature for rule: ${errorString(rule)}`;
  // cel-go's "index out of bounds: 5" (v0.26.0 interpreter/attributes.go),
  // where cel-js says "No such key: index out of bounds, index 5 >= size 1".
  const bounds = /^No such key: index out of bounds, index (\S+)/i.exec(msg);
  if (bounds) return `index out of bounds: ${bounds[1]} evaluating rule: ${errorString(rule)}`;
  const m = /^No such key: (.*)$/i.exec(msg);
  return `${m ? `no such key: ${m[1]}` : msg} evaluating rule: ${errorString(rule)}`;
}
