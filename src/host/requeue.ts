// When a reconciled XR is looked at again: Crossplane's poll interval, the
// XR's own (crossplane.io/poll-interval), or its pipeline's TTL, with jitter.
import type { JsonObject } from "@bufbuild/protobuf";
import { parseDuration } from "../steps/duration.js";
import { isObject, metaOf } from "./kube.js";

/** Crossplane's defaults: --poll-interval 1m, --min-poll-interval 1s, and the annotation that sets one XR's. */
export const POLL_INTERVAL_MS = 60_000;
export const MIN_POLL_INTERVAL_MS = 1_000;
export const ANNOTATION_POLL_INTERVAL = "crossplane.io/poll-interval";

/**
 * requeueAfterMs is when a reconciled XR is looked at again, as Crossplane's
 * composite reconciler with realtime compositions has it (reconciler.go at
 * 2d040d2d): after the pipeline's TTL (its steps' shortest positive one)
 * when there is one, else after the XR's poll interval (its
 * crossplane.io/poll-interval annotation, no shorter than the minimum, else
 * the default), give or take a tenth (jitter), so XRs made together do not
 * all come back together.
 */
export function requeueAfterMs(xr: JsonObject, ttlSeconds: number | undefined, random = Math.random): number {
  let base = POLL_INTERVAL_MS;
  const annotations = metaOf(xr)["annotations"];
  const annotated = isObject(annotations) ? annotations[ANNOTATION_POLL_INTERVAL] : undefined;
  if (typeof annotated === "string") {
    try {
      base = Math.max(parseDuration(annotated), MIN_POLL_INTERVAL_MS);
    } catch {
      // Not a duration: the default, as Crossplane's GetPollInterval gives none.
    }
  }
  if (ttlSeconds !== undefined && ttlSeconds > 0) base = ttlSeconds * 1000;
  return Math.round(base + (random() - 0.5) * 2 * base * 0.1);
}
