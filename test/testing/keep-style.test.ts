// xfn test --update rewrites expected.yaml through its YAML documents: what
// stays keeps its comments, flow or block style and quoting.
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parseAllDocuments } from "yaml";
import { rewriteKeepingStyle } from "../../src/testing/keep-style.js";

const K = suite("testing: --update keeps the YAML as written");

const cases: Record<string, { reason: string; text: string; value: unknown; want: string }> = {
  SameValues: {
    reason: "nothing changed: the text is the same",
    text: "# head\na: {b: 1, c: [x, y]} # tail\nd: 'quoted'\n",
    value: { a: { b: 1, c: ["x", "y"] }, d: "quoted" },
    want: "# head\na: {b: 1, c: [x, y]} # tail\nd: 'quoted'\n",
  },
  ChangedScalar: {
    reason: "a changed value keeps its node's quoting and comment",
    text: "tag: 'old' # the tag\nn: 1\n",
    value: { tag: "new", n: 2 },
    want: "tag: 'new' # the tag\nn: 2\n",
  },
  TypeChange: {
    reason: "a value of another type gets a node of its own, the comment carried over",
    text: "ready: READY_TRUE # set by the step\n",
    value: { ready: 3 },
    want: "ready: 3 # set by the step\n",
  },
  AmbiguousString: {
    reason: "a new string YAML 1.1 would read as a boolean is quoted, as the writers quote it",
    text: "flag: x\n",
    value: { flag: "yes" },
    want: 'flag: "yes"\n',
  },
  KeyGoneKeyNew: {
    reason: "a key gone is dropped with its comment; a new key goes after the others",
    text: "a: 1\n# about b\nb: 2\n",
    value: { a: 1, c: { d: true } },
    want: "a: 1\nc:\n  d: true\n",
  },
  BlockSequenceFlush: {
    reason: "a text that writes sequences at their key's indent keeps doing so",
    text: "items:\n- a\n- b\nother:\n- c\n",
    value: { items: ["a", "z", "q"], other: ["c"] },
    want: "items:\n- a\n- z\n- q\nother:\n- c\n",
  },
};
for (const [name, tc] of Object.entries(cases)) {
  K(name, () => {
    const got = rewriteKeepingStyle(tc.text, [{ from: 0, value: tc.value }], true);
    assert.is(got, tc.want, tc.reason);
    assert.equal(parseAllDocuments(got)[0]!.toJS(), tc.value, `${tc.reason}: it reads back as the value`);
  });
}

K("a stream: documents kept in their place, one dropped, a new one written as the stream writer does", () => {
  const text = "# first\na: 1\n---\nb: {x: 1}\n---\nc: 3\n";
  const got = rewriteKeepingStyle(text, [{ from: 0, value: { a: 2 } }, { from: 2, value: { c: 3 } }, { value: { d: "new" } }]);
  assert.is(got, "# first\na: 2\n---\nc: 3\n---\nd: new\n");
});

K.run();
