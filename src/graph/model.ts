// A composition's resource graph: the composed resources (by their names in
// the pipeline) and their state, the dependencies between them (what the
// dependencies step recorded in the pipeline context, GRAPH_CONTEXT_KEY), what
// each waits for (the XR's status.waiting), and the deletion waves the
// deletion step would follow. Drawn by svg.ts and mermaid.ts.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isObject } from "../json.js";
import { deletionWaves } from "../steps/graph.js";
import { GRAPH_CONTEXT_KEY, namedIn, parseWaitFor, XR, type FieldWait } from "../steps/dependencies.js";

/** State is where a composed resource is: ready, created but not ready, to be created, or held back until something it waits for. */
export type State = "ready" | "unready" | "pending" | "waiting";

export interface GraphNode {
  /** Its name in the pipeline. */
  id: string;
  /** Its kind, where known (a resource not desired yet has none). */
  kind?: string;
  state: State;
  /** What it waits for, as status.waiting records it. */
  waitingFor?: string[];
}

export interface GraphEdge {
  /** The dependent. */
  from: string;
  /** What it depends on. */
  to: string;
  /** The field it waits for, or the expression, or nothing for a plain dependsOn. */
  label?: string;
}

export interface GraphModel {
  xr: { kind: string; name: string };
  nodes: GraphNode[];
  edges: GraphEdge[];
  /** Deletion waves, dependents first: wave 0 is deleted first. */
  waves: string[][];
}

/** ResourceState is what a render (or a host's reconcile) knows of one desired composed resource. */
export interface ResourceState {
  name: string;
  kind: string;
  ready: boolean;
  observed: boolean;
}

const strings = (v: JsonValue | undefined): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);

/**
 * graphOf builds the model from an XR (its status.waiting), the desired
 * resources' states, and the pipeline's context (the dependencies step's
 * record; without one, only the resources and their states).
 */
export function graphOf(xr: JsonObject, resources: readonly ResourceState[], context: JsonObject): GraphModel {
  const m = isObject(xr["metadata"]) ? xr["metadata"] : {};
  const status = isObject(xr["status"]) ? xr["status"] : {};
  const waiting = isObject(status["waiting"]) ? status["waiting"] : {};
  const deps = isObject(context[GRAPH_CONTEXT_KEY]) ? context[GRAPH_CONTEXT_KEY] : {};
  const nodes = new Map<string, GraphNode>();
  for (const r of resources) nodes.set(r.name, { id: r.name, kind: r.kind, state: r.ready ? "ready" : r.observed ? "unready" : "pending" });
  let edges: GraphEdge[] = [];
  const node = (id: string) => {
    if (!nodes.has(id)) nodes.set(id, { id, state: "waiting" });
    return nodes.get(id)!;
  };
  for (const [name, d] of Object.entries(deps)) {
    if (!isObject(d)) continue;
    node(name);
    for (const to of strings(d["dependsOn"])) {
      node(to);
      edges.push({ from: name, to });
    }
    for (const text of strings(d["waitFor"])) {
      let w: FieldWait;
      try {
        w = parseWaitFor(text, `${GRAPH_CONTEXT_KEY}.${name}.waitFor`);
      } catch {
        continue; // the step writes only entries it parsed; anything else was not written by it
      }
      if (w.resource === XR) continue; // a field of the XR itself: shown on the node, not as an edge
      node(w.resource);
      edges.push({ from: name, to: w.resource, label: w.path });
    }
    for (const e of strings(d["waitUntil"])) {
      // An expression names the resources it reads, as the dependencies step finds them: an edge to each.
      for (const other of namedIn(e, new Set(nodes.keys()))) if (other !== name) edges.push({ from: name, to: other, label: e });
    }
  }
  edges = joinEdges(edges);
  for (const [name, w] of Object.entries(waiting)) {
    const n = node(name);
    if (n.state !== "ready") n.state = "waiting";
    n.waitingFor = strings(isObject(w) ? w["for"] : undefined);
  }
  const graph = new Map<string, string[]>();
  for (const id of nodes.keys()) graph.set(id, []);
  for (const e of edges) graph.get(e.from)!.push(e.to);
  let waves: string[][];
  try {
    waves = deletionWaves(graph, [...nodes.keys()]);
  } catch {
    waves = [[...nodes.keys()].sort()];
  }
  return {
    xr: { kind: String(xr["kind"] ?? ""), name: String(m["name"] ?? "") },
    nodes: [...nodes.values()].sort((a, b) => a.id.localeCompare(b.id)),
    edges,
    waves,
  };
}

/**
 * joinEdges draws one edge per dependent and what it depends on: a dependsOn
 * and a waitFor (or several waits) on the same pair are one edge, labelled
 * with every field or expression waited for.
 */
function joinEdges(edges: GraphEdge[]): GraphEdge[] {
  const byPair = new Map<string, { from: string; to: string; labels: string[] }>();
  for (const e of edges) {
    const key = JSON.stringify([e.from, e.to]);
    const got = byPair.get(key) ?? { from: e.from, to: e.to, labels: [] };
    if (e.label !== undefined && !got.labels.includes(e.label)) got.labels.push(e.label);
    byPair.set(key, got);
  }
  return [...byPair.values()].map(({ from, to, labels }) => ({ from, to, ...(labels.length ? { label: labels.join(", ") } : {}) }));
}

/** escapeMermaid keeps a label inside Mermaid's quotes. */
function escapeMermaid(s: string): string {
  return s.replace(/"/g, "#quot;").replace(/[<>]/g, (c) => (c === "<" ? "#lt;" : "#gt;"));
}

const STATE_LABEL: Record<State, string> = { ready: "ready", unready: "not ready", pending: "not created yet", waiting: "waiting" };

/** mermaid is the graph as a Mermaid flowchart (for READMEs and pull requests): a subgraph per deletion wave. */
export function mermaid(g: GraphModel): string {
  const id = new Map(g.nodes.map((n, i) => [n.id, `n${i}`]));
  const lines = ["flowchart LR"];
  lines.push(
    "  classDef ready fill:#d7f5dd,stroke:#1a7f37",
    "  classDef unready fill:#fff4ce,stroke:#9a6700",
    "  classDef pending fill:#eef1f4,stroke:#57606a,stroke-dasharray:4 3",
    "  classDef waiting fill:#ffe2e0,stroke:#cf222e",
  );
  g.waves.forEach((wave, i) => {
    lines.push(`  subgraph w${i}["deletion wave ${i + 1}"]`);
    for (const name of wave) {
      const n = g.nodes.find((x) => x.id === name)!;
      const text = [name, n.kind ?? "", STATE_LABEL[n.state]].filter(Boolean).join("<br/>");
      lines.push(`    ${id.get(name)}["${escapeMermaid(text).replaceAll("#lt;br/#gt;", "<br/>")}"]:::${n.state}`);
    }
    lines.push("  end");
  });
  // From what is created first to what waits for it, as the SVG draws them.
  for (const e of g.edges) lines.push(`  ${id.get(e.to)} -->${e.label ? `|"${escapeMermaid(e.label)}"|` : ""} ${id.get(e.from)}`);
  return `${lines.join("\n")}\n`;
}
