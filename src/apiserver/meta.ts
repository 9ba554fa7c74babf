// The checks every object's metadata gets from kube-apiserver, and the data
// checks of ConfigMaps and Secrets: the refusals users meet first. Messages are
// kube-apiserver's, read at kubernetes/apimachinery eed236ce
// (pkg/api/validation/objectmeta.go, pkg/util/validation/validation.go,
// pkg/api/validate/content/kube.go) and kubernetes/kubernetes'
// pkg/apis/core/validation (ValidateConfigMap, ValidateSecret).
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isObject } from "../json.js";
import { invalid, required, tooLong, type FieldError } from "../schema/fielderr.js";
import { ApiError } from "./errors.js";

import {
  isDNS1035Label,
  isDNS1123Label,
  isDNS1123Subdomain,
  isLabelValue,
  isQualifiedName,
  LABEL_VALUE,
  maxLen,
  regexError,
} from "../schema/names.js";

export { isDNS1035Label, isDNS1123Label, isDNS1123Subdomain, isLabelValue, isQualifiedName };

const CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+";
const CONFIG_KEY = new RegExp(`^${CONFIG_KEY_FMT}$`);
/** TOTAL_ANNOTATION_SIZE is kube-apiserver's limit on all annotations' keys and values together. */
export const TOTAL_ANNOTATION_SIZE = 256 * 1024;
/** DATA_SIZE is the limit on a ConfigMap's or Secret's data. */
export const DATA_SIZE = 1024 * 1024;

/**
 * nameErrors says why name cannot name an object of a kind (a namespace's is
 * a DNS label, others' a DNS subdomain); prefix: name is a generateName.
 */
export function nameErrors(isNamespace: boolean, name: string, prefix = false): string[] {
  // A generateName may end in a dash: the generated suffix follows it.
  const v = prefix && name.endsWith("-") ? `${name.slice(0, -1)}a` : name;
  return isNamespace ? isDNS1123Label(v) : isDNS1123Subdomain(v);
}

/** GOOD_KEYS remembers label keys, annotation keys and finalizers that passed (every write repeats them); bounded. */
const GOOD_KEYS = new Set<string>();

/** keyErrors is isQualifiedName(key), remembering keys that pass. */
function keyErrors(key: string): string[] {
  if (GOOD_KEYS.has(key)) return [];
  const errs = isQualifiedName(key);
  if (!errs.length) {
    if (GOOD_KEYS.size >= 10_000) GOOD_KEYS.clear();
    GOOD_KEYS.add(key);
  }
  return errs;
}

/**
 * metaErrors is what ValidateObjectMeta (and, with old, ValidateObjectMetaUpdate)
 * refuses in an object's metadata: names, labels, annotations, finalizers and
 * owner references.
 */
export function metaErrors(obj: JsonObject, isNamespace: boolean): FieldError[] {
  const m = isObject(obj["metadata"]) ? obj["metadata"] : {};
  const errs: FieldError[] = [];
  if (typeof m["generateName"] === "string" && m["generateName"] !== "")
    for (const msg of nameErrors(isNamespace, m["generateName"], true)) errs.push(invalid("metadata.generateName", m["generateName"], msg));
  const name = typeof m["name"] === "string" ? m["name"] : "";
  if (!name) errs.push(required("metadata.name", "name or generateName is required"));
  else for (const msg of nameErrors(isNamespace, name)) errs.push(invalid("metadata.name", name, msg));
  const labels = m["labels"];
  if (isObject(labels))
    for (const k in labels) {
      const v = labels[k];
      if (typeof v !== "string") continue;
      for (const msg of keyErrors(k)) errs.push(invalid("metadata.labels", k, msg));
      if (v.length > 63 || !LABEL_VALUE.test(v)) for (const msg of isLabelValue(v)) errs.push(invalid("metadata.labels", v, msg));
    }
  const annotations = m["annotations"];
  let size = 0;
  if (isObject(annotations))
    for (const k in annotations) {
      const v = annotations[k];
      if (typeof v !== "string") continue;
      for (const msg of keyErrors(k.toLowerCase())) errs.push(invalid("metadata.annotations", k, msg));
      size += k.length + v.length;
    }
  // Sizes count bytes: only a total near the limit needs counting exactly.
  if (size > TOTAL_ANNOTATION_SIZE / 4 && isObject(annotations)) {
    size = 0;
    for (const k in annotations) {
      const v = annotations[k];
      if (typeof v === "string") size += Buffer.byteLength(k) + Buffer.byteLength(v);
    }
  }
  if (size > TOTAL_ANNOTATION_SIZE) errs.push(tooLong("metadata.annotations", TOTAL_ANNOTATION_SIZE));
  const finalizers = Array.isArray(m["finalizers"]) ? m["finalizers"].filter((f): f is string => typeof f === "string") : [];
  for (const f of finalizers) for (const msg of keyErrors(f)) errs.push(invalid("metadata.finalizers", f, msg));
  if (finalizers.includes("orphan") && finalizers.includes("foregroundDeletion"))
    errs.push(invalid("metadata.finalizers", finalizers, "finalizer orphan and foregroundDeletion cannot be both set"));
  const refs = Array.isArray(m["ownerReferences"]) ? m["ownerReferences"] : [];
  let controller = "";
  refs.forEach((r, i) => {
    const ref = isObject(r) ? r : {};
    const at = `metadata.ownerReferences[${i}]`;
    const apiVersion = typeof ref["apiVersion"] === "string" ? ref["apiVersion"] : "";
    if (!apiVersion) errs.push(required(`${at}.apiVersion`, "must not be empty"));
    else if (apiVersion.split("/").length > 2 || apiVersion.endsWith("/"))
      errs.push(invalid(`${at}.apiVersion`, apiVersion, "must be <group>/<version> or <version>"));
    for (const k of ["kind", "name", "uid"])
      if (typeof ref[k] !== "string" || ref[k] === "") errs.push(required(`${at}.${k}`, "must not be empty"));
    if (ref["controller"] === true) {
      const here = `${String(ref["kind"])}/${String(ref["name"])}`;
      if (controller)
        errs.push(
          invalid(
            "metadata.ownerReferences",
            refs,
            `Only one reference can have Controller set to true. Found "true" in references for ${controller} and ${here}`,
          ),
        );
      else controller = here;
    }
  });
  return errs;
}

/** decodeError is the 400 a body gets that does not decode into its built-in kind. */
function decodeError(kind: string, why: string): ApiError {
  return new ApiError(400, "BadRequest", `${kind} in version "v1" cannot be handled as a ${kind}: ${why}`);
}

/** checkStrings refuses, as decoding does, metadata labels and annotations that are not strings. */
export function checkMetaTypes(kind: string, obj: JsonObject): void {
  const m = obj["metadata"];
  if (m === undefined || m === null) return;
  if (!isObject(m))
    throw decodeError(kind, `json: cannot unmarshal ${jsonType(m)} into Go struct field ${kind}.metadata of type v1.ObjectMeta`);
  for (const f of ["labels", "annotations"]) {
    const v = m[f];
    if (v === undefined || v === null) continue;
    if (!isObject(v))
      throw decodeError(
        kind,
        `json: cannot unmarshal ${jsonType(v)} into Go struct field ObjectMeta.metadata.${f} of type map[string]string`,
      );
    for (const x of Object.values(v))
      if (typeof x !== "string")
        throw decodeError(kind, `json: cannot unmarshal ${jsonType(x)} into Go struct field ObjectMeta.metadata.${f} of type string`);
  }
}

function jsonType(v: JsonValue): string {
  return v === null ? "null" : Array.isArray(v) ? "array" : typeof v === "object" ? "object" : typeof v;
}

/**
 * decodeData checks a ConfigMap's or Secret's data as decoding it does (string
 * values; a Secret's data base64), and folds a Secret's stringData into its
 * data, as the API server stores it; a Secret without a type is Opaque.
 */
export function decodeData(kind: "ConfigMap" | "Secret", obj: JsonObject): void {
  const fields = kind === "ConfigMap" ? ["data", "binaryData"] : ["data", "stringData"];
  for (const f of fields) {
    const v = obj[f];
    if (v === undefined || v === null) continue;
    const go = f === "binaryData" || (kind === "Secret" && f === "data") ? "map[string][]uint8" : "map[string]string";
    if (!isObject(v)) throw decodeError(kind, `json: cannot unmarshal ${jsonType(v)} into Go struct field ${kind}.${f} of type ${go}`);
    for (const x of Object.values(v)) {
      if (typeof x !== "string")
        throw decodeError(
          kind,
          `json: cannot unmarshal ${jsonType(x)} into Go struct field ${kind}.${f} of type ` +
            (go === "map[string]string" ? "string" : "[]uint8"),
        );
      if (go !== "map[string]string") {
        const bad = badBase64(x);
        if (bad !== undefined) throw decodeError(kind, `illegal base64 data at input byte ${bad}`);
      }
    }
  }
  // SetDefaults_Secret: a Secret without a type is Opaque.
  if (kind === "Secret" && (obj["type"] === undefined || obj["type"] === "")) obj["type"] = "Opaque";
  if (kind === "Secret" && isObject(obj["stringData"])) {
    const data = isObject(obj["data"]) ? obj["data"] : {};
    for (const [k, v] of Object.entries(obj["stringData"])) if (typeof v === "string") data[k] = Buffer.from(v, "utf8").toString("base64");
    obj["data"] = data;
    delete obj["stringData"];
  }
}

/**
 * badBase64 is where s stops being standard, padded base64, or undefined: the
 * first character outside the alphabet, else the start of a last quantum
 * that is short or wrongly padded (Go names the same bytes, in most cases).
 */
function badBase64(s: string): number | undefined {
  const clean = s.replace(/[\r\n]/g, "");
  const bad = clean.search(/[^A-Za-z0-9+/=]/);
  if (bad >= 0) return bad;
  if (/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(clean)) return undefined;
  return clean.length - (clean.length % 4 || 4);
}

/** dataErrors is what ValidateConfigMap / ValidateSecret refuse in the data: bad keys, a key in both maps, more than 1 MiB. */
export function dataErrors(kind: "ConfigMap" | "Secret", obj: JsonObject): FieldError[] {
  const errs: FieldError[] = [];
  const maps = kind === "ConfigMap" ? ["data", "binaryData"] : ["data"];
  const seen = new Set<string>();
  let size = 0;
  for (const f of maps) {
    const v = isObject(obj[f]) ? (obj[f] as JsonObject) : {};
    for (const [k, x] of Object.entries(v)) {
      for (const msg of configKeyErrors(k)) errs.push(invalid(f, k, msg));
      if (seen.has(k)) errs.push({ type: "FieldValueDuplicate", field: `data[${k}]`, value: k, detail: "" });
      seen.add(k);
      size += typeof x === "string" ? (f === "data" && kind === "ConfigMap" ? Buffer.byteLength(x) : Math.floor((x.length * 3) / 4)) : 0;
    }
  }
  if (size > DATA_SIZE) errs.push(tooLong(kind === "ConfigMap" ? "<nil>" : "data", DATA_SIZE));
  return errs;
}

function configKeyErrors(k: string): string[] {
  const errs: string[] = [];
  if (k.length > 253) errs.push(maxLen(253));
  if (!CONFIG_KEY.test(k))
    errs.push(
      regexError(
        "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
        CONFIG_KEY_FMT,
        "key.name",
        "KEY_NAME",
        "key-name",
      ),
    );
  if (k === ".") errs.push("must not be '.'");
  else if (k === "..") errs.push("must not be '..'");
  else if (k.startsWith("..")) errs.push("must not start with '..'");
  return errs;
}
