// In-process stage costs for one request size: decode, function, encode.
//   node --import tsx bench/stages.ts [N] [iterations]
// Prints the median wall time of each stage and the process CPU per request
// (all threads, so garbage collection counts), then, for scale, what V8's own
// JSON code takes for the same data. Used to find where xfn's time goes; not
// part of npm run bench.
import { decodeRequest, encodeResponse } from "../src/wire/codec.js";
import { composed, request as build, xfnFunction } from "./workload.js";

const n = Number(process.argv[2] ?? 1000);
const iters = Number(process.argv[3] ?? 50);
const bytes = build(n);
const fn = xfnFunction();
const t = { decode: [] as number[], fn: [] as number[], encode: [] as number[] };
let out = 0;
let cpu = 0;
for (let k = 0; k < iters + 10; k++) {
  const u = process.cpuUsage();
  const a = performance.now();
  const req = decodeRequest(bytes);
  const b = performance.now();
  const rsp = fn(req, { now: () => new Date(0) } as never) as never;
  const c = performance.now();
  out = encodeResponse(rsp).length;
  const d = performance.now();
  const du = process.cpuUsage(u);
  if (k >= 10) {
    t.decode.push(b - a);
    t.fn.push(c - b);
    t.encode.push(d - c);
    cpu += (du.user + du.system) / 1000;
  }
}
// Medians: the machine is shared, and a mean takes in every pause.
const r = (xs: number[]) => Math.round(xs.sort((a, b) => a - b)[xs.length >> 1]! * 100) / 100;
console.log(
  `N=${n} request ${bytes.length} B, response ${out} B: decode ${r(t.decode)} ms, function ${r(t.fn)} ms, encode ${r(t.encode)} ms (medians); CPU ${Math.round((cpu / iters) * 100) / 100} ms/request`,
);

// For scale: the same data through V8's JSON code. Build the composed objects,
// JSON.stringify them, make bytes of that; JSON.parse the observed resources as JSON text.
const plain = (v: unknown) => JSON.parse(JSON.stringify(v)) as never;
const decoded = decodeRequest(bytes);
const xr = plain(decoded.observed!.composite!.resource);
const text = JSON.stringify(Object.fromEntries(Object.entries(decoded.observed!.resources).map(([k, v]) => [k, plain(v.resource)])));
const j = { build: [] as number[], stringify: [] as number[], bytes: [] as number[], parse: [] as number[] };
for (let k = 0; k < iters + 10; k++) {
  const a = performance.now();
  const objs = Array.from({ length: n }, (_, i) => composed(xr, i));
  const b = performance.now();
  const s = JSON.stringify(objs);
  const c = performance.now();
  out = Buffer.from(s).length;
  const d = performance.now();
  JSON.parse(text);
  const e = performance.now();
  if (k >= 10) {
    j.build.push(b - a);
    j.stringify.push(c - b);
    j.bytes.push(d - c);
    j.parse.push(e - d);
  }
}
console.log(
  `JSON for scale: build the ${n} objects ${r(j.build)} ms, JSON.stringify them ${r(j.stringify)} ms, Buffer.from that ${r(j.bytes)} ms; JSON.parse the observed resources (${text.length} B of JSON) ${r(j.parse)} ms`,
);
