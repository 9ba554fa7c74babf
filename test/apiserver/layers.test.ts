// The embedded API server's modules import one another without a circle, and
// its validator (schema compilation, defaulting, pruning, validation, CEL,
// metadata checks) stands on its own: none of it reaches the store, the
// watches, persistence or the HTTP server, so an offline validator of
// manifests can use it as it is.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ROOT } from "../support/spawn.js";

const L = suite("apiserver: module layers");
const DIR = join(ROOT, "src/apiserver");

/** imports maps each module of src/apiserver to the modules of src/apiserver it imports (types too). */
function imports(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const f of readdirSync(DIR).filter((f) => f.endsWith(".ts"))) {
    const text = readFileSync(join(DIR, f), "utf8");
    const deps = [...text.matchAll(/^(?:import|export)\b[^;]*?from "\.\/([\w-]+)\.js";/gms)].map((m) => `${m[1]}.ts`);
    out.set(f, [...new Set(deps)]);
  }
  return out;
}

/** cycle finds a circle of imports, as the list of modules around it, or undefined. */
function cycle(graph: Map<string, string[]>): string[] | undefined {
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (n: string): string[] | undefined => {
    if (state.get(n) === "done") return undefined;
    if (state.get(n) === "open") return [...stack.slice(stack.indexOf(n)), n];
    state.set(n, "open");
    stack.push(n);
    for (const d of graph.get(n) ?? []) {
      const c = visit(d);
      if (c) return c;
    }
    stack.pop();
    state.set(n, "done");
    return undefined;
  };
  for (const n of [...graph.keys()].sort()) {
    const c = visit(n);
    if (c) return c;
  }
  return undefined;
}

L("no two modules import each other, directly or around a circle (type imports included)", () => {
  const graph = imports();
  assert.ok(graph.size > 10, "the modules were read");
  const c = cycle(graph);
  assert.is(c, undefined, `a circle: ${c?.join(" -> ")}`);
  // The check finds one: the two modules of a circle made up.
  assert.equal(
    cycle(
      new Map([
        ["a.ts", ["b.ts"]],
        ["b.ts", ["a.ts"]],
      ]),
    ),
    ["a.ts", "b.ts", "a.ts"],
  );
});

L("the validator's modules reach neither the store, the watches, persistence nor the HTTP server", () => {
  const graph = imports();
  const reach = (from: string) => {
    const seen = new Set<string>();
    const go = (n: string) => {
      if (seen.has(n)) return;
      seen.add(n);
      for (const d of graph.get(n) ?? []) go(d);
    };
    go(from);
    return seen;
  };
  const validator = ["schema.ts", "cel.ts", "defaults.ts", "typed.ts", "meta.ts", "fielderr.ts", "node.ts", "formats.ts"];
  for (const v of validator) {
    assert.ok(graph.has(v), `${v} exists`);
    const reached = [...reach(v)].filter((m) => ["store.ts", "server.ts", "fanout.ts", "persist.ts", "gc.ts", "types.ts"].includes(m));
    assert.equal(reached, [], `${v} reaches ${reached.join(", ")}`);
  }
});

L.run();
