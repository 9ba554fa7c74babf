// The kinds the host reads (CompositeResourceDefinition, Composition) and the
// CRD it serves an XRD's XRs with, as Crossplane would.
import type { JsonObject } from "@bufbuild/protobuf";
import { isObject, metaOf, str } from "./kube.js";
import type { Kind } from "./watches.js";
import { scopeOf, xrSchemaOf } from "../engine/xcrd.js";

export const XP_GROUP = "apiextensions.crossplane.io";
export const XR_FINALIZER = "composite.apiextensions.crossplane.io";
/** XRD_FINALIZER holds an XRD while its XRs and its CRD are deleted, as Crossplane's does. */
export const XRD_FINALIZER = "defined.apiextensions.crossplane.io";
export const XRD_KINDS: Kind[] = [
  { group: XP_GROUP, version: "v2", plural: "compositeresourcedefinitions" },
  { group: XP_GROUP, version: "v1", plural: "compositeresourcedefinitions" },
];
export const COMPOSITIONS: Kind = { group: XP_GROUP, version: "v1", plural: "compositions" };
export const CRDS: Kind = { group: "apiextensions.k8s.io", version: "v1", plural: "customresourcedefinitions" };

// An XRD's scope defaults by the version it is written in, as in Crossplane's
// own CRD: Namespaced in v2, LegacyCluster in v1. The API server stores the
// default, so every version then reads the same scope.
const XRD_SCOPE_DEFAULT: Record<string, string> = { v2: "Namespaced", v1: "LegacyCluster" };

/** The columns `kubectl get xrd` shows, as Crossplane's own XRD CRD has them (xrd_types.go's printcolumn markers). */
const XRD_COLUMNS = [
  { name: "ESTABLISHED", type: "string", jsonPath: ".status.conditions[?(@.type=='Established')].status" },
  { name: "OFFERED", type: "string", jsonPath: ".status.conditions[?(@.type=='Offered')].status" },
  { name: "AGE", type: "date", jsonPath: ".metadata.creationTimestamp" },
];

/** The minimal CRDs the host needs to read XRDs and Compositions on a bare API server. */
export function crossplaneCRDs(): JsonObject[] {
  const schema = (kind: string, v: string): JsonObject => ({
    type: "object",
    "x-kubernetes-preserve-unknown-fields": true,
    ...(kind === "CompositeResourceDefinition"
      ? {
          properties: {
            spec: {
              type: "object",
              "x-kubernetes-preserve-unknown-fields": true,
              properties: { scope: { type: "string", default: XRD_SCOPE_DEFAULT[v]! } },
            },
          },
        }
      : {}),
  });
  const mk = (kind: string, plural: string, versions: string[]) => ({
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${XP_GROUP}` },
    spec: {
      group: XP_GROUP,
      names: {
        kind,
        plural,
        singular: kind.toLowerCase(),
        listKind: `${kind}List`,
        ...(kind === "CompositeResourceDefinition" ? { shortNames: ["xrd", "xrds"] } : { shortNames: ["comp"] }),
      },
      scope: "Cluster",
      versions: versions.map((v, i) => ({
        name: v,
        served: true,
        storage: i === 0,
        subresources: { status: {} },
        schema: { openAPIV3Schema: schema(kind, v) },
        ...(kind === "CompositeResourceDefinition" ? { additionalPrinterColumns: XRD_COLUMNS } : {}),
      })),
    },
  });
  return [mk("CompositeResourceDefinition", "compositeresourcedefinitions", ["v2", "v1"]), mk("Composition", "compositions", ["v1"])];
}

/** XRType is the XR kind an XRD defines. */
export interface XRType {
  xrd: string;
  kind: Kind;
  gvk: { apiVersion: string; kind: string };
  namespaced: boolean;
  /** Whether the XRD is written in v1 (a legacy XR: composition fields at spec, not spec.crossplane). */
  legacy: boolean;
  /** The openAPIV3Schema the XR kind's CRD serves (what the API server keeps of a status written to it), if the XRD has one. */
  schema?: JsonObject;
}

/** xrType reads the XR kind an XRD defines, or undefined if it names no group, kind, plural or served version. */
export function xrType(xrd: JsonObject): XRType | undefined {
  const spec = isObject(xrd["spec"]) ? xrd["spec"] : {};
  const names = isObject(spec["names"]) ? spec["names"] : {};
  const group = str(spec["group"]);
  const kind = str(names["kind"]);
  const plural = str(names["plural"]);
  const versions = Array.isArray(spec["versions"]) ? (spec["versions"] as JsonObject[]) : [];
  const version = str((versions.find((v) => v["referenceable"] === true) ?? versions.find((v) => v["served"] !== false))?.["name"]);
  if (!group || !kind || !plural || !version) return undefined;
  // The API server stores the scope's default (see crossplaneCRDs); without
  // one, the version the XRD is read in decides, as its default would: the
  // same rule the XR kind's CRD is made by (engine/xcrd.ts).
  const scope = scopeOf(xrd);
  let schema: JsonObject | undefined;
  try {
    schema = xrSchemaOf(xrd, version);
  } catch {
    // An XRD its CRD cannot be made from: the host refuses it where it makes the CRD.
  }
  return {
    xrd: String(metaOf(xrd)["name"]),
    kind: { group, version, plural },
    gvk: { apiVersion: `${group}/${version}`, kind },
    namespaced: scope === "Namespaced",
    legacy: scope === "LegacyCluster",
    ...(schema ? { schema } : {}),
  };
}

/** xrCRDRef names the CRD that serves t's XRs (deleting it needs nothing more). */
export function xrCRDRef(t: XRType): JsonObject {
  const name = `${t.kind.plural}.${t.kind.group}`;
  return { apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", metadata: { name } };
}
