// The resource graph of a render: states, dependency and wait edges with their
// labels, deletion waves; drawn as SVG (checked structurally, every value
// escaped) and as Mermaid; and `xfn render --graph` end to end.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { graphOf, mermaid } from "../../src/graph/model.js";
import { escape, svg } from "../../src/graph/svg.js";
import { GRAPH_CONTEXT_KEY } from "../../src/steps/dependencies.js";
import { run } from "../support/spawn.js";

const G = suite("graph");

const xr = {
  apiVersion: "example.org/v1",
  kind: "XNet",
  metadata: { name: "net" },
  status: { waiting: { cluster: { for: ["vpc.status.id"], since: "2026-11-26T10:00:00Z" } } },
};
const context = {
  [GRAPH_CONTEXT_KEY]: {
    cluster: { waitFor: ["vpc:status.id"] },
    subnet: { dependsOn: ["vpc"] },
    dns: { waitUntil: ['subnet.status.ok && "a" < "b"'] },
  },
};
const states = [
  { name: "vpc", kind: "VPC", ready: true, observed: true },
  { name: "subnet", kind: "Subnet", ready: false, observed: true },
  { name: "dns", kind: "Zone", ready: false, observed: false },
];

G("the model: states, edges labelled with what is waited for, deletion waves dependents first", () => {
  const g = graphOf(xr, states, context);
  assert.equal(g.xr, { kind: "XNet", name: "net" });
  assert.equal(
    g.nodes.map((n) => [n.id, n.kind ?? "", n.state, n.waitingFor ?? []]),
    [
      ["cluster", "", "waiting", ["vpc.status.id"]],
      ["dns", "Zone", "pending", []],
      ["subnet", "Subnet", "unready", []],
      ["vpc", "VPC", "ready", []],
    ],
  );
  assert.equal(g.edges, [
    { from: "cluster", to: "vpc", label: "status.id" },
    { from: "subnet", to: "vpc" },
    { from: "dns", to: "subnet", label: 'subnet.status.ok && "a" < "b"' },
  ]);
  assert.equal(g.waves, [["cluster", "dns"], ["subnet"], ["vpc"]]);
  // A dependsOn and a waitFor (or two waits) on the same pair: one edge, labelled with what is waited for.
  const both = graphOf(xr, states, {
    [GRAPH_CONTEXT_KEY]: { cluster: { dependsOn: ["vpc"], waitFor: ["vpc:status.id", "vpc:status.arn"] } },
  });
  assert.equal(both.edges, [{ from: "cluster", to: "vpc", label: "status.id, status.arn" }]);
  assert.is([...svg(both).matchAll(/<g class="edge"/g)].length, 1, "one edge drawn");
  const bare = graphOf({ kind: "XNet", metadata: { name: "net" } }, states, {});
  assert.equal([bare.edges, bare.waves], [[], [["dns", "subnet", "vpc"]]], "without the dependencies step: the resources, no edges");
});

G("SVG: a box per resource with its state, an edge per dependency from what comes first, waves as groups, every value escaped", () => {
  const out = svg(graphOf(xr, states, context));
  assert.match(out, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" width="\d+" height="\d+"/);
  const nodes = [...out.matchAll(/<g class="node" data-name="([^"]+)" data-state="(\w+)">/g)].map((m) => [m[1], m[2]]);
  assert.equal(nodes, [
    ["cluster", "waiting"],
    ["dns", "pending"],
    ["subnet", "unready"],
    ["vpc", "ready"],
  ]);
  const edges = [...out.matchAll(/<g class="edge" data-from="([^"]+)" data-to="([^"]+)"><polyline points="([^"]+)"/g)].map((m) => [
    m[1],
    m[2],
    m[3]!.split(" ").length >= 2,
  ]);
  assert.equal(edges, [
    ["vpc", "cluster", true],
    ["vpc", "subnet", true],
    ["subnet", "dns", true],
  ]);
  assert.match(out, />status\.id<\/text>/);
  assert.match(out, />subnet\.status\.ok &amp;&amp; &quot;a&quot; &lt; &quot;b&quot;<\/text>/, "the expression, escaped");
  assert.not.match(out, /&& "a"/, "no raw ampersand or quote");
  assert.equal(
    [...out.matchAll(/<g class="wave" data-wave="(\d)">/g)].map((m) => m[1]),
    ["1", "2", "3"],
  );
  assert.is(escape(`<a href="x" onclick='y'>&`), "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;");
});

G("SVG 1.1 only, as every renderer draws it: an arrowhead per edge, its tip at the line's end; each label on a white box", () => {
  const out = svg(graphOf(xr, states, context));
  // librsvg and ImageMagick leave out what SVG 2 added: paint-order blanked the labels, markers dropped the arrowheads.
  for (const svg2 of ["paint-order", "<marker", "marker-end", "auto-start-reverse"]) assert.not.ok(out.includes(svg2), svg2);
  const groups = [...out.matchAll(/<g class="edge"[^>]*>([\s\S]*?)<\/g>/g)].map((m) => m[1]!);
  assert.is(groups.length, 3);
  for (const g of groups) {
    const line = /<polyline points="([^"]+)"/.exec(g)![1]!.split(" ");
    const head = /<polygon class="arrowhead" points="([^"]+)"/.exec(g);
    assert.ok(head, `an arrowhead: ${g}`);
    assert.is(head![1]!.split(" ")[0], line.at(-1), "the tip is where the line ends");
    const label = /<text x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)<\/text>/.exec(g);
    if (!label) continue;
    const box = /<rect x="([\d.-]+)" y="([\d.-]+)" width="([\d.]+)" height="([\d.]+)" fill="#ffffff"/.exec(g);
    assert.ok(box && g.indexOf("<rect") < g.indexOf("<text"), `the label ${label[3]} on a box drawn first: ${g}`);
    const [x, y, w, h] = box!.slice(1).map(Number) as [number, number, number, number];
    const [tx, ty] = [Number(label[1]), Number(label[2])];
    assert.ok(tx > x && tx < x + w && ty - 8 > y && ty < y + h + 2, `the box holds the label: ${g}`);
  }
});

G("Mermaid: a subgraph per wave, classes by state, labelled edges", () => {
  const out = mermaid(graphOf(xr, states, context));
  assert.match(out, /^flowchart LR\n/);
  assert.match(
    out,
    /\n {2}subgraph w0\["deletion wave 1"\]\n {4}n0\["cluster<br\/>waiting"\]:::waiting\n {4}n1\["dns<br\/>Zone<br\/>not created yet"\]:::pending\n {2}end\n/,
  );
  assert.match(out, /\n {2}n3 -->\|"status\.id"\| n0\n/);
  assert.match(out, /\n {2}n3 --> n2\n/);
  assert.match(out, /\n {2}n2 -->\|"subnet\.status\.ok && #quot;a#quot; #lt; #quot;b#quot;"\| n1\n/);
});

G(
  "xfn render --graph: SVG for .svg, Mermaid for .mmd and .md, any other extension or a path it cannot write is a clear error",
  async () => {
    const dir = mkdtempSync(join(tmpdir(), "xfn-graph-"));
    try {
      const args = ["render", "examples/xr.yaml", "examples/composition.yaml", "examples/functions.yaml", "-o", "examples/observed.yaml"];
      const r = await run([...args, "--graph", join(dir, "g.svg")]);
      assert.is(r.code, 0, r.stderr);
      assert.match(r.stdout, /^---\napiVersion: example\.xfn\.dev\/v1alpha1\nkind: XBuckets\n/, "the render's output is unchanged");
      const pic = readFileSync(join(dir, "g.svg"), "utf8");
      assert.match(pic, /<g class="node" data-name="bucket-logs" data-state="ready">/);
      assert.match(pic, /<g class="node" data-name="bucket-assets" data-state="pending">/);
      assert.match(pic, /<g class="edge" data-from="bucket-logs" data-to="bucket-assets">/);
      const md = await run([...args, "--graph", join(dir, "g.md")]);
      assert.is(md.code, 0, md.stderr);
      assert.match(readFileSync(join(dir, "g.md"), "utf8"), /^```mermaid\nflowchart LR\n[\s\S]*\n```\n$/);
      writeFileSync(join(dir, "file"), "");
      const bad = await run([...args, "--graph", join(dir, "file", "g.svg")]);
      assert.is(bad.code, 1);
      assert.match(bad.stderr, /^xfn render: cannot write the graph to .*file\/g\.svg: ENOTDIR/);
      // A format it does not write is refused before anything runs, naming those it writes; nothing is written.
      for (const name of ["g.png", "g.SVG.pdf", "graph"]) {
        const other = await run([...args, "--graph", join(dir, name)]);
        assert.is(other.code, 1, `${name}: ${other.stdout}`);
        assert.is(other.stdout, "", "nothing rendered");
        assert.match(
          other.stderr,
          /cannot write a(?: \.\w+ file| file without an extension); it writes SVG \(\.svg\) and Mermaid \(\.mmd, or \.md/,
        );
        assert.not.ok(existsSync(join(dir, name)));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

G.run();
