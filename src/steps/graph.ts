// A small dependency graph over composed resource names.

/** CycleError reports a dependency cycle as "a -> b -> a". */
export class CycleError extends Error {
  override readonly name = "CycleError";
  constructor(readonly cycle: readonly string[]) {
    super(`dependency cycle: ${cycle.join(" -> ")}`);
  }
}

/** Graph maps each resource to the resources it depends on. */
export type Graph = ReadonlyMap<string, readonly string[]>;

/** checkAcyclic throws a CycleError naming the first cycle found, in a stable order. */
export function checkAcyclic(g: Graph): void {
  const state = new Map<string, "visiting" | "done">();
  const path: string[] = [];
  const visit = (n: string): void => {
    if (state.get(n) === "done") return;
    if (state.get(n) === "visiting") throw new CycleError([...path.slice(path.indexOf(n)), n]);
    state.set(n, "visiting");
    path.push(n);
    for (const d of g.get(n) ?? []) visit(d);
    path.pop();
    state.set(n, "done");
  };
  for (const n of [...g.keys()].sort()) visit(n);
}

/** dependents returns, for each resource, the resources that depend on it directly. */
export function dependents(g: Graph): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [n, deps] of g) for (const d of deps) out.set(d, [...(out.get(d) ?? []), n]);
  return out;
}
