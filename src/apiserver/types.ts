// The shapes the store, its watches, persistence and the HTTP server share:
// a served resource type, a change event and a watch's subscription.
import { isDeepStrictEqual } from "node:util";
import type { JsonObject } from "@bufbuild/protobuf";
import { isObject } from "../json.js";
import type { FieldRequirement, Requirement } from "./selector.js";
import type { Schema } from "../schema/schema.js";

/** ResourceType is one kind the server serves. */
export interface ResourceType {
  group: string;
  versions: string[];
  kind: string;
  listKind: string;
  plural: string;
  singular: string;
  namespaced: boolean;
  statusSubresource: boolean;
  shortNames: string[];
  /** The categories it belongs to (a CRD's spec.names.categories: kubectl get managed, get all). */
  categories?: string[];
  /** The CRD that defines it, if any. */
  crd?: string;
  /** A CRD's storage version (discovery's storageVersionHash is made from it). */
  storageVersion?: string;
  /** Per served version, the CRD's compiled openAPIV3Schema (writes are defaulted, pruned and validated by it). */
  schemas?: Record<string, Schema>;
  /** Per served version, the CRD's openAPIV3Schema as written (published at /openapi/v3 for kubectl explain). */
  openAPI?: Record<string, JsonObject>;
  /** Per served version, the CRD's additionalPrinterColumns (kubectl get's columns). */
  columns?: Record<string, JsonObject[]>;
}

export type EventType = "ADDED" | "MODIFIED" | "DELETED";
export interface StoreEvent {
  rv: number;
  type: EventType;
  typeKey: string;
  object: JsonObject;
  /** The object before the change (for selector transitions). */
  previous?: JsonObject;
}

/** Watcher is one watch stream's subscription. */
export interface Watcher {
  typeKey: string;
  namespace?: string;
  labels: Requirement[];
  fields: FieldRequirement[];
  send(type: EventType | "BOOKMARK" | "ERROR", object: JsonObject): void;
  close(): void;
}

/** Snapshot is what persistence saves. */
export interface Snapshot {
  rv: number;
  objects: Array<{ typeKey: string; object: JsonObject }>;
}

/** ensureMeta is an object's metadata, added to it (empty) when it has none. */
export const ensureMeta = (o: JsonObject): JsonObject =>
  isObject(o["metadata"]) ? o["metadata"] : ((o["metadata"] = {}), o["metadata"] as JsonObject);

/**
 * generationChanged is whether a write moves an object's generation: for a
 * custom resource any change but to metadata (and to status, where the kind
 * has a status subresource), as apiextensions' strategy compares; for other
 * kinds a change of spec.
 */
export function generationChanged(t: ResourceType, current: JsonObject, next: JsonObject): boolean {
  if (!t.crd) return JSON.stringify(current["spec"]) !== JSON.stringify(next["spec"]);
  const content = (o: JsonObject) => {
    const { metadata: _m, status, ...rest } = o;
    return t.statusSubresource ? rest : { ...rest, status };
  };
  return !isDeepStrictEqual(content(current), content(next));
}
