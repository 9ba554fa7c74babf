// Discovery as kube-apiserver serves it: the API groups (APIGroupList) and
// each group version's resources (APIResourceList), with their verbs, short
// names, categories and status subresources, and the review kinds of
// reviews.ts.
import { createHash } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Store } from "./store.js";
import { REVIEW_GROUPS } from "./reviews.js";

/** discovery is the APIResourceList of a group version, or undefined when nothing is served in it. */
export function discovery(store: Store, group: string, version: string): JsonObject | undefined {
  const resources: JsonObject[] = [];
  for (const t of store.types.values()) {
    if (t.group !== group || !t.versions.includes(version)) continue;
    resources.push({
      name: t.plural,
      singularName: t.singular,
      namespaced: t.namespaced,
      kind: t.kind,
      // A custom resource's verbs in the order apiextensions-apiserver lists them (v0.36.3,
      // customresource_discovery_controller.go); every kind with the hash of its storage version.
      verbs: t.crd
        ? ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]
        : ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
      ...(t.shortNames.length ? { shortNames: t.shortNames } : {}),
      ...(t.categories?.length ? { categories: t.categories } : {}),
      storageVersionHash: storageVersionHash(t.group, t.storageVersion ?? t.versions[0]!, t.kind),
    });
    if (t.statusSubresource)
      resources.push({
        name: `${t.plural}/status`,
        singularName: "",
        namespaced: t.namespaced,
        kind: t.kind,
        verbs: ["get", "patch", "update"],
      });
  }
  if (resources.length === 0) return undefined;
  return { kind: "APIResourceList", apiVersion: "v1", groupVersion: group ? `${group}/${version}` : version, resources };
}

/** groups is the APIGroupList of every group served. */
export function groups(store: Store): JsonObject {
  const byGroup = new Map<string, Set<string>>(REVIEW_GROUPS.map((g) => [g, new Set(["v1"])]));
  for (const t of store.types.values())
    if (t.group) for (const v of t.versions) (byGroup.get(t.group) ?? byGroup.set(t.group, new Set()).get(t.group)!).add(v);
  return {
    kind: "APIGroupList",
    apiVersion: "v1",
    groups: [...byGroup].sort().map(([name, vs]) => {
      const versions = [...vs].map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
      return { name, versions, preferredVersion: versions[0]! };
    }),
  };
}

/**
 * storageVersionHash is discovery's hash of a kind's storage version: the
 * first 8 bytes of SHA-256 of group/version/kind, base64 (k8s.io/apiserver
 * v0.36.3 endpoints/discovery/storageversionhash.go).
 */
export function storageVersionHash(group: string, version: string, kind: string): string {
  return createHash("sha256").update(`${group}/${version}/${kind}`).digest().subarray(0, 8).toString("base64");
}
