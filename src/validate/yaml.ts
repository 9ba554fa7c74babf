// Fast YAML for `xfn validate`: documents one at a time, read by js-yaml with
// Kubernetes' resolution of plain scalars (engine/kubeyaml.ts), so that a file
// of 50,000 resources is neither held parsed whole nor read at the pace of the
// `yaml` package (which took 70% of validate's time). The `yaml` package (engine/docs.ts parseDocs) stays the
// reference: a file whose documents this reader does not take as they are
// (one that does not parse, holds an alias, a directive or a duplicate key)
// is read by it instead, whole, with its words for the error; what they read
// alike is checked by test/validate/yaml.test.ts.
import { closeSync, openSync, readFileSync, readSync } from "node:fs";
import { StringDecoder } from "node:string_decoder";
import yaml from "js-yaml";
import { parseDocsWith } from "../engine/input.js";
import { asNumber, GO_HINT, goResolve } from "../engine/kubeyaml.js";
import { yamlLib } from "../yamllib.js";

/**
 * KUBE reads plain scalars as Kubernetes does (engine/kubeyaml.ts, go-yaml
 * v2's YAML 1.1 resolution: `yes` true, `0777` 511), as the `yaml` package's
 * reading does.
 */
const KUBE = yaml.FAILSAFE_SCHEMA.extend({
  implicit: [
    new yaml.Type("tag:xfn.dev,2026:kube-plain", {
      kind: "scalar",
      resolve: (s: string) => GO_HINT.test(s),
      // A number: keys that read as numbers are left to the `yaml` package (NOT_PLAIN), which writes them as Go does.
      construct: (s: string) => asNumber(goResolve(s)),
    }),
  ],
});

/** A line that ends a document (`---`, `...`, alone or before a space): YAML forbids it inside any scalar. */
const MARKER = /^(?:---|\.\.\.)(?:[ \t\r\n]|$)/;
/** Only blank lines and comments. */
const EMPTY = /^(?:[ \t]*(?:#.*)?(?:\r?\n|$))*$/;
/**
 * What this reader leaves to the `yaml` package: an alias or anchor (shared
 * nodes a walk would expand without bound), a tag other than a core one, a
 * merge key, and a key that reads as a number or null (js-yaml writes such a
 * key as JavaScript prints it; Kubernetes as Go does, or refuses it).
 */
const NOT_PLAIN =
  /(?:^|[\s,[{])[*&][^\s,[\]{}]|(?:^|[\s,[{:-])!(?!!(?:str|int|float|bool|null|map|seq)\b)|(?:^|[\s,[{?])(?:[-+.0-9][-+.0-9_a-fA-FxXoO]*|[-+]?\.(?:inf|Inf|INF|nan|NaN|NAN)|~|null|Null|NULL|<<)[ \t]*:(?:[ \t\r\n]|$)/;

/** LEFT is a document this reader leaves to the `yaml` package (see NOT_PLAIN; a directive too). */
const LEFT = Symbol("left to the yaml package");

/**
 * chunks cuts the lines of a YAML stream into its documents' texts, each with
 * its own start marker, numbered as the `yaml` package numbers documents;
 * LEFT in place of the rest from a document this reader does not take.
 */
function* chunks(lines: Iterable<string>): Generator<string | typeof LEFT> {
  let doc = "";
  let opened = false; // the current document began with a `---` line
  let any = false; // a document was given
  function* close(explicit: boolean): Generator<string | typeof LEFT> {
    // Before the first marker, blank lines and comments are no document of their own.
    if (explicit || opened || !EMPTY.test(doc) || (any && doc !== "")) {
      any = true;
      yield NOT_PLAIN.test(doc) ? LEFT : doc;
    }
  }
  for (const line of lines) {
    const c = line.charCodeAt(0);
    if (c === 0x25 /* % */) return yield LEFT;
    if ((c === 0x2d /* - */ || c === 0x2e) /* . */ && MARKER.test(line.slice(0, 4))) {
      if (line.startsWith("---")) {
        yield* close(false);
        doc = line;
        opened = true;
      } else {
        // `...` ends the document; what follows starts another only with content.
        doc += line;
        yield* close(true);
        doc = "";
        opened = false;
      }
    } else doc += line;
  }
  if (doc !== "" || opened) yield* close(false);
}

/** linesOf are text's lines, each with its line break. */
function* linesOf(text: string): Generator<string> {
  for (let at = 0; at < text.length;) {
    const nl = text.indexOf("\n", at);
    const end = nl < 0 ? text.length : nl + 1;
    yield text.slice(at, end);
    at = end;
  }
}

/** fileLines are a file's lines, read a megabyte at a time. */
function* fileLines(path: string): Generator<string> {
  const fd = openSync(path, "r");
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    const decoder = new StringDecoder("utf8");
    let rest = "";
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      rest += decoder.write(buf.subarray(0, n));
      const last = rest.lastIndexOf("\n");
      if (last < 0) continue;
      yield* linesOf(rest.slice(0, last + 1));
      rest = rest.slice(last + 1);
    }
    rest += decoder.end();
    if (rest) yield rest;
  } finally {
    closeSync(fd);
  }
}

/**
 * parsed are the documents of a stream's lines, one at a time (null for an
 * empty one). From a document this reader does not take (LEFT, or one
 * js-yaml refuses), whole() is read by parseDocs instead, which says why one
 * does not parse, naming the file and document.
 */
function* parsed(lines: Iterable<string>, whole: () => string, file: string): Generator<unknown> {
  let i = 0;
  for (const chunk of chunks(lines)) {
    let v: unknown;
    try {
      if (chunk === LEFT) throw new Error("left");
      v = yaml.load(chunk, { schema: KUBE });
    } catch {
      // From this document on, the ones before having been given already.
      yield* parseDocsWith(yamlLib(), whole(), file).slice(i);
      return;
    }
    i++;
    yield v === undefined ? null : v;
  }
}

/**
 * documents are the documents of text, read from file, one at a time (null
 * for an empty one), numbered as the `yaml` package numbers them.
 */
export function documents(text: string, file: string): Generator<unknown> {
  return parsed(linesOf(text), () => text, file);
}

/**
 * fileDocuments are documents() of a file read a megabyte at a time: neither
 * its documents nor its text are held whole (the file is read again whole
 * only for a document this reader leaves to the `yaml` package).
 */
export function fileDocuments(path: string): Generator<unknown> {
  return parsed(fileLines(path), () => readFileSync(path, "utf8"), path);
}
