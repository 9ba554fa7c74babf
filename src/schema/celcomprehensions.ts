// CEL's two-variable comprehensions, which Kubernetes' CEL environment has
// (ext.TwoVarComprehensions, k8s.io/apiserver v0.36.3 pkg/cel/environment/base.go)
// and cel-js has not: all, exists and existsOne (exists_one) with an index or
// key and a value, transformList, transformMap and transformMapEntry. Their
// meaning is cel-go's expansion (github.com/google/cel-go v0.26.0,
// ext/comprehensions.go): `all` is false if the predicate is false for any
// element, else an error if it failed for one, else true; `exists` the mirror;
// `existsOne` and the transforms fail on the first error. A list's first
// variable is the index (int), a map's the key. Registered as cel-js macros:
// each is type-checked with its two variables in scope, then run here.
import { Optional, type Environment } from "@marcbachmann/cel-js";

/** The parts of cel-js's parse tree, checker, evaluator and scopes a macro uses (lib/macros.js). */
interface Ast {
  op: string;
  args: unknown;
}
interface CelType {
  kind: string;
  isDynOrBool(): boolean;
  keyType?: CelType;
  valueType?: CelType;
}
interface Checker {
  check(a: Ast, ctx: Scope): CelType;
  getType(name: string): CelType;
  registry: { getListType(t: CelType): CelType; getMapType(k: CelType, v: CelType): CelType; getOptionalType(t: CelType): CelType };
  createError(code: string, message: string, at: Ast): Error;
}
interface Evaluator {
  run(a: Ast, ctx: Scope): unknown;
}
interface Scope {
  forkWithVariable(name: string, t: CelType): Scope;
  reuse(parent: Scope): Scope;
  setIterValue(v: unknown, ev: Evaluator): Scope;
}

type Kind = "all" | "exists" | "existsOne" | "transformList" | "transformMap" | "transformMapEntry";

interface Macro {
  kind: Kind;
  range: Ast;
  first: string;
  second: string;
  filter?: Ast;
  body: Ast;
  outer?: Scope;
  inner?: Scope;
  typeCheck(checker: Checker, m: Macro, ctx: Scope): CelType;
  evaluate(ev: Evaluator, m: Macro, ctx: Scope): unknown;
}

/** variable is a macro argument that must be a plain name, as cel-go's extractIterVar requires. */
function variable(a: Ast, checkerless: string): string {
  if (a.op !== "id") throw new Error(`${checkerless}: argument must be a simple name`);
  return a.args as string;
}

/** entries are the (first, second) pairs a comprehension ranges over: a list's (index, item), a map's (key, value). */
function entries(range: unknown): [unknown, unknown][] {
  if (Array.isArray(range)) return range.map((x, i) => [BigInt(i), x]);
  // A set or map list (x-kubernetes-list-type) is a Set to cel-js (cel.ts valueSet): a list.
  if (range instanceof Set) return [...range].map((x, i) => [BigInt(i), x]);
  if (range instanceof Map) return [...range];
  if (range !== null && typeof range === "object" && !(range instanceof Uint8Array)) return Object.entries(range);
  throw new Error(`expression of type '${typeof range}' cannot be range of a comprehension (must be list or map)`);
}

/** asMap is a map CEL value as cel-js makes one: a plain object when every key is a string, else a Map. */
const asMap = (m: Map<unknown, unknown>) => ([...m.keys()].every((k) => typeof k === "string") ? Object.fromEntries(m) : m);

function typeCheck(chk: Checker, m: Macro, ctx: Scope): CelType {
  const range = chk.check(m.range, ctx);
  const dyn = chk.getType("dyn");
  const known = (t: CelType | undefined) => (t && t.kind !== "param" ? t : dyn);
  const [a, b] =
    range.kind === "list"
      ? [chk.getType("int"), known(range.valueType)]
      : range.kind === "map"
        ? [known(range.keyType), known(range.valueType)]
        : range.kind === "dyn"
          ? [dyn, dyn]
          : (() => {
              throw chk.createError(
                "invalid_comprehension_range",
                `${m.kind}() cannot range over this type (must be list or map)`,
                m.range,
              );
            })();
  m.outer = ctx.forkWithVariable(m.first, a);
  m.inner = m.outer.forkWithVariable(m.second, b);
  const bool = (x: Ast) => {
    const t = chk.check(x, m.inner!);
    if (!t.isDynOrBool()) throw chk.createError("invalid_macro_argument", `${m.kind}() predicate must return bool`, x);
  };
  if (m.filter) bool(m.filter);
  if (m.kind === "all" || m.kind === "exists" || m.kind === "existsOne") {
    bool(m.body);
    return chk.getType("bool");
  }
  const t = chk.check(m.body, m.inner);
  if (m.kind === "transformList") return chk.registry.getListType(t);
  if (m.kind === "transformMap") return chk.registry.getMapType(a, t);
  return t.kind === "map" ? t : chk.registry.getMapType(dyn, dyn);
}

function evaluate(ev: Evaluator, m: Macro, ctx: Scope): unknown {
  const outer = m.outer!.reuse(ctx);
  const inner = m.inner!.reuse(outer);
  const run = (x: Ast, k: unknown, v: unknown) => {
    outer.setIterValue(k, ev);
    inner.setIterValue(v, ev);
    return ev.run(x, inner);
  };
  const pairs = entries(ev.run(m.range, ctx));
  if (m.kind === "all" || m.kind === "exists") {
    const decisive = m.kind === "exists";
    let failed: unknown;
    for (const [k, v] of pairs) {
      try {
        if (run(m.body, k, v) === decisive) return decisive;
      } catch (err) {
        failed ??= err;
      }
    }
    if (failed) throw failed;
    return !decisive;
  }
  if (m.kind === "existsOne") return pairs.filter(([k, v]) => run(m.body, k, v) === true).length === 1;
  const kept = m.filter ? pairs.filter(([k, v]) => run(m.filter!, k, v) === true) : pairs;
  if (m.kind === "transformList") return kept.map(([k, v]) => run(m.body, k, v));
  const out = new Map<unknown, unknown>();
  for (const [k, v] of kept) {
    const made = run(m.body, k, v);
    if (m.kind === "transformMap") {
      out.set(k, made);
      continue;
    }
    for (const [key, value] of entries(made)) {
      if (out.has(key)) throw new Error(`insert failed: key ${String(key)} already exists`);
      out.set(key, value);
    }
  }
  return asMap(out);
}

/** withTwoVarComprehensions registers the two-variable comprehension macros on env, on lists and maps alike. */
export function withTwoVarComprehensions(env: Environment): Environment {
  const macro =
    (kind: Kind) =>
    ({ args, receiver }: { args: Ast[]; receiver: Ast }): Macro => {
      const first = variable(args[0]!, kind);
      const second = variable(args[1]!, kind);
      if (first === second) throw new Error(`duplicate variable name: ${first}`);
      return {
        kind,
        range: receiver,
        first,
        second,
        ...(args.length === 4 && { filter: args[2]! }),
        body: args.at(-1)!,
        typeCheck,
        evaluate,
      };
    };
  const names: [Kind, string, number[]][] = [
    ["all", "bool", [3]],
    ["exists", "bool", [3]],
    ["existsOne", "bool", [3]],
    ["transformList", "list<dyn>", [3, 4]],
    ["transformMap", "map<dyn, dyn>", [3, 4]],
    ["transformMapEntry", "map<dyn, dyn>", [3, 4]],
  ];
  for (const [kind, result, arities] of names)
    for (const receiver of ["list", "map"])
      for (const n of arities) {
        const sig = `${receiver}.${kind}(${Array(n).fill("ast").join(", ")}): ${result}`;
        env.registerFunction(sig, macro(kind) as never);
        if (kind === "existsOne") env.registerFunction(sig.replace("existsOne", "exists_one"), macro(kind) as never);
      }
  return env;
}

/**
 * withOptionalMaps registers optional.optMap(v, e) and optional.optFlatMap(v, e)
 * (cel-go v0.26.0 cel/library.go, optionalLib's macros): e with v bound to the
 * optional's value, as an optional (optMap) or as the optional e is (optFlatMap);
 * optional.none() when there is no value.
 */
export function withOptionalMaps(env: Environment): Environment {
  interface OptMacro {
    flat: boolean;
    target: Ast;
    name: string;
    body: Ast;
    scope?: Scope;
    typeCheck(chk: Checker, m: OptMacro, ctx: Scope): CelType;
    evaluate(ev: Evaluator, m: OptMacro, ctx: Scope): unknown;
  }
  const typeCheckOpt = (chk: Checker, m: OptMacro, ctx: Scope): CelType => {
    const t = chk.check(m.target, ctx);
    const inner = t.kind === "optional" && t.valueType && t.valueType.kind !== "param" ? t.valueType : chk.getType("dyn");
    m.scope = ctx.forkWithVariable(m.name, inner);
    const body = chk.check(m.body, m.scope);
    return m.flat ? body : chk.registry.getOptionalType(body);
  };
  const evaluateOpt = (ev: Evaluator, m: OptMacro, ctx: Scope): unknown => {
    const opt = ev.run(m.target, ctx) as Optional;
    if (!opt.hasValue()) return Optional.none();
    const scope = m.scope!.reuse(ctx).setIterValue(opt.value(), ev);
    const out = ev.run(m.body, scope);
    return m.flat ? out : Optional.of(out);
  };
  for (const flat of [false, true])
    env.registerFunction(`optional.${flat ? "optFlatMap" : "optMap"}(ast, ast): ${flat ? "optional<dyn>" : "optional<dyn>"}`, (({
      args,
      receiver,
    }: {
      args: Ast[];
      receiver: Ast;
    }): OptMacro => ({
      flat,
      target: receiver,
      name: variable(args[0]!, flat ? "optFlatMap" : "optMap"),
      body: args[1]!,
      typeCheck: typeCheckOpt,
      evaluate: evaluateOpt,
    })) as never);
  return env;
}
