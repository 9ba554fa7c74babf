// Field errors as kube-apiserver reports them: each names a field path, a
// type (FieldValueInvalid, FieldValueRequired, ...) and a detail, and a
// refusal gathers them into a 422 Invalid Status whose details.causes list one
// cause per error, so kubectl and client libraries print what they would
// against a real cluster. Read at kubernetes/apimachinery eed236ce:
// pkg/util/validation/field/errors.go (ErrorBody, the type names),
// pkg/api/errors/errors.go (NewInvalid) and pkg/util/errors (the aggregate).
import type { JsonValue } from "@bufbuild/protobuf";

export type FieldErrorType =
  | "FieldValueNotFound"
  | "FieldValueRequired"
  | "FieldValueDuplicate"
  | "FieldValueInvalid"
  | "FieldValueNotSupported"
  | "FieldValueForbidden"
  | "FieldValueTooLong"
  | "FieldValueTooMany"
  | "FieldValueTooFew"
  | "InternalError"
  | "FieldValueTypeInvalid"
  | "FieldValueTooShort";

/** OMIT stands for a value the message leaves out (Kubernetes' field.OmitValueType). */
export const OMIT = Symbol("omit");

/** FieldError is one field's error. value is what the message shows (undefined shows null). */
export interface FieldError {
  type: FieldErrorType;
  field: string;
  value?: JsonValue | typeof OMIT | undefined;
  detail: string;
}

const TITLES: Record<FieldErrorType, string> = {
  FieldValueNotFound: "Not found",
  FieldValueRequired: "Required value",
  FieldValueDuplicate: "Duplicate value",
  FieldValueInvalid: "Invalid value",
  FieldValueNotSupported: "Unsupported value",
  FieldValueForbidden: "Forbidden",
  FieldValueTooLong: "Too long",
  FieldValueTooMany: "Too many",
  FieldValueTooFew: "Too few",
  InternalError: "Internal error",
  FieldValueTypeInvalid: "Invalid value",
  FieldValueTooShort: "Too short",
};

const NO_VALUE = new Set<FieldErrorType>([
  "FieldValueRequired",
  "FieldValueForbidden",
  "FieldValueTooLong",
  "FieldValueTooShort",
  "InternalError",
]);

/** goFloat formats a number as Go's %v does for a float64 (shortest form; exponent below 1e-4 and from 1e21). */
export function goFloat(n: number): string {
  if (!Number.isFinite(n)) return n > 0 ? "+Inf" : n < 0 ? "-Inf" : "NaN";
  if (Number.isInteger(n) && Math.abs(n) < 1e21) return String(n);
  const exp = n === 0 ? 0 : Math.floor(Math.log10(Math.abs(n)));
  if (exp < -4 || exp >= 21) {
    const [m, e] = n.toExponential().split("e") as [string, string];
    const sign = e.startsWith("-") ? "-" : "+";
    const digits = e.replace(/^[+-]/, "").padStart(2, "0");
    return `${m}e${sign}${digits}`;
  }
  return String(n);
}

/** goValue renders a value as ErrorBody does: numbers and bools bare, strings quoted, anything else as JSON. */
export function goValue(v: JsonValue | undefined): string {
  if (typeof v === "number") return goFloat(v);
  if (typeof v === "boolean") return String(v);
  if (typeof v === "string") return JSON.stringify(v);
  // Go's json.Marshal, which escapes HTML's characters and the JavaScript line separators.
  return JSON.stringify(v ?? null).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** body is the error without its field: "Invalid value: 3: must be ...". */
export function body(e: FieldError): string {
  const title = TITLES[e.type];
  let s = NO_VALUE.has(e.type) || e.value === OMIT ? title : `${title}: ${goValue(e.value as JsonValue | undefined)}`;
  if (e.detail) s += `: ${e.detail}`;
  return s;
}

/** text is the whole error, as Kubernetes prints it: "spec.replicas: Invalid value: ...". */
export function text(e: FieldError): string {
  return `${e.field}: ${body(e)}`;
}

export const invalid = (field: string, value: JsonValue | typeof OMIT | undefined, detail: string): FieldError => ({
  type: "FieldValueInvalid",
  field,
  value,
  detail,
});
export const required = (field: string, detail = ""): FieldError => ({ type: "FieldValueRequired", field, detail });
export const forbidden = (field: string, detail: string): FieldError => ({ type: "FieldValueForbidden", field, detail });
export const tooLong = (field: string, max: number): FieldError => ({
  type: "FieldValueTooLong",
  field,
  detail: max >= 0 ? `may not be more than ${max} ${max === 1 ? "byte" : "bytes"}` : "value is too long",
});
export const notSupported = (field: string, value: JsonValue | undefined, valid: string[]): FieldError => ({
  type: "FieldValueNotSupported",
  field,
  value,
  detail: valid.length ? `supported values: ${valid.map((v) => JSON.stringify(v)).join(", ")}` : "",
});
export const tooMany = (field: string, actual: number, max: number): FieldError => ({
  type: "FieldValueTooMany",
  field,
  value: actual,
  detail: max >= 0 ? `must have at most ${max} ${max === 1 ? "item" : "items"}` : "has too many items",
});

/** message is the Status message of a refusal: `Kind.group "name" is invalid: <the errors>`. */
export function message(qualifiedKind: string, name: string, errs: FieldError[]): string {
  const seen = [...new Set(errs.map(text))];
  const head = `${qualifiedKind} ${JSON.stringify(name)} is invalid`;
  if (seen.length === 0) return head;
  return `${head}: ${seen.length === 1 ? seen[0] : `[${seen.join(", ")}]`}`;
}
