// What `xfn validate` reads, as crossplane/cli's loader reads it (cmd/crossplane/
// common/load/loader.go at 3d72f93): a comma-separated list of sources, each a
// file, a folder (walked, its .yaml and .yml files read; a link to a folder is
// not followed, as filepath.Walk does not) or `-` for standard input. Every
// document of every stream counts; empty ones are skipped. A Composition's
// pipeline step inputs are validated too, each before its Composition, as
// there (a function's input against the function's CRD).
import { lstatSync, readdirSync, statSync } from "node:fs";
import { extname, join } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { InputError, type Doc } from "../engine/input.js";
import { documents, fileDocuments } from "./yaml.js";
import { isObject } from "../json.js";
import { messageOf } from "../sdk/errors.js";

/** loadSources reads sources (comma-separated); stdin is read with readStdin when a source is "-". */
export function loadSources(sources: string, readStdin: () => string): Doc[] {
  return [...eachSource(sources, readStdin)];
}

/**
 * eachSource is loadSources one document at a time: a file's documents are
 * read as they are asked for, so that a caller that drops each holds one
 * (and the file's text) at a time.
 */
export function* eachSource(sources: string, readStdin: () => string): Generator<Doc> {
  for (const source of sources.split(",")) {
    if (source === "-") yield* stream(documents(readStdin(), "<stdin>"), "<stdin>");
    else {
      let st;
      try {
        st = statSync(source);
      } catch (err) {
        // crossplane's words (cmd/crossplane/common/load/loader.go: "cannot stat input source", Go's os.Stat error).
        const why = (err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file or directory" : messageOf(err);
        throw new InputError(`cannot stat input source: stat ${source}: ${why}`);
      }
      if (st.isDirectory()) for (const f of walk(source)) yield* stream(readFile(f), f);
      else yield* stream(readFile(source), source);
    }
  }
}

/** readFile is a file's documents, read as they are asked for; a file that cannot be read is said so. */
function* readFile(file: string): Generator<unknown> {
  try {
    yield* fileDocuments(file);
  } catch (err) {
    if (err instanceof InputError) throw err;
    throw new InputError(`cannot read ${file}: ${messageOf(err)}`);
  }
}

/** walk lists a folder's .yaml and .yml files, depth first in name order; links to folders are not followed. */
function walk(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    const st = lstatSync(p);
    if (st.isDirectory()) out.push(...walk(p));
    else if (extname(name) === ".yaml" || extname(name) === ".yml") {
      // A link is read if it leads to a file; one that leads to a folder (or nowhere) is skipped, as Walk skips it.
      if (st.isSymbolicLink()) {
        try {
          if (!statSync(p).isFile()) continue;
        } catch {
          continue;
        }
      }
      out.push(p);
    }
  }
  return out;
}

function* stream(docs: Iterable<unknown>, file: string): Generator<Doc> {
  let i = -1;
  for (const v of docs) {
    i++;
    if (v === null || v === undefined) continue;
    const where = `${file}${i > 0 ? ` (document ${i + 1})` : ""}`;
    if (!isObject(v as never))
      throw new InputError(`${where}: expected a Kubernetes object, got ${Array.isArray(v) ? "a list" : typeof v}`);
    const obj = v as JsonObject;
    if (Object.keys(obj).length === 0) continue;
    if (obj["apiVersion"] === "apiextensions.crossplane.io/v1" && obj["kind"] === "Composition") {
      const spec = isObject(obj["spec"]) ? obj["spec"] : {};
      for (const [j, step] of (Array.isArray(spec["pipeline"]) ? spec["pipeline"] : []).entries())
        if (isObject(step) && isObject(step["input"])) yield { obj: step["input"], source: `${where}: spec.pipeline[${j}].input` };
    }
    yield { obj, source: where };
  }
}
