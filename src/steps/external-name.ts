// externalName: an external name, once observed, is never lost.
//
// Every observed composed resource's crossplane.io/external-name is recorded in
// the desired XR status (Crossplane persists it there), and kept on the desired
// composed resource. When a resource comes back without it (recreated, the
// annotation wiped, a provider restarted mid-create) the recorded name is put
// back, so the provider observes the existing cloud resource instead of
// creating a second one. This does not depend on any management policy.
//
// A provider that learns a cloud-assigned ID after its create returns may keep
// it only in its status (crossplane-runtime persists such a name only through
// late-init, so never under a management policy without LateInitialize: the
// story of failure mode 4, replayed under real Crossplane by the tier's test
// provider). fromFields names, per composed resource, the status field that
// holds its external name; while the annotation is absent the name is read
// there, recorded, and put on the desired resource, so Crossplane writes it to
// the object before a provider restart can lose it.
//
// It never invents a name; an earlier step's explicit annotation is kept; when
// the recorded and observed names differ, the observed one wins and a Warning
// names both. A create that started (external-create-pending) and has no
// succeeded/failed record after it is a Warning: the provider may have lost
// track of a cloud resource. A desired resource whose name is still held by a
// resource that is being deleted is held back with a Warning, so two objects
// never fight over one cloud resource.
import type { JsonObject } from "@bufbuild/protobuf";
import { getOwn, setOwn } from "../own.js";
import { step, type Step, type StepContext } from "../pipeline.js";
import { getValue, parsePath } from "../sdk/fieldpath.js";
import { annotationReader, getAnnotation, isDeleting, setAnnotation } from "../sdk/object.js";
import * as request from "../sdk/request.js";
import * as response from "../sdk/response.js";
import { CREATE_FAILED, CREATE_PENDING, CREATE_SUCCEEDED, EXTERNAL_NAME, observedXR, sortedKeys } from "./common.js";

/** ExternalNameOptions configure the externalName step. */
export interface ExternalNameOptions {
  /** Where in the XR's status the names are recorded. Default status.externalNames. */
  statusField?: string;
  /**
   * Per composed resource name, a field of the observed resource that holds its
   * external name while the annotation is absent, e.g. status.atProvider.id for
   * a provider that learns a cloud-assigned ID late. Default none.
   */
  fromFields?: Readonly<Record<string, string>>;
}

export const DEFAULT_EXTERNAL_NAMES_FIELD = "status.externalNames";

/** recordedNames reads the names recorded in the XR (observed, then as desired by earlier steps). */
function recordedNames(ctx: StepContext, field: string): Record<string, string> {
  const out: Record<string, string> = {};
  const sources = [observedXR(ctx), request.getDesiredComposite(ctx.req)?.resource];
  for (const src of sources) {
    const v = src ? getValue(src, field) : undefined;
    if (v === undefined || v === null) continue;
    if (typeof v !== "object" || Array.isArray(v)) throw new Error(`${field} in the XR is not an object`);
    for (const [k, name] of Object.entries(v)) if (typeof name === "string" && name !== "") setOwn(out, k, name);
  }
  return out;
}

/**
 * incompleteCreate returns the pending timestamp of a create that has no
 * outcome recorded after it. read reads obj's annotations (annotationReader).
 */
export function incompleteCreate(obj: JsonObject, read = annotationReader(obj)): string | undefined {
  const pending = read(CREATE_PENDING);
  if (!pending) return undefined;
  return notBefore(read(CREATE_SUCCEEDED), pending) || notBefore(read(CREATE_FAILED), pending) ? undefined : pending;
}

// Timestamps as crossplane-runtime writes them (RFC 3339, whole seconds, UTC):
// for two of these, comparing the text compares the instants.
const UTC_SECONDS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

/** notBefore tells whether the outcome v is recorded at or after pending (any outcome counts if pending does not parse). */
function notBefore(v: string | undefined, pending: string): boolean {
  if (v === undefined) return false;
  if (v.length === 20 && pending.length === 20 && UTC_SECONDS.test(v) && UTC_SECONDS.test(pending)) return v >= pending;
  const t = Date.parse(pending);
  return Number.isNaN(t) || Date.parse(v) >= t;
}

/** externalName returns the step. */
export function externalName(opts: ExternalNameOptions = {}): Step {
  const field = opts.statusField ?? DEFAULT_EXTERNAL_NAMES_FIELD;
  if (!/^status(\.|\[|$)/.test(field)) throw new Error(`externalName statusField must be under status, got ${JSON.stringify(field)}`);
  const fromFields: Record<string, string> = {};
  for (const [key, path] of Object.entries(opts.fromFields ?? {})) {
    if (typeof path !== "string" || path === "")
      throw new Error(`externalName fromFields.${key} must be a field path, got ${JSON.stringify(path)}`);
    try {
      parsePath(path);
    } catch (err) {
      throw new Error(`externalName fromFields.${key}: ${(err as Error).message}`, { cause: err });
    }
    setOwn(fromFields, key, path);
  }

  return step("externalName", (ctx) => {
    const recorded = recordedNames(ctx, field);
    const observed = request.getObservedComposedResources(ctx.req);
    const desired = ctx.rsp.desired?.resources ?? {};
    const names: Record<string, string> = { ...recorded };

    // Each observed object's external name (its annotations found once: each
    // search is a scan of its metadata), and the names held by objects being
    // deleted, and by whom.
    const seenNames = new Map<string, string>();
    const deletingHolders = new Map<string, string>();
    for (const key of sortedKeys(observed)) {
      const obj = observed[key]!.resource ?? {};
      const annotations = annotationReader(obj);
      let seen = annotations(EXTERNAL_NAME);
      const from = getOwn(fromFields, key);
      if (!seen && from) {
        const v = getValue(obj, from);
        if (typeof v === "string" && v !== "") {
          seen = v;
          response
            .normal(ctx.rsp, `${key}: external name ${JSON.stringify(v)} read from ${from}; writing it to the resource`)
            .withReason("ExternalNameFromField");
        }
      }
      const rec = getOwn(recorded, key);
      if (seen) {
        seenNames.set(key, seen);
        if (isDeleting(obj)) deletingHolders.set(seen, key);
        if (rec && rec !== seen) {
          response
            .warning(
              ctx.rsp,
              `${key}: recorded external name ${JSON.stringify(rec)} differs from the observed ${JSON.stringify(seen)}; ` +
                "keeping the observed one",
            )
            .withReason("ExternalNameChanged")
            .targetCompositeAndClaim();
        }
        setOwn(names, key, seen);
      }
      const pending = incompleteCreate(obj, annotations);
      if (pending) {
        response
          .warning(
            ctx.rsp,
            `${key}: the provider began creating it at ${pending} and recorded no result; ` +
              "check the cloud for a resource it may have lost track of",
          )
          .withReason("ExternalCreateIncomplete")
          .targetCompositeAndClaim();
      }
    }

    for (const key of sortedKeys(desired)) {
      const want = desired[key]!.resource;
      if (!want) continue;
      const explicit = getAnnotation(want, EXTERNAL_NAME);
      const name = explicit ?? getOwn(names, key);
      if (!name) continue;
      const holder = deletingHolders.get(name);
      const observedName = seenNames.get(key);
      if (holder !== undefined && holder !== key && observedName !== name) {
        response
          .warning(
            ctx.rsp,
            `${key}: external name ${JSON.stringify(name)} is still held by ${holder}, which is being deleted; waiting until it is gone`,
          )
          .withReason("ExternalNameInUse")
          .targetCompositeAndClaim();
        ctx.hold(key, `${holder} to finish deleting`);
        continue;
      }
      if (explicit) {
        // An earlier step chose this name; it is the one about to be applied.
        setOwn(names, key, explicit);
      } else {
        setAnnotation(want, EXTERNAL_NAME, name);
        if (!observedName) {
          response.normal(ctx.rsp, `${key}: restored external name ${JSON.stringify(name)}`).withReason("ExternalNameRestored");
        }
      }
    }

    if (Object.keys(names).length > 0) response.setDesiredCompositeField(ctx.rsp, field, names);
  });
}
