// What kube's compiler refuses in a CRD's rules, found on cel-js's parse tree:
// each x-kubernetes-validations rule type-checked against the schema it sits
// on (self typed as kube's SchemaDeclType types it), and the refusals cel-js's
// checker does not make itself (has() of a field the schema lacks, a constant
// pattern RE2 does not take, a literal mixing types, a name no rule has), in
// cel-go's words with its caret display. compileRuleExpression compiles one
// expression the same way without a schema, for the CEL conformance test and
// bench/cel-engines.ts. The rules' environment and evaluation are cel.ts's.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { Environment } from "@marcbachmann/cel-js";
import { onRE2, re2 } from "../re2.js";
import { isObject } from "../json.js";
import { invalid, type FieldError } from "./fielderr.js";
import { NAMESPACE_TYPES, NAMESPACES } from "./cellibs.js";
import { hasAfterIndex, RULE_ENV as ENV, ruleValue } from "./cel.js";
import { messageOf } from "../sdk/errors.js";
import { metered } from "./celmeter.js";
import { escape } from "./celsize.js";

/** The first parts of type names a rule may write as values (type(ip(x)) == net.IP). */
const TYPE_NAMESPACES = new Set(["net", "kubernetes", "google"]);

/**
 * issue is a compile error as cel-go's issues print one: where (line and column of the
 * expression, 1-based), what, then the line with a caret under the place
 * (common/errors.go ToDisplayString).
 */
function issue(text: string, column: number, detail: string): string {
  const before = text.slice(0, column - 1);
  const line = before.split("\n").length;
  const col = column - 1 - (before.lastIndexOf("\n") + 1) + 1;
  const shown = text.split("\n")[line - 1] ?? "";
  return `ERROR: <input>:${line}:${col}: ${detail}\n | ${shown}\n | ${".".repeat(col - 1)}^`;
}

/** Refused is an expression a CRD could not carry as a rule: it does not parse, or does not type-check, as ruleTypeErrors decides. */
export class Refused extends Error {}

/**
 * compileRuleExpression compiles one CEL expression as a rule's is compiled
 * (the same environment, has() rewrite, RE2 matches and type check), with
 * self, oldSelf and names declared dyn: how the CEL conformance test and
 * bench/cel-engines.ts reach the engine without a schema. It throws Refused
 * where a rule would refuse its CRD; the function it answers runs the
 * expression with vars bound.
 */
export function compileRuleExpression(text: string, names: string[] = []): (vars: Record<string, unknown>) => unknown {
  const src = hasAfterIndex(text);
  let parsed: ReturnType<typeof ENV.parse>;
  try {
    parsed = ENV.parse(src);
  } catch (err) {
    throw new Refused(messageOf(err));
  }
  const env = declared(ENV);
  for (const name of names) env.registerVariable(name, "dyn");
  const checked = env.check(src) as { valid: boolean; error?: { message: string; node?: { pos?: number } } };
  const error = checked.valid ? undefined : checkerError(checked.error?.message ?? "", checked.error?.node, text, env);
  if (error) throw new Refused(checked.error!.message);
  const refused = checked.valid ? (mixedLiteral(env, src) ?? staticError(env, text)) : undefined;
  if (refused) throw new Refused("detail" in refused ? refused.detail : refused.instantiation);
  onRE2((parsed as unknown as { ast: unknown }).ast);
  metered((parsed as unknown as { ast: object }).ast);
  return (vars) => parsed({ ...NAMESPACES, ...vars });
}

/**
 * celType is the CEL type a rule's self has under a (raw) schema, as kube's
 * SchemaDeclType types it, declared into env (object types get names of their
 * own): objects with properties are types with those fields, maps of
 * additionalProperties map<string, T>, arrays list<T>, formats date-time and
 * date timestamps, duration durations, byte bytes. What the schema leaves
 * open (preserved unknown fields, int-or-string, embedded resources, no type)
 * is dyn, so that no rule kube takes is refused here.
 */
function celType(s: JsonValue | undefined, env: Environment, name: string, root: boolean): string | Record<string, unknown> {
  const o = isObject(s) ? s : {};
  if (o["x-kubernetes-int-or-string"] === true || o["x-kubernetes-embedded-resource"] === true) return "dyn";
  switch (o["type"]) {
    case "integer":
      return "int";
    case "number":
      return "double";
    case "boolean":
      return "bool";
    case "string": {
      const f = o["format"];
      return f === "date-time" || f === "date"
        ? "google.protobuf.Timestamp"
        : f === "duration"
          ? "google.protobuf.Duration"
          : f === "byte"
            ? "bytes"
            : "string";
    }
    case "array": {
      const item = celType(o["items"], env, `${name}_item`, false);
      return `list<${named(item, env, `${name}_item`)}>`;
    }
    case "object": {
      if (isObject(o["additionalProperties"])) {
        const v = celType(o["additionalProperties"], env, `${name}_value`, false);
        return `map<string, ${named(v, env, `${name}_value`)}>`;
      }
      if (o["x-kubernetes-preserve-unknown-fields"] === true || !isObject(o["properties"])) return "dyn";
      const fields: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(o["properties"])) {
        // A property is a field by its escaped name (a name that cannot be escaped is no field);
        // a reserved word is taken bare too, as kube's checker takes self.namespace.
        const escaped = escape(k);
        if (escaped === undefined) continue;
        const field =
          root && k === "metadata"
            ? { name: "string", generateName: "string" }
            : named(celType(v, env, `${name}_${k}`, false), env, `${name}_${k}`);
        fields[escaped] = field;
        if (escaped !== k && /^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) fields[k] = field;
      }
      // At the root, kube gives every rule apiVersion, kind and metadata's name and generateName (WithTypeAndObjectMeta).
      if (root) {
        for (const k of ["apiVersion", "kind"]) fields[k] ??= "string";
        fields["metadata"] = { name: "string", generateName: "string" };
      }
      return fields;
    }
    default:
      return "dyn";
  }
}

/** cel-go's names of the operators cel-js reports, and the types whose mismatches both checkers see alike. */
const OPERATORS: Record<string, string> = {
  "+": "_+_",
  "-": "_-_",
  "*": "_*_",
  "/": "_/_",
  "%": "_%_",
  "==": "_==_",
  "!=": "_!=_",
  "<": "_<_",
  "<=": "_<=_",
  ">": "_>_",
  ">=": "_>=_",
  in: "@in",
};
// reverse: kube has list.reverse() only (its strings library version has no string.reverse()), as here.
// With them, kube's strings library's functions: both environments declare the same overloads.
const CORE_FUNCTIONS = new Set([
  "size",
  "startsWith",
  "endsWith",
  "contains",
  "matches",
  "reverse",
  "charAt",
  "indexOf",
  "lastIndexOf",
  "lowerAscii",
  "upperAscii",
  "replace",
  "split",
  "substring",
  "trim",
  "join",
]);
const NUMERIC = new Set(["int", "uint", "double"]);
/** goType is a cel-js type as cel-go prints it (list<string> is list(string)); undefined when it is open or a schema's object. */
function goType(t: string): string | undefined {
  const plain = /^(int|uint|double|string|bytes|bool|null|google\.protobuf\.(Timestamp|Duration))$/;
  if (plain.test(t)) return t === "null" ? "null_type" : t;
  const inner = /^(list|map|optional)<(.+)>$/.exec(t);
  if (!inner) return undefined;
  const parts = inner[2]!.split(/,\s*/).map(goType);
  const kind = inner[1] === "optional" ? "optional_type" : inner[1];
  return parts.every((p) => p !== undefined) ? `${kind}(${parts.join(", ")})` : undefined;
}

/**
 * checkerError is cel-go's word for what cel-js's checker found, when both
 * checkers find it alike: a field the schema lacks (undefined field), an
 * operator or a core string function given types it has no overload for
 * (found no matching overload). Numbers of mixed types ordered are left alone
 * (kube orders int against double); anything else, undefined.
 */
function checkerError(message: string, node: unknown, text: string, env?: Environment): { column: number; detail: string } | undefined {
  const first = message.split("\n")[0]!;
  const n = node as { pos?: number; args?: unknown } | undefined;
  const key = /^No such key: (.*)$/.exec(first);
  if (key) return { column: n?.pos ?? 1, detail: `undefined field '${key[1]}'` };
  const op = /^no such overload: (.+) (==|!=|<=|>=|<|>|\+|-|\*|\/|%|in) (.+)$/.exec(first);
  if (op) {
    // An object of the schema (cel-js names its types Self...) against a map: kube types them apart too.
    const object = (t: string) => /^\$?[Ss]elf/.test(t);
    const shown = (t: string) => (object(t) ? t : goType(t));
    const [l, r] =
      (object(op[1]!) && goType(op[3]!) !== undefined) || (object(op[3]!) && goType(op[1]!) !== undefined)
        ? [shown(op[1]!), shown(op[3]!)]
        : [goType(op[1]!), goType(op[3]!)];
    // Mixed numbers are ordered across types (kube's CrossTypeNumericComparisons) but not compared for
    // equality: 1.0 == 1 does not compile there. Null (which cel-go may take where a value could be
    // absent) is left to the rule's run.
    const ordering = ["<", "<=", ">", ">="].includes(op[2]!);
    if (!l || !r || (NUMERIC.has(l) && NUMERIC.has(r) && ordering) || l === "null_type" || r === "null_type") return undefined;
    // cel-go places the error at the operator.
    const [left] = Array.isArray(n?.args) ? (n.args as { end?: number }[]) : [];
    const at = text.indexOf(op[2]!, left?.end ?? 0);
    return { column: at + 1, detail: `found no matching overload for '${OPERATORS[op[2]!]}' applied to '(${l}, ${r})'` };
  }
  const call = /^found no matching overload for '(?:(\S+)\.)?(\w+)\((.*)\)'$/.exec(first);
  // A member function no library declares (100.least(42)): cel-go finds no such name, at its '('.
  if (call && call[1] !== undefined && goType(call[1]) !== undefined && env && !functionNames(env).has(call[2]!)) {
    const open = text.indexOf(`${call[2]}(`, n?.pos ?? 0);
    if (open >= 0) return { column: open + call[2]!.length + 1, detail: `undeclared reference to '${call[2]}' (in container '')` };
  }
  if (call && CORE_FUNCTIONS.has(call[2]!)) {
    const target = call[1] === undefined ? undefined : goType(call[1]);
    const args = call[3] ? call[3].split(/,\s*/).map(goType) : [];
    if ((call[1] !== undefined && !target) || args.some((a) => a === undefined)) return undefined;
    const applied = `${target ? `${target}.` : ""}(${args.join(", ")})`;
    // A member call is placed at its '(' (where cel-go's parser puts the call), a global one at its name.
    const start = n?.pos ?? 0;
    const open = target ? text.indexOf(`${call[2]}(`, start) : -1;
    const column = open >= 0 ? open + call[2]!.length + 1 : start + 1;
    return { column, detail: `found no matching overload for '${call[2]}' applied to '${applied}'` };
  }
  // orValue() given a value of another type than the optional's (cel-go: no overload, at its '(').
  const orValue = /^optional\.orValue\(value\) argument must be compatible type, got '(.+)' and '(.+)'$/.exec(first);
  if (orValue) {
    const [held, given] = [goType(orValue[1]!), goType(orValue[2]!)];
    const open = text.lastIndexOf("orValue(", n?.pos ?? text.length); // cel-js places it at the argument
    if (held && given && open >= 0)
      return { column: open + 8, detail: `found no matching overload for 'orValue' applied to 'optional_type(${held}).(${given})'` };
  }
  // A function no library has (neither kube's environment nor ours declares it): cel-go finds no such
  // name, and places the error at the call's '('.
  const unknownCall = /^found no matching overload for '(\w+)\(/.exec(first);
  if (unknownCall && env && !functionNames(env).has(unknownCall[1]!)) {
    const start = n?.pos ?? 0;
    return { column: start + unknownCall[1]!.length + 1, detail: `undeclared reference to '${unknownCall[1]}' (in container '')` };
  }
  // A name no rule has (kube declares only self, oldSelf and the libraries); a type's dotted name
  // (net.IP, kubernetes.Quantity), which cel-js does not know as a value, is left to the rule's run.
  const undeclared = /^Unknown variable: (\w+)$/.exec(first);
  if (undeclared && !TYPE_NAMESPACES.has(undeclared[1]!))
    return { column: (n?.pos ?? 0) + 1, detail: `undeclared reference to '${undeclared[1]}' (in container '')` };
  // A list or map literal mixing types (kube's environment checks aggregate literals as homogeneous,
  // cel-go checker/checker.go checkCreateList/checkCreateMap): placed at the element that differs.
  const mixed = /^(?:List elements must have the same type|Map (?:key|value) uses wrong type), expected type '(.+)' but found '(.+)'$/.exec(
    first,
  );
  if (mixed) {
    const [want, got] = [goType(mixed[1]!), goType(mixed[2]!)];
    if (want && got) return { column: (n?.pos ?? 0) + 1, detail: `expected type '${want}' but found '${got}'` };
  }
  return undefined;
}

/**
 * declared is a clone of env that knows only the names a rule may use: the
 * libraries' namespaces (NAMESPACES), self and oldSelf (dyn, unless the caller
 * declares them after), so that checking a rule that names anything else
 * (authorizer, which only admission policies have) refuses it as kube does.
 */
function declared(env: Environment, self = true): Environment {
  const out = env.clone({ unlistedVariablesAreDyn: false });
  for (const [name, lib] of Object.entries(NAMESPACES)) out.registerVariable(name, NAMESPACE_TYPES.get(lib.constructor)!);
  if (self) out.registerVariable("self", "dyn").registerVariable("oldSelf", "dyn");
  return out;
}

/** The parts of a cel-js parse tree node staticError reads. */
interface TreeNode {
  op?: string;
  args?: unknown;
  pos?: number;
  end?: number;
}

/** children are a tree node's child nodes, in cel-js's layouts (a node, a list, [name, receiver, [args]]). */
function children(n: TreeNode): TreeNode[] {
  const out: TreeNode[] = [];
  const add = (x: unknown) => {
    if (Array.isArray(x)) x.forEach(add);
    else if (x && typeof x === "object" && "op" in x) out.push(x as TreeNode);
  };
  add(n.args);
  return out;
}

/** REGEX_CALLS take a pattern kube checks when constant: matches() when it compiles, find() and findAll() when it makes the program. */
const REGEX_CALLS = new Set(["matches", "find", "findAll"]);

/**
 * staticError is what kube's compiler refuses that cel-js's checker lets
 * pass: has() of a field the schema does not have (cel-js checks only the
 * object it reads from), and a constant pattern RE2 does not take, given to
 * matches() ("invalid matches argument", at the pattern) or to find() or
 * findAll() (the program is not made: "error parsing regexp: ...", Go's
 * words, which re2js shares).
 */
function staticError(env: Environment, text: string): { column: number; detail: string } | { instantiation: string } | undefined {
  // cel.bind() is cel-js's own; kube's environment has no bindings library, so "cel" is no name there.
  const bind = /\bcel\s*\.\s*bind\s*\(/.exec(text.replace(/'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"/g, (q) => " ".repeat(q.length)));
  if (bind) return { column: bind.index + 1, detail: "undeclared reference to 'cel' (in container '')" };
  let root: TreeNode;
  try {
    root = (env.parse(text) as unknown as { ast: TreeNode }).ast;
  } catch {
    return undefined;
  }
  const walk = (n: TreeNode): { column: number; detail: string } | { instantiation: string } | undefined => {
    const args = Array.isArray(n.args) ? n.args : [];
    if (n.op === "call" && args[0] === "has" && Array.isArray(args[1]) && (args[1][0] as TreeNode | undefined)?.op === ".") {
      const arg = args[1][0] as TreeNode;
      let start = arg;
      while (start.op === "." && Array.isArray(start.args)) start = start.args[0] as TreeNode;
      const inner = env.check(text.slice(start.pos ?? 0, arg.end)) as { valid: boolean; error?: { message: string } };
      const missing = inner.valid ? null : /^No such key: (.*)$/.exec(inner.error?.message.split("\n")[0] ?? "");
      if (missing) return { column: (n.pos ?? 0) + 4, detail: `undefined field '${missing[1]}'` };
    }
    const name = args[0];
    const patternNode = (n.op === "rcall" ? (args[2] as TreeNode[] | undefined)?.[0] : (args[1] as TreeNode[] | undefined)?.[1]) as
      TreeNode | undefined;
    if ((n.op === "rcall" || n.op === "call") && typeof name === "string" && REGEX_CALLS.has(name) && patternNode?.op === "value") {
      const pattern = patternNode.args;
      if (typeof pattern === "string")
        try {
          re2(pattern);
        } catch (err) {
          if (name === "matches") return { column: (patternNode.pos ?? 0) + 1, detail: "invalid matches argument" };
          return { instantiation: messageOf(err).replace(/^invalid regular expression: /, "") };
        }
    }
    for (const c of children(n)) {
      const found = walk(c);
      if (found) return found;
    }
    return undefined;
  };
  return walk(root);
}

/** FORMAT_EXEMPT: the functions whose list arguments may mix types (cel-go ext/strings.go exempts format's). */
const FORMAT_EXEMPT = new Set(["format"]);

/** exemptRanges are the [pos, end) spans of the arguments of calls FORMAT_EXEMPT names, in a cel-js parse tree. */
function exemptRanges(node: unknown, out: [number, number][] = []): [number, number][] {
  if (!node || typeof node !== "object") return out;
  const n = node as { op?: string; args?: unknown; pos?: number; end?: number };
  if (Array.isArray(node)) {
    for (const x of node) exemptRanges(x, out);
    return out;
  }
  if ((n.op === "rcall" || n.op === "call") && Array.isArray(n.args) && FORMAT_EXEMPT.has(n.args[0] as string)) {
    const args = n.args.at(-1);
    if (Array.isArray(args)) for (const a of args as { pos?: number; end?: number }[]) out.push([a.pos ?? 0, a.end ?? 0]);
  }
  if (Array.isArray(n.args)) exemptRanges(n.args, out);
  else if (n.args && typeof n.args === "object") exemptRanges(n.args, out);
  return out;
}

/**
 * mixedLiteral is the refusal of a list or map literal that mixes types, which
 * kube's environment checks as homogeneous (cel-go's homogeneous aggregate
 * literal validator, with format()'s arguments exempt); env is the rule's
 * environment (its variables declared), checked again with the check on.
 */
function mixedLiteral(env: Environment, text: string): { column: number; detail: string } | undefined {
  const strict = env.clone({ homogeneousAggregateLiterals: true });
  let result: { valid: boolean; error?: { message: string; node?: { pos?: number } } };
  try {
    result = strict.check(text) as typeof result;
  } catch {
    return undefined;
  }
  if (result.valid || !/^(List elements|Map (key|value))/.test(result.error?.message ?? "")) return undefined;
  const at = result.error?.node?.pos ?? 0;
  if (exemptRanges((strict.parse(text) as unknown as { ast: unknown }).ast).some(([a, b]) => at >= a && at < b)) return undefined;
  return checkerError(result.error!.message, result.error!.node, text);
}

/** The names of the functions an environment declares (global and member), by environment. */
const FUNCTION_NAMES = new WeakMap<Environment, Set<string>>();
function functionNames(env: Environment): Set<string> {
  let names = FUNCTION_NAMES.get(env);
  if (!names) FUNCTION_NAMES.set(env, (names = new Set(env.getDefinitions().functions.map((f) => f.name))));
  return names;
}

/** named is a type as a field may name it: an object type is registered under name. */
function named(t: string | Record<string, unknown>, env: Environment, name: string): string {
  if (typeof t === "string") return t;
  env.registerType({ name, schema: t as never });
  return name;
}

/**
 * oldSelfErrors is what apiextensions-apiserver v0.36.3 (validation.go, the rule loop of
 * ValidateCustomResourceDefinitionOpenAPISchema) refuses in how a rule uses oldSelf: a
 * transition rule where old and new values cannot be matched, and optionalOldSelf on a
 * rule that does not read oldSelf.
 */
function oldSelfErrors(r: JsonObject, where: string, uncorrelatable: string | undefined, errs: FieldError[]): void {
  const text = typeof r["rule"] === "string" ? r["rule"] : "";
  if (!text.trim()) return;
  if (/\boldSelf\b/.test(text)) {
    if (uncorrelatable !== undefined)
      errs.push(
        invalid(`${where}.rule`, text, `oldSelf cannot be used on the uncorrelatable portion of the schema within ${uncorrelatable}`),
      );
  } else if (typeof r["optionalOldSelf"] === "boolean")
    errs.push(invalid(`${where}.optionalOldSelf`, r["optionalOldSelf"], "may not be set if oldSelf is not used in rule"));
}

/**
 * ruleTypeErrors type-checks a schema's x-kubernetes-validations against the
 * schema, as kube compiles them when the CRD is written: a rule over a field
 * the schema does not have, one whose value is not a bool, a messageExpression
 * that is not a string, refuse the CRD, in cel-go's words.
 */
export function ruleTypeErrors(
  schema: JsonObject,
  at: string,
  root = true,
  skip: (at: string) => boolean = () => false,
  uncorrelatable?: string,
): FieldError[] {
  const errs: FieldError[] = [];
  const rules = Array.isArray(schema["x-kubernetes-validations"]) ? schema["x-kubernetes-validations"].filter(isObject) : [];
  if (rules.length && !skip(at)) {
    const env = declared(ENV, false);
    const self = celType(schema, env, "Self", root);
    for (const v of ["self", "oldSelf"])
      if (typeof self === "string") env.registerVariable({ name: v, type: self });
      else env.registerVariable({ name: v, schema: self as never });
    // With optionalOldSelf, oldSelf is an optional of self's type (kube's optional_type(T)).
    let optionalEnv: Environment | undefined;
    const envOf = (r: JsonObject): Environment => {
      if (r["optionalOldSelf"] !== true) return env;
      if (!optionalEnv) {
        optionalEnv = declared(ENV, false);
        const t = named(celType(schema, optionalEnv, "Self", root), optionalEnv, "Self");
        optionalEnv.registerVariable({ name: "self", type: t }).registerVariable({ name: "oldSelf", type: `optional<${t}>` });
      }
      return optionalEnv;
    };
    rules.forEach((r, i) => {
      const where = `${at}.x-kubernetes-validations[${i}]`;
      // How a rule uses oldSelf is checked only of one that compiles, as kube checks it; one refused
      // here reads no oldSelf to kube, so optionalOldSelf on it is refused too.
      let compiled = false;
      let refusedRule = false;
      for (const [field, want] of [
        ["rule", "bool"],
        ["messageExpression", "string"],
      ] as const) {
        const text = r[field];
        if (typeof text !== "string" || !text.trim()) continue;
        let result: { valid: boolean; type?: string; error?: { message: string; node?: { pos?: number } } };
        const ruleEnv = field === "rule" ? envOf(r) : env;
        try {
          result = ruleEnv.check(text) as typeof result;
        } catch {
          continue; // does not parse: compileRule says so
        }
        // Refused: a field the schema does not have, an operator or core function given types it
        // has no overload for, a literal mixing types, a constant pattern RE2 does not take. Another
        // failure may be a function of Kubernetes' libraries cel-js lacks, which kube would take (the
        // rule then fails when run).
        const found = result.valid
          ? (mixedLiteral(ruleEnv, text) ?? staticError(ruleEnv, text))
          : checkerError(result.error?.message ?? "", result.error?.node, text, ruleEnv);
        const prefix = field === "rule" ? "compilation failed" : "messageExpression compilation failed";
        const refuse = (detail: string) => errs.push(invalid(`${where}.${field}`, ruleValue(r), detail));
        if (found && "instantiation" in found) refuse(`program instantiation failed: ${found.instantiation}`);
        else if (found) {
          refuse(`${prefix}: ${issue(text, found.column, found.detail)}`);
          if (field === "rule") refusedRule = true;
        } else if (!result.valid) continue;
        else if (result.type !== want && result.type !== "dyn")
          refuse(field === "rule" ? "cel expression must evaluate to a bool" : "messageExpression must evaluate to a string");
        else if (field === "rule") compiled = true;
      }
      if (compiled) oldSelfErrors(r, where, uncorrelatable, errs);
      else if (refusedRule && typeof r["optionalOldSelf"] === "boolean")
        errs.push(invalid(`${where}.optionalOldSelf`, r["optionalOldSelf"], "may not be set if oldSelf is not used in rule"));
    });
  }
  const props = isObject(schema["properties"]) ? schema["properties"] : {};
  // Where an old value cannot be matched to a new one (the items of a list that is not a map list,
  // the fields of an atomic map), a rule may not read oldSelf: the first such place is named.
  const inAtomicMap = schema["x-kubernetes-map-type"] === "atomic" ? (uncorrelatable ?? at) : uncorrelatable;
  const inItems = schema["x-kubernetes-list-type"] !== "map" ? (uncorrelatable ?? at) : uncorrelatable;
  for (const [k, v] of Object.entries(props))
    if (isObject(v)) errs.push(...ruleTypeErrors(v, `${at}.properties[${k}]`, false, skip, inAtomicMap));
  if (isObject(schema["items"])) errs.push(...ruleTypeErrors(schema["items"], `${at}.items`, false, skip, inItems));
  if (isObject(schema["additionalProperties"]))
    errs.push(...ruleTypeErrors(schema["additionalProperties"], `${at}.additionalProperties`, false, skip, uncorrelatable));
  return errs;
}
