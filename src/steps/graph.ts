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

/**
 * deletionWaves orders names for deletion, dependents first: wave 0 holds what
 * nothing (among names) depends on, and each later wave what only earlier
 * waves depend on. Names the graph does not mention are in wave 0. Each wave
 * is sorted. The graph must be acyclic.
 */
export function deletionWaves(g: Graph, names: readonly string[]): string[][] {
  const present = new Set(names);
  const users = dependents(g);
  const wave = new Map<string, number>();
  const waveOf = (n: string): number => {
    const known = wave.get(n);
    if (known !== undefined) return known;
    const mine = (users.get(n) ?? []).filter((u) => present.has(u));
    const w = mine.length === 0 ? 0 : 1 + Math.max(...mine.map(waveOf));
    wave.set(n, w);
    return w;
  };
  const out: string[][] = [];
  for (const n of [...present].sort()) (out[waveOf(n)] ??= []).push(n);
  return out.filter((w) => w !== undefined);
}
