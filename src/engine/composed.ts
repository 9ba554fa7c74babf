// From the pipeline's desired state to the composed resources Crossplane would
// apply: what Crossplane v2's function composer does with each desired
// resource between running the pipeline and applying, shared by xfn render
// and xfn host so that both name, place and refuse resources alike.
//
// For each desired resource (in name order here; Crossplane walks a Go map):
//   1. an observed resource keeps its namespace, name and generateName;
//   2. a namespaced XR may not compose a cluster-scoped kind (checked when
//      the resource has no namespace and the kind's scope is known);
//   3. a namespace other than the XR's is replaced by the XR's, with a
//      NamespaceOverridden Warning event;
//   4. metadata derived from the XR: generateName "<crossplane.io/composite>-"
//      when there is neither name nor generateName, the XR's namespace, the
//      composition resource name annotation, the composite (and claim)
//      labels, and the XR as controller (a controller of another uid is an
//      error);
//   5. a name fixed before the resource exists (names.ts childName);
//   6. a name the API server would refuse is an error naming it.
// An error stops the whole composition, as in Crossplane (nothing is applied).
//
// Read at crossplane/crossplane 2d040d2daf4e001799c4154a4a09b9e1f40d7fde:
// internal/controller/apiextensions/composite/composition_functions.go
// (FunctionComposer.Compose, UpdateResourceRefs) and composition_render.go
// (RenderComposedResourceMetadata).
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Ready, type Resource } from "../gen/fn/v1/run_function_pb.js";
import { getOwn } from "../own.js";
import { childName, validateName } from "./names.js";
import { isObject, metaOf } from "../json.js";

export const COMPOSITION_RESOURCE_NAME = "crossplane.io/composition-resource-name";
export const COMPOSITE_LABEL = "crossplane.io/composite";
export const CLAIM_NAME_LABEL = "crossplane.io/claim-name";
export const CLAIM_NAMESPACE_LABEL = "crossplane.io/claim-namespace";
/** NAMESPACE_OVERRIDDEN is the reason of Crossplane's event for a composed resource moved into its XR's namespace. */
export const NAMESPACE_OVERRIDDEN = "NamespaceOverridden";

const str = (v: JsonValue | undefined): string => (typeof v === "string" ? v : "");

/** ComposeEvent is an Event Crossplane records on the XR while composing. */
export interface ComposeEvent {
  type: "Normal" | "Warning";
  reason: string;
  message: string;
}

/**
 * ComposeError stops a composition before anything is applied, as Crossplane's
 * composer returns an error (the reconcile reports "cannot compose resources: ...").
 */
export class ComposeError extends Error {
  override readonly name = "ComposeError";
}

/** ComposeInputs are what composeResources works from. */
export interface ComposeInputs {
  /** The XR as the pipeline observed it: its uid and its crossplane.io/composite label set. */
  xr: JsonObject;
  /** The desired composed resources the pipeline returned, by composition resource name. */
  desired: Record<string, Resource>;
  /** The observed composed resources, by composition resource name. */
  observed: Record<string, JsonObject>;
  /** Whether a kind is namespaced; undefined when its scope is not known. */
  namespaced?: (apiVersion: string, kind: string) => boolean | undefined;
  /** Leave a resource without a name with only its generateName (pre-v2 crossplane render). */
  keepGenerateName?: boolean;
}

/** Composed is one composed resource, ready to apply. */
export interface Composed {
  /** Its name in the pipeline (the composition resource name). */
  name: string;
  object: JsonObject;
  /** Whether the pipeline said it is ready (Crossplane does not look at the resource's own conditions). */
  ready: boolean;
}

/** prefixOf is the prefix of composed resources' names: the XR's crossplane.io/composite label, else its name. */
export function prefixOf(xr: JsonObject): string {
  const labels = metaOf(xr)["labels"];
  const l = isObject(labels) ? str(labels[COMPOSITE_LABEL]) : "";
  return l || str(metaOf(xr)["name"]);
}

/** composeResources turns desired resources into the objects Crossplane applies, with the events it records; it throws ComposeError. */
export function composeResources(i: ComposeInputs): { composed: Composed[]; events: ComposeEvent[] } {
  const xm = metaOf(i.xr);
  const xrNamespace = str(xm["namespace"]);
  const events: ComposeEvent[] = [];
  const composed: Composed[] = [];
  for (const name of Object.keys(i.desired).sort()) {
    const d = i.desired[name]!;
    const cd: JsonObject = structuredClone(d.resource ?? {});
    const m: JsonObject = isObject(cd["metadata"]) ? cd["metadata"] : {};
    cd["metadata"] = m;
    const seen = getOwn(i.observed, name);
    if (seen) {
      const om = metaOf(seen);
      for (const k of ["namespace", "name", "generateName"]) {
        if (str(om[k]) !== "") m[k] = om[k]!;
        else delete m[k];
      }
    }
    const apiVersion = str(cd["apiVersion"]);
    const kind = str(cd["kind"]);
    if (xrNamespace !== "" && str(m["namespace"]) === "" && i.namespaced?.(apiVersion, kind) === false)
      throw new ComposeError(
        `cannot apply cluster scoped composed resource ${JSON.stringify(name)} (a ${kind} named ${str(m["name"])}) ` +
          "for a namespaced composite resource.",
      );
    if (xrNamespace !== "" && str(m["namespace"]) !== "" && m["namespace"] !== xrNamespace)
      events.push({
        type: "Warning",
        reason: NAMESPACE_OVERRIDDEN,
        message:
          `cannot create composed resource ${JSON.stringify(name)} in namespace ${JSON.stringify(m["namespace"])}, ` +
          `using XR namespace ${JSON.stringify(xrNamespace)} instead`,
      });
    renderMetadata(cd, i.xr, name);
    if (str(m["name"]) === "" && !i.keepGenerateName) {
      // Crossplane names it from its controller's uid, which renderMetadata just made the XR.
      m["name"] = childName(str(m["generateName"]), str(xm["uid"]), name);
    }
    const given = str(m["name"]);
    if ((given !== "" || !i.keepGenerateName) && !validateName(given, groupOf(apiVersion), kind))
      throw new ComposeError(
        `cannot apply composed resource ${JSON.stringify(name)} because it has an invalid name ${JSON.stringify(given)}. ` +
          "Must be a valid RFC 1123 subdomain name.",
      );
    composed.push({ name, object: cd, ready: d.ready === Ready.TRUE });
  }
  return { composed, events };
}

const groupOf = (apiVersion: string) => (apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.lastIndexOf("/")) : "");

/** renderMetadata derives a composed resource's metadata from its XR, as Crossplane's RenderComposedResourceMetadata does. */
function renderMetadata(cd: JsonObject, xr: JsonObject, name: string): void {
  const m = metaOf(cd);
  const xm = metaOf(xr);
  const xrLabels = isObject(xm["labels"]) ? xm["labels"] : {};
  const prefix = prefixOf(xr);
  if (str(m["name"]) === "" && str(m["generateName"]) === "") m["generateName"] = `${prefix}-`;
  if (str(xm["namespace"]) !== "") m["namespace"] = xm["namespace"]!;
  m["annotations"] = { ...(isObject(m["annotations"]) ? m["annotations"] : {}), [COMPOSITION_RESOURCE_NAME]: name };
  const labels: JsonObject = { ...(isObject(m["labels"]) ? m["labels"] : {}), [COMPOSITE_LABEL]: prefix };
  const claimName = str(xrLabels[CLAIM_NAME_LABEL]);
  const claimNamespace = str(xrLabels[CLAIM_NAMESPACE_LABEL]);
  if (claimName !== "" && claimNamespace !== "") {
    labels[CLAIM_NAME_LABEL] = claimName;
    labels[CLAIM_NAMESPACE_LABEL] = claimNamespace;
  }
  m["labels"] = labels;
  const uid = str(xm["uid"]);
  const owner: JsonObject = {
    apiVersion: str(xr["apiVersion"]),
    kind: str(xr["kind"]),
    name: str(xm["name"]),
    uid,
    controller: true,
    blockOwnerDeletion: true,
  };
  const refs = Array.isArray(m["ownerReferences"]) ? m["ownerReferences"].filter(isObject) : [];
  const controller = refs.find((r) => r["controller"] === true);
  if (controller && str(controller["uid"]) !== uid)
    throw new ComposeError(
      `cannot render metadata for composed resource ${JSON.stringify(name)}: cannot set controller reference: ` +
        `${str(m["name"])} is already controlled by ${str(controller["kind"])} ${str(controller["name"])} (UID ${str(controller["uid"])})`,
    );
  // An owner of the same uid is replaced where it stands; otherwise the XR is added last.
  const at = refs.findIndex((r) => str(r["uid"]) === uid);
  if (at >= 0) refs[at] = owner;
  else refs.push(owner);
  m["ownerReferences"] = refs;
}

/** ObjectRef is a reference to a composed resource, as an XR's resourceRefs hold them. */
export interface ObjectRef {
  apiVersion?: string;
  kind?: string;
  name: string;
  namespace?: string;
  uid?: string;
}

/**
 * resourceRefsOf makes an XR's references to its composed resources, sorted as
 * Crossplane sorts them (by apiVersion, kind, name and namespace run together).
 * A namespaced XR's references carry no namespace.
 */
export function resourceRefsOf(xr: JsonObject, objects: JsonObject[]): ObjectRef[] {
  const namespaced = str(metaOf(xr)["namespace"]) !== "";
  const refs = objects.map((o): ObjectRef => {
    const m = metaOf(o);
    // As Go writes a corev1.ObjectReference: empty fields left out.
    return {
      ...(str(o["apiVersion"]) !== "" ? { apiVersion: str(o["apiVersion"]) } : {}),
      ...(str(o["kind"]) !== "" ? { kind: str(o["kind"]) } : {}),
      name: str(m["name"]),
      ...(!namespaced && str(m["namespace"]) !== "" ? { namespace: str(m["namespace"]) } : {}),
      ...(str(m["uid"]) !== "" ? { uid: str(m["uid"]) } : {}),
    };
  });
  const key = (r: ObjectRef) => (r.apiVersion ?? "") + (r.kind ?? "") + r.name + (r.namespace ?? "");
  // Compared as Go compares strings: by UTF-8 bytes.
  return refs.sort((a, b) => Buffer.compare(Buffer.from(key(a)), Buffer.from(key(b))));
}

// Where engine code and its tests have long found it; the steps, which functions load, take it from words.ts.
export { firstNAndSomeMore } from "../words.js";
