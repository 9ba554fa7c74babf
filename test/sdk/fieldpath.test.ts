import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import {
  deleteValue,
  expandWildcards,
  FieldPathError,
  formatPath,
  getNumber,
  getString,
  getStringArray,
  getStringObject,
  getValue,
  getValues,
  parsePath,
  setValue,
} from "../../src/sdk/fieldpath.js";

const Parse = suite("parsePath");

// Written from crossplane-runtime's documented fieldpath behaviour (its Parse and
// FieldOrIndex tables): positions are where its lexer reports the error.
const parseCases: Record<string, { path: string; want?: unknown; err?: RegExp }> = {
  SingleField: { path: "spec", want: [{ field: "spec" }] },
  SingleIndex: { path: "[0]", want: [{ index: 0 }] },
  TwoFields: { path: "metadata.name", want: [{ field: "metadata" }, { field: "name" }] },
  SimpleFields: { path: "spec.forProvider.region", want: [{ field: "spec" }, { field: "forProvider" }, { field: "region" }] },
  APIConventionsExample: {
    path: "fields[1].state.current",
    want: [{ field: "fields" }, { index: 1 }, { field: "state" }, { field: "current" }],
  },
  IndexAfterField: {
    path: "spec.containers[0].image",
    want: [{ field: "spec" }, { field: "containers" }, { index: 0 }, { field: "image" }],
  },
  NestedArray: { path: "nested[0][1].name", want: [{ field: "nested" }, { index: 0 }, { index: 1 }, { field: "name" }] },
  BracketStyleField: {
    path: "spec[containers][0].name",
    want: [{ field: "spec" }, { field: "containers" }, { index: 0 }, { field: "name" }],
  },
  BracketFieldWithPeriod: { path: "data[.config.yml]", want: [{ field: "data" }, { field: ".config.yml" }] },
  BracketKeyWithDotsAndSlash: {
    path: "metadata.annotations[crossplane.io/external-name]",
    want: [{ field: "metadata" }, { field: "annotations" }, { field: "crossplane.io/external-name" }],
  },
  QuotedKeyWithPeriod: { path: "metadata.labels['app.hash']", want: [{ field: "metadata" }, { field: "labels" }, { field: "app.hash" }] },
  DoubleQuotedKey: {
    path: 'metadata.annotations["crossplane.io/external-name"]',
    want: [{ field: "metadata" }, { field: "annotations" }, { field: "crossplane.io/external-name" }],
  },
  QuotedDotField: { path: "'spec'.x", want: [{ field: "spec" }, { field: "x" }] },
  QuotedNumberIsAKey: { path: "data['3']", want: [{ field: "data" }, { field: "3" }] },
  NegativeIsAKey: { path: "a[-3]", want: [{ field: "a" }, { field: "-3" }] },
  FloatIsAKey: { path: "a[3.0]", want: [{ field: "a" }, { field: "3.0" }] },
  LeadingZeroesIndex: { path: "a[007]", want: [{ field: "a" }, { index: 7 }] },
  LargestIndex: { path: "a[4294967295]", want: [{ field: "a" }, { index: 4294967295 }] },
  OverflowIsAKey: { path: "a[4294967296]", want: [{ field: "a" }, { field: "4294967296" }] },
  Wildcard: { path: "spec.containers[*].name", want: [{ field: "spec" }, { field: "containers" }, { field: "*" }, { field: "name" }] },
  DotWildcard: { path: "spec.*.name", want: [{ field: "spec" }, { field: "*" }, { field: "name" }] },
  LeadingBracket: { path: "[a.b][2]", want: [{ field: "a.b" }, { index: 2 }] },
  FieldRightAfterBracket: { path: "a[0]b", want: [{ field: "a" }, { index: 0 }, { field: "b" }] },
  Empty: { path: "", err: /is empty/ },
  LeadingPeriod: { path: ".metadata.name", err: /unexpected "\." at position 0/ },
  TrailingPeriod: { path: "metadata.name.", err: /unexpected "\." at position 13/ },
  BracketsFollowingPeriod: { path: "spec.containers.[0].name", err: /unexpected "\[" at position 16/ },
  DoublePeriod: { path: "metadata..name", err: /unexpected "\." at position 9/ },
  DanglingRightBracket: { path: "metadata.]name", err: /unexpected "\]" at position 9/ },
  DoubleOpenBracket: { path: "spec[bracketed[name]]", err: /unexpected "\[" at position 14/ },
  DanglingLeftBracket: { path: "spec[name", err: /unterminated "\[" at position 4/ },
  EmptyBracket: { path: "spec[]", err: /unexpected "\]" at position 5/ },
  TrailingPeriodAfterBracket: { path: "a[0].", err: /unexpected "\." at position 4/ },
  ProtoKey: { path: "a.__proto__.polluted", err: /__proto__ is not allowed/ },
  QuotedProtoKey: { path: "a['__proto__']", err: /__proto__ is not allowed/ },
};

for (const [name, tc] of Object.entries(parseCases)) {
  Parse(name, () => {
    if (tc.err) {
      assert.throws(
        () => parsePath(tc.path),
        (e: unknown) => e instanceof FieldPathError && tc.err!.test(e.message),
      );
    } else {
      assert.equal(parsePath(tc.path), tc.want);
    }
  });
}

// ---

const Get = suite("getValue");

const obj = (): JsonObject => ({
  metadata: { name: "x", annotations: { "crossplane.io/external-name": "vpc-123" }, labels: { "app.hash": "abc" } },
  spec: { containers: [{ image: "nginx" }, { image: "redis" }], replicas: 3, nothing: null },
});

const getCases: Record<string, { path: string; want?: JsonValue | undefined; err?: RegExp }> = {
  Field: { path: "metadata.name", want: "x" },
  Annotation: { path: "metadata.annotations[crossplane.io/external-name]", want: "vpc-123" },
  QuotedAnnotation: { path: "metadata.annotations['crossplane.io/external-name']", want: "vpc-123" },
  QuotedLabel: { path: "metadata.labels['app.hash']", want: "abc" },
  WholeArray: { path: "spec.containers", want: [{ image: "nginx" }, { image: "redis" }] },
  Wildcard: { path: "spec.containers[*].image", err: /has a wildcard: read it with getValues/ },
  WildcardOverNull: { path: "spec.nothing[*].image", want: undefined },
  WildcardOverMissing: { path: "spec.missing[*].image", want: undefined },
  Index: { path: "spec.containers[1].image", want: "redis" },
  MissingField: { path: "spec.missing.deeper", want: undefined },
  IndexOutOfRange: { path: "spec.containers[5].image", want: undefined },
  ThroughNull: { path: "spec.nothing.x", want: undefined },
  PrototypeNotVisible: { path: "spec.toString", want: undefined },
  FieldOfString: { path: "metadata.name.first", err: /metadata\.name is a string, not an object/ },
  IndexIntoObject: { path: "spec[0]", err: /spec is an object, not an array/ },
  FieldOfArray: { path: "spec.containers.image", err: /spec\.containers is an array, not an object/ },
};

for (const [name, tc] of Object.entries(getCases)) {
  Get(name, () => {
    if (tc.err) assert.throws(() => getValue(obj(), tc.path), tc.err);
    else assert.equal(getValue(obj(), tc.path), tc.want);
  });
}

Get("typed getters check the type and name the path", () => {
  assert.is(getNumber(obj(), "spec.replicas"), 3);
  assert.is(getString(obj(), "spec.missing"), undefined);
  assert.is(getString(obj(), "spec.nothing"), undefined);
  assert.throws(() => getString(obj(), "spec.replicas"), /"spec\.replicas": is a number, not a string/);
});

Get("an undefined object reads as missing", () => {
  assert.is(getValue(undefined, "a.b"), undefined);
});

// ---

const Write = suite("setValue");

const setCases: Record<string, { start: JsonObject; path: string; value: JsonValue; want?: JsonObject; err?: RegExp }> = {
  CreatesObjects: { start: {}, path: "spec.forProvider.region", value: "eu", want: { spec: { forProvider: { region: "eu" } } } },
  CreatesArrays: { start: {}, path: "spec.tags[0].key", value: "k", want: { spec: { tags: [{ key: "k" }] } } },
  Appends: { start: { a: [1] }, path: "a[1]", value: 2, want: { a: [1, 2] } },
  Replaces: { start: { a: [1, 2] }, path: "a[0]", value: 9, want: { a: [9, 2] } },
  KeyWithDots: {
    start: {},
    path: "metadata.annotations[crossplane.io/external-name]",
    value: "id-1",
    want: { metadata: { annotations: { "crossplane.io/external-name": "id-1" } } },
  },
  ReplacesNull: { start: { a: null }, path: "a.b", value: true, want: { a: { b: true } } },
  GrowsArray: { start: { a: ["x"] }, path: "a[2]", value: "z", want: { a: ["x", null, "z"] } },
  GrowsNewArray: { start: {}, path: "a[1][1]", value: 1, want: { a: [null, [null, 1]] } },
  GrowsInnerArray: { start: { a: [[1]] }, path: "a[0][2]", value: 3, want: { a: [[1, null, 3]] } },
  LargestIndex: { start: {}, path: "a[1024]", value: 1, want: { a: [...Array<null>(1024).fill(null), 1] } },
  IndexTooLarge: { start: {}, path: "a[1025]", value: 1, err: /index 1025 is greater than the largest allowed, 1024/ },
  QuotedKey: { start: {}, path: "metadata.labels['app.hash']", value: "h", want: { metadata: { labels: { "app.hash": "h" } } } },
  WildcardEveryElement: {
    start: { spec: { containers: [{ name: "a" }, { name: "b" }] } },
    path: "spec.containers[*].image",
    value: "nginx",
    want: {
      spec: {
        containers: [
          { name: "a", image: "nginx" },
          { name: "b", image: "nginx" },
        ],
      },
    },
  },
  WildcardEveryKey: { start: { tags: { a: 1, b: 2 } }, path: "tags.*", value: 0, want: { tags: { a: 0, b: 0 } } },
  WildcardMatchesNothing: { start: { spec: {} }, path: "spec.containers[*].image", value: 1, err: /the wildcards match nothing to set/ },
  WildcardOverString: { start: { a: "s" }, path: "a[*]", value: 1, err: /the wildcard after a meets a string, not an array or object/ },
  ThroughString: { start: { a: "s" }, path: "a.b", value: 1, err: /a is a string, cannot descend into it/ },
  FieldOnArray: { start: { a: [] }, path: "a.b", value: 1, err: /a is an array, not an object/ },
  IndexOnObject: { start: { a: {} }, path: "a[0]", value: 1, err: /a is an object, not an array/ },
};

for (const [name, tc] of Object.entries(setCases)) {
  Write(name, () => {
    const o = structuredClone(tc.start);
    if (tc.err) assert.throws(() => setValue(o, tc.path, tc.value), tc.err);
    else {
      setValue(o, tc.path, tc.value);
      assert.equal(o, tc.want);
    }
  });
}

Write("never pollutes Object.prototype", () => {
  const o: JsonObject = {};
  assert.throws(
    () => setValue(o, "__proto__.polluted", true),
    (e: unknown) => e instanceof FieldPathError,
  );
  assert.throws(
    () => setValue(o, "a[__proto__]", true),
    (e: unknown) => e instanceof FieldPathError,
  );
  setValue(o, "constructor.prototype.polluted", true);
  assert.is(({} as Record<string, unknown>)["polluted"], undefined);
  assert.is(JSON.stringify(o), JSON.stringify({ constructor: { prototype: { polluted: true } } }));
});

// ---

const Delete = suite("deleteValue");

Delete("removes fields and array elements and reports what it did", () => {
  const o = obj();
  assert.ok(deleteValue(o, "metadata.annotations['crossplane.io/external-name']"));
  assert.equal(o["metadata"], { name: "x", annotations: {}, labels: { "app.hash": "abc" } });
  assert.ok(deleteValue(o, "spec.containers[0]"));
  assert.equal(getValue(o, "spec.containers"), [{ image: "redis" }]);
  assert.not.ok(deleteValue(o, "spec.absent.x"));
  assert.not.ok(deleteValue(o, "spec.containers[7]"));
  assert.not.ok(deleteValue(o, "spec.nothing.x"));
});

// As crossplane-runtime's DeleteField: a segment meeting the wrong type is an error, not "nothing removed".
const deleteErrors: Record<string, { path: string; err: RegExp }> = {
  FieldOfString: { path: "metadata.name.x", err: /metadata\.name is a string, not an object/ },
  IndexIntoObject: { path: "metadata[0]", err: /metadata is an object, not an array/ },
  FieldOfArray: { path: "spec.containers.image", err: /spec\.containers is an array, not an object/ },
  IndexIntoRoot: { path: "[0]", err: /the root is an object, not an array/ },
  DeepIntoNumber: { path: "spec.replicas[0].x", err: /spec\.replicas is a number, not an array/ },
};
for (const [name, tc] of Object.entries(deleteErrors)) {
  Delete(`wrong type: ${name}`, () => {
    const o = obj();
    assert.throws(
      () => deleteValue(o, tc.path),
      (e: unknown) => e instanceof FieldPathError && tc.err.test(e.message),
    );
    assert.equal(o, obj(), "nothing changed");
  });
}

Delete("a wildcard removes every match, later elements first", () => {
  const o: JsonObject = { a: [{ k: 1, v: 1 }, { k: 2 }, { k: 3, v: 3 }], m: { x: 1, y: 2 } };
  assert.ok(deleteValue(o, "a[*].v"));
  assert.equal(o["a"], [{ k: 1 }, { k: 2 }, { k: 3 }]);
  assert.ok(deleteValue(o, "a[*]"));
  assert.equal(o["a"], []);
  assert.ok(deleteValue(o, "m.*"));
  assert.equal(o["m"], {});
  assert.not.ok(deleteValue(o, "m.*"));
});

// ---

const Expand = suite("expandWildcards");

// crossplane-runtime's ExpandWildcards documentation and tables: only paths that exist come back.
const data = (): JsonObject => ({
  spec: {
    containers: [
      { name: "cool", image: "latest", args: ["start", "now", "debug"] },
      { name: "cooler", args: [] },
    ],
    tags: { "a.b": "1", c: "2" },
    replicas: 3,
    nothing: null,
  },
});
const expandCases: Record<string, { path: string; want?: string[]; err?: RegExp }> = {
  DocumentedExample: {
    path: "spec.containers[*].args[*]",
    want: ["spec.containers[0].args[0]", "spec.containers[0].args[1]", "spec.containers[0].args[2]"],
  },
  ArrayThenField: { path: "spec.containers[*].name", want: ["spec.containers[0].name", "spec.containers[1].name"] },
  OnlyWhereTheFieldExists: { path: "spec.containers[*].image", want: ["spec.containers[0].image"] },
  ObjectKeys: { path: "spec.tags[*]", want: ["spec.tags[a.b]", "spec.tags.c"] },
  NoWildcardExisting: { path: "spec.replicas", want: ["spec.replicas"] },
  NoWildcardMissing: { path: "spec.missing", want: [] },
  MissingBase: { path: "spec.missing[*].x", want: [] },
  NullBase: { path: "spec.nothing[*]", want: [] },
  EmptyArray: { path: "spec.containers[1].args[*]", want: [] },
  OverNumber: { path: "spec.replicas[*]", err: /the wildcard after spec\.replicas meets a number, not an array or object/ },
  ThroughWrongType: { path: "spec.replicas.x[*]", err: /spec\.replicas is a number, not an object/ },
};
for (const [name, tc] of Object.entries(expandCases)) {
  Expand(name, () => {
    if (tc.err) assert.throws(() => expandWildcards(data(), tc.path), tc.err);
    else assert.equal(expandWildcards(data(), tc.path), tc.want);
  });
}

Expand("every expanded path reads back through getValue, and getValues gives the values", () => {
  const d = data();
  for (const p of expandWildcards(d, "spec.*")) assert.ok(getValue(d, p) !== undefined, p);
  assert.equal(getValues(d, "spec.containers[*].args[*]"), ["start", "now", "debug"]);
  assert.equal(getValues(d, "spec.tags.*"), ["1", "2"]);
  assert.equal(getValues(d, "spec.containers[0].name"), ["cool"]);
});

Expand("formatPath writes what parsePath reads", () => {
  for (const p of ["spec.containers[0].name", "data[.config.yml]", "spec.containers[*].name", "[0]", "a[x.y][2].b"]) {
    assert.equal(parsePath(formatPath(parsePath(p))), parsePath(p), p);
  }
  assert.is(formatPath(parsePath("metadata.labels['app.hash']")), "metadata.labels[app.hash]");
});

// ---

// crossplane-runtime pkg/fieldpath/paved_test.go at 4e7ed235565d24a6f6ad255aeacb82f09973b875, case
// names kept. Where it answers a not-found error, xfn answers undefined; where
// it answers another error, xfn throws.
const Paved = suite("crossplane-runtime paved_test.go");
type PavedCase = { data: JsonObject; path: string; want?: unknown; err?: true };
const pavedGet: Record<string, PavedCase> = {
  MetadataName: { path: "metadata.name", data: { metadata: { name: "cool" } }, want: "cool" },
  ContainerName: { path: "spec.containers[0].name", data: { spec: { containers: [{ name: "cool" }] } }, want: "cool" },
  NestedArray: { path: "items[0][1]", data: { items: [["a", "b"]] }, want: "b" },
  OwnerRefController: { path: "metadata.ownerRefs[0].controller", data: { metadata: { ownerRefs: [{ controller: true }] } }, want: true },
  MetadataVersion: { path: "metadata.version", data: { metadata: { version: 2 } }, want: 2 },
  SomeFloat: { path: "metadata.version", data: { metadata: { version: 2.0 } }, want: 2 },
  MetadataNope: { path: "metadata.name", data: { metadata: { nope: "cool" } }, want: undefined },
  InsufficientContainers: { path: "spec.containers[1].name", data: { spec: { containers: [{ name: "cool" }] } }, want: undefined },
  NotAnArray: { path: "metadata[1]", data: { metadata: { nope: "cool" } }, err: true },
  NotAnObject: { path: "spec.containers[nope].name", data: { spec: { containers: [{ name: "cool" }] } }, err: true },
  MalformedPath: { path: "spec[]", data: {}, err: true },
  NilParent: { path: "spec.containers[*].name", data: { spec: { containers: null } }, want: undefined },
};
for (const [name, c] of Object.entries(pavedGet))
  Paved(`TestGetValue/${name}`, () => {
    if (c.err)
      assert.throws(
        () => getValue(c.data, c.path),
        (e: Error) => e instanceof FieldPathError,
      );
    else assert.equal(getValue(c.data, c.path), c.want);
  });
const pavedStringArray: Record<string, PavedCase> = {
  MetadataLabels: { path: "spec.containers[0].command", data: { spec: { containers: [{ command: ["/bin/bash"] }] } }, want: ["/bin/bash"] },
  MalformedPath: { path: "spec[]", data: {}, err: true },
  NotAnArray: { path: "metadata.version", data: { metadata: { version: 2 } }, err: true },
  NotAStringArray: { path: "metadata.versions", data: { metadata: { versions: [1, 2] } }, err: true },
};
for (const [name, c] of Object.entries(pavedStringArray))
  Paved(`TestGetStringArray/${name}`, () => {
    if (c.err)
      assert.throws(
        () => getStringArray(c.data, c.path),
        (e: Error) => e instanceof FieldPathError,
      );
    else assert.equal(getStringArray(c.data, c.path), c.want);
  });
Paved("TestGetStringArray: the message says which", () => {
  assert.throws(
    () => getStringArray({ metadata: { versions: [1, 2] } }, "metadata.versions"),
    /"metadata\.versions": is not an array of strings/,
  );
  assert.is(getStringArray({}, "metadata.versions"), undefined);
});
const pavedStringObject: Record<string, PavedCase> = {
  MetadataLabels: { path: "metadata.labels", data: { metadata: { labels: { cool: "true" } } }, want: { cool: "true" } },
  MalformedPath: { path: "spec[]", data: {}, err: true },
  NotAnObject: { path: "metadata.version", data: { metadata: { version: 2 } }, err: true },
  NotAStringObject: { path: "metadata.versions", data: { metadata: { versions: { a: 2 } } }, err: true },
};
for (const [name, c] of Object.entries(pavedStringObject))
  Paved(`TestGetStringObject/${name}`, () => {
    if (c.err)
      assert.throws(
        () => getStringObject(c.data, c.path),
        (e: Error) => e instanceof FieldPathError,
      );
    else assert.equal(getStringObject(c.data, c.path), c.want);
  });
Paved("TestGetStringObject: the message says which; a key named __proto__ is kept", () => {
  assert.throws(
    () => getStringObject({ metadata: { versions: { a: 2 } } }, "metadata.versions"),
    /"metadata\.versions": is not an object with string field values/,
  );
  const labels = JSON.parse('{"__proto__": "x"}') as JsonObject;
  assert.equal(Object.keys(getStringObject({ metadata: { labels } }, "metadata.labels")!), ["__proto__"]);
});
const pavedSet: Record<string, { data: JsonObject; path: string; value?: JsonValue; want: JsonObject; err?: true }> = {
  MetadataName: { data: { metadata: { name: "lame" } }, path: "metadata.name", value: "cool", want: { metadata: { name: "cool" } } },
  NonExistentMetadataName: { data: {}, path: "metadata.name", value: "cool", want: { metadata: { name: "cool" } } },
  ContainerName: {
    data: { spec: { containers: [{ name: "lame" }] } },
    path: "spec.containers[0].name",
    value: "cool",
    want: { spec: { containers: [{ name: "cool" }] } },
  },
  NonExistentContainerName: {
    data: {},
    path: "spec.containers[0].name",
    value: "cool",
    want: { spec: { containers: [{ name: "cool" }] } },
  },
  NewContainer: {
    data: { spec: { containers: [{ name: "cool" }] } },
    path: "spec.containers[1].name",
    value: "cooler",
    want: { spec: { containers: [{ name: "cool" }, { name: "cooler" }] } },
  },
  NestedArray: { data: {}, path: "data[0][0]", value: "a", want: { data: [["a"]] } },
  GrowNestedArray: { data: { data: [["a"]] }, path: "data[0][1]", value: "b", want: { data: [["a", "b"]] } },
  GrowArrayField: { data: { data: ["a"] }, path: "data[2]", value: "c", want: { data: ["a", null, "c"] } },
  RejectsHighIndexes: { data: { data: ["a"] }, path: "data[1025]", value: "c", want: { data: ["a"] }, err: true },
  MapStringString: {
    data: { metadata: {} },
    path: "metadata.labels",
    value: { cool: "very" },
    want: { metadata: { labels: { cool: "very" } } },
  },
  NotAnArray: { data: { data: {} }, path: "data[0]", want: { data: {} }, err: true },
  NotAnObject: { data: { data: [] }, path: "data.name", want: { data: [] }, err: true },
  MalformedPath: { data: {}, path: "spec[]", want: {}, err: true },
};
for (const [name, c] of Object.entries(pavedSet))
  Paved(`TestSetValue/${name}`, () => {
    const d = structuredClone(c.data);
    if (c.err)
      assert.throws(
        () => setValue(d, c.path, c.value ?? null),
        (e: Error) => e instanceof FieldPathError,
      );
    else setValue(d, c.path, c.value ?? null);
    assert.equal(d, c.want, "an error leaves the object as it was");
  });
Paved("TestSetValue/RejectsHighIndexes: the limit is crossplane-runtime's DefaultMaxFieldPathIndex, 1024", () => {
  const d: JsonObject = { data: [] };
  setValue(d, "data[1024]", "last");
  assert.is((d["data"] as JsonValue[]).length, 1025);
  assert.throws(() => setValue({ data: [] }, "data[1025]", "c"), /index 1025 is greater than the largest allowed, 1024/);
});
const containers = { spec: { containers: [{ name: "cool", image: "latest", args: ["start", "now", "debug"] }] } };
const pavedExpand: Record<string, { data: JsonObject; path: string; want?: string[]; err?: true }> = {
  NoWildcardExisting: { path: "password", data: { password: "top-secret" }, want: ["password"] },
  NoWildcardNonExisting: { path: "username", data: { password: "top-secret" }, want: [] },
  NestedNoWildcardExisting: { path: "items[0][1]", data: { items: [["a", "b"]] }, want: ["items[0][1]"] },
  NestedNoWildcardNonExisting: { path: "items[0][5]", data: { items: [["a", "b"]] }, want: [] },
  NestedArray: {
    path: "items[*][*]",
    data: { items: [["a", "b", "c"], ["d"]] },
    want: ["items[0][0]", "items[0][1]", "items[0][2]", "items[1][0]"],
  },
  KeysOfMap: {
    path: "items[*]",
    data: { items: { key1: "val1", "key2.as.annotation": "val2" } },
    want: ["items.key1", "items[key2.as.annotation]"],
  },
  ArrayOfObjects: {
    path: "spec.containers[*][*]",
    data: { spec: { containers: [{ name: "cool", image: "latest", args: ["start", "now"] }] } },
    want: ["spec.containers[0].name", "spec.containers[0].image", "spec.containers[0].args"],
  },
  MultiLayer: {
    path: "spec.containers[*].args[*]",
    data: containers,
    want: ["spec.containers[0].args[0]", "spec.containers[0].args[1]", "spec.containers[0].args[2]"],
  },
  WildcardInTheBeginning: { path: "spec.containers[*].args[1]", data: containers, want: ["spec.containers[0].args[1]"] },
  WildcardAtTheEnd: {
    path: "spec.containers[0].args[*]",
    data: containers,
    want: ["spec.containers[0].args[0]", "spec.containers[0].args[1]", "spec.containers[0].args[2]"],
  },
  NoData: { path: "metadata[*]", data: {}, want: [] },
  InsufficientContainers: { path: "spec.containers[1].args[*]", data: { spec: { containers: [{ name: "cool" }] } }, want: [] },
  UnexpectedWildcard: { path: "spec.containers[0].name[*]", data: { spec: { containers: [{ name: "cool" }] } }, err: true },
  NotAnArray: { path: "metadata[1]", data: { metadata: { nope: "cool" } }, err: true },
  NotAnObject: { path: "spec.containers[nope].name", data: { spec: { containers: [{ name: "cool" }] } }, err: true },
  MalformedPath: { path: "spec[]", data: {}, err: true },
  NilValue: { path: "spec.containers[*].name", data: { spec: { containers: null } }, want: [] },
};
for (const [name, c] of Object.entries(pavedExpand))
  Paved(`TestExpandWildcards/${name}`, () => {
    if (c.err)
      assert.throws(
        () => expandWildcards(c.data, c.path),
        (e: Error) => e instanceof FieldPathError,
      );
    // The test sorts both sides; xfn keeps document order, which sorted is the same.
    else assert.equal(expandWildcards(c.data, c.path).sort(), [...c.want!].sort());
  });

Parse.run();
Get.run();
Paved.run();
Write.run();
Delete.run();
Expand.run();
