// Kubernetes' own CEL (test/crossplane/kubecel, cel-go with kube's libraries and
// its CRD validation, built to WebAssembly by scripts/anchors.mjs), loaded into
// this process: the oracle of test/crossplane/celoracle.test.ts, and the third
// engine of bench/cel-engines.ts. Needs Go 1.26 to build (once; cached).
import { readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
// @ts-expect-error -- a plain .mjs script without types
import { build } from "../../scripts/anchors.mjs";

/** KubeCel is the loaded module's functions, with what loading it took. */
export interface KubeCel {
  /** evaluate is expr's value in kube's CRD rule environment, canonical (test/support/celspec.ts), or "error: ...". */
  evaluate(expr: string, bindings?: Record<string, string>): string;
  /** compileCRD is the JSON list of field errors the CRD (JSON) is refused with; "[]" when accepted. */
  compileCRD(crd: string): string;
  /** validate is the JSON list of field errors the rules of a CRD version give an object (compiled once per key). */
  validate(key: string, crd: string, version: string, obj: string, old?: string): string;
  /** startMs: load and start; rssMiB: memory it added; bytes: the module's size. */
  startMs: number;
  rssMiB: number;
  bytes: number;
}

let loaded: Promise<KubeCel> | undefined;

/** loadKubeCel builds (if need be) and starts the module, once per process. */
export function loadKubeCel(): Promise<KubeCel> {
  return (loaded ??= start());
}

async function start(): Promise<KubeCel> {
  const path = (build("kubecel") as Record<string, string>)["kubecel.wasm"]!;
  const rss0 = process.memoryUsage().rss;
  const t0 = performance.now();
  createRequire(import.meta.url)(join(dirname(path), "wasm_exec.js"));
  const G = globalThis as unknown as Record<string, unknown>;
  // Node's WebAssembly global, typed here: the project's lib has no DOM types.
  const wasm = G["WebAssembly"] as { instantiate(b: Buffer, imports: object): Promise<{ instance: object }> };
  const go = new (G["Go"] as new () => { importObject: object; run(i: object): Promise<void> })();
  const { instance } = await wasm.instantiate(readFileSync(path), go.importObject);
  void go.run(instance);
  const fn = <T>(name: string) => {
    const f = G[name];
    if (typeof f !== "function") throw new Error(`${path} set no ${name}`);
    return f as T;
  };
  const evaluate = fn<(e: string, b: string) => string>("xfnCelEval");
  return {
    evaluate: (expr, bindings = {}) => evaluate(expr, JSON.stringify(bindings)),
    compileCRD: fn("xfnCelCompileCRD"),
    validate: fn("xfnCelValidate"),
    startMs: performance.now() - t0,
    rssMiB: (process.memoryUsage().rss - rss0) / 1048576,
    bytes: statSync(path).size,
  };
}
