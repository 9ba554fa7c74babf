// What a CRD's CEL rule costs while it runs, counted as cel-go's runtime cost
// tracker counts it, so kube's per-call limit and per-request budget stop the
// rules they would stop. cel-js counts nothing: every evaluation step of a
// parsed rule is wrapped here to charge one unit, and the calls whose work
// grows with their operands charge by the operands' sizes with cel-go's
// formulas (read at github.com/google/cel-go v0.31.0, interpreter/runtimecost.go
// costCall and actualSize; ext/sets.go trackSetsCost): equality and ordering
// the smaller size times 0.1, string concatenation the sum times 0.1, `in` a
// list its length, matches() (1 + the string's length) times 0.1 times the
// pattern's length times 0.25, contains() the product of both lengths times
// 0.1, startsWith/endsWith the prefix times 0.1, sets.contains and
// sets.intersects 1 + the product of the sizes (sets.equivalent twice that).
// On top, a step that makes a string or a list (not one reading a field or a
// variable) charges a tenth of its length, so no rule grows the heap without
// being charged for it.
import { RE2_MATCHES } from "../re2.js";

/** PER_CALL_LIMIT and REQUEST_BUDGET are kube's celconfig.PerCallLimit and RuntimeCELCostBudget. */
export const PER_CALL_LIMIT = 1_000_000;
export const REQUEST_BUDGET = 10_000_000;

/** cel-go's common.StringTraversalCostFactor and common.RegexStringLengthCostFactor. */
const TRAVERSAL = 0.1;
const REGEX_LENGTH = 0.25;

/** CostExceeded ends a rule that went past its per-call limit (cel-go's error text). */
export class CostExceeded extends Error {
  static readonly TEXT = "operation cancelled: actual cost limit exceeded";
  constructor() {
    super(CostExceeded.TEXT);
  }
}

/** The running rule's cost so far (undefined: no rule of this server is running, e.g. a function's own CEL). */
let meter: { used: number } | undefined;

/** charge counts n units against the running rule, ending it past the per-call limit. */
export function charge(n: number): void {
  if (meter && (meter.used += n) > PER_CALL_LIMIT) throw new CostExceeded();
}

/** withMeter runs fn with cost as the running rule's meter: cost.used then holds what it cost, whether it returned or threw. */
export function withMeter<T>(fn: () => T, cost: { used: number }): T {
  meter = cost;
  try {
    return fn();
  } finally {
    meter = undefined;
  }
}

/** Sizes of plain objects already counted: a rule's values are made for it and not changed while it runs. */
const SIZES = new WeakMap<object, number>();

/** actualSize is cel-go's actualSize: a string's or a list's length, a map's entries, an optional's value's; 1 otherwise. */
export function actualSize(v: unknown): number {
  if (typeof v === "string") return v.length;
  if (typeof v !== "object" || v === null) return 1;
  if (Array.isArray(v) || v instanceof Uint8Array) return v.length;
  if (v instanceof Map || v instanceof Set) return v.size;
  const opt = v as { hasValue?: () => boolean; value?: () => unknown };
  if (typeof opt.hasValue === "function" && v.constructor?.name === "Optional") return opt.hasValue() ? actualSize(opt.value!()) : 1;
  let n = SIZES.get(v);
  if (n === undefined) {
    n = Object.keys(v).length;
    SIZES.set(v, n);
  }
  return n;
}

const traversal = (n: number) => Math.ceil(n * TRAVERSAL);
const isText = (v: unknown) => typeof v === "string" || v instanceof Uint8Array;

/** A parsed node as metered reads it: cel-js's ASTNode (op, args) with what metering keeps on it. */
interface Step {
  op: string;
  args: unknown;
  evaluate: (...a: unknown[]) => unknown;
  /** This node's value is read by its parent's charge: kept here until then. */
  xfnKeep?: boolean;
  xfnLast?: unknown;
  /** What this node's call costs beyond its step, from its operands' last values. */
  xfnCost?: (operands: unknown[]) => number;
  xfnOperands?: Step[];
}

/** Steps that give a value already made (a variable, a field, an element, a literal, a branch): they make nothing to charge. */
const READS = new Set(["id", ".", "[]", ".?", "[?]", "value", "?:"]);

/** Operand costs by binary operator. */
const BINARY: Record<string, (l: unknown, r: unknown) => number> = {
  "==": (l, r) => traversal(Math.min(actualSize(l), actualSize(r))),
  "!=": (l, r) => traversal(Math.min(actualSize(l), actualSize(r))),
  "<": (l, r) => traversal(Math.min(actualSize(l), actualSize(r))),
  "<=": (l, r) => traversal(Math.min(actualSize(l), actualSize(r))),
  ">": (l, r) => traversal(Math.min(actualSize(l), actualSize(r))),
  ">=": (l, r) => traversal(Math.min(actualSize(l), actualSize(r))),
  "+": (l, r) => (isText(l) && isText(r) ? traversal(actualSize(l) + actualSize(r)) : 0),
  in: (_, r) => (Array.isArray(r) || r instanceof Set ? actualSize(r) : 0),
};

/** Operand costs by function or method name (a method's receiver first). */
const CALLS: Record<string, (a: unknown[]) => number> = {
  [RE2_MATCHES]: ([s, re]) => Math.ceil((1 + actualSize(s)) * TRAVERSAL) * Math.ceil(actualSize(re) * REGEX_LENGTH),
  contains: ([s, sub]) => (isText(s) ? traversal(actualSize(s)) * traversal(actualSize(sub)) : 0),
  startsWith: ([, p]) => traversal(actualSize(p)),
  endsWith: ([, p]) => traversal(actualSize(p)),
};
const SETS: Record<string, number> = { contains: 1, intersects: 1, equivalent: 2 };

/** costOf gives a node its operand cost, and marks the operands it reads; nodes with no such cost are left as they are. */
function costOf(n: Step): void {
  const a = Array.isArray(n.args) ? (n.args as unknown[]) : [];
  const steps = (xs: unknown[]) => (xs.every((x) => typeof x === "object" && x !== null) ? (xs as Step[]) : undefined);
  let operands: Step[] | undefined;
  let cost: ((o: unknown[]) => number) | undefined;
  const bin = Object.hasOwn(BINARY, n.op) ? BINARY[n.op] : undefined;
  if (bin && a.length === 2) {
    operands = steps(a);
    cost = ([l, r]) => bin(l, r);
  } else if (n.op === "rcall" && typeof a[0] === "string" && Array.isArray(a[2])) {
    const receiver = a[1] as Step;
    const set = receiver?.op === "id" && receiver.args === "sets" && Object.hasOwn(SETS, a[0]) ? SETS[a[0]] : undefined;
    if (set !== undefined) {
      operands = steps(a[2] as unknown[]);
      cost = ([x, y]) => 1 + actualSize(x) * actualSize(y) * set;
    } else if (Object.hasOwn(CALLS, a[0])) {
      operands = steps([receiver, ...(a[2] as unknown[])]);
      cost = CALLS[a[0]];
    }
  } else if (n.op === "call" && typeof a[0] === "string" && Array.isArray(a[1]) && Object.hasOwn(CALLS, a[0])) {
    operands = steps(a[1] as unknown[]);
    cost = CALLS[a[0]];
  }
  if (!operands || !cost) return;
  for (const o of operands) o.xfnKeep = true;
  n.xfnOperands = operands;
  n.xfnCost = cost;
}

/** annotate walks a parsed rule, giving each node its operand cost (costOf). */
function annotate(node: unknown): void {
  if (Array.isArray(node)) return node.forEach(annotate);
  if (typeof node !== "object" || node === null) return;
  const n = node as Step;
  if (typeof n.op === "string") costOf(n);
  annotate(n.args);
}

/**
 * metered makes every evaluation step of a parsed rule count. cel-js's node's
 * first evaluate() picks the function it will run from then on and stores it
 * on the node; that function is wrapped to charge its step, its operands'
 * cost (annotate) and a tenth of the size of a string or list it makes. The
 * wrapping of evaluate is done once, on the shared node class.
 */
export function metered(ast: object): void {
  annotate(ast);
  const proto = Object.getPrototypeOf(ast) as { evaluate: (...a: unknown[]) => unknown; xfnMetered?: boolean };
  if (proto.xfnMetered) return;
  const first = proto.evaluate;
  proto.xfnMetered = true;
  proto.evaluate = function (this: Step, ...args: unknown[]) {
    const out = first.apply(this, args);
    const chosen = this.evaluate;
    if (chosen !== proto.evaluate && !(chosen as { xfnCounted?: boolean }).xfnCounted) {
      const counted = function (this: Step, ...a: unknown[]) {
        return meter ? account(this, chosen.apply(this, a)) : chosen.apply(this, a);
      };
      (counted as { xfnCounted?: boolean }).xfnCounted = true;
      this.evaluate = counted;
    }
    return meter ? account(this, out) : out;
  };
}

/** account charges node n's step that gave r: one unit, its operands' cost, and a tenth of a string or list it made. */
function account(n: Step, r: unknown): unknown {
  charge(1);
  if (n.xfnKeep) n.xfnLast = r;
  if (n.xfnCost) {
    const ops = n.xfnOperands!;
    const values = ops.map((o) => o.xfnLast);
    for (const o of ops) o.xfnLast = undefined;
    charge(n.xfnCost(values));
  }
  if ((typeof r === "string" || Array.isArray(r)) && r.length > 10 && !READS.has(n.op)) charge(Math.ceil(r.length / 10));
  return r;
}
