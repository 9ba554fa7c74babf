// Printing Kubernetes objects as a YAML stream, as Crossplane's Go tools print
// them (sigs.k8s.io/yaml): keys sorted, lists not indented under their key,
// strings that YAML 1.1 would read as something else ("True", "yes", a
// timestamp, "1.5") in double quotes, other strings that need quoting in single
// quotes, no folding of long lines. So xfn render's output diffs cleanly
// against crossplane render's.
import * as YAML from "yaml";
import { Document, isScalar, parseDocument, visit, type Scalar } from "yaml";
import { safeYamlWith, type YamlOptions } from "./yamlout.js";
import { hasControl, safeYaml } from "../terminal.js";

/** toYamlStream renders each object as a document, each preceded by "---". */
export function toYamlStream(objects: readonly unknown[]): string {
  return objects.map((o) => `---\n${toYaml(o)}`).join("");
}

const readsAsOther = new Map<string, boolean>();

/** readsAsNonString tells whether s, written plain, would be read by YAML 1.1 as another type. */
function readsAsNonString(s: string): boolean {
  if (s === "") return true;
  let v = readsAsOther.get(s);
  if (v === undefined) {
    const d = parseDocument(s, { version: "1.1" });
    v = d.errors.length === 0 && isScalar(d.contents) && typeof d.contents.value !== "string";
    if (readsAsOther.size > 10_000) readsAsOther.clear();
    readsAsOther.set(s, v);
  }
  return v;
}

/** quoteAmbiguous double-quotes a string scalar that YAML 1.1 readers (Go's yaml) would read as another type when plain. */
export function quoteAmbiguous(node: Scalar<unknown>): void {
  // A control character is written escaped, which only double quotes allow (safeYaml).
  if (typeof node.value === "string" && (readsAsNonString(node.value) || hasControl(node.value))) node.type = "QUOTE_DOUBLE";
}

function toYaml(o: unknown): string {
  const doc = new Document(o, { sortMapEntries: true });
  visit(doc, { Scalar: (_key, node) => quoteAmbiguous(node) });
  return safeYaml(doc.toString({ indentSeq: false, singleQuote: true, lineWidth: 0 }));
}

/** safeYamlOf is YAML of value (yaml's stringify, with options) with every string holding a control character written escaped. */
export function safeYamlOf(value: unknown, options: YamlOptions = {}): string {
  return safeYamlWith(YAML, value, options);
}
