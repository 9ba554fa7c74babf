// Offline validation of manifests against CRDs and XRDs, as `crossplane
// resource validate` does it (crossplane/cli 3d72f93: pkg/validate/validate.go,
// unknown_fields.go, types.go; cmd/crossplane/validate/manager.go), with the
// validator the embedded API server uses (src/schema/: schema.ts, cel.ts) in place
// of kube-apiserver's libraries. For each resource whose kind a schema covers:
// its defaults are applied, then the schema is checked (types, required,
// enums, formats, list types), then every field the schema does not declare
// is an unknown field (what server-side apply refuses with "field not
// declared in schema"), then the CEL rules, on the pruned object. An XRD is
// checked through the CRD Crossplane makes from it (engine/xcrd.ts).
//
// Differences, kept: a resource is never changed (defaults and pruning work
// on a copy, as there); a built-in kind is checked against the fields the
// embedded API server knows of it (Namespace, ConfigMap, Secret, Event,
// Lease, CustomResourceDefinition) or an OpenAPI v3 document given as a
// schema (what `kubectl get --raw /openapi/v3/apis/apps/v1` prints), since
// xfn has no Go types to decode strictly into. As there (and unlike
// kube-apiserver), CEL rules run on an object the schema refused too; a rule
// that reads a value of the wrong type fails with kube's "invalid data" error.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { builtinSchema } from "../apiserver/openapi.js";
import { runRules } from "../schema/cel.js";
import { typedErrors, typedMessage } from "../apiserver/typed.js";
import { invalid, OMIT, text, type FieldError } from "../schema/fielderr.js";
import { applyDefaults, listErrors, prune, Schema, validateValue } from "../schema/schema.js";
import { forCompositeResource, forCompositeResourceClaim, XRDError } from "../engine/xcrd.js";
import { isObject, metaOf } from "../json.js";
import { flatten, parseApiVersion } from "../render/schema.js";
import { InputError, type Doc } from "../engine/input.js";
import { render } from "./output.js";

export type ValidationStatus = "valid" | "invalid" | "missingSchema" | "defaultingFailed";
export type FieldErrorType = "schema" | "cel" | "unknownField" | "defaulting";

export interface FieldValidationError {
  type: FieldErrorType;
  field?: string;
  message: string;
  value?: JsonValue;
}

export interface ResourceValidationResult {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  status: ValidationStatus;
  errors?: FieldValidationError[];
}

export interface ValidationSummary {
  total: number;
  valid: number;
  invalid: number;
  missingSchemas: number;
}

export interface ValidationResult {
  summary: ValidationSummary;
  resources: ResourceValidationResult[];
}

/**
 * Schemas are the kinds validation knows: each version of each CRD, the CRDs
 * Crossplane makes from XRDs, and the kinds of OpenAPI v3 documents.
 */
export class Schemas {
  /** CRDs in the order given (defaults are taken from the first with the kind's group and kind, as crossplane's applyDefaults). */
  readonly crds: JsonObject[] = [];
  private readonly byGVK = new Map<string, Schema>();

  /**
   * add takes what `crossplane resource validate` takes as extensions: CRDs and
   * XRDs; OpenAPI v3 documents too. Anything else (a Provider, a
   * Function, a Composition given among the schemas) is skipped, as there.
   * A schema that does not compile (a CEL rule that does not parse) is an
   * InputError naming the document.
   */
  add(docs: Doc[]): this {
    for (const d of docs) {
      const o = d.obj;
      if (o["kind"] === "CustomResourceDefinition" && String(o["apiVersion"]).startsWith("apiextensions.k8s.io/")) this.addCRD(o, d.source);
      else if (o["kind"] === "CompositeResourceDefinition" && String(o["apiVersion"]).startsWith("apiextensions.crossplane.io/")) {
        try {
          this.addCRD(forCompositeResource(o), d.source);
          const claim = forCompositeResourceClaim(o);
          if (claim) this.addCRD(claim, d.source);
        } catch (err) {
          if (err instanceof XRDError) throw new InputError(`${d.source}: cannot derive the CRDs of the XRD: ${err.message}`);
          throw err;
        }
      } else if (isObject(o["components"]) && isObject(o["components"]["schemas"])) this.addOpenAPI(o, d.source);
    }
    return this;
  }

  private addCRD(crd: JsonObject, source: string): void {
    this.crds.push(crd);
    const spec = isObject(crd["spec"]) ? crd["spec"] : {};
    const names = isObject(spec["names"]) ? spec["names"] : {};
    const versions = Array.isArray(spec["versions"]) ? spec["versions"].filter(isObject) : [];
    // apiextensions.k8s.io/v1beta1 kept one schema for every version; it wins where it is set, as there.
    const top =
      isObject(spec["validation"]) && isObject(spec["validation"]["openAPIV3Schema"]) ? spec["validation"]["openAPIV3Schema"] : undefined;
    versions.forEach((v, i) => {
      const s = top ?? (isObject(v["schema"]) && isObject(v["schema"]["openAPIV3Schema"]) ? v["schema"]["openAPIV3Schema"] : undefined);
      if (!s) return;
      const key = gvkKey(String(spec["group"] ?? ""), String(v["name"] ?? ""), String(names["kind"] ?? ""));
      // Last wins, as there.
      this.byGVK.set(key, compile(s, `${source}: spec.versions[${i}].schema.openAPIV3Schema`));
    });
  }

  private addOpenAPI(doc: JsonObject, source: string): void {
    const all = (doc["components"] as JsonObject)["schemas"] as JsonObject;
    for (const [name, s] of Object.entries(all)) {
      const gvks = isObject(s) ? s["x-kubernetes-group-version-kind"] : undefined;
      if (!Array.isArray(gvks) || gvks.length !== 1 || !isObject(gvks[0])) continue;
      const g = gvks[0];
      const flat = flatten(all, name);
      const key = gvkKey(String(g["group"] ?? ""), String(g["version"] ?? ""), String(g["kind"] ?? ""));
      this.byGVK.set(key, compile(flat, `${source}: ${name}`));
    }
  }

  /** find is the compiled schema of a kind, or undefined. */
  find(apiVersion: string, kind: string): Schema | undefined {
    const { group, version } = parseApiVersion(apiVersion);
    return this.byGVK.get(gvkKey(group, version, kind));
  }
}

const gvkKey = (group: string, version: string, kind: string) => `${group.toLowerCase()}/${version}/${kind}`;

/** Each schema object compiled once, whether for checking or for defaulting (the same CRD version is both). */
const compiled = new WeakMap<JsonObject, Schema>();

function compile(s: JsonObject, where: string): Schema {
  const hit = compiled.get(s);
  if (hit) return hit;
  try {
    const c = new Schema(s, "openAPIV3Schema");
    compiled.set(s, c);
    return c;
  } catch (err) {
    const e = err as Error & { error?: FieldError };
    throw new InputError(`cannot use the schema at ${where}: ${e.error ? text(e.error) : e.message}`);
  }
}

/** Built-in kinds' schemas, compiled once, with metadata taken as it comes (there is no ObjectMeta schema here). */
const builtins = new Map<string, Schema | null>();
function builtin(apiVersion: string, kind: string): Schema | undefined {
  const key = `${apiVersion}/${kind}`;
  let s = builtins.get(key);
  if (s === undefined) {
    const { group, version } = parseApiVersion(apiVersion);
    const raw = builtinSchema(group, version, kind);
    s = raw ? new Schema(raw) : null;
    builtins.set(key, s);
  }
  return s ?? undefined;
}

/** schemaValidate checks each resource, in order, and sums up (SchemaValidate). Resources are not changed. */
export function schemaValidate(resources: Iterable<JsonObject>, schemas: Schemas): ValidationResult {
  const out: ResourceValidationResult[] = [];
  for (const r of resources) out.push(validateResource(r, schemas));
  return { summary: summaryOf(out), resources: out };
}

/** Copies of the apiVersions and kinds results name, by text (few: one per kind). */
const NAMES = new Map<string, string>();
/**
 * own is a copy of s that holds nothing else: a string cut from a parsed
 * document's text keeps that text alive, and a result is kept until the
 * summary (xfn validate reads resources one at a time and drops them).
 */
const own = (s: string): string => (s.length < 13 ? s : Buffer.from(s, "utf8").toString("utf8"));
const shared = (s: string): string => {
  let c = NAMES.get(s);
  if (c === undefined) {
    c = own(s);
    if (NAMES.size < 10_000) NAMES.set(c, c);
  }
  return c;
};

/** result is a resource's result, one shape for all (namespace and errors set only when there are some). */
function result(
  head: { apiVersion: string; kind: string; name: string; namespace: string | undefined },
  status: ResourceValidationResult["status"],
  errors: FieldValidationError[],
): ResourceValidationResult {
  const r: ResourceValidationResult = { apiVersion: head.apiVersion, kind: head.kind, name: head.name, status };
  if (head.namespace) r.namespace = head.namespace;
  if (errors.length) r.errors = errors;
  return r;
}

function validateResource(input: JsonObject, schemas: Schemas): ResourceValidationResult {
  const apiVersion = typeof input["apiVersion"] === "string" ? input["apiVersion"] : "";
  const kind = typeof input["kind"] === "string" ? input["kind"] : "";
  const m = metaOf(input);
  const namespace = typeof m["namespace"] === "string" && m["namespace"] !== "" ? m["namespace"] : undefined;
  const head = {
    apiVersion: shared(canonicalApiVersion(apiVersion)),
    kind: shared(kind),
    name: own(nameOf(input)),
    namespace: namespace === undefined ? undefined : shared(namespace),
  };
  const schema = schemas.find(apiVersion, kind);
  if (!schema) {
    const b = builtin(apiVersion, kind);
    if (!b) return result(head, "missingSchema", []);
    const errs = strictErrors(structuredClone(input), b);
    return result(head, statusOf(errs), errs);
  }
  const r = structuredClone(input);
  const errors: FieldValidationError[] = [];
  const d = defaultingError(r, apiVersion, kind, schemas);
  if (d) errors.push({ type: "defaulting", message: d });
  const root = schema.root;
  const schemaErrs = [...validateValue(r, root, "", "", undefined), ...listErrors(r, root, "")];
  errors.push(...schemaErrs.map((e) => converted(e, "schema")));
  for (const p of prune(r, root)) {
    const child = p.split(".").pop()!;
    errors.push(converted(invalid(p, child, `unknown field: "${child}"`), "unknownField"));
  }
  if (schema.hasRules) {
    errors.push(...runRules(r, root, undefined, []).map((e) => converted(e, "cel")));
  }
  return result(head, statusOf(errors), errors);
}

/**
 * defaultingError applies the defaults of the first CRD with the resource's
 * group and kind, as crossplane's applyDefaults picks it; a CRD without the
 * resource's version is its one error ("no schema found for version ...").
 */
function defaultingError(r: JsonObject, apiVersion: string, kind: string, schemas: Schemas): string | undefined {
  const { group, version } = parseApiVersion(apiVersion);
  const crd = schemas.crds.find((c) => {
    const spec = isObject(c["spec"]) ? c["spec"] : {};
    return spec["group"] === group && isObject(spec["names"]) && spec["names"]["kind"] === kind;
  });
  if (!crd) return undefined;
  const spec = crd["spec"] as JsonObject;
  const v = (Array.isArray(spec["versions"]) ? spec["versions"] : []).find((x) => isObject(x) && x["name"] === version);
  const s = isObject(v) && isObject(v["schema"]) ? v["schema"]["openAPIV3Schema"] : undefined;
  if (!isObject(s)) return `no schema found for version ${version} in CRD ${String(metaOf(crd)["name"] ?? "")}`;
  applyDefaults(r, compile(s, `CRD ${String(metaOf(crd)["name"] ?? "")} version ${version}`).root);
  return undefined;
}

/** strictErrors checks a built-in kind as strict decoding would: fields it does not have, values of the wrong type. */
function strictErrors(r: JsonObject, s: Schema): FieldValidationError[] {
  const errs: FieldValidationError[] = validateValue(r, s.root, "", "", undefined).map((e) => converted(e, "schema"));
  for (const p of prune(r, s.root)) errs.push({ type: "schema", field: p, message: `unknown field "${p}"` });
  return errs;
}

/** converted is a field error as crossplane reports it: its field, the whole text, and the value kube's error carries. */
function converted(e: FieldError, type: FieldErrorType): FieldValidationError {
  const out: FieldValidationError = { type, field: e.field, message: text(e) };
  const v = badValue(e);
  if (v !== undefined) out.value = v;
  return out;
}

/** badValue is Go's BadValue: "" where kube's constructor gives none (Required, Forbidden, ...), left out when nil. */
function badValue(e: FieldError): JsonValue | undefined {
  if (e.value === OMIT) return {};
  if (e.value !== undefined) return e.value === null ? undefined : e.value;
  return e.type === "InternalError" ? undefined : "";
}

function statusOf(errs: FieldValidationError[]): ValidationStatus {
  if (errs.length === 0) return "valid";
  return errs.every((e) => e.type === "defaulting") ? "defaultingFailed" : "invalid";
}

/** summaryOf counts: a defaulting failure alone counts as valid (a warning), as there. */
function summaryOf(rs: ResourceValidationResult[]): ValidationSummary {
  const s: ValidationSummary = { total: rs.length, valid: 0, invalid: 0, missingSchemas: 0 };
  for (const r of rs) {
    if (r.status === "valid" || r.status === "defaultingFailed") s.valid++;
    else if (r.status === "invalid") s.invalid++;
    else s.missingSchemas++;
  }
  return s;
}

/** nameOf is the resource's name, else its name in the pipeline (composed resources from a render have no name yet). */
function nameOf(r: JsonObject): string {
  const m = metaOf(r);
  if (typeof m["name"] === "string" && m["name"] !== "") return m["name"];
  const a = isObject(m["annotations"]) ? m["annotations"]["crossplane.io/composition-resource-name"] : undefined;
  return typeof a === "string" ? a : "";
}

/** canonicalApiVersion is group/version as Go prints a GroupVersion (a core kind: just the version). */
function canonicalApiVersion(apiVersion: string): string {
  const { group, version } = parseApiVersion(apiVersion);
  return group ? `${group}/${version}` : version;
}

/**
 * applyRefusals are what a cluster's server-side apply answers for the
 * resources it cannot even read as typed objects under their schemas (a field
 * the schema does not declare, a value of the wrong kind): the 500 Crossplane
 * meets when it applies a composed resource, in structured-merge-diff's words
 * (the embedded API server's typed.ts). One line per refused resource.
 */
export function applyRefusals(resources: JsonObject[], schemas: Schemas): string[] {
  const out: string[] = [];
  for (const r of resources) {
    const apiVersion = typeof r["apiVersion"] === "string" ? r["apiVersion"] : "";
    const kind = typeof r["kind"] === "string" ? r["kind"] : "";
    const schema = schemas.find(apiVersion, kind);
    if (!schema) continue;
    const errs = typedErrors(r, schema.root);
    if (errs.length === 0) continue;
    const m = metaOf(r);
    const { group, version } = parseApiVersion(apiVersion);
    out.push(
      `failed to create typed patch object (${String(m["namespace"] ?? "")}/${nameOf(r)}; ${group}/${version}, Kind=${kind}): ` +
        typedMessage(errs).replaceAll("\n", " "),
    );
  }
  return out;
}

/**
 * problems checks resources for a render or a test case: nothing when every
 * one passed and has a schema; otherwise the report's lines for those that
 * did not (no [✓] lines), and what server-side apply would answer for each of
 * applied it could not read.
 */
export function problems(resources: JsonObject[], applied: JsonObject[], schemas: Schemas) {
  const result = schemaValidate(resources, schemas);
  if (result.summary.invalid === 0 && result.summary.missingSchemas === 0) return undefined;
  return {
    failed: resultError(result, false),
    report: render(result, "text", { skipSuccessResults: true }).trimEnd().split("\n"),
    refusals: applyRefusals(applied, schemas),
  };
}

/** resultError is the command's error when validation did not pass (ResultError), or undefined. */
export function resultError(r: ValidationResult, errorOnMissingSchemas: boolean): string | undefined {
  if (r.summary.invalid > 0) return "could not validate all resources";
  if (errorOnMissingSchemas && r.summary.missingSchemas > 0) return "could not validate all resources, schema(s) missing";
  return undefined;
}
