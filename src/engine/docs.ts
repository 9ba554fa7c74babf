// Loading render inputs: YAML (or JSON) files, or directories of them, each
// holding one or more documents. Every error names the file and the problem.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { extname, join } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import * as YAML from "yaml";
import { InputError } from "../sdk/errors.js";
import { docName, parseDocsWith, type Doc } from "./input.js";
import { messageOf } from "../sdk/errors.js";

// A problem with what the user gave (exit code 1) is the SDK's InputError: one class for input
// that does not parse or make sense, a function's or xfn's own. What reads input without the
// `yaml` package (input.ts) is re-exported from here too.
export { InputError };
export { MAX_STDIN_BYTES, readStdinBounded, type Doc } from "./input.js";

const YAML_FILES = new Set([".yaml", ".yml", ".json"]);

function files(path: string): string[] {
  let st;
  try {
    st = statSync(path);
  } catch {
    throw new InputError(`cannot read ${path}: no such file or directory`);
  }
  if (st.isFile()) return [path];
  const found = readdirSync(path)
    .filter((f) => YAML_FILES.has(extname(f)))
    .sort()
    .map((f) => join(path, f))
    .filter((f) => statSync(f).isFile());
  // As crossplane render: a folder given for documents must hold some.
  if (found.length === 0) throw new InputError(`no YAML files found in ${path} (.yaml, .yml or .json)`);
  return found;
}

/**
 * parseDocs parses every YAML (or JSON) document in text, read from file. The
 * first document that does not parse throws an InputError naming the file,
 * the document and the problem: a malformed document is never read in part.
 */
export function parseDocs(text: string, file: string): unknown[] {
  return parseDocsWith(YAML, text, file);
}

/** parseDoc parses text that holds at most one YAML document (null for none), naming file in errors. */
export function parseDoc(text: string, file: string): unknown {
  const docs = parseDocs(text, file);
  if (docs.length > 1) throw new InputError(`cannot parse ${file}: expected one YAML document, found ${docs.length}`);
  return docs[0] ?? null;
}

/** loadDocs reads every document of a file, or of every YAML file in a directory. */
export function loadDocs(path: string): Doc[] {
  const out: Doc[] = [];
  for (const file of files(path)) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      throw new InputError(`cannot read ${file}: ${messageOf(err)}`);
    }
    for (const [i, v] of parseDocs(text, file).entries()) {
      const where = docName(file, i);
      if (v === null || v === undefined) continue; // an empty document between separators
      if (typeof v !== "object" || Array.isArray(v))
        throw new InputError(`${where}: expected a Kubernetes object, got ${Array.isArray(v) ? "a list" : typeof v}`);
      out.push({ obj: v as JsonObject, source: where });
    }
  }
  return out;
}

/** loadOne reads a file that must hold exactly one object. */
export function loadOne(path: string, what: string): Doc {
  const docs = loadDocs(path);
  if (docs.length !== 1) throw new InputError(`${path}: expected exactly one ${what}, found ${docs.length} documents`);
  return docs[0]!;
}

const str = (o: JsonObject, k: string): string | undefined => (typeof o[k] === "string" ? (o[k] as string) : undefined);

/** identity returns apiVersion, kind and metadata.name, or throws naming what is missing. */
export function identity(doc: Doc, what: string): { apiVersion: string; kind: string; name: string; namespace?: string } {
  const apiVersion = str(doc.obj, "apiVersion");
  const kind = str(doc.obj, "kind");
  const meta = (doc.obj["metadata"] ?? {}) as JsonObject;
  const name = str(meta, "name");
  if (!apiVersion || !kind) throw new InputError(`${doc.source}: not a Kubernetes object (${what} needs apiVersion and kind)`);
  if (!name) throw new InputError(`${doc.source}: ${kind} has no metadata.name`);
  const namespace = str(meta, "namespace");
  return { apiVersion, kind, name, ...(namespace ? { namespace } : {}) };
}
