// The function's input: what a Composition's pipeline step passes it. Its
// schema for Crossplane is package/input/*.yaml; keep the two in step.
import type { JsonObject } from "xfn-runtime";

/** Input configures the function. */
export interface Input {
  /** Region of a bucket when neither the bucket nor the XR names one. */
  defaultRegion: string;
}

/** parseInput checks the raw input; a thrown error becomes a Fatal result naming it. */
export function parseInput(raw: JsonObject): Input {
  const region = raw["defaultRegion"];
  if (region === undefined) return { defaultRegion: "us-east-1" };
  if (typeof region !== "string" || region === "") throw new Error("input defaultRegion must be a non-empty string");
  return { defaultRegion: region };
}
