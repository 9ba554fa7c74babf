// The resource graph as SVG. Layout is @dagrejs/dagre's (the layered layout
// Mermaid's flowcharts use): pure JavaScript, no WebAssembly to load, and it
// lays out clusters, which are the deletion waves here. The drawing is ours:
// boxes coloured by state, edges from what is created first to what waits for
// it, labelled with the field waited for; every text is escaped. Only SVG 1.1
// is used (no markers, no paint-order), so that browsers, librsvg (GNOME,
// rsvg-convert) and ImageMagick draw the same picture: arrowheads are
// triangles of their own, a label sits on a white box of its own.
import dagre from "@dagrejs/dagre";
import type { GraphModel, State } from "./model.js";

const COLOURS: Record<State, { fill: string; stroke: string; dash?: string }> = {
  ready: { fill: "#d7f5dd", stroke: "#1a7f37" },
  unready: { fill: "#fff4ce", stroke: "#9a6700" },
  pending: { fill: "#eef1f4", stroke: "#57606a", dash: "4 3" },
  waiting: { fill: "#ffe2e0", stroke: "#cf222e" },
};
const STATE_TEXT: Record<State, string> = { ready: "ready", unready: "not ready", pending: "not created yet", waiting: "waiting" };

/** escape makes a value safe inside SVG text and attributes. */
export function escape(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

const CHAR_W = 7;
const LINE_H = 16;
const clip = (s: string, n = 60) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** svg draws the graph (a standalone SVG document). */
export function svg(g: GraphModel): string {
  const dg = new dagre.graphlib.Graph({ compound: true, multigraph: true });
  dg.setGraph({ rankdir: "LR", nodesep: 24, ranksep: 70, marginx: 16, marginy: 16 });
  dg.setDefaultEdgeLabel(() => ({}));
  const lines = new Map<string, string[]>();
  for (const n of g.nodes) {
    const text = [n.id, ...(n.kind ? [n.kind] : []), STATE_TEXT[n.state], ...(n.waitingFor ?? []).map((w) => `waits: ${clip(w, 40)}`)];
    lines.set(n.id, text);
    dg.setNode(`r:${n.id}`, { width: Math.max(...text.map((t) => t.length)) * CHAR_W + 24, height: text.length * LINE_H + 14 });
  }
  g.waves.forEach((wave, i) => {
    dg.setNode(`w:${i}`, { label: `deletion wave ${i + 1}`, clusterLabelPos: "top", paddingTop: 24 });
    for (const id of wave) dg.setParent(`r:${id}`, `w:${i}`);
  });
  g.edges.forEach((e, i) => {
    const label = e.label ? clip(e.label, 40) : "";
    dg.setEdge(`r:${e.to}`, `r:${e.from}`, { label, width: label.length * CHAR_W, height: label ? LINE_H : 0, labelpos: "c" }, `e${i}`);
  });
  dagre.layout(dg);
  const { width = 0, height = 0 } = dg.graph();
  const W = Math.ceil(width);
  const H = Math.ceil(height) + 28;
  const title = `${g.xr.kind}/${g.xr.name}`;
  const out: string[] = [
    open("svg", {
      xmlns: "http://www.w3.org/2000/svg",
      width: W,
      height: H,
      viewBox: `0 -28 ${W} ${H}`,
      "font-family": "sans-serif",
      "font-size": 12,
    }),
    el("title", {}, title),
    el("text", { x: 16, y: -10, "font-weight": "bold" }, title),
  ];
  g.waves.forEach((_, i) => {
    const c = dg.node(`w:${i}`);
    if (!c) return;
    const x = c.x - c.width / 2;
    const y = c.y - c.height / 2;
    const frame = { x, y, width: c.width, height: c.height, rx: 6, fill: "none", stroke: "#d0d7de", "stroke-dasharray": "6 4" };
    out.push(
      open("g", { class: "wave", "data-wave": i + 1 }) + el("rect", frame),
      `${el("text", { x: x + 8, y: y + 16, fill: "#57606a" }, `deletion wave ${i + 1}`)}</g>`,
    );
  });
  g.edges.forEach((e, i) => {
    const ed = dg.edge({ v: `r:${e.to}`, w: `r:${e.from}`, name: `e${i}` });
    if (!ed) return;
    const pts: { x: number; y: number }[] = ed.points;
    const points = pts.map((p) => `${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
    const label = e.label ? clip(e.label, 40) : "";
    out.push(
      open("g", { class: "edge", "data-from": e.to, "data-to": e.from }) +
        el("polyline", { points, fill: "none", stroke: "#57606a" }) +
        arrowhead(pts[pts.length - 2]!, pts[pts.length - 1]!) +
        // The label on a white box, so the line does not run through its letters.
        (label
          ? el("rect", {
              x: ed.x - ed.width / 2 - 2,
              y: ed.y - LINE_H / 2 - 1,
              width: ed.width + 4,
              height: LINE_H + 2,
              fill: "#ffffff",
              stroke: "none",
            }) + el("text", { x: ed.x, y: ed.y + 4, "text-anchor": "middle", fill: "#24292f" }, label)
          : "") +
        "</g>",
    );
  });
  for (const n of g.nodes) {
    const p = dg.node(`r:${n.id}`);
    const c = COLOURS[n.state];
    const x = p.x - p.width / 2;
    const y = p.y - p.height / 2;
    const box = {
      x,
      y,
      width: p.width,
      height: p.height,
      rx: 4,
      fill: c.fill,
      stroke: c.stroke,
      ...(c.dash ? { "stroke-dasharray": c.dash } : {}),
    };
    out.push(
      open("g", { class: "node", "data-name": n.id, "data-state": n.state }) + el("rect", box),
      ...lines
        .get(n.id)!
        .map((t, j) =>
          el("text", { x: x + 12, y: y + 18 + j * LINE_H, ...(j === 0 ? { "font-weight": "bold" } : { fill: "#57606a" }) }, t),
        ),
      "</g>",
    );
  }
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}

const ARROW_LENGTH = 9;
const ARROW_HALF_WIDTH = 4.5;

/** arrowhead is a filled triangle with its tip at to, pointing from from to to. */
function arrowhead(from: { x: number; y: number }, to: { x: number; y: number }): string {
  const len = Math.hypot(to.x - from.x, to.y - from.y) || 1;
  const [dx, dy] = [(to.x - from.x) / len, (to.y - from.y) / len];
  const [bx, by] = [to.x - dx * ARROW_LENGTH, to.y - dy * ARROW_LENGTH];
  const corner = (side: number) => `${(bx - dy * ARROW_HALF_WIDTH * side).toFixed(1)},${(by + dx * ARROW_HALF_WIDTH * side).toFixed(1)}`;
  return el("polygon", {
    class: "arrowhead",
    points: `${to.x.toFixed(1)},${to.y.toFixed(1)} ${corner(1)} ${corner(-1)}`,
    fill: "#57606a",
    stroke: "none",
  });
}

type Attrs = Record<string, string | number>;
const attrs = (a: Attrs) =>
  Object.entries(a)
    .map(([k, v]) => ` ${k}="${escape(String(v))}"`)
    .join("");
/** open is a start tag, its attribute values escaped. */
const open = (tag: string, a: Attrs) => `<${tag}${attrs(a)}>`;
/** el is an element: empty, or holding escaped text. */
const el = (tag: string, a: Attrs, text?: string) =>
  text === undefined ? `<${tag}${attrs(a)}/>` : `<${tag}${attrs(a)}>${escape(text)}</${tag}>`;
