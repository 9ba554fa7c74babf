import { create, toBinary, type JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { RunFunctionRequestSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { annotationReader, getAnnotation, getLabel, getObjectCondition, isDeleting, setAnnotation } from "../../src/sdk/object.js";
import { decodeRequest } from "../../src/wire/codec.js";
import { isUnread } from "../../src/wire/struct/lazy.js";
import { setLazyMin } from "../../src/wire/struct/read.js";

const Obj = suite("object helpers");

Obj("annotations and labels with dotted keys", () => {
  const o = { metadata: { labels: { "app.kubernetes.io/name": "x" } } };
  assert.is(getAnnotation(o, "crossplane.io/external-name"), undefined);
  setAnnotation(o, "crossplane.io/external-name", "id-1");
  assert.is(getAnnotation(o, "crossplane.io/external-name"), "id-1");
  assert.is(getLabel(o, "app.kubernetes.io/name"), "x");
  assert.is(getLabel(undefined, "a"), undefined);
});

const condCases: Record<string, { status: unknown; want: unknown }> = {
  NoStatus: { status: undefined, want: undefined },
  Found: {
    status: {
      conditions: [
        { type: "Synced", status: "True" },
        { type: "Ready", status: "False", reason: "Creating", message: "m" },
      ],
    },
    want: { type: "Ready", status: "False", reason: "Creating", message: "m" },
  },
  MalformedEntriesSkipped: { status: { conditions: ["junk", null, { type: "Ready" }] }, want: undefined },
};
for (const [name, tc] of Object.entries(condCases)) {
  Obj(`getObjectCondition: ${name}`, () => {
    assert.equal(getObjectCondition(tc.status === undefined ? {} : ({ status: tc.status } as never), "Ready"), tc.want);
  });
}

Obj("isDeleting", () => {
  assert.ok(isDeleting({ metadata: { deletionTimestamp: "2026-01-01T00:00:00Z" } }));
  assert.not.ok(isDeleting({ metadata: {} }));
});

/** decoded returns o as the server hands it to a function: every value lazy, read from bytes. */
function decoded(o: JsonObject): JsonObject {
  const old = setLazyMin(0);
  try {
    const bytes = toBinary(
      RunFunctionRequestSchema,
      create(RunFunctionRequestSchema, { observed: { resources: { x: { resource: o } } } } as never),
    );
    return decodeRequest(bytes).observed!.resources["x"]!.resource!;
  } finally {
    setLazyMin(old);
  }
}

const outcome = (f: () => unknown): unknown => {
  try {
    return { value: f() };
  } catch (err) {
    return { error: (err as Error).message };
  }
};

Obj("on objects read from the wire the helpers answer as on plain objects, wrong types included, and leave them unread", () => {
  const E = "crossplane.io/external-name";
  const shapes: JsonObject[] = [
    {},
    { metadata: { annotations: { [E]: "id-1", other: "x" }, labels: { l: "v" }, deletionTimestamp: "2026-01-01T00:00:00Z" } },
    { metadata: { annotations: { [E]: 7 }, labels: "not an object", deletionTimestamp: 5 } },
    { metadata: { annotations: null, labels: [], deletionTimestamp: null } },
    { metadata: "not an object" },
    { metadata: [{ annotations: {} }] },
    { metadata: {} },
    {
      status: {
        conditions: [
          { type: "Synced", status: "True" },
          { type: "Ready", status: "False", reason: "Creating", message: "m", lastTransitionTime: "t" },
        ],
      },
    },
    { status: { conditions: "not a list" } },
    { status: { conditions: null } },
    { status: ["not an object"] },
    { status: { atProvider: { id: "x" } } },
  ];
  const unusual = new Set([shapes[2], shapes[3], shapes[4], shapes[5], shapes[8], shapes[9], shapes[10]]);
  for (const shape of shapes) {
    const reads: [string, (o: JsonObject) => unknown][] = [
      ["getAnnotation", (o) => getAnnotation(o, E)],
      ["getAnnotation other", (o) => getAnnotation(o, "other")],
      ["annotationReader", (o) => ((read) => [read(E), read("other"), read("absent")])(annotationReader(o))],
      ["getLabel", (o) => getLabel(o, "l")],
      ["isDeleting", (o) => isDeleting(o)],
      ["getObjectCondition", (o) => getObjectCondition(o, "Ready")],
    ];
    for (const [name, read] of reads) {
      const o = decoded(shape);
      const got = outcome(() => read(o));
      assert.equal(
        got,
        outcome(() => read(shape)),
        `${name} of ${JSON.stringify(shape)}`,
      );
      // Where every part is the type it should be, the answer comes from the bytes.
      if (!("error" in (got as object)) && !unusual.has(shape)) {
        for (const k of ["metadata", "status"])
          if (Object.hasOwn(shape, k)) assert.ok(isUnread(o, k), `${name} of ${JSON.stringify(shape)} read ${k}`);
      }
    }
  }
});

Obj("annotationReader answers every key as getAnnotation does, on plain objects and on objects read from the wire", () => {
  const shapes: JsonObject[] = [
    {},
    { metadata: {} },
    { metadata: { annotations: { a: "1", b: "", c: 7, d: null, e: { nested: true } } } },
    { metadata: { annotations: null } },
    { metadata: { annotations: "text" } },
    { metadata: { annotations: ["a"] } },
    { metadata: "text" },
    { metadata: null },
  ];
  for (const shape of shapes) {
    for (const o of [shape, decoded(shape)]) {
      const read = annotationReader(o);
      for (const k of ["a", "b", "c", "d", "e", "absent", "__proto__"]) {
        assert.equal(
          outcome(() => read(k)),
          outcome(() => getAnnotation(o, k)),
          `${k} of ${JSON.stringify(shape)}`,
        );
      }
    }
  }
});

Obj.run();
