// Names Crossplane gives, one module for xfn render and xfn host:
//
// - childName: the name of a composed resource that has only a generateName,
//   fixed before it is created so that the XR can record a reference to it
//   first. Crossplane v2's composer (internal/names ChildName): the prefix (with
//   exactly one "-" at its end), then the first 12 hex digits of
//   SHA-256(XR uid + composition resource name), the prefix cut so that the
//   whole is at most 63 characters.
// - renderUID: the uid crossplane render gives an XR that has none, a
//   name-based (version 5) UUID in the nil namespace of "<gvk>\0<ns>\0<name>",
//   where <gvk> is written as Go's GroupVersionKind.String() writes it.
// - validateName: whether a composed resource's name is one the API server
//   takes, as Crossplane checks before it applies: an RFC 1123 subdomain, with
//   ":" allowed in the names of RBAC kinds.
//
// Read at crossplane/crossplane 2d040d2daf4e001799c4154a4a09b9e1f40d7fde
// (internal/names, internal/render/composite/render.go).
import { createHash } from "node:crypto";

const MAX_NAME_LENGTH = 63;
const HASH_LENGTH = 12;

/** childName is the name Crossplane gives a composed resource from its generateName, the XR's uid and its composition resource name. */
export function childName(parentName: string, parentUID: string, childNameInPipeline: string): string {
  const suffix = createHash("sha256")
    .update(parentUID + childNameInPipeline)
    .digest("hex")
    .slice(0, HASH_LENGTH);
  let parent = parentName;
  if (parent !== "" && !parent.endsWith("-")) parent += "-";
  if (parent.length + suffix.length <= MAX_NAME_LENGTH) return parent + suffix;
  // Cut the prefix to fit, keeping a "-" between it and the hash.
  let keep = MAX_NAME_LENGTH - HASH_LENGTH;
  if (!parent.slice(0, keep).endsWith("-")) {
    keep--;
    return `${parent.slice(0, keep)}-${suffix}`;
  }
  return parent.slice(0, keep) + suffix;
}

/** gvkString writes a group, version and kind as Go's schema.GroupVersionKind.String() does. */
export function gvkString(apiVersion: string, kind: string): string {
  const i = apiVersion.lastIndexOf("/");
  const group = i < 0 ? "" : apiVersion.slice(0, i);
  const version = i < 0 ? apiVersion : apiVersion.slice(i + 1);
  return `${group}/${version}, Kind=${kind}`;
}

/** uuidV5 is a name-based UUID (RFC 4122 version 5, SHA-1) of name in namespace, as Go's uuid.NewSHA1 makes it. */
export function uuidV5(namespace: Uint8Array, name: string): string {
  const h = createHash("sha1").update(namespace).update(name, "utf8").digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString("hex");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

const NIL_UUID = new Uint8Array(16);

/** renderUID is the uid crossplane render gives an XR without one: the same XR always gets the same uid. */
export function renderUID(apiVersion: string, kind: string, namespace: string, name: string): string {
  return uuidV5(NIL_UUID, `${gvkString(apiVersion, kind)}\x00${namespace}\x00${name}`);
}

const MAX_SUBDOMAIN_LENGTH = 253;
const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const RBAC_KINDS = new Set(["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"]);

/** validateName tells whether name is one Crossplane applies for a kind of group: an RFC 1123 subdomain (":" allowed for RBAC kinds). */
export function validateName(name: string, group: string, kind: string): boolean {
  const n = group === "rbac.authorization.k8s.io" && RBAC_KINDS.has(kind) ? name.replaceAll(":", "") : name;
  return n.length > 0 && n.length <= MAX_SUBDOMAIN_LENGTH && SUBDOMAIN.test(n);
}
