// The --graph SVG as common renderers draw it: librsvg (rsvg-convert, what
// GNOME and many document tools use) and ImageMagick's own SVG renderer. Each
// picture is read back pixel by pixel (ImageMagick writes it as text): the
// edge labels must be dark text on white, and each arrowhead must be drawn.
// With paint-order halos and SVG markers, ImageMagick drew the labels blank
// and dropped the arrowheads.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { graphOf } from "../../src/graph/model.js";
import { svg } from "../../src/graph/svg.js";
import { GRAPH_CONTEXT_KEY } from "../../src/steps/dependencies.js";
import { needs } from "../support/needs.js";

const S = suite("graph: the SVG through librsvg and ImageMagick");
const R = needs(S, "rsvg", "imagemagick");

const picture = svg(
  graphOf(
    { apiVersion: "example.org/v1", kind: "XNet", metadata: { name: "net" } },
    [
      { name: "vpc", kind: "VPC", ready: true, observed: true },
      { name: "cluster", kind: "Cluster", ready: false, observed: false },
    ],
    { [GRAPH_CONTEXT_KEY]: { cluster: { waitFor: ["vpc.status.id"] } } },
  ),
);

/** darkest is the lowest grey level (0 black, 1 white) in the box around (x, y), of the PNG at png, read by ImageMagick. */
function darkest(png: string, x: number, y: number, w: number, h: number): number {
  const out = execFileSync(
    "convert",
    [
      png,
      "-crop",
      `${Math.round(w)}x${Math.round(h)}+${Math.round(x)}+${Math.round(y)}`,
      "+repage",
      "-colorspace",
      "gray",
      "-format",
      "%[fx:minima]",
      "info:",
    ],
    { encoding: "utf8" },
  );
  return Number(out.trim());
}

R("edge labels are dark text on white and arrowheads are drawn, in rsvg-convert and in ImageMagick", () => {
  const dir = mkdtempSync(join(tmpdir(), "xfn-render-graph-"));
  try {
    writeFileSync(join(dir, "g.svg"), picture);
    // Where the SVG says the label and the arrowhead are (the viewBox starts 28 above the picture).
    const viewTop = Number(/viewBox="0 (-?\d+)/.exec(picture)![1]);
    const text = /<text x="([\d.]+)" y="([\d.]+)" text-anchor="middle"[^>]*>status\.id<\/text>/.exec(picture)!;
    // The arrowhead's tip is where the edge's line ends.
    const tip = /<polyline points="[^"]*?([\d.]+),([\d.]+)"/.exec(picture)!;
    const [tx, ty] = [Number(text[1]), Number(text[2]) - viewTop];
    const [ax, ay] = [Number(tip[1]), Number(tip[2]) - viewTop];
    const renderers: Record<string, (out: string) => void> = {
      "rsvg-convert": (out) => execFileSync("rsvg-convert", [join(dir, "g.svg"), "-o", out]),
      // ImageMagick's own renderer (msvg:), not the librsvg it may be built with.
      "ImageMagick (msvg)": (out) => execFileSync("convert", [`msvg:${join(dir, "g.svg")}`, out]),
    };
    for (const [name, render] of Object.entries(renderers)) {
      const png = join(dir, `${name.replace(/\W+/g, "-")}.png`);
      render(png);
      // The label's letters: dark pixels in the middle of where it is written (the line is grey, and runs under it).
      assert.ok(darkest(png, tx - 20, ty - 10, 40, 12) < 0.3, `${name}: the label is drawn`);
      // The arrowhead: grey pixels just before its tip, left of the box it points at.
      assert.ok(darkest(png, ax - 8, ay - 2, 5, 4) < 0.6, `${name}: the arrowhead is drawn`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

S.run();
