// The embedded API server's modules and the schema's (src/schema: schema
// compilation, defaulting, pruning, validation, CEL) import one another
// without a circle; the schema's import nothing of the API server (xfn
// validate, render and the host use them as they are), and the API server's
// own validators (typed and metadata checks) reach neither the store, the
// watches, persistence nor the HTTP server.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ROOT } from "../support/spawn.js";

const L = suite("apiserver and schema: module layers");
const FOLDERS = ["src/apiserver", "src/schema"];

/** imports maps each module of src/apiserver and src/schema ("apiserver/x.ts") to the modules of both it imports (types too). */
function imports(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const folder of FOLDERS) {
    const here = folder.split("/")[1]!;
    for (const f of readdirSync(join(ROOT, folder)).filter((f) => f.endsWith(".ts"))) {
      const text = readFileSync(join(ROOT, folder, f), "utf8");
      const deps = [...text.matchAll(/^(?:import|export)\b[^;]*?from "\.\.?\/(?:(apiserver|schema)\/)?([\w-]+)\.js";/gms)]
        .filter((m) => m[1] !== undefined || !m[0].includes('"../'))
        .map((m) => `${m[1] ?? here}/${m[2]}.ts`);
      out.set(`${here}/${f}`, [...new Set(deps)]);
    }
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

L("src/schema, the one home of schemas and CEL (the API server, validate and render use it), imports nothing of the API server", () => {
  const graph = imports();
  const schema = [...graph.keys()].filter((m) => m.startsWith("schema/"));
  assert.ok(schema.length > 10, "the schema modules were read");
  for (const m of schema) {
    const server = (graph.get(m) ?? []).filter((d) => d.startsWith("apiserver/"));
    assert.equal(server, [], `${m} imports ${server.join(", ")}`);
  }
});

L("the API server's own validators reach neither the store, the watches, persistence nor the HTTP server", () => {
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
  const validator = ["apiserver/typed.ts", "apiserver/meta.ts", "apiserver/refusal.ts", "schema/schema.ts", "schema/cel.ts"];
  const server = ["store.ts", "server.ts", "fanout.ts", "persist.ts", "gc.ts", "types.ts"].map((f) => `apiserver/${f}`);
  for (const v of validator) {
    assert.ok(graph.has(v), `${v} exists`);
    const reached = [...reach(v)].filter((m) => server.includes(m));
    assert.equal(reached, [], `${v} reaches ${reached.join(", ")}`);
  }
});

L.run();
