// Printing Kubernetes objects as a YAML stream, keys sorted as Kubernetes'
// own serializer sorts them, so output is stable and diffs stay small.
import { stringify } from "yaml";

/** toYamlStream renders each object as a document, each preceded by "---". */
export function toYamlStream(objects: readonly unknown[]): string {
  return objects.map((o) => `---\n${stringify(o, { sortMapEntries: true, lineWidth: 0 })}`).join("");
}
