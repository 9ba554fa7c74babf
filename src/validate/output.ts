// A validation result printed as `crossplane resource validate` prints it
// (crossplane/cli 3d72f93 pkg/validate/output/render.go): text with [✓], [!]
// and [x] lines and a totals line; JSON as Go's encoding/json indents it (its
// fields in struct order, <, > and & escaped); YAML as sigs.k8s.io/yaml writes
// it (keys sorted, lists not indented under their key).
import { safeYamlWith } from "../render/yamlout.js";
import { yamlLib } from "../yamllib.js";
import { printable, safeJson } from "../terminal.js";
import type { FieldValidationError, ValidationResult } from "./validate.js";

export type Format = "text" | "json" | "yaml";
export const FORMATS: readonly Format[] = ["text", "json", "yaml"];

export interface RenderOptions {
  /** Leave out the [✓] lines (text only: JSON and YAML always hold every resource). */
  skipSuccessResults?: boolean;
}

/** render writes result in format. */
export function render(result: ValidationResult, format: Format, opts: RenderOptions = {}): string {
  if (format === "json") return `${goJSON(ordered(result))}\n`;
  if (format === "yaml") return safeYamlWith(yamlLib(), ordered(result), { sortMapEntries: true, indentSeq: false, lineWidth: 0 });
  return text(result, opts);
}

/** ordered is the result with its fields in the Go structs' order and the empty ones left out (omitempty). */
function ordered(r: ValidationResult): unknown {
  return {
    summary: {
      total: r.summary.total,
      valid: r.summary.valid,
      invalid: r.summary.invalid,
      missingSchemas: r.summary.missingSchemas,
    },
    resources: r.resources.map((x) => ({
      apiVersion: x.apiVersion,
      kind: x.kind,
      name: x.name,
      ...(x.namespace ? { namespace: x.namespace } : {}),
      status: x.status,
      ...(x.errors?.length
        ? {
            errors: x.errors.map((e) => ({
              type: e.type,
              ...(e.field ? { field: e.field } : {}),
              message: e.message,
              ...(e.value !== undefined ? { value: e.value } : {}),
            })),
          }
        : {}),
    })),
  };
}

/** goJSON is JSON.stringify indented by two, with the characters Go's encoder escapes for HTML escaped. */
function goJSON(v: unknown): string {
  return safeJson(JSON.stringify(v, null, 2).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`));
}

function text(result: ValidationResult, opts: RenderOptions): string {
  let out = "";
  // Names and messages come from the files given: printed safe for a terminal (no escape codes).
  const safe = (s: string) => printable(s, { lines: false });
  for (const r of result.resources) {
    const gvk = safe(`${r.apiVersion}, Kind=${r.kind}`);
    const name = safe(r.name);
    switch (r.status) {
      case "missingSchema":
        out += `[!] could not find CRD/XRD for: ${gvk}\n`;
        break;
      case "valid":
        if (!opts.skipSuccessResults) out += `[✓] ${gvk}, ${name} validated successfully\n`;
        break;
      default:
        for (const e of r.errors ?? []) out += errorLine(gvk, name, e, safe);
    }
  }
  const s = result.summary;
  return `${out}Total ${s.total} resources: ${s.missingSchemas} missing schemas, ${s.valid} success cases, ${s.invalid} failure cases\n`;
}

function errorLine(gvk: string, name: string, e: FieldValidationError, safe: (s: string) => string): string {
  const message = safe(e.message);
  switch (e.type) {
    case "defaulting":
      return `[!] failed to apply defaults for ${gvk}, ${name}: ${message}\n`;
    case "cel":
      return `[x] CEL validation error ${gvk}, ${name} : ${message}\n`;
    default:
      return `[x] schema validation error ${gvk}, ${name} : ${message}\n`;
  }
}
