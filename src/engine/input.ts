// Reading input without loading the `yaml` package: the documents' type, the
// words for a document that does not parse (given the `yaml` package to parse
// with), and standard input, bounded. engine/docs.ts parses with the package
// it imports; xfn validate (validate/yaml.ts) loads it only for the documents
// its fast reader leaves to it.
import { readSync } from "node:fs";
import type { JsonObject } from "@bufbuild/protobuf";
import type * as Yaml from "yaml";
import { InputError, messageOf } from "../sdk/errors.js";
import { KUBE_YAML, toKubeJson } from "./kubeyaml.js";
import { MAX_JSON_FORM_DEPTH } from "../wire/depth.js";

export { InputError };

/** Doc is one parsed document and where it came from. */
export interface Doc {
  obj: JsonObject;
  source: string;
}

/** docName names document i of file: the file alone for the first. */
export const docName = (file: string, i: number): string => `${file}${i > 0 ? ` (document ${i + 1})` : ""}`;

/**
 * yamlReason is the first line of a YAML error. The parser recurses, and a
 * document nested too deeply overflows its stack: that is said as such.
 */
function yamlReason(message: string): string {
  // The parser ends the line with ":" before a snippet of the source.
  const first = message.split("\n")[0]!.replace(/:$/, "");
  const overflow = "Maximum call stack size exceeded";
  if (!first.startsWith(overflow)) return first;
  return `${first.replace(overflow, "nested too deeply for the YAML parser")} (xfn reads at most ${MAX_JSON_FORM_DEPTH} levels)`;
}

/**
 * parseDocsWith parses every YAML (or JSON) document in text, read from file,
 * with the `yaml` package Y. The first document that does not parse throws an
 * InputError naming the file, the document and the problem: a malformed
 * document is never read in part.
 */
export function parseDocsWith(Y: typeof Yaml, text: string, file: string): unknown[] {
  const out: unknown[] = [];
  // As Kubernetes reads YAML (kubeyaml.ts): yes is true, 0777 is 511, and so on.
  for (const [i, doc] of Y.parseAllDocuments(text, KUBE_YAML as Yaml.ParseOptions).entries()) {
    if (doc.errors.length > 0) throw new InputError(`cannot parse ${docName(file, i)}: ${yamlReason(doc.errors[0]!.message)}`);
    try {
      out.push(toKubeJson(doc.toJS(KUBE_YAML)));
    } catch (err) {
      throw new InputError(`cannot parse ${docName(file, i)}: ${messageOf(err)}`);
    }
  }
  return out;
}

/** MAX_STDIN_BYTES bounds what a command reads from standard input (a file of documents of that size is already unusual). */
export const MAX_STDIN_BYTES = 256 * 1024 * 1024;

/**
 * readStdinBounded reads standard input to its end, refusing more than
 * limit bytes: `-` given /dev/zero or `yes` grew the process to 16.8 GB.
 */
export function readStdinBounded(limit = MAX_STDIN_BYTES, fd = 0): string {
  const chunks: Buffer[] = [];
  let total = 0;
  const chunk = Buffer.allocUnsafe(1 << 20);
  for (;;) {
    let n: number;
    try {
      n = readSync(fd, chunk, 0, chunk.length, null);
    } catch (err) {
      // A non-blocking stdin with nothing yet: wait for it, as readFileSync(0) would.
      if ((err as NodeJS.ErrnoException).code === "EAGAIN") {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
        continue;
      }
      if ((err as NodeJS.ErrnoException).code === "EOF") break;
      throw err;
    }
    if (n === 0) break;
    total += n;
    if (total > limit) throw new InputError(`cannot read standard input: it holds more than ${limit / 2 ** 20} MiB, the most read from it`);
    chunks.push(Buffer.from(chunk.subarray(0, n)));
  }
  return Buffer.concat(chunks, total).toString("utf8");
}
