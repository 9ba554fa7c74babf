import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { deleteValue, FieldPathError, getNumber, getString, getValue, parsePath, setValue } from "../../src/sdk/fieldpath.js";

const Parse = suite("parsePath");

const parseCases: Record<string, { path: string; want?: unknown; err?: RegExp }> = {
  SimpleFields: { path: "spec.forProvider.region", want: [{ field: "spec" }, { field: "forProvider" }, { field: "region" }] },
  IndexAfterField: {
    path: "spec.containers[0].image",
    want: [{ field: "spec" }, { field: "containers" }, { index: 0 }, { field: "image" }],
  },
  BracketKeyWithDotsAndSlash: {
    path: "metadata.annotations[crossplane.io/external-name]",
    want: [{ field: "metadata" }, { field: "annotations" }, { field: "crossplane.io/external-name" }],
  },
  LeadingBracket: { path: "[a.b][2]", want: [{ field: "a.b" }, { index: 2 }] },
  Empty: { path: "", err: /is empty/ },
  LeadingDot: { path: ".spec", err: /empty field name at offset 0/ },
  DoubleDot: { path: "spec..x", err: /empty field name at offset 5/ },
  TrailingDot: { path: "spec.", err: /empty field name/ },
  Unclosed: { path: "a[0", err: /unclosed "\["/ },
  EmptyBrackets: { path: "a[]", err: /empty brackets/ },
  StrayClose: { path: "a]", err: /unexpected "\]"/ },
  JunkAfterBracket: { path: "a[0]b", err: /expected "\." or "\[" after "\]"/ },
  DotThenBracket: { path: "a.[0]", err: /"\[" cannot follow "\."/ },
  ProtoKey: { path: "a.__proto__.polluted", err: /__proto__ is not allowed/ },
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
  metadata: { name: "x", annotations: { "crossplane.io/external-name": "vpc-123" } },
  spec: { containers: [{ image: "nginx" }, { image: "redis" }], replicas: 3, nothing: null },
});

const getCases: Record<string, { path: string; want?: JsonValue | undefined; err?: RegExp }> = {
  Field: { path: "metadata.name", want: "x" },
  Annotation: { path: "metadata.annotations[crossplane.io/external-name]", want: "vpc-123" },
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
  IndexPastEnd: { start: { a: [] }, path: "a[2]", value: 1, err: /index 2 is past the end of a \(length 0\)/ },
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
  assert.ok(deleteValue(o, "metadata.annotations[crossplane.io/external-name]"));
  assert.equal(o["metadata"], { name: "x", annotations: {} });
  assert.ok(deleteValue(o, "spec.containers[0]"));
  assert.equal(getValue(o, "spec.containers"), [{ image: "redis" }]);
  assert.not.ok(deleteValue(o, "spec.absent.x"));
  assert.not.ok(deleteValue(o, "spec.containers[7]"));
  assert.not.ok(deleteValue(o, "metadata.name.x"));
});

Parse.run();
Get.run();
Write.run();
Delete.run();
