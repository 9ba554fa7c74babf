// Readers of a RunFunctionRequest. Each takes the request first, has no hidden
// state and never changes the request. Functions that return resources return
// the request's own objects: treat them as read-only, and write through the
// response (which starts as a copy, see response.ts).
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Capability, type Resource, type RunFunctionRequest } from "../gen/fn/v1/run_function_pb.js";
import { getOwn } from "../own.js";
import { InputError } from "./errors.js";

/** getTag returns the request's opaque tag ("" when Crossplane sent none). */
export function getTag(req: RunFunctionRequest): string {
  return req.meta?.tag ?? "";
}

/** getObservedComposite returns the observed XR, or undefined if the request has none. */
export function getObservedComposite(req: RunFunctionRequest): Resource | undefined {
  return req.observed?.composite;
}

/**
 * getObservedCompositeResource returns the observed XR's object, or undefined.
 * A type argument (say an interface from `xfn generate types`) states what you
 * expect the XR to be; nothing checks it, just as for JSON.parse: read fields
 * that users set through fieldpath, or validate them, before trusting them.
 */
export function getObservedCompositeResource<T extends object = JsonObject>(req: RunFunctionRequest): T | undefined {
  return req.observed?.composite?.resource as T | undefined;
}

/**
 * getObservedComposedResource returns one observed composed resource's object,
 * or undefined. A type argument is unchecked, as for getObservedCompositeResource.
 */
export function getObservedComposedResource<T extends object = JsonObject>(req: RunFunctionRequest, name: string): T | undefined {
  const resources = req.observed?.resources;
  return (resources ? getOwn(resources, name)?.resource : undefined) as T | undefined;
}

/** getObservedComposedResources returns the observed composed resources by name. */
export function getObservedComposedResources(req: RunFunctionRequest): Readonly<Record<string, Resource>> {
  return req.observed?.resources ?? {};
}

/** getDesiredComposite returns the XR as desired by earlier steps, or undefined. */
export function getDesiredComposite(req: RunFunctionRequest): Resource | undefined {
  return req.desired?.composite;
}

/** getDesiredComposedResources returns the composed resources desired by earlier steps. */
export function getDesiredComposedResources(req: RunFunctionRequest): Readonly<Record<string, Resource>> {
  return req.desired?.resources ?? {};
}

/** InputParser checks a raw input object and returns it typed; it throws on bad input. */
export type InputParser<T> = (input: JsonObject) => T;

/**
 * getInput returns the step's input block. With a parser (a plain function, or
 * e.g. a zod schema's `parse`), the input is validated and typed; a parser's
 * error is rethrown as "cannot parse function input: …". A request without
 * input yields an empty object, so a parser sees the same shape either way.
 */
export function getInput(req: RunFunctionRequest): JsonObject;
export function getInput<T>(req: RunFunctionRequest, parse: InputParser<T>): T;
export function getInput<T>(req: RunFunctionRequest, parse?: InputParser<T>): T | JsonObject {
  const input = req.input ?? {};
  if (!parse) return input;
  try {
    return parse(input);
  } catch (err) {
    throw new InputError(`cannot parse function input: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

/** getContextKey returns a value from the pipeline context, or undefined when the key is not set. */
export function getContextKey(req: RunFunctionRequest, key: string): JsonValue | undefined {
  const ctx = req.context;
  return ctx ? getOwn(ctx, key) : undefined;
}

/** ENVIRONMENT_KEY is the context key under which Crossplane keeps the environment. */
export const ENVIRONMENT_KEY = "apiextensions.crossplane.io/environment";

/**
 * getEnvironment returns the pipeline's environment: what function-environment-configs
 * (or Crossplane v1's EnvironmentConfigs) put in the context under ENVIRONMENT_KEY,
 * or undefined when nothing did. Change it with setContextKey(rsp, ENVIRONMENT_KEY, ...).
 */
export function getEnvironment(req: RunFunctionRequest): JsonObject | undefined {
  const env = getContextKey(req, ENVIRONMENT_KEY);
  return env !== null && typeof env === "object" && !Array.isArray(env) ? env : undefined;
}

/**
 * getAllRequiredResources returns every requirement Crossplane answered, by
 * name (required_resources, and extra_resources for names only it holds).
 */
export function getAllRequiredResources(req: RunFunctionRequest): Record<string, JsonObject[]> {
  const out: Record<string, JsonObject[]> = {};
  for (const name of new Set([...Object.keys(req.requiredResources), ...Object.keys(req.extraResources)])) {
    Object.defineProperty(out, name, { value: getRequiredResources(req, name)!, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/**
 * getRequiredResources returns the objects Crossplane fetched for the named
 * requirement. It reads `required_resources` and, for functions that asked
 * through the deprecated field, `extra_resources`. Undefined means Crossplane has
 * not answered this requirement yet (ask with requireResources); an empty array
 * means it looked and found nothing.
 */
export function getRequiredResources(req: RunFunctionRequest, name: string): JsonObject[] | undefined {
  const found = getOwn(req.requiredResources, name) ?? getOwn(req.extraResources, name);
  if (!found) return undefined;
  return found.items.map((r) => r.resource ?? {});
}

/** WATCHED_RESOURCE is the requirement under which a WatchOperation hands its Operation's functions the resource that changed. */
export const WATCHED_RESOURCE = "ops.crossplane.io/watched-resource";

/**
 * getWatchedResource returns the resource whose change started this
 * Operation (a WatchOperation's), or undefined when there is none: a plain
 * Operation, a CronOperation, or a composition function.
 */
export function getWatchedResource(req: RunFunctionRequest): JsonObject | undefined {
  return getRequiredResources(req, WATCHED_RESOURCE)?.[0];
}

/**
 * getRequiredSchema returns the OpenAPI v3 schema Crossplane fetched for the
 * named schema requirement: undefined when not answered yet, null when
 * Crossplane answered that the kind does not exist.
 */
export function getRequiredSchema(req: RunFunctionRequest, name: string): JsonObject | null | undefined {
  if (!Object.hasOwn(req.requiredSchemas, name)) return undefined;
  return req.requiredSchemas[name]?.openapiV3 ?? null;
}

/**
 * getCredentials returns the named credential's data (for example a Secret's
 * keys), or undefined when the Composition passed no such credential. Never log
 * what this returns.
 */
export function getCredentials(req: RunFunctionRequest, name: string): Readonly<Record<string, Uint8Array>> | undefined {
  const c = getOwn(req.credentials, name);
  return c?.source.case === "credentialData" ? c.source.value.data : undefined;
}

/**
 * advertisesCapabilities reports whether the caller lists its capabilities at
 * all (Crossplane v2.2 and later). When it does not, hasCapability cannot tell
 * an unsupported feature from an older Crossplane.
 */
export function advertisesCapabilities(req: RunFunctionRequest): boolean {
  return req.meta?.capabilities.includes(Capability.CAPABILITIES) ?? false;
}

/** hasCapability reports whether the caller says it supports the capability. */
export function hasCapability(req: RunFunctionRequest, cap: Capability): boolean {
  return req.meta?.capabilities.includes(cap) ?? false;
}
