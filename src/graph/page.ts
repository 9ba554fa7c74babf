// The host's /graph page: every XR the host reconciles with its SYNCED and
// READY, and the graph of the one chosen (svg.ts), from what the host's watches
// and its last reconcile of it saw. Plain HTML with the SVG inline and a few
// lines of script that fetch the page's main part again every two seconds, so
// it follows the host as watches deliver events. No build step, nothing
// fetched from elsewhere, every value escaped.
import type { JsonObject } from "@bufbuild/protobuf";
import type { HttpAnswer, Routes } from "../http.js";
import { isObject } from "../json.js";
import type { GraphModel } from "./model.js";
import { escape, svg } from "./svg.js";
import { statusOf } from "../trace/trace.js";

/** GraphSource is what the page reads: the host. */
export interface GraphSource {
  xrs(): Array<{ key: string; xr: JsonObject }>;
  graph(key: string): GraphModel | undefined;
}

/** main is the part of the page the script replaces: the list, and the chosen XR's graph. */
function main(source: GraphSource, chosen: string | null): string {
  const rows = source.xrs().map(({ key, xr }) => {
    const m = isObject(xr["metadata"]) ? xr["metadata"] : {};
    const name = `${String(xr["kind"] ?? "")}/${String(m["name"] ?? "")}`;
    const ns = typeof m["namespace"] === "string" ? m["namespace"] : "";
    const cls = key === chosen ? ' class="chosen"' : "";
    const { synced, ready } = statusOf(xr, false);
    return (
      `<tr${cls} data-key="${escape(key)}"><td><a href="?xr=${escape(encodeURIComponent(key))}">${escape(name)}</a></td>` +
      `<td>${escape(ns)}</td><td>${escape(synced)}</td><td>${escape(ready)}</td></tr>`
    );
  });
  const list = rows.length
    ? `<table><thead><tr><th>XR</th><th>NAMESPACE</th><th>SYNCED</th><th>READY</th></tr></thead><tbody>${rows.join("")}</tbody></table>`
    : "<p>No XRs yet.</p>";
  let picture = "";
  if (chosen) {
    const g = source.graph(chosen);
    picture = g ? `<section class="graph">${svg(g)}</section>` : `<p>No XR ${escape(chosen)} (it may be gone).</p>`;
  }
  return `${list}${picture}`;
}

const STYLE =
  "body{font-family:sans-serif;margin:24px;color:#24292f}table{border-collapse:collapse;margin-bottom:16px}" +
  "td,th{padding:4px 12px;text-align:left;border-bottom:1px solid #d0d7de}tr.chosen{background:#ddf4ff}" +
  "a{color:#0969da}";

// Refetch the main part every two seconds: what the host's watches have seen since.
const SCRIPT =
  "setInterval(async()=>{try{const r=await fetch('/graph/main'+location.search);" +
  "if(r.ok)document.querySelector('main').innerHTML=await r.text();}catch(e){}},2000);";

/** graphRoutes are /graph (the page) and /graph/main (its main part, which the page's script fetches). */
export function graphRoutes(source: GraphSource): Routes {
  const html = (body: string): HttpAnswer => ({ status: 200, type: "text/html; charset=utf-8", body });
  return {
    "/graph": (q) =>
      html(
        `<!doctype html><html><head><meta charset="utf-8"><title>xfn host: XRs</title><style>${STYLE}</style></head>` +
          `<body><h1>XRs</h1><main>${main(source, q.get("xr"))}</main><script>${SCRIPT}</script></body></html>\n`,
      ),
    "/graph/main": (q) => html(main(source, q.get("xr"))),
  };
}
