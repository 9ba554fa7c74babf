// holds: the drift check before a write. Table tests of what "seen carries want" means.
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { holds } from "../../src/sdk/holds.js";

const H = suite("sdk: holds");

const j = (text: string): unknown => JSON.parse(text);
const cases: [name: string, seen: unknown, want: unknown, ok: boolean][] = [
  ["equal scalars", 1, 1, true],
  ["different scalars", "a", "b", false],
  ["null holds null", null, null, true],
  ["an object for a scalar", { a: 1 }, 1, false],
  ["defaulted fields are extra keys", { a: 1, b: 2 }, { a: 1 }, true],
  ["a nested difference", j(`{"spec": {"x": {"y": 1}}}`), j(`{"spec": {"x": {"y": 2}}}`), false],
  ["a missing key", { a: 1 }, { b: 1 }, false],
  ["lists must be equal in length", [1, 2], [1], false],
  ["lists element by element, each partially", [{ a: 1, b: 2 }], [{ a: 1 }], true],
  ["a list for an object", [1], {}, false],
  ["an object for a list", {}, [], false],
  ["an empty want holds in any object", { a: 1 }, {}, true],
  // Keys Object.prototype has: a seen object without them has nothing there.
  ["__proto__ wanted, not there", { a: 1 }, j(`{"__proto__": {}}`), false],
  ["__proto__ wanted and there", j(`{"__proto__": {"a": 1, "b": 2}}`), j(`{"__proto__": {"a": 1}}`), true],
  ["__proto__ differs", j(`{"__proto__": {"a": 1}}`), j(`{"__proto__": {"a": 2}}`), false],
  ["constructor wanted, not there", {}, j(`{"constructor": {}}`), false],
  ["toString wanted, not there", {}, j(`{"toString": {}}`), false],
];
for (const [name, seen, want, ok] of cases) H(name, () => assert.is(holds(seen, want), ok));

H.run();
