// Choosing an XR's Composition, as Crossplane does.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isObject, metaOf, str } from "./kube.js";

/**
 * selectComposition picks the XR's Composition as Crossplane does: the XRD's
 * enforcedCompositionRef; else the XR's compositionRef; else, when the XR has
 * no compositionSelector either, the XRD's defaultCompositionRef; else the
 * Compositions for the XR's kind whose labels match the selector (all of
 * them without one). Where Crossplane would pick one of several at random
 * and record it on the XR, this asks for a choice instead. recorded is the
 * XR's own compositionRef, if any. It throws naming what is wrong.
 */
export function selectComposition(
  gvk: { apiVersion: string; kind: string },
  xrd: JsonObject | undefined,
  all: readonly JsonObject[],
  xr: JsonObject,
): { obj: JsonObject; recorded: string | undefined } {
  const spec = isObject(xr["spec"]) ? xr["spec"] : {};
  const cp = isObject(spec["crossplane"]) ? spec["crossplane"] : {};
  const field = (k: string) => cp[k] ?? spec[k]; // v2 XRs keep these under spec.crossplane, v1 XRs at spec
  const xrdSpec = xrd && isObject(xrd["spec"]) ? xrd["spec"] : {};
  const nameOf = (ref: JsonValue | undefined) => (isObject(ref) ? str(ref["name"]) : undefined);
  const { apiVersion, kind } = gvk;
  const typeOf = (x: JsonObject) => {
    const t = isObject(x["spec"]) && isObject(x["spec"]["compositeTypeRef"]) ? x["spec"]["compositeTypeRef"] : {};
    return `${String(t["apiVersion"])} ${String(t["kind"])}`;
  };
  const forKind = (x: JsonObject) => typeOf(x) === `${apiVersion} ${kind}`;

  // What the XR says must be well formed (Crossplane's schema would refuse it otherwise).
  const rawSelector = field("compositionSelector");
  const rawRef = field("compositionRef");
  if (rawSelector !== undefined && rawSelector !== null) {
    const labels = isObject(rawSelector) ? rawSelector["matchLabels"] : undefined;
    if (
      !isObject(rawSelector) ||
      (labels !== undefined && labels !== null && !(isObject(labels) && Object.values(labels).every((v) => typeof v === "string")))
    ) {
      throw new Error(`compositionSelector must be {matchLabels: {key: "value", ...}}, got ${JSON.stringify(rawSelector)}`);
    }
  }
  if (rawRef !== undefined && rawRef !== null && !nameOf(rawRef))
    throw new Error(`compositionRef must be {name: "..."}, got ${JSON.stringify(rawRef)}`);
  const selector = isObject(rawSelector) ? rawSelector : undefined;
  const enforced = nameOf(xrdSpec["enforcedCompositionRef"]);
  const own = nameOf(rawRef);
  const ref = enforced ?? own ?? (selector ? undefined : nameOf(xrdSpec["defaultCompositionRef"]));
  if (ref) {
    const found = all.find((x) => metaOf(x)["name"] === ref);
    const why = enforced ? " (the XRD's enforcedCompositionRef)" : own ? "" : " (the XRD's defaultCompositionRef)";
    if (!found) throw new Error(`Composition ${JSON.stringify(ref)}${why} not found`);
    if (!forKind(found)) throw new Error(`Composition ${JSON.stringify(ref)}${why} composes ${typeOf(found)}, not ${apiVersion} ${kind}`);
    return { obj: found, recorded: own };
  }
  const want = selector && isObject(selector["matchLabels"]) ? selector["matchLabels"] : {};
  const matching = all.filter((x) => {
    if (!forKind(x)) return false;
    const labels = isObject(metaOf(x)["labels"]) ? (metaOf(x)["labels"] as JsonObject) : {};
    return Object.entries(want).every(([k, v]) => labels[k] === v);
  });
  const what = `for ${apiVersion} ${kind}${selector ? ` with labels ${JSON.stringify(want)}` : ""}`;
  if (matching.length === 0) throw new Error(`no Composition ${what}`);
  if (matching.length > 1) {
    const names = matching.map((x) => String(metaOf(x)["name"])).sort();
    const choose = selector
      ? "compositionRef, or narrow compositionSelector"
      : "compositionRef or compositionSelector, or give the XRD a defaultCompositionRef";
    throw new Error(`${matching.length} Compositions ${what} (${names.join(", ")}): set the XR's ${choose}`);
  }
  return { obj: matching[0]!, recorded: own };
}
