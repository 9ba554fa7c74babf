// `xfn test --update` rewrites expected.yaml through its YAML documents, not
// from scratch: a key or item that stays keeps its node, so its comments, its
// flow or block style and its quoting stay; only values that changed are
// replaced, keys and items that went are dropped, and new ones are added
// after the others.
import { isMap, isNode, isScalar, isSeq, parseAllDocuments, type Scalar, visit, type Document, type Node, type Pair } from "yaml";
import { quoteAmbiguous, toYamlStream } from "../render/output.js";

type Doc = Document.Parsed;

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** fresh makes a node for value, quoting strings YAML 1.1 would read as another type, as the writers do. */
function fresh(doc: Doc, value: unknown): Node {
  const node = doc.createNode(value) as Node;
  visit(node, { Scalar: (_k, n) => quoteAmbiguous(n) });
  return node;
}

/** carry moves the comments and blank lines around old onto its replacement. */
function carry(old: Node, made: Node): Node {
  if (old.commentBefore) made.commentBefore = old.commentBefore;
  if (old.comment) made.comment = old.comment;
  if (old.spaceBefore) made.spaceBefore = old.spaceBefore;
  return made;
}

/** patch returns node brought to value, keeping whatever of node still says the same. */
function patch(doc: Doc, node: unknown, value: unknown): Node {
  if (!isNode(node)) return fresh(doc, value);
  if (isPlainObject(value) && isMap(node)) {
    const seen = new Set<string>();
    node.items = (node.items as Pair[]).filter((p) => {
      const key = isScalar(p.key) ? String(p.key.value) : String(p.key);
      if (!Object.hasOwn(value, key) || seen.has(key)) return false;
      seen.add(key);
      p.value = patch(doc, p.value, value[key]);
      return true;
    });
    for (const [k, v] of Object.entries(value)) if (!seen.has(k)) node.items.push(doc.createPair(k, fresh(doc, v)) as Pair);
    return node;
  }
  if (Array.isArray(value) && isSeq(node)) {
    node.items = value.map((v, i) => patch(doc, node.items[i], v));
    return node;
  }
  if (isScalar(node) && !isPlainObject(value) && !Array.isArray(value)) {
    if (node.value === value) return node;
    // Same type: the new value in the old node (its quoting fits). Another type: a new node, with the old one's comments.
    if (typeof node.value === typeof value && node.value !== null) {
      node.value = value;
      if (typeof value === "string") quoteAmbiguous(node as Scalar<unknown>);
      return node;
    }
  }
  return carry(node, fresh(doc, value));
}

/** sequencesFlush tells whether a text writes a block sequence at its key's indent (`key:\n- a`), as crossplane render does. */
function sequencesFlush(text: string): boolean {
  const flush = text.match(/^( *)[^\s#-][^\n]*:[ \t]*\n\1- /gm)?.length ?? 0;
  const indented = text.match(/^( *)[^\s#-][^\n]*:[ \t]*\n\1 {2}- /gm)?.length ?? 0;
  return flush > indented;
}

/**
 * rewriteKeepingStyle is the YAML stream text brought to entries, one per
 * document to write: from (the index of a document of text that it updates)
 * or none (a new document, written as the stream writer writes them).
 * single is text's form for one document (no leading ---).
 */
export function rewriteKeepingStyle(text: string, entries: Array<{ from?: number; value: unknown }>, single = false): string {
  const docs = parseAllDocuments(text) as Doc[];
  const indentSeq = !sequencesFlush(text);
  // `{a: 1}` or `{ a: 1 }`, as the text writes its flow collections.
  const flowCollectionPadding = (text.match(/[{[] \S/g)?.length ?? 0) >= (text.match(/[{[][^\s}\]]/g)?.length ?? 0);
  const out = entries.map((e, i) => {
    const doc = e.from !== undefined ? docs[e.from] : undefined;
    if (!doc) return toYamlStream([e.value]);
    doc.contents = patch(doc, doc.contents, e.value) as never;
    const body = doc.toString({ lineWidth: 0, indentSeq, flowCollectionPadding });
    // The first document as written (with its --- or without); the others after a ---.
    return single || (i === 0 && e.from === 0) || body.startsWith("---") ? body : `---\n${body}`;
  });
  return out.join("");
}
