// safeYamlOf's work (render/output.ts) given the `yaml` package to do it
// with, so that a command that writes YAML only sometimes (xfn validate -o
// yaml) loads the package only then (validate/output.ts, yamllib.ts).
import type * as Yaml from "yaml";
import { hasControl, safeYaml } from "../terminal.js";

export type YamlOptions = Parameters<Yaml.Document["toString"]>[0] & { sortMapEntries?: boolean };

/** safeYamlWith is YAML of value (Y's stringify, with options) with every string holding a control character written escaped. */
export function safeYamlWith(Y: typeof Yaml, value: unknown, options: YamlOptions = {}): string {
  const { sortMapEntries, ...toString } = options;
  const doc = new Y.Document(value, sortMapEntries ? { sortMapEntries } : {});
  Y.visit(doc, {
    Scalar: (_key, node) => {
      if (typeof node.value === "string" && hasControl(node.value)) node.type = "QUOTE_DOUBLE";
    },
  });
  return safeYaml(doc.toString(toString));
}
