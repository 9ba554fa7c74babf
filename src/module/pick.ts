// Finds the function a module exports, for `xfn serve` and bundled packages.
import type { RunFunction } from "../function.js";

/** pickFunction finds the exported function in an ES module or CommonJS namespace. */
export function pickFunction(mod: Record<string, unknown>): RunFunction | undefined {
  const candidates = [mod["default"], mod["runFunction"]];
  const d = mod["default"];
  if (d && typeof d === "object") candidates.push((d as Record<string, unknown>)["default"], (d as Record<string, unknown>)["runFunction"]);
  return candidates.find((c): c is RunFunction => typeof c === "function");
}
