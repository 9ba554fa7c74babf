// Server-side apply reads the applied configuration as a typed object before
// it merges anything: structured-merge-diff converts it with the CRD's schema,
// and a field the schema does not declare, or a value of the wrong kind,
// fails the apply with the converter's words, before any validation runs.
// This is what a Crossplane user meets when a function composes a field its
// provider's CRD lacks ("... field not declared in schema"), so the embedded
// server does the same.
//
// Read at kubernetes-sigs/structured-merge-diff 15d0754 (typed/validate.go,
// typed/helpers.go, fieldpath/element.go) and kubernetes/apimachinery
// eed236ce (pkg/util/managedfields/internal/structuredmerge.go: the error is
// a plain one, which kube-apiserver answers as a 500 with no reason, see
// kubernetes/kubernetes#139253).
import type { JsonValue } from "@bufbuild/protobuf";
import { isObject } from "../json.js";
import { goFloat } from "../schema/fielderr.js";
import type { Node } from "../schema/node.js";

const META = new Set(["apiVersion", "kind", "metadata"]);

/** typedErrors are the conversion errors of an applied configuration under schema root, as structured-merge-diff words them. */
export function typedErrors(obj: JsonValue, root: Node): string[] {
  const errs: string[] = [];
  walk(obj, { ...root, embedded: true }, "", errs);
  return errs;
}

/** typedMessage joins the errors as ValidationErrors.Error does. */
export function typedMessage(errs: string[]): string {
  return errs.length === 1 ? errs[0]! : ["errors:", ...errs.map((e) => `  ${e}`)].join("\n");
}

function scalarKind(s: Node): "numeric" | "string" | "boolean" | "untyped" | undefined {
  if (s.intOrString) return "untyped";
  const t = s.types[0];
  if (t === "integer" || t === "number") return "numeric";
  if (t === "string") return "string";
  if (t === "boolean") return "boolean";
  return undefined;
}

function walk(v: JsonValue | undefined, s: Node, path: string, errs: string[]): void {
  if (v === undefined || v === null || s.preserve) return;
  const at = (m: string) => errs.push(path ? `${path}: ${m}` : m);
  const kind = scalarKind(s);
  if (kind) {
    if (kind === "numeric" && typeof v !== "number") at(`expected numeric (int or float), got ${goType(v)}`);
    else if (kind === "string" && typeof v !== "string") at(`expected string, got &value.valueUnstructured{Value:${goSharp(v)}}`);
    else if (kind === "boolean" && typeof v !== "boolean") at(`expected boolean, got &{${goV(v)}}`);
    else if (kind === "untyped" && typeof v === "object") at(`expected any scalar, got &{${goV(v)}}`);
    return;
  }
  if (s.types[0] === "array" || s.items) {
    if (!Array.isArray(v)) return void at(`expected list, got &{${goV(v)}}`);
    const keys = s.listType === "map" ? (s.listMapKeys ?? []) : undefined;
    const seen = new Set<string>();
    v.forEach((item, i) => {
      let pe = `[${i}]`;
      if (keys?.length || s.listType === "set") {
        if (s.listType === "set") pe = `[=${goV(item)}]`;
        else {
          if (!isObject(item)) return void errs.push(`element ${i}: expected map, got &{${goV(item)}}`);
          const missing = keys!.find((k) => item[k] === undefined && s.items?.props?.get(k)?.default === undefined);
          if (missing)
            return void errs.push(
              `element ${i}: associative list with keys has an element that omits key field ${JSON.stringify(missing)} ` +
                "(and doesn't have default value)",
            );
          pe = `[${keys!.map((k) => `${k}=${JSON.stringify(item[k] ?? s.items?.props?.get(k)?.default ?? null)}`).join(",")}]`;
        }
        if (seen.has(pe)) errs.push(`duplicate entries for key ${pe}`);
        seen.add(pe);
      }
      if (s.items) walk(item, s.items, `${path}${pe}`, errs);
    });
    return;
  }
  if (s.types[0] === "object" || s.props || s.additional) {
    if (!isObject(v)) return void at(`expected map, got &{${goV(v)}}`);
    for (const [k, x] of Object.entries(v)) {
      if (s.embedded && META.has(k)) continue;
      const p = s.props?.get(k) ?? (s.additional || undefined);
      if (!p) {
        // structured-merge-diff stops at a map's first undeclared field.
        errs.push(`${path}.${k}: field not declared in schema`);
        return;
      }
      walk(x, p, `${path}.${k}`, errs);
    }
  }
}

/** goType is Go's %T of a decoded JSON value. */
function goType(v: JsonValue): string {
  if (typeof v === "string") return "string";
  if (typeof v === "boolean") return "bool";
  if (Array.isArray(v)) return "[]interface {}";
  if (isObject(v)) return "map[string]interface {}";
  return Number.isInteger(v) ? "int64" : "float64";
}

/** goV is Go's %v of a decoded JSON value. */
function goV(v: JsonValue): string {
  if (v === null) return "<nil>";
  if (typeof v === "number") return goFloat(v);
  if (typeof v !== "object") return String(v);
  if (Array.isArray(v)) return `[${v.map(goV).join(" ")}]`;
  return `map[${Object.keys(v)
    .sort()
    .map((k) => `${k}:${goV(v[k]!)}`)
    .join(" ")}]`;
}

/** goSharp is Go's %#v of a decoded JSON value. */
function goSharp(v: JsonValue): string {
  if (v === null) return "interface {}(nil)";
  if (typeof v === "number") return goFloat(v);
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "boolean") return String(v);
  if (Array.isArray(v)) return `[]interface {}{${v.map(goSharp).join(", ")}}`;
  return `map[string]interface {}{${Object.keys(v)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${goSharp(v[k]!)}`)
    .join(", ")}}`;
}
