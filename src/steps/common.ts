// Names and small helpers the lifecycle steps share.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { getOwn } from "../own.js";
import type { StepContext } from "../pipeline.js";
import * as request from "../sdk/request.js";

export const EXTERNAL_NAME = "crossplane.io/external-name";
export const CREATE_PENDING = "crossplane.io/external-create-pending";
export const CREATE_SUCCEEDED = "crossplane.io/external-create-succeeded";
export const CREATE_FAILED = "crossplane.io/external-create-failed";

/** observedXR returns the observed composite resource, or an empty object. */
export function observedXR(ctx: StepContext): JsonObject {
  return request.getObservedCompositeResource(ctx.req) ?? {};
}

/** observedResource returns an observed composed resource's object, or undefined. */
export function observedResource(ctx: StepContext, name: string): JsonObject | undefined {
  const all = request.getObservedComposedResources(ctx.req);
  return getOwn(all, name)?.resource;
}

/** isNonEmpty is true for a value that is present and not "", [], {} or null. */
export function isNonEmpty(v: JsonValue | undefined): boolean {
  if (v === undefined || v === null || v === "") return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === "object") return Object.keys(v).length > 0;
  return true;
}

/** sorted returns the keys of an object in a stable order. */
export const sortedKeys = (o: object): string[] => Object.keys(o).sort();
