// The cost of a CRD's x-kubernetes-validations estimated when the CRD is
// written, as kube-apiserver estimates it: each rule's worst case from the
// sizes the schema allows (maxItems, maxProperties, maxLength, enums, formats;
// without them, as many as fit in a 3 MiB request), times the number of times
// the rule can run (the enclosing lists' and maps' bounds), against a limit per
// rule and one for the whole schema. A CRD over either is refused with kube's
// words, so a rule that a real cluster refuses up front is not stored here and
// stopped at run time instead.
//
// Read at google/cel-go 14f6746a (checker/cost.go: the estimator, the costs of
// the standard functions and the sizes of the macros' comprehensions as
// parser/macro.go and, for two variables, v0.26.0 ext/comprehensions.go expand
// them; ext/sets.go), kubernetes/kubernetes
// staging/src/k8s.io/apiserver/pkg/cel (library/cost.go 00e63227: Kubernetes'
// library functions; limits.go; common/schemas.go, as kro repeats it: the
// sizes a schema allows), apiextensions-apiserver pkg/apiserver/schema/cel/
// compilation.go (the size estimator walking the schema, maxCardinality) and
// pkg/apis/apiextensions/validation (cel_validation.go: cardinality from the
// enclosing lists and maps; validation.go: the limits, the messages, and no
// per-rule limit for a version whose schema an update leaves unchanged). Its
// table test ports compilation_test.go's TestCostEstimation.
//
// The estimate walks cel-js's parse tree, with types inferred from the schema and the operators (cel-go
// works on its type-checked tree); where an operand's type is open (dyn), the costs of the overloads it
// could take are joined, as cel-go joins a call's candidate overloads.
import type { JsonObject } from "@bufbuild/protobuf";
import { Environment } from "@marcbachmann/cel-js";
import { isObject } from "../json.js";
import { forbidden, type FieldError } from "./fielderr.js";
import { hasAfterIndex } from "./cel.js";
import {
  add,
  BOOL,
  declOf,
  DYN,
  factor,
  fixed,
  INT,
  equalsInO1,
  LIST_EXTENSION,
  listExtensionCost,
  literalType,
  MAX,
  MAX_REQUEST,
  mul,
  nonNegative,
  REGEX_FACTOR,
  resultType,
  SCALAR,
  sum,
  t,
  times,
  TRAVERSAL,
  union,
  UNKNOWN,
  ZERO,
  type Decl,
  type Kind,
  type Range,
} from "./celsize.js";

/** The per-rule limit (StaticEstimatedCostLimit) and the whole schema's (StaticEstimatedCRDCostLimit). */
export const RULE_COST_LIMIT = 10_000_000;
export const SCHEMA_COST_LIMIT = 100_000_000;

const PARSER = new Environment({ unlistedVariablesAreDyn: true, enableOptionalTypes: true });

// --- the estimator ------------------------------------------------------------------

/** A node of cel-js's parse tree (or one made here for a macro's expansion). */
interface N {
  op: string;
  args: unknown;
}
interface Entry {
  container: "list" | "map";
  key: Range;
  val: Range;
}
interface Local {
  path: string[] | undefined;
  size?: Range | undefined;
  entry?: Entry | undefined;
  type: Decl;
}
/** What a call's cost is estimated from: an argument's path, type and size. */
interface Arg {
  path: string[] | undefined;
  type: Decl;
  expr: N | undefined;
  size: Range | undefined;
}
const ACCU = "@result";
const MACROS = new Set(["all", "exists", "exists_one", "existsOne", "map", "filter", "transformList", "transformMap", "transformMapEntry"]);
/** The comprehensions that only exist with two variables, with or without a filter. */
const TRANSFORMS = new Set(["transformList", "transformMap", "transformMapEntry"]);
/** Names before a dot that make a global function's name (or cel.bind), not a variable's field. */
const NAMESPACES = new Set(["cel", "sets", "strings", "optional", "math", "ip", "lists"]);
const node = (op: string, args: unknown): N => ({ op, args });
/** transformSteps are a transform's init, condition and step: accu + [t], or cel.@mapInsert(accu, k, t) or (accu, t); filtered. */
function transformSteps(name: string, v: string, body: N, args: N[]): [N, N, N] {
  const list = name === "transformList";
  const insert = name === "transformMap" ? [accu(), node("id", v), body] : [accu(), body];
  const step = list ? node("+", [accu(), node("list", [body])]) : node("call", ["cel.@mapInsert", insert]);
  return [node(list ? "list" : "map", []), node("value", true), args[3] ? node("?:", [args[2]!, step, accu()]) : step];
}
/** macroVars are the variables of a macro call: one for map(x, f) and the one-variable forms, two for the rest. */
const macroVars = (name: string, args: N[]) =>
  TRANSFORMS.has(name) || (args.length === 3 && name !== "map") ? args.slice(0, 2) : args.length <= 3 ? args.slice(0, 1) : [];
const accu = () => node("id", ACCU);
/** Coster is cel-go's coster over one rule, with kube's size estimator (the schema) and library estimates. */
class Coster {
  private readonly paths = new Map<N, string[]>();
  private readonly sizes = new Map<N, Range>();
  private readonly entries = new Map<N, Entry>();
  private readonly types = new Map<N, Decl>();
  private readonly locals = new Map<string, Local[]>();

  constructor(
    private readonly root: Decl,
    private readonly vars: Record<string, Decl>,
  ) {}

  cost(e: N): Range {
    if (negativeLiteral(e)) {
      this.types.set(e, literalType((e.args as N).args));
      return ZERO;
    }
    switch (e.op) {
      case "value":
        this.types.set(e, literalType(e.args));
        return ZERO;
      case "id":
        return this.ident(e);
      case ".":
        return this.select(e);
      case "list":
        return this.list(e);
      case "map":
        return this.map(e);
      case "call":
      case "rcall":
        return this.call(e);
      default:
        return this.operator(e);
    }
  }

  private ident(e: N): Range {
    const name = e.args as string;
    const v = this.peek(name);
    this.paths.set(e, v ? (v.path ?? []) : [name]);
    this.types.set(e, v ? v.type : (this.vars[name] ?? DYN));
    return fixed(1);
  }

  private select(e: N): Range {
    const [operand, field] = e.args as [N, string];
    let c = this.cost(operand);
    const ot = this.type(operand);
    if (ot.kind === "map" || ot.kind === "object") c = sum(c, fixed(1));
    this.paths.set(e, [...this.path(operand), field]);
    this.types.set(e, ot.kind === "object" ? (ot.fields?.get(field) ?? DYN) : ot.kind === "map" ? (ot.elem ?? DYN) : DYN);
    return c;
  }

  private list(e: N): Range {
    const items = e.args as N[];
    let c = ZERO;
    let item: Range = { min: items.length ? MAX : 0, max: 0 };
    for (const x of items) {
      c = sum(c, this.cost(x));
      item = union(item, this.sizeOrUnknown(x));
    }
    this.entries.set(e, { container: "list", key: fixed(1), val: item });
    this.types.set(e, t("list", items.length ? this.type(items[0]!) : DYN));
    return sum(c, fixed(10));
  }

  private map(e: N): Range {
    const entries = e.args as [N, N][];
    let c = ZERO;
    let key: Range = { min: entries.length ? MAX : 0, max: 0 };
    let val: Range = { ...key };
    for (const [k, v] of entries) {
      c = sum(sum(c, this.cost(k)), this.cost(v));
      key = union(key, this.sizeOrUnknown(k));
      val = union(val, this.sizeOrUnknown(v));
    }
    this.entries.set(e, { container: "map", key, val });
    this.types.set(e, t("map", entries.length ? this.type(entries[0]![1]) : DYN, entries.length ? this.type(entries[0]![0]) : DYN));
    return sum(c, fixed(30));
  }

  /** call is a function call; as is the node its type and size are kept for, when e is a rewritten one. */
  private call(e: N, as: N = e): Range {
    const [name, a, b] = e.args as [string, N | N[], N[] | undefined];
    const target = e.op === "rcall" ? (a as N) : undefined;
    const args = e.op === "rcall" ? b! : (a as N[]);
    if (!target && (name === "has" || name === "xfnHasField")) {
      // A presence test costs nothing itself (kube sets PresenceTestHasCost(false)); its operand does.
      this.types.set(as, BOOL);
      const inner = args[0]!;
      return inner.op === "." ? this.cost((inner.args as [N, string])[0]) : this.cost(inner);
    }
    if (
      target?.op === "id" &&
      NAMESPACES.has(target.args as string) &&
      !this.peek(target.args as string) &&
      !this.vars[target.args as string]
    ) {
      // cel.bind(...), sets.contains(...), strings.quote(...), optional.of(...): a macro or a global function with a dotted name.
      if (target.args === "cel" && name === "bind" && args.length === 3 && args[0]!.op === "id") return this.bind(e, args);
      return this.call(node("call", [`${target.args as string}.${name}`, args]), e);
    }
    const vars = macroVars(name, args);
    if (target && MACROS.has(name) && vars.length && vars.every((x) => x!.op === "id")) return this.macro(e, name, target, args);
    if (!target && name === "dyn" && args.length === 1) {
      const c = this.cost(args[0]!);
      this.copySizes(as, args[0]!);
      this.types.set(as, DYN);
      return sum(fixed(1), c);
    }
    const argCosts = args.map((x) => this.cost(x));
    const argNodes = args.map((x) => this.arg(x));
    let c = ZERO;
    let targetNode: Arg | undefined;
    if (target) {
      c = this.cost(target);
      targetNode = this.arg(target);
    }
    const est = this.functionCost(name, targetNode, argNodes, argCosts);
    this.types.set(
      as,
      resultType(
        name,
        targetNode?.type,
        argNodes.map((x) => x.type),
      ),
    );
    const size = est.size ?? this.computeSize(as);
    if (size) this.sizes.set(as, size);
    return sum(c, est.cost);
  }

  /** operator is one of cel-js's operator nodes, costed as the call cel-go makes of it. */
  private operator(e: N): Range {
    const op = e.op;
    if (op === "&&" || op === "||") {
      const [l, r] = e.args as [N, N];
      const lc = this.cost(l);
      const rc = this.cost(r);
      this.types.set(e, BOOL);
      return { min: lc.min, max: sum(lc, rc).max };
    }
    if (op === "?:") {
      const [cond, yes, no] = e.args as [N, N, N];
      const cc = this.cost(cond);
      const yc = this.cost(yes);
      const nc = this.cost(no);
      this.sizes.set(e, union(this.sizeOrUnknown(yes), this.sizeOrUnknown(no)));
      const ye = this.entry(yes);
      const ne = this.entry(no);
      if (ye && ne) this.entries.set(e, { container: ye.container, key: union(ye.key, ne.key), val: union(ye.val, ne.val) });
      const yt = this.type(yes);
      this.types.set(e, yt.kind === "dyn" ? this.type(no) : yt);
      return sum(cc, union(yc, nc));
    }
    if (op === "!_" || op === "-_") {
      const c = this.cost(e.args as N);
      this.types.set(e, op === "!_" ? BOOL : this.type(e.args as N));
      return sum(fixed(1), c);
    }
    if (op === ".?") {
      // x.?f is the call _?._(x, 'f'): O(1).
      const [operand, field] = e.args as [N, string];
      const c = this.cost(operand);
      const ot = this.type(operand);
      this.types.set(e, t("optional", ot.kind === "object" ? ot.fields?.get(field) : ot.kind === "map" ? ot.elem : DYN));
      return sum(fixed(1), c);
    }
    const [l, r] = e.args as [N, N];
    const lc = this.cost(l);
    const rc = this.cost(r);
    const args = sum(lc, rc);
    const lt = this.type(l);
    const rt = this.type(r);
    if (op === "[]" || op === "[?]") {
      const list = lt.kind === "list" || (lt.kind !== "map" && rt.kind === "int");
      const item = lt.kind === "list" || lt.kind === "map" ? (lt.elem ?? DYN) : DYN;
      this.types.set(e, op === "[?]" ? t("optional", item) : item);
      if (op === "[]") {
        const size = this.entry(l)?.val ?? undefined;
        this.paths.set(e, [...this.path(l), list ? "@items" : "@values"]);
        const s = size ?? this.computeSize(e);
        if (s) this.sizes.set(e, s);
      }
      return sum(fixed(1), args);
    }
    const ls = this.sizeOrUnknown(l);
    const rs = this.sizeOrUnknown(r);
    const compare = (): Range => {
      const smallest = Math.min(ls.max, rs.max);
      return sum(factor({ min: smallest > 0 ? 1 : 0, max: smallest }, TRAVERSAL), args);
    };
    const candidates = (kinds: Kind[]) => {
      const open = lt.kind === "dyn" && rt.kind === "dyn";
      return kinds.filter((k) => lt.kind === k || rt.kind === k || open);
    };
    switch (op) {
      case "==":
      case "!=":
        this.types.set(e, BOOL);
        // Two values of one of Kubernetes' library types compare in O(1) (k8s.io/apiserver v0.36.3
        // pkg/cel/library/cost.go, EstimateCallCost "_==_"): quantities, IPs, CIDRs, semvers; and types.
        // (A URL's cost there grows with its size; it is left to compare().)
        if (equalsInO1(lt, rt, l, r)) return sum(fixed(1), args);
        return compare();
      case "<":
      case "<=":
      case ">":
      case ">=":
        this.types.set(e, BOOL);
        return candidates(["string", "bytes"]).length ? union(compare(), sum(fixed(1), args)) : sum(fixed(1), args);
      case "in":
        this.types.set(e, BOOL);
        return rt.kind === "list" || rt.kind === "dyn" ? sum(factor(rs, 1), args) : sum(fixed(1), args);
      case "+": {
        const kinds = candidates(["string", "bytes", "list"]);
        this.types.set(e, lt.kind === "dyn" ? rt : lt);
        if (!kinds.length) return sum(fixed(1), args);
        const size = sum(ls, rs);
        this.sizes.set(e, size);
        const le = this.entry(l);
        const re = this.entry(r);
        if (le && re) this.entries.set(e, { container: le.container, key: union(le.key, re.key), val: union(le.val, re.val) });
        let c: Range | undefined;
        for (const k of kinds) {
          const one = k === "list" ? sum(fixed(1), args) : sum(factor(size, TRAVERSAL), args);
          c = c ? union(c, one) : one;
        }
        // With an open operand, the O(1) overloads (numbers, timestamps) are candidates too.
        return kinds.length < 3 && (lt.kind === "dyn" || rt.kind === "dyn") ? union(c!, sum(fixed(1), args)) : c!;
      }
      default:
        this.types.set(e, lt.kind === "dyn" ? rt : lt);
        return sum(fixed(1), args);
    }
  }

  /**
   * macro is a comprehension as cel-go expands its macros, costed as costComprehension: the range, the
   * accumulator's start and the result once, the loop's condition and step once per element of the range.
   */
  private macro(e: N, name: string, range: N, args: N[]): Range {
    const twoVars = TRANSFORMS.has(name) || (args.length === 3 && name !== "map");
    const v = (args[0]!.args as string) ?? "";
    const v2 = twoVars ? (args[1]!.args as string) : undefined;
    const body = args.at(-1)!;
    let init: N;
    let cond: N;
    let step: N;
    let result: N = accu();
    switch (name) {
      case "all":
        init = node("value", true);
        cond = node("call", ["@not_strictly_false", [accu()]]);
        step = node("&&", [accu(), body]);
        break;
      case "exists":
        init = node("value", false);
        cond = node("call", ["@not_strictly_false", [node("!_", accu())]]);
        step = node("||", [accu(), body]);
        break;
      case "exists_one":
      case "existsOne":
        init = node("value", 0n);
        cond = node("value", true);
        step = node("?:", [body, node("+", [accu(), node("value", 1n)]), accu()]);
        result = node("==", [accu(), node("value", 1n)]);
        break;
      case "transformList":
      case "transformMap":
      case "transformMapEntry":
        [init, cond, step] = transformSteps(name, v, body, args);
        break;
      default: {
        // map(x, f), map(x, p, f), filter(x, p)
        init = node("list", []);
        cond = node("value", true);
        const item = name === "filter" ? node("id", v) : body;
        step = node("+", [accu(), node("list", [item])]);
        if (name === "filter" || args.length === 3) step = node("?:", [name === "filter" ? body : args[1]!, step, accu()]);
      }
    }
    let c = sum(this.cost(range), this.cost(init));
    this.pushLocal(ACCU, init);
    const rangeType = this.type(range);
    const entry = this.entry(range);
    const container = entry?.container ?? (rangeType.kind === "map" ? "map" : "list");
    const base = this.path(range);
    if (v2 !== undefined) {
      this.push(v, {
        path: [...base, container === "list" ? "@indices" : "@keys"],
        size: entry?.key,
        type: container === "list" ? INT : (rangeType.key ?? DYN),
      });
      this.push(v2, { path: [...base, container === "list" ? "@items" : "@values"], size: entry?.val, type: rangeType.elem ?? DYN });
    } else
      this.push(v, {
        path: [...base, container === "list" ? "@items" : "@keys"],
        size: container === "list" ? entry?.val : entry?.key,
        type: (container === "list" ? rangeType.elem : rangeType.key) ?? DYN,
      });
    const loop = this.cost(cond);
    const stepCost = this.cost(step);
    this.pop(v);
    if (v2 !== undefined) this.pop(v2);
    c = sum(c, this.cost(result));
    this.pop(ACCU);
    const count = this.sizeOrUnknown(range);
    c = sum(c, times(count, sum(stepCost, loop)));
    const made = init.op === "list" || init.op === "map" ? t(init.op, DYN) : undefined;
    this.types.set(e, made ?? (name.startsWith("exists") || name === "all" ? BOOL : INT));
    if (init.op === "value") {
      const s = this.computeSize(init);
      if (s) this.sizes.set(e, s);
    } else {
      this.sizes.set(e, count);
      const se = this.entry(step);
      if (se) this.entries.set(e, se);
    }
    return c;
  }

  /** bind is cel.bind(v, init, expr): a comprehension over an empty list, costed as costBind. */
  private bind(e: N, args: N[]): Range {
    const [v, init, body] = args as [N, N, N];
    let c = sum(fixed(10), this.cost(init));
    this.pushLocal(v.args as string, init);
    c = sum(c, this.cost(body));
    this.pop(v.args as string);
    this.copySizes(e, body);
    this.types.set(e, this.type(body));
    return c;
  }

  /** functionCost is cel-go's functionCost with kube's library estimates (library/cost.go) and ext/sets.go's. */
  private functionCost(name: string, target: Arg | undefined, args: Arg[], argCosts: Range[]): { cost: Range; size?: Range } {
    const argSum = argCosts.reduce(sum, ZERO);
    const lib = this.library(name, target, args);
    if (lib) return { cost: sum(lib.cost, argSum), ...(lib.size && { size: lib.size }) };
    const size = (a: Arg | undefined) => (a ? (a.size ?? UNKNOWN) : UNKNOWN);
    const kind = (a: Arg | undefined) => a?.type.kind;
    if (name === "format" && target) return { cost: sum(factor(size(target), TRAVERSAL), argSum) };
    if (
      !target &&
      args.length === 1 &&
      ((name === "bytes" && kind(args[0]) === "string") || (name === "string" && kind(args[0]) === "bytes"))
    ) {
      const s = size(args[0]);
      return {
        cost: sum(factor(s, TRAVERSAL), argSum),
        size: name === "bytes" ? { min: s.min, max: mul(s.max, 4) } : { min: Math.floor(s.min / 4), max: s.max },
      };
    }
    if (name === "strings.quote" && args.length === 1) {
      const s = size(args[0]);
      return { cost: sum(factor(s, TRAVERSAL), argSum), size: { min: add(s.min, 2), max: add(mul(s.max, 2), 2) } };
    }
    if ((name === "startsWith" || name === "endsWith") && args.length === 1) return { cost: sum(factor(size(args[0]), TRAVERSAL), argSum) };
    if (name === "matches" && target && args.length === 1) {
      const str = factor(sum(size(target), fixed(1)), TRAVERSAL);
      return { cost: sum(times(str, factor(size(args[0]), REGEX_FACTOR)), argSum) };
    }
    if (name === "contains" && target && args.length === 1)
      return { cost: sum(times(factor(size(target), TRAVERSAL), factor(size(args[0]), TRAVERSAL)), argSum) };
    return { cost: sum(fixed(1), argSum) };
  }

  /** library is kube's CostEstimator.EstimateCallCost (and the sets library's estimates), by function name. */
  private library(name: string, target: Arg | undefined, args: Arg[]): { cost: Range; size?: Range } | undefined {
    const est = (a: Arg) => a.size ?? this.estimateSize(a.path) ?? UNKNOWN;
    if (!target && (name === "sets.contains" || name === "sets.intersects" || name === "sets.equivalent") && args.length === 2)
      return { cost: sum(factor(times(est(args[0]!), est(args[1]!)), name === "sets.equivalent" ? 2 : 1), fixed(1)) };
    if (target && args.length === 0 && LIST_EXTENSION.has(name)) return listExtensionCost(name, est(target), this.elementOf(target)?.type);
    switch (name) {
      case "isSorted":
      case "sum":
      case "max":
      case "min":
      case "indexOf":
      case "lastIndexOf": {
        if (!target) return undefined;
        const item = this.elementOf(target);
        if (item) {
          let each = fixed(1);
          if (item.type.kind === "string" || item.type.kind === "bytes") each = sum(each, factor(est(item), TRAVERSAL));
          return { cost: times(est(target), each) };
        }
        return { cost: factor(est(target), TRAVERSAL) };
      }
      case "url":
        return args.length === 1 ? { cost: factor(est(args[0]!), TRAVERSAL) } : undefined;
      case "lowerAscii":
      case "upperAscii":
      case "substring":
      case "trim": {
        if (!target) return undefined;
        const s = est(target);
        return { cost: factor(s, TRAVERSAL), size: s };
      }
      case "replace": {
        if (!target || args.length < 2) return undefined;
        const s = est(target);
        const from = est(args[0]!);
        const to = est(args[1]!);
        const count = { min: 0, max: 0 };
        const kept = { min: 0, max: 0 };
        if (from.min === 0) {
          count.max = s.max < MAX ? s.max + 1 : s.max;
          kept.max = s.max;
        } else if (to.max <= from.min) kept.max = s.max;
        else count.max = Math.ceil(s.max / from.min);
        if (from.max === 0) {
          count.min = s.min < MAX ? s.min + 1 : s.min;
          kept.min = s.min;
        } else if (from.max <= to.min) kept.min = s.min;
        else count.min = Math.ceil(s.min / from.max);
        return { cost: factor(s, 2 * TRAVERSAL), size: sum(times(count, to), kept) };
      }
      case "split": {
        if (!target) return undefined;
        const s = est(target);
        let max = s.max;
        const n = args[1]?.expr;
        if (n?.op === "value" && (typeof n.args === "bigint" || typeof n.args === "number")) max = Number(n.args);
        return { cost: factor(s, 2 * TRAVERSAL), size: { min: 0, max } };
      }
      case "join": {
        if (!target) return undefined;
        const listSize = est(target);
        const item = this.elementOf(target);
        let s = item ? times(listSize, est(item)) : ZERO;
        if (args.length) s = sum(s, times(est(args[0]!), { min: Math.max(0, listSize.min - 1), max: Math.max(0, listSize.max - 1) }));
        return { cost: factor(s, TRAVERSAL), size: s };
      }
      case "find":
      case "findAll": {
        if (!target || args.length < 1) return undefined;
        const s = est(target);
        return { cost: times(factor(sum(s, fixed(1)), TRAVERSAL), factor(est(args[0]!), REGEX_FACTOR)), size: { min: 0, max: s.max } };
      }
      // Parsing a string (global functions: its argument is args[0], as in kube's len(args) >= 1).
      case "cidr":
      case "isIP":
      case "isCIDR":
      case "quantity":
      case "isQuantity":
      case "ip.isCanonical":
        return args[0] ? { cost: factor(est(args[0]), TRAVERSAL) } : undefined;
      case "ip":
        if (args.length >= 1) return { cost: factor(est(args[0]!), TRAVERSAL) };
        // A CIDR's ip(): a field read.
        return target ? { cost: fixed(1) } : undefined;
      case "masked":
      case "prefixLength":
      case "family":
      case "isUnspecified":
      case "isLoopback":
      case "isLinkLocalMulticast":
      case "isLinkLocalUnicast":
      case "sign":
      case "asInteger":
      case "isInteger":
      case "asApproximateFloat":
      case "isGreaterThan":
      case "isLessThan":
      case "compareTo":
      case "add":
      case "sub":
        return { cost: fixed(1) };
      case "containsIP":
      case "containsCIDR": {
        if (!target || args.length < 1) return undefined;
        const ip = { min: 4, max: 16 };
        let c = factor(sum(ip, ip), TRAVERSAL);
        if (name === "containsCIDR") c = sum(sum(c, factor(ip, TRAVERSAL)), fixed(1));
        if (args[0]!.type.kind === "string") c = sum(c, factor(est(args[0]!), TRAVERSAL));
        return { cost: c };
      }
      default:
        return undefined;
    }
  }

  /** elementOf is listElementNode: a list's (or map's key) element, with its path for the schema's sizes. */
  private elementOf(list: Arg): Arg | undefined {
    const tp = list.type.kind === "list" ? list.type.elem : list.type.kind === "map" ? list.type.key : undefined;
    if (!tp) return undefined;
    return { path: list.path ? [...list.path, "@items"] : undefined, type: tp, expr: undefined, size: undefined };
  }

  // --- cel-go's bookkeeping: paths, sizes, entry sizes, local variables ----------

  private arg(x: N): Arg {
    let path: string[] | undefined = this.path(x);
    if (path[0] === ACCU) path = undefined;
    return { path, type: this.type(x), expr: x, size: this.computeSize(x) };
  }
  private type(x: N): Decl {
    return this.types.get(x) ?? DYN;
  }
  private path(x: N): string[] {
    if (x.op === "id") {
      const v = this.peek(x.args as string);
      if (v) return v.path ?? [];
    }
    return this.paths.get(x) ?? [];
  }
  private entry(x: N): Entry | undefined {
    const e = this.entries.get(x);
    if (e) return e;
    return x.op === "id" ? this.peek(x.args as string)?.entry : undefined;
  }
  private copySizes(dst: N, src: N): void {
    const s = this.computeSize(src);
    if (s) this.sizes.set(dst, s);
    const en = this.entry(src);
    if (en) this.entries.set(dst, en);
  }
  private sizeOrUnknown(x: N): Range {
    return this.computeSize(x) ?? UNKNOWN;
  }
  private computeSize(x: N): Range | undefined {
    const known = this.sizes.get(x);
    if (known) return known;
    const literal = exprSize(x);
    if (literal) return literal;
    const est = this.estimateSize(this.path(x));
    if (est) {
      this.sizes.set(x, est);
      return est;
    }
    const tp = this.type(x);
    if (SCALAR.has(tp.kind) || (tp.kind === "optional" && tp.elem && SCALAR.has(tp.elem.kind))) return fixed(1);
    if (x.op === "id") return this.peek(x.args as string)?.size;
    return undefined;
  }
  /** estimateSize is kube's sizeEstimator: a path from a rule's variable, through the schema, to a size. */
  private estimateSize(path: string[] | undefined): Range | undefined {
    if (!path?.length) return undefined;
    let d: Decl | undefined = this.root;
    for (const step of path.slice(1)) {
      if (step === "@items" || step === "@values") d = d.elem;
      else if (step === "@keys") d = d.key;
      else d = d.fields?.get(step);
      if (!d) return undefined;
    }
    return { min: 0, max: d.max };
  }
  private pushLocal(name: string, init: N): void {
    const p = this.path(init);
    this.push(name, { path: p, size: this.computeSize(init), entry: this.entry(init), type: this.type(init) });
  }
  private push(name: string, v: Local): void {
    const stack = this.locals.get(name) ?? [];
    stack.push(v);
    this.locals.set(name, stack);
  }
  private pop(name: string): void {
    this.locals.get(name)?.pop();
  }
  private peek(name: string): Local | undefined {
    return this.locals.get(name)?.at(-1);
  }
}

/** negativeLiteral is -1 or -1.5, which cel-go's parser reads as one literal and cel-js as a negation. */
const negativeLiteral = (e: N): boolean =>
  e.op === "-_" && (e.args as N).op === "value" && ["number", "bigint"].includes(typeof (e.args as N).args);

/** exprSize is computeExprSize: the size a literal has (a string's characters, a list's items). */
function exprSize(x: N): Range | undefined {
  if (negativeLiteral(x)) return fixed(1);
  if (x.op === "value") {
    const v = x.args;
    if (typeof v === "string") return fixed([...v].length);
    if (v instanceof Uint8Array) return fixed(v.length);
    return fixed(1);
  }
  if (x.op === "list") return fixed((x.args as N[]).length);
  if (x.op === "map") return fixed((x.args as unknown[]).length);
  return undefined;
}

/**
 * ruleCost is a rule's (or messageExpression's) estimated worst-case cost under the schema node it is on
 * (cel-go's Max); 0 for one that does not parse, as kube gives no cost to a rule it cannot compile.
 */
export function ruleCost(text: string, schema: JsonObject, root: boolean, optionalOldSelf = false): number {
  return costUnder(text, declOf(schema, root || schema["x-kubernetes-embedded-resource"] === true), optionalOldSelf);
}

/** costUnder is ruleCost under a node's DeclType (0 without one: rules cannot see the node). */
function costUnder(text: string, decl: Decl | undefined, optionalOldSelf: boolean): number {
  if (!decl) return 0;
  let ast: N;
  try {
    ast = (PARSER.parse(hasAfterIndex(text)) as unknown as { ast: N }).ast;
  } catch {
    return 0;
  }
  try {
    return new Coster(decl, { self: decl, oldSelf: optionalOldSelf ? t("optional", decl) : decl }).cost(ast).max;
  } catch {
    return 0; // a tree the estimate does not know: not refused for cost (the rule is still stopped by its runtime budget)
  }
}

/** costMessage is getCostErrorMessage. */
function costMessage(what: string, cost: number, limit: number): string {
  const f = cost / limit;
  const by = f > 100 ? "more than 100x" : f < 1.5 ? `${f.toFixed(6)}x` : `${f.toFixed(1)}x`;
  return (
    `${what} exceeds budget by factor of ${by} (try simplifying the rule, or adding maxItems, maxProperties, ` +
    "and maxLength where arrays, maps, and strings are declared)"
  );
}

/** extra is how many more times a node's children can occur than the node: extractMaxElements (undefined: unbounded). */
function extra(s: JsonObject): number | undefined {
  if (s["type"] === "object") {
    if (s["additionalProperties"] !== undefined && s["additionalProperties"] !== false)
      return s["maxProperties"] !== undefined ? nonNegative(s["maxProperties"]) : undefined;
    return 1;
  }
  if (s["type"] === "array") return s["maxItems"] !== undefined ? nonNegative(s["maxItems"]) : undefined;
  return 1;
}

/**
 * costErrors is what kube refuses in one version's schema for cost: each rule whose cost times the times
 * it can run is over RULE_COST_LIMIT (and each such messageExpression, not multiplied), unless unchanged
 * says the schema is the stored one; and a schema whose total is over SCHEMA_COST_LIMIT, naming the (at
 * most four) rules that contributed the most.
 */
export function costErrors(schema: JsonObject, at: string, unchanged = false, skip: (at: string) => boolean = () => false): FieldError[] {
  const errs: FieldError[] = [];
  const top: { path: string; cost: number }[] = [];
  let total = 0;
  const observe = (path: string, cost: number) => {
    total = add(total, cost);
    if (cost < SCHEMA_COST_LIMIT / 100) return;
    top.push({ path, cost });
    top.sort((a, b) => b.cost - a.cost);
    top.length = Math.min(top.length, 4);
  };
  const walk = (s: JsonObject, where: string, root: boolean, cardinality: number | undefined) => {
    const rules = Array.isArray(s["x-kubernetes-validations"]) && !skip(where) ? s["x-kubernetes-validations"] : [];
    // The node's type, once for all its rules.
    const decl = rules.length ? declOf(s, root || s["x-kubernetes-embedded-resource"] === true) : undefined;
    rules.forEach((r, i) => {
      if (!isObject(r) || typeof r["rule"] !== "string" || !r["rule"].trim()) return;
      const raw = costUnder(r["rule"], decl, r["optionalOldSelf"] === true);
      const cost = mul(raw, cardinality ?? Math.floor(MAX_REQUEST / ((decl?.min ?? 0) + 1)));
      const path = `${where}.x-kubernetes-validations[${i}]`;
      if (!unchanged && cost > RULE_COST_LIMIT)
        errs.push(forbidden(`${path}.rule`, costMessage("estimated rule cost", cost, RULE_COST_LIMIT)));
      observe(`${path}.rule`, cost);
      if (typeof r["messageExpression"] === "string" && r["messageExpression"].trim()) {
        const m = costUnder(r["messageExpression"], decl, r["optionalOldSelf"] === true);
        if (!unchanged && m > RULE_COST_LIMIT)
          errs.push(forbidden(`${path}.messageExpression`, costMessage("estimated messageExpression cost", m, RULE_COST_LIMIT)));
        observe(`${path}.messageExpression`, m);
      }
    });
    const more = cardinality === undefined ? undefined : extra(s);
    const child = more === undefined ? undefined : mul(cardinality!, more);
    if (isObject(s["additionalProperties"])) walk(s["additionalProperties"], `${where}.additionalProperties`, false, child);
    const props = isObject(s["properties"]) ? s["properties"] : {};
    for (const [k, v] of Object.entries(props)) if (isObject(v)) walk(v, `${where}.properties[${k}]`, false, child);
    if (isObject(s["items"])) walk(s["items"], `${where}.items`, false, child);
  };
  walk(schema, at, true, 1);
  if (total > SCHEMA_COST_LIMIT) {
    for (const { path } of top)
      errs.push(forbidden(path, "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"));
    errs.push(
      forbidden(
        at,
        costMessage("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema", total, SCHEMA_COST_LIMIT),
      ),
    );
  }
  return errs;
}
