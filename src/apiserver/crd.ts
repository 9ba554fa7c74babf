// A CustomResourceDefinition checked as kube-apiserver checks one before it is
// stored: names, group, scope, versions (one storage version, unique names, a
// schema each), status.storedVersions, and each schema structural, with the
// constructs apiextensions refuses and defaults of the schema's own types.
// Read at kubernetes/kubernetes staging/src/k8s.io/apiextensions-apiserver:
// pkg/apis/apiextensions/validation/validation.go (ValidateCustomResource-
// Definition{,Spec,Names,StoredVersions}, the OpenAPI schema checks and the
// x-kubernetes-validations checks, as cluster-api repeats them from v0.30.0)
// and pkg/apiserver/schema/validation.go (21e7f350: ValidateStructural), and
// the registry strategy (PrepareForCreate/Update record the storage version in
// status.storedVersions). Field paths and messages are kube's; a value Go would
// print as a struct dump is left out.
import { isDeepStrictEqual } from "node:util";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isObject } from "../json.js";
import { forbidden, invalid, notSupported, OMIT, required, type FieldError } from "../schema/fielderr.js";
import { isDNS1035Label, isDNS1123Subdomain } from "./meta.js";
import { compileNode, validateValue } from "../schema/schema.js";
import { ruleTypeErrors } from "../schema/celcheck.js";
import { costErrors } from "../schema/celcost.js";

const REASONS = ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];

const str = (v: JsonValue | undefined): string => (typeof v === "string" ? v : "");
const strings = (v: JsonValue | undefined): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);
const obj = (v: JsonValue | undefined): JsonObject => (isObject(v) ? v : {});

/**
 * defaultCRD gives a CRD read from a request the defaults kube-apiserver's
 * decoding gives it (apiextensions-apiserver v0.36.3 apis/apiextensions/v1
 * defaults.go), before its writer is recorded as their owner: names.singular
 * (the kind, lower case), names.listKind (kind + "List"), conversion
 * (strategy None) and a conversion webhook service's port (443).
 */
export function defaultCRD(crd: JsonObject): void {
  if (!isObject(crd["spec"])) return;
  const spec = crd["spec"];
  if (isObject(spec["names"])) {
    const names = spec["names"];
    const kind = str(names["kind"]);
    if (!str(names["singular"])) names["singular"] = kind.toLowerCase();
    if (!str(names["listKind"]) && kind) names["listKind"] = `${kind}List`;
  }
  for (const v of Array.isArray(spec["versions"]) ? spec["versions"] : [])
    if (isObject(v) && isObject(v["schema"]) && isObject(v["schema"]["openAPIV3Schema"])) omitEmpty(v["schema"]["openAPIV3Schema"]);
  if (isObject(spec["validation"]) && isObject(spec["validation"]["openAPIV3Schema"])) omitEmpty(spec["validation"]["openAPIV3Schema"]);
  if (spec["conversion"] === undefined || spec["conversion"] === null) spec["conversion"] = { strategy: "None" };
  const service = obj(obj(obj(spec["conversion"])["webhook"])["clientConfig"])["service"];
  if (isObject(service) && service["port"] === undefined) service["port"] = 443;
}

/**
 * internalVersions is spec.versions as kube's refusal shows them: its internal
 * CustomResourceDefinitionVersion list as Go's JSON writes it. A per-version
 * schema, subresources, columns or selectable fields the same in every
 * version are hoisted out by the v1 conversion (null here); a list that would
 * still hold one is not shown (OMIT): its internal form is not reproduced.
 */
function internalVersions(versions: JsonValue[]): JsonValue | typeof OMIT {
  const vs = versions.map(obj);
  const hoisted = (k: string) => vs.every((v) => isDeepStrictEqual(v[k], vs[0]?.[k]));
  const parts = ["schema", "subresources", "additionalPrinterColumns", "selectableFields"];
  if (parts.some((k) => !hoisted(k) && vs.some((v) => v[k] !== undefined))) return OMIT;
  return vs.map((v) => ({
    Name: str(v["name"]),
    Served: v["served"] === true,
    Storage: v["storage"] === true,
    Deprecated: v["deprecated"] === true,
    DeprecationWarning: typeof v["deprecationWarning"] === "string" ? v["deprecationWarning"] : null,
    Schema: null,
    Subresources: null,
    AdditionalPrinterColumns: null,
    SelectableFields: null,
  }));
}

/** JSONSchemaProps' fields Go leaves out when empty (omitempty, not pointers): false, "", [] and {}. */
const OMIT_FALSE = [
  "exclusiveMaximum",
  "exclusiveMinimum",
  "uniqueItems",
  "nullable",
  "x-kubernetes-embedded-resource",
  "x-kubernetes-int-or-string",
];
const OMIT_EMPTY_STRING = ["id", "$schema", "$ref", "description", "type", "format", "title", "pattern"];
const OMIT_EMPTY_LIST = ["required", "enum", "allOf", "oneOf", "anyOf", "x-kubernetes-list-map-keys", "x-kubernetes-validations"];
const OMIT_EMPTY_MAP = ["properties", "patternProperties", "definitions", "dependencies"];

/** JSONSchemaProps' fields (apiextensions v1, by their JSON names): kube's decoding drops any other key. */
const SCHEMA_FIELDS = new Set([
  ...OMIT_FALSE,
  ...OMIT_EMPTY_STRING,
  ...OMIT_EMPTY_LIST,
  ...OMIT_EMPTY_MAP,
  "default",
  "maximum",
  "minimum",
  "maxLength",
  "minLength",
  "maxItems",
  "minItems",
  "multipleOf",
  "maxProperties",
  "minProperties",
  "items",
  "not",
  "additionalProperties",
  "additionalItems",
  "externalDocs",
  "example",
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-list-type",
  "x-kubernetes-map-type",
]);
/** ValidationRule's fields. */
const RULE_FIELDS = new Set(["rule", "message", "messageExpression", "reason", "fieldPath", "optionalOldSelf"]);

/**
 * omitEmpty drops from a schema, at every level, what kube's decoding into
 * JSONSchemaProps does not keep: empty omitempty fields, and keys that are
 * no field of it (or of a ValidationRule).
 */
function omitEmpty(s: JsonObject): void {
  for (const k of Object.keys(s)) if (!SCHEMA_FIELDS.has(k)) delete s[k];
  for (const r of Array.isArray(s["x-kubernetes-validations"]) ? s["x-kubernetes-validations"] : [])
    if (isObject(r)) for (const k of Object.keys(r)) if (!RULE_FIELDS.has(k)) delete r[k];
  for (const k of OMIT_FALSE) if (s[k] === false) delete s[k];
  for (const k of OMIT_EMPTY_STRING) if (s[k] === "") delete s[k];
  for (const k of OMIT_EMPTY_LIST) if (Array.isArray(s[k]) && (s[k] as JsonValue[]).length === 0) delete s[k];
  for (const k of OMIT_EMPTY_MAP) if (isObject(s[k]) && Object.keys(s[k] as JsonObject).length === 0) delete s[k];
  for (const k of ["properties", "patternProperties", "definitions"])
    for (const v of Object.values(obj(s[k]))) if (isObject(v)) omitEmpty(v);
  for (const k of ["items", "additionalProperties", "not"]) if (isObject(s[k])) omitEmpty(s[k] as JsonObject);
  for (const k of ["allOf", "oneOf", "anyOf"])
    for (const v of Array.isArray(s[k]) ? (s[k] as JsonValue[]) : []) if (isObject(v)) omitEmpty(v);
}

/**
 * prepareCRD is the strategy's part before validation: the storage version is
 * recorded in status.storedVersions (once; a new storage version is added).
 */
export function prepareCRD(crd: JsonObject): void {
  const versions = Array.isArray(obj(crd["spec"])["versions"]) ? (obj(crd["spec"])["versions"] as JsonValue[]).filter(isObject) : [];
  const storage = versions.filter((v) => v["storage"] === true);
  if (storage.length !== 1) return;
  const status = isObject(crd["status"]) ? crd["status"] : ((crd["status"] = {}), crd["status"] as JsonObject);
  const stored = strings(status["storedVersions"]);
  const name = str(storage[0]!["name"]);
  if (!stored.includes(name)) status["storedVersions"] = [...stored, name];
}

/**
 * crdErrors is what kube-apiserver refuses in a CRD (prepared by prepareCRD);
 * old is the stored CRD an update replaces (a version whose schema it leaves
 * unchanged is not refused for one rule's cost, as kube ratchets it).
 */
export function crdErrors(crd: JsonObject, old?: JsonObject): FieldError[] {
  const errs: FieldError[] = [];
  const spec = obj(crd["spec"]);
  const names = obj(spec["names"]);
  const group = str(spec["group"]);
  const plural = str(names["plural"]);
  if (str(obj(crd["metadata"])["name"]) !== `${plural}.${group}`)
    errs.push(invalid("metadata.name", str(obj(crd["metadata"])["name"]), 'must be spec.names.plural+"."+spec.group'));
  if (!group) errs.push(required("spec.group"));
  else if (isDNS1123Subdomain(group).length) errs.push(invalid("spec.group", group, isDNS1123Subdomain(group).join(",")));
  else if (group.split(".").length < 2) errs.push(invalid("spec.group", group, "should be a domain with at least one dot"));
  errs.push(...namesErrors(names));
  const scope = str(spec["scope"]);
  if (!scope) errs.push(required("spec.scope"));
  else if (scope !== "Cluster" && scope !== "Namespaced") errs.push(notSupported("spec.scope", scope, ["Cluster", "Namespaced"]));
  const versions = Array.isArray(spec["versions"]) ? spec["versions"] : [];
  let storage = 0;
  const seen = new Set<string>();
  let unique = true;
  const shared = sharedSchema(versions);
  versions.forEach((raw, i) => {
    const v = obj(raw);
    const name = str(v["name"]);
    if (v["storage"] === true) storage++;
    if (seen.has(name)) unique = false;
    seen.add(name);
    const bad = isDNS1035Label(name);
    if (bad.length) errs.push(invalid(`spec.versions[${i}].name`, name, bad.join(",")));
    const where = `spec.versions[${i}].schema.openAPIV3Schema`;
    const schema = obj(v["schema"])["openAPIV3Schema"];
    if (!isObject(schema)) errs.push(required(where));
    else if (!shared) errs.push(...schemaErrors(schema, where, sameSchema(old, name, schema)));
    else if (i === 0) errs.push(...schemaErrors(schema, "spec.validation.openAPIV3Schema", sameSchema(old, name, schema)));
  });
  if (!unique) errs.push(invalid("spec.versions", internalVersions(versions), "must contain unique version names"));
  if (storage !== 1)
    errs.push(invalid("spec.versions", internalVersions(versions), "must have exactly one version marked as storage version"));
  errs.push(...storedVersionErrors(crd, versions));
  return errs;
}

/**
 * sharedSchema is whether every version has the same schema: kube's conversion
 * to its internal CRD then moves it to spec.validation, where its errors are
 * reported (apiextensions-apiserver v0.36.3 pkg/apis/apiextensions/v1/conversion.go).
 */
function sharedSchema(versions: JsonValue[]): boolean {
  const schemas = versions.map((raw) => JSON.stringify(obj(obj(raw)["schema"])["openAPIV3Schema"] ?? null));
  return versions.length > 0 && schemas.every((x) => x === schemas[0]);
}

/** schemaWhere is where errors of version i's schema are reported: spec.validation's when every version shares it. */
export const schemaWhere = (versions: JsonValue[], i: number): string =>
  sharedSchema(versions) ? "spec.validation.openAPIV3Schema" : `spec.versions[${i}].schema.openAPIV3Schema`;

function namesErrors(names: JsonObject): FieldError[] {
  const errs: FieldError[] = [];
  const at = "spec.names";
  const label = (field: string, value: string, mixed = false) => {
    const bad = isDNS1035Label(mixed ? value.toLowerCase() : value);
    if (value && bad.length)
      errs.push(invalid(`${at}.${field}`, value, `${mixed ? "may have mixed case, but should otherwise match: " : ""}${bad.join(",")}`));
  };
  const plural = str(names["plural"]);
  const kind = str(names["kind"]);
  const listKind = str(names["listKind"]);
  if (!plural) errs.push(required(`${at}.plural`));
  label("plural", plural);
  label("singular", str(names["singular"]));
  if (!kind) errs.push(required(`${at}.kind`));
  label("kind", kind, true);
  label("listKind", listKind, true);
  strings(names["shortNames"]).forEach((s, i) => label(`shortNames[${i}]`, s));
  if (kind && kind === listKind) errs.push(invalid(`${at}.listKind`, listKind, "kind and listKind may not be the same"));
  strings(names["categories"]).forEach((c, i) => label(`categories[${i}]`, c));
  return errs;
}

/** storedVersionErrors is ValidateCustomResourceDefinitionStoredVersions, for a CRD that has stored versions. */
function storedVersionErrors(crd: JsonObject, versions: JsonValue[]): FieldError[] {
  const stored = strings(obj(crd["status"])["storedVersions"]);
  if (stored.length === 0) return [];
  const errs: FieldError[] = [];
  const left = new Map(stored.map((v, i) => [v, i]));
  for (const raw of versions) {
    const v = obj(raw);
    const name = str(v["name"]);
    if (v["storage"] === true && !left.has(name))
      errs.push(invalid("status.storedVersions", name, `must have the storage version ${name}`));
    left.delete(name);
  }
  for (const [v, i] of left) errs.push(invalid(`status.storedVersions[${i}]`, v, "must appear in spec.versions"));
  return errs;
}

type Level = "root" | "item" | "field";

/** sameSchema says whether old (a stored CRD) has version name with this very schema. */
function sameSchema(old: JsonObject | undefined, name: string, schema: JsonObject): boolean {
  if (!old) return false;
  const versions = obj(old["spec"])["versions"];
  const was = Array.isArray(versions) ? versions.find((v) => isObject(v) && v["name"] === name) : undefined;
  return isObject(was) && isDeepStrictEqual(obj(was["schema"])["openAPIV3Schema"], schema);
}

/**
 * schemaErrors is what apiextensions refuses in one version's openAPIV3Schema;
 * unchanged, that an update leaves it as stored (so no rule is refused for its
 * own cost, though the schema's total still is).
 */
export function schemaErrors(schema: JsonObject, where: string, unchanged = false): FieldError[] {
  // As validateCustomResourceDefinitionValidation orders it: defaults are checked on a structural
  // schema, rules type-checked and costed on one whose defaults hold too (kube skips them otherwise);
  // and a node's rules only where neither it nor anything under it has another error
  // (ValidateCustomResourceDefinitionOpenAPISchema compiles them "if len(allErrs.SchemaErrors) == 0").
  const errs: FieldError[] = [];
  structural(schema, "root", where, errs);
  const structuralOk = errs.length === 0;
  const defaultErrs: FieldError[] = [];
  if (structuralOk) defaults(schema, where, defaultErrs);
  errs.push(...defaultErrs);
  const openErrs: FieldError[] = [];
  openAPI(schema, where, openErrs);
  errs.push(...openErrs);
  const skip = (at: string) => openErrs.some((e) => e.field === at || e.field.startsWith(`${at}.`) || e.field.startsWith(`${at}[`));
  if (structuralOk && defaultErrs.length === 0)
    errs.push(...ruleTypeErrors(schema, where, true, skip), ...costErrors(schema, where, unchanged, skip));
  return errs;
}

/** structural is validateStructuralInvariants. */
function structural(s: JsonObject, lvl: Level, at: string, errs: FieldError[]): void {
  const type = str(s["type"]);
  const preserve = s["x-kubernetes-preserve-unknown-fields"] === true;
  const intOrString = s["x-kubernetes-int-or-string"] === true;
  const embedded = s["x-kubernetes-embedded-resource"] === true;
  const props = obj(s["properties"]);
  if (type === "array" && !isObject(s["items"])) errs.push(required(`${at}.items`, "must be specified"));
  if (isObject(s["items"])) structural(s["items"], "item", `${at}.items`, errs);
  for (const [k, v] of Object.entries(props)) structural(obj(v), "field", `${at}.properties[${k}]`, errs);
  if (s["additionalProperties"] !== undefined && s["additionalProperties"] !== null) {
    if (lvl === "root") errs.push(forbidden(`${at}.additionalProperties`, "must not be used at the root"));
    if (isObject(s["additionalProperties"])) structural(s["additionalProperties"], "field", `${at}.additionalProperties`, errs);
  }
  if (intOrString && preserve)
    errs.push(invalid(`${at}.x-kubernetes-preserve-unknown-fields`, true, "must be false if x-kubernetes-int-or-string is true"));
  if (intOrString && embedded)
    errs.push(invalid(`${at}.x-kubernetes-embedded-resource`, true, "must be false if x-kubernetes-int-or-string is true"));
  const intOrStringAnyOf = (v: JsonValue | undefined) =>
    Array.isArray(v) && v.length === 2 && JSON.stringify(v) === JSON.stringify([{ type: "integer" }, { type: "string" }]);
  const allOf = Array.isArray(s["allOf"]) ? s["allOf"] : [];
  for (const [key, list] of [
    ["anyOf", intOrStringAnyOf(s["anyOf"]) ? [] : s["anyOf"]],
    ["oneOf", s["oneOf"]],
  ] as const)
    if (Array.isArray(list)) list.forEach((n, i) => nested(obj(n), "field", `${at}.${key}[${i}]`, errs));
  allOf.forEach((n, i) => {
    const skip = i === 0 && intOrStringAnyOf(obj(n)["anyOf"]);
    nested(skip ? { ...obj(n), anyOf: [] } : obj(n), "field", `${at}.allOf[${i}]`, errs);
  });
  if (isObject(s["not"])) nested(s["not"], "field", `${at}.not`, errs);
  if (embedded && type !== "object") {
    if (!type) errs.push(required(`${at}.type`, "must be object if x-kubernetes-embedded-resource is true"));
    else errs.push(invalid(`${at}.type`, type, "must be object if x-kubernetes-embedded-resource is true"));
  } else if (!type && !intOrString && !preserve) {
    const why =
      lvl === "root"
        ? "must not be empty at the root"
        : lvl === "item"
          ? "must not be empty for specified array items"
          : "must not be empty for specified object fields";
    errs.push(required(`${at}.type`, why));
  }
  if (embedded && s["additionalProperties"] !== undefined)
    errs.push(forbidden(`${at}.additionalProperties`, "must not be used if x-kubernetes-embedded-resource is set"));
  if (lvl === "root" && type && type !== "object") errs.push(invalid(`${at}.type`, type, "must be object at the root"));
  const checkMeta = lvl === "root" || embedded;
  if (checkMeta) {
    for (const [k, want] of [
      ["kind", "string"],
      ["apiVersion", "string"],
      ["metadata", "object"],
    ] as const)
      if (isObject(props[k]) && str(props[k]["type"]) !== want)
        errs.push(invalid(`${at}.properties[${k}].type`, str(props[k]["type"]), `must be ${want}`));
  }
  if (lvl === "root" && isObject(props["metadata"])) {
    const m = props["metadata"];
    const mp = Object.keys(obj(m["properties"]));
    const onlyNames = mp.every((k) => k === "name" || k === "generateName");
    const rest = Object.keys(m).filter((k) => !["type", "default", ...(onlyNames ? ["properties"] : [])].includes(k));
    if (rest.length)
      errs.push(
        forbidden(
          `${at}.properties[metadata]`,
          "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ),
      );
  }
  if (embedded && !preserve && Object.keys(props).length === 0)
    errs.push(
      required(
        `${at}.properties`,
        "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
      ),
    );
}

/** nested is validateNestedValueValidation: under anyOf, allOf, oneOf and not, only value validation may be said. */
function nested(s: JsonObject, lvl: Level, at: string, errs: FieldError[]): void {
  for (const key of ["anyOf", "allOf", "oneOf"])
    if (Array.isArray(s[key])) (s[key] as JsonValue[]).forEach((n, i) => nested(obj(n), lvl, `${at}.${key}[${i}]`, errs));
  if (isObject(s["not"])) nested(s["not"], lvl, `${at}.not`, errs);
  if (isObject(s["items"])) nested(s["items"], lvl, `${at}.items`, errs);
  for (const [k, v] of Object.entries(obj(s["properties"]))) nested(obj(v), "field", `${at}.properties[${k}]`, errs);
  const said: Array<[string, boolean, string]> = [
    ["type", Boolean(str(s["type"])), "must be empty to be structural"],
    ["additionalProperties", s["additionalProperties"] !== undefined, "must be undefined to be structural"],
    ["default", s["default"] !== undefined, "must be undefined to be structural"],
    ["title", Boolean(str(s["title"])), "must be empty to be structural"],
    ["description", Boolean(str(s["description"])), "must be empty to be structural"],
    ["nullable", s["nullable"] === true, "must be false to be structural"],
    ["x-kubernetes-preserve-unknown-fields", s["x-kubernetes-preserve-unknown-fields"] === true, "must be false to be structural"],
    ["x-kubernetes-embedded-resource", s["x-kubernetes-embedded-resource"] === true, "must be false to be structural"],
    ["x-kubernetes-int-or-string", s["x-kubernetes-int-or-string"] === true, "must be false to be structural"],
    ["x-kubernetes-list-map-keys", strings(s["x-kubernetes-list-map-keys"]).length > 0, "must be empty to be structural"],
    ["x-kubernetes-list-type", s["x-kubernetes-list-type"] !== undefined, "must be undefined to be structural"],
  ];
  for (const [k, bad, why] of said) if (bad) errs.push(forbidden(`${at}.${k}`, why));
  if (isObject(obj(s["properties"])["metadata"]))
    errs.push(forbidden(`${at}.properties[metadata]`, "must not be specified in a nested context"));
}

/** openAPI is the OpenAPI schema checks of ValidateCustomResourceDefinitionOpenAPISchema that the structural ones do not make. */
function openAPI(s: JsonObject, at: string, errs: FieldError[]): void {
  if (s["$ref"] !== undefined) errs.push(forbidden(`${at}.$ref`, "$ref is not supported"));
  if (s["uniqueItems"] === true)
    errs.push(forbidden(`${at}.uniqueItems`, "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"));
  const ap = s["additionalProperties"];
  if (ap !== undefined && ap !== true && Object.keys(obj(s["properties"])).length > 0)
    errs.push(forbidden(`${at}.additionalProperties`, "additionalProperties and properties are mutual exclusive"));
  listAndMapTypeErrors(s, at, errs);
  const rules = Array.isArray(s["x-kubernetes-validations"]) ? s["x-kubernetes-validations"] : [];
  rules.forEach((raw, i) => ruleErrors(obj(raw), s, `${at}.x-kubernetes-validations[${i}]`, errs));
  for (const [k, v] of Object.entries(obj(s["properties"]))) openAPI(obj(v), `${at}.properties[${k}]`, errs);
  if (isObject(s["items"])) openAPI(s["items"], `${at}.items`, errs);
  if (isObject(ap)) openAPI(ap, `${at}.additionalProperties`, errs);
  for (const key of ["anyOf", "allOf", "oneOf"])
    if (Array.isArray(s[key])) (s[key] as JsonValue[]).forEach((n, j) => openAPI(obj(n), `${at}.${key}[${j}]`, errs));
  if (isObject(s["not"])) openAPI(s["not"], `${at}.not`, errs);
}

/**
 * listAndMapTypeErrors is what apiextensions refuses in a node's
 * x-kubernetes-list-type, -list-map-keys and -map-type (apiextensions-apiserver
 * v0.36.3 pkg/apis/apiextensions/validation/validation.go,
 * ValidateCustomResourceDefinitionOpenAPISchema and validateMapListKeysMapSet,
 * with the options of a CRD's create: a set's items atomic, a set's or a map
 * list's items not nullable, a map list's keys required or defaulted).
 */
function listAndMapTypeErrors(s: JsonObject, at: string, errs: FieldError[]): void {
  const type = str(s["type"]);
  const typeErr = (want: string, why: string) =>
    errs.push(type ? invalid(`${at}.type`, type, `must be ${want} if ${why}`) : required(`${at}.type`, `must be ${want} if ${why}`));
  const mapType = s["x-kubernetes-map-type"];
  if (mapType !== undefined && mapType !== null) {
    if (type !== "object") typeErr("object", "x-kubernetes-map-type is specified");
    if (mapType !== "atomic" && mapType !== "granular")
      errs.push(notSupported(`${at}.x-kubernetes-map-type`, mapType, ["atomic", "granular"]));
  }
  const listType = s["x-kubernetes-list-type"];
  const has = listType !== undefined && listType !== null;
  const items = isObject(s["items"]) ? s["items"] : undefined;
  if (has && type !== "array") typeErr("array", "x-kubernetes-list-type is specified");
  else if (listType === "set" && items) {
    if (items["type"] === "array" && items["x-kubernetes-list-type"] !== undefined && items["x-kubernetes-list-type"] !== "atomic")
      errs.push(
        invalid(
          `${at}.items.x-kubernetes-list-type`,
          items["x-kubernetes-list-type"],
          "must be atomic as item of a list with x-kubernetes-list-type=set",
        ),
      );
    if (items["type"] === "object" && items["x-kubernetes-map-type"] !== "atomic")
      errs.push(
        invalid(
          `${at}.items.x-kubernetes-map-type`,
          items["x-kubernetes-list-type"] ?? null,
          "must be atomic as item of a list with x-kubernetes-list-type=set",
        ),
      );
  }
  if (has && listType !== "atomic" && listType !== "set" && listType !== "map")
    errs.push(notSupported(`${at}.x-kubernetes-list-type`, listType, ["atomic", "set", "map"]));
  const keys = strings(s["x-kubernetes-list-map-keys"]);
  if (keys.length > 0) {
    if (!has) errs.push(required(`${at}.x-kubernetes-list-type`, "must be map if x-kubernetes-list-map-keys is non-empty"));
    else if (listType !== "map")
      errs.push(invalid(`${at}.x-kubernetes-list-type`, listType, "must be map if x-kubernetes-list-map-keys is non-empty"));
  }
  if (listType === "map") {
    if (keys.length === 0) errs.push(required(`${at}.x-kubernetes-list-map-keys`, "must not be empty if x-kubernetes-list-type is map"));
    if (!items) errs.push(required(`${at}.items`, "must have a schema if x-kubernetes-list-type is map"));
    else if (items["type"] !== "object")
      errs.push(invalid(`${at}.items.type`, items["type"] ?? "", "must be object if parent array's x-kubernetes-list-type is map"));
    else {
      const props = obj(items["properties"]);
      const seen = new Set<string>();
      for (const k of keys) {
        const p = props[k];
        if (isObject(p)) {
          if (p["type"] === "array" || p["type"] === "object")
            errs.push(
              invalid(
                `${at}.items.properties[${k}].type`,
                "object",
                "must be a scalar type if parent array's x-kubernetes-list-type is map",
              ),
            );
        } else errs.push(invalid(`${at}.x-kubernetes-list-map-keys`, keys, "entries must all be names of item properties"));
        if (seen.has(k)) errs.push(invalid(`${at}.x-kubernetes-list-map-keys`, keys, "must not contain duplicate entries"));
        seen.add(k);
      }
    }
  }
  if ((listType === "set" || listType === "map") && items) {
    if (items["nullable"] === true)
      errs.push(forbidden(`${at}.items.nullable`, `cannot be nullable when x-kubernetes-list-type is ${listType}`));
    if (listType === "map") {
      const req = strings(items["required"]);
      const props = obj(items["properties"]);
      for (const k of keys) {
        const p = props[k];
        if (!isObject(p)) continue;
        if (!req.includes(k) && p["default"] === undefined)
          errs.push(
            required(
              `${at}.items.properties[${k}].default`,
              "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            ),
          );
        if (p["nullable"] === true)
          errs.push(
            forbidden(`${at}.items.properties[${k}].nullable`, "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"),
          );
      }
    }
  }
}

/** ruleErrors checks one x-kubernetes-validations entry's fields (its rule's CEL is compiled in cel.ts). */
function ruleErrors(rule: JsonObject, s: JsonObject, at: string, errs: FieldError[]): void {
  const text = str(rule["rule"]).trim();
  const message = str(rule["message"]);
  // In kube-apiserver v1.36.3's words (apiextensions-apiserver v0.36.3 validation.go, the x-kubernetes-validations loop).
  if (!text) errs.push(required(`${at}.rule`, "rule is not specified"));
  else if (message.length > 0 && message.trim() === "") errs.push(invalid(`${at}.message`, message, "must be non-empty if specified"));
  else if (/[\n\r]/.test(message.trim())) errs.push(invalid(`${at}.message`, message, "must not contain line breaks"));
  else if (/[\n\r]/.test(text) && message.trim() === "")
    errs.push(required(`${at}.message`, "message must be specified if rule contains line breaks"));
  const expr = str(rule["messageExpression"]);
  if (expr.length > 0 && expr.trim() === "")
    errs.push(required(`${at}.messageExpression`, "messageExpression must be non-empty if specified"));
  if (rule["reason"] !== undefined && !REASONS.includes(str(rule["reason"])))
    errs.push(notSupported(`${at}.reason`, rule["reason"], REASONS));
  const fp = rule["fieldPath"];
  if (typeof fp === "string" && fp.length > 0) {
    if (fp.trim() === "") errs.push(invalid(`${at}.fieldPath`, fp, "must be non-empty if specified"));
    if (/[\n\r]/.test(fp)) errs.push(invalid(`${at}.fieldPath`, fp, "must not contain line breaks"));
    if (fieldPathError(fp, s)) errs.push(invalid(`${at}.fieldPath`, fp, "must be a valid path"));
  }
}

/**
 * fieldPathError is why a rule's fieldPath does not name a field of its
 * schema (cel.ValidFieldPath): a path of .name and ['name'] steps (a [n] step
 * only through an array, a ['key'] one through a map), or none.
 */
function fieldPathError(path: string, root: JsonObject): string | undefined {
  let s: JsonObject | undefined = root;
  let rest = path;
  while (rest.length) {
    let name: string;
    let m: RegExpExecArray | null;
    if ((m = /^\.([A-Za-z_][A-Za-z0-9_-]*)/.exec(rest))) name = m[1]!;
    else if ((m = /^\['((?:[^'\\]|\\.)*)'\]/.exec(rest))) name = m[1]!.replace(/\\(.)/g, "$1");
    else if ((m = /^\[(\d+)\]/.exec(rest))) {
      if (str(s?.["type"]) !== "array") return `expected single quoted string but got ${m[1]}`;
      s = obj(s?.["items"]);
      rest = rest.slice(m[0].length);
      continue;
    } else return `expected [ or . but got: ${rest[0]}`;
    const props = obj(s?.["properties"]);
    const additional: JsonValue | undefined = s?.["additionalProperties"];
    const named = props[name];
    if (isObject(named)) s = named;
    else if (isObject(additional)) s = additional;
    else return "does not refer to a valid field";
    rest = rest.slice(m[0].length);
  }
  return undefined;
}

/** defaults checks each default against the schema it is the default of (structuraldefaulting.ValidateDefaults). */
function defaults(s: JsonObject, at: string, errs: FieldError[]): void {
  if (s["default"] !== undefined && s["default"] !== null) {
    const node = compileNode({ ...s, default: undefined } as unknown as JsonObject, at, { rules: false });
    const where = `${at}.default`;
    // kube-openapi names the default's own path, which is empty: " in body should ...".
    for (const e of validateValue(s["default"], node, "", where, undefined)) errs.push(e);
  }
  // Not into additionalProperties: kube does not look there (defaulting/validation.go).
  for (const [k, v] of Object.entries(obj(s["properties"]))) defaults(obj(v), `${at}.properties[${k}]`, errs);
  if (isObject(s["items"])) defaults(s["items"], `${at}.items`, errs);
}
