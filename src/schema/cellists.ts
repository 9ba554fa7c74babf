// CEL's lists extension as Kubernetes' CRD rules have it (ext.Lists(ListsVersion(3)),
// k8s.io/apiserver v0.36.3 pkg/cel/environment/base.go, from Kubernetes 1.34), and
// the optional library's first() and last(): list.distinct(), flatten(),
// flatten(depth), reverse(), slice(start, end), sort(), sortBy(x, key),
// first(), last() and lists.range(n). Their meaning and errors are cel-go's
// (github.com/google/cel-go v0.26.0 ext/lists.go; cel/library.go for first and
// last), checked against kube's CEL built from its module
// (test/apiserver/kubecel-answers.json, test/crossplane/kubecel.test.ts).
import { Optional, type Environment } from "@marcbachmann/cel-js";
import { canonical, ListsLibrary } from "./cellibs.js";
import { charge } from "./celmeter.js";

const fail = (msg: string): never => {
  throw new Error(msg);
};

/** items is a list as an array (a set or map list reaches a rule as a Set, cel.ts valueSet). */
const items = (l: Iterable<unknown>): unknown[] => (Array.isArray(l) ? l : [...l]);

/** kindOf is the CEL type an element orders as, or undefined for one that does not order (a list, a map). */
function kindOf(v: unknown): string | undefined {
  if (typeof v === "bigint") return "int";
  if (typeof v === "number") return "double";
  if (typeof v === "string") return "string";
  if (typeof v === "boolean") return "bool";
  if (v instanceof Uint8Array) return "bytes";
  if (v instanceof Date) return "timestamp";
  const name = (v as object | null)?.constructor?.name;
  if (name === "UnsignedInt") return "uint";
  if (name === "Duration") return "duration";
  return undefined;
}

/** order compares two elements of one orderable kind, as cel-go's Compare does. */
function order(a: unknown, b: unknown): number {
  if (a instanceof Uint8Array && b instanceof Uint8Array) return Buffer.compare(a, b);
  if (a instanceof Date && b instanceof Date) return a.getTime() - b.getTime();
  const num = (x: unknown) => {
    const o = x as { value?: bigint; seconds?: bigint; nanos?: number };
    if (o?.constructor?.name === "UnsignedInt") return o.value!;
    if (o?.constructor?.name === "Duration") return o.seconds! * 1_000_000_000n + BigInt(o.nanos ?? 0);
    return x as bigint | number | string | boolean;
  };
  const [x, y] = [num(a), num(b)];
  return x < y ? -1 : x > y ? 1 : 0;
}

/** sortedBy is list ordered by the keys at the same places (cel-go sortListByAssociatedKeys). */
function sortedBy(list: unknown[], keys: unknown[]): unknown[] {
  // (sortBy makes its keys from the list itself: they are always as many)
  if (list.length === 0) return list;
  const kind = kindOf(keys[0]);
  if (!kind) fail("list elements must be comparable");
  if (keys.some((k) => kindOf(k) !== kind)) fail("list elements must have the same type");
  charge(list.length * Math.ceil(Math.log2(list.length + 1)));
  const idx = keys.map((_, i) => i).sort((i, j) => order(keys[i], keys[j]) || i - j);
  return idx.map((i) => list[i]);
}

function flatten(list: unknown[], depth: bigint): unknown[] {
  if (depth < 0n) fail("level must be non-negative");
  const out: unknown[] = [];
  for (const v of list) {
    if ((Array.isArray(v) || v instanceof Set) && depth > 0n) out.push(...flatten(items(v), depth - 1n));
    else out.push(v);
  }
  charge(out.length);
  return out;
}

/** The parts of cel-js's macro interface sortBy uses (as celcomprehensions.ts). */
interface Ast {
  op: string;
  args: unknown;
}
interface Scope {
  forkWithVariable(name: string, t: unknown): Scope;
  reuse(parent: Scope): Scope;
  setIterValue(v: unknown, ev: { run(a: Ast, ctx: Scope): unknown }): Scope;
}

/** withListsLibrary registers the lists extension, first() and last() on env. */
export function withListsLibrary(env: Environment): Environment {
  env
    .registerType("cel.ListsLibrary", ListsLibrary)
    .registerFunction("cel.ListsLibrary.range(int): list<int>", (_: ListsLibrary, n: bigint) => {
      charge(Number(n > 0n ? n : 0n));
      return Array.from({ length: Number(n > 0n ? n : 0n) }, (_x, i) => BigInt(i));
    })
    .registerFunction("list.distinct(): list", (l: Iterable<unknown>) => {
      const seen = new Set<string>();
      const all = items(l);
      charge(all.length);
      return all.filter((v) => {
        const c = canonical(v);
        return seen.has(c) ? false : (seen.add(c), true);
      });
    })
    .registerFunction("list.flatten(): list", (l: Iterable<unknown>) => flatten(items(l), 1n))
    .registerFunction("list.flatten(int): list", (l: Iterable<unknown>, d: bigint) => flatten(items(l), d))
    .registerFunction("list.reverse(): list", (l: Iterable<unknown>) => {
      const all = items(l);
      charge(all.length);
      return [...all].reverse();
    })
    .registerFunction("list.slice(int, int): list", (l: Iterable<unknown>, s: bigint, e: bigint) => {
      const all = items(l);
      if (s < 0n || e < 0n) fail(`cannot slice(${s}, ${e}), negative indexes not supported`);
      if (s > e) fail(`cannot slice(${s}, ${e}), start index must be less than or equal to end index`);
      if (BigInt(all.length) < e) fail(`cannot slice(${s}, ${e}), list is length ${all.length}`);
      charge(Number(e - s));
      return all.slice(Number(s), Number(e));
    })
    .registerFunction("list.sort(): list", (l: Iterable<unknown>) => sortedBy(items(l), items(l)))
    .registerFunction("list.first(): optional<dyn>", (l: Iterable<unknown>) => {
      const all = items(l);
      return all.length ? Optional.of(all[0]) : Optional.none();
    })
    .registerFunction("list.last(): optional<dyn>", (l: Iterable<unknown>) => {
      const all = items(l);
      return all.length ? Optional.of(all[all.length - 1]) : Optional.none();
    });
  // sortBy(x, key): the list ordered by key, computed with x bound to each element (cel-go's sortByMacro).
  env.registerFunction("list.sortBy(ast, ast): list", (({ args, receiver }: { args: Ast[]; receiver: Ast }) => {
    if (args[0]?.op !== "id") throw new Error("sortBy(var, key): var must be a simple name");
    const m = { list: receiver, name: args[0].args as string, key: args[1]!, scope: undefined as Scope | undefined };
    return {
      typeCheck(
        chk: { check(a: Ast, ctx: Scope): { kind: string; valueType?: unknown }; getType(n: string): unknown },
        _: unknown,
        ctx: Scope,
      ) {
        const t = chk.check(m.list, ctx);
        m.scope = ctx.forkWithVariable(m.name, t.kind === "list" && t.valueType ? t.valueType : chk.getType("dyn"));
        chk.check(m.key, m.scope);
        return t;
      },
      evaluate(ev: { run(a: Ast, ctx: Scope): unknown }, _: unknown, ctx: Scope) {
        const list = items(ev.run(m.list, ctx) as Iterable<unknown>);
        const scope = m.scope!.reuse(ctx);
        return sortedBy(
          list,
          list.map((v) => ev.run(m.key, scope.setIterValue(v, ev))),
        );
      },
    };
  }) as never);
  return env;
}
