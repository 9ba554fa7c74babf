import { suite } from "uvu";
import * as assert from "uvu/assert";
import { getAnnotation, getLabel, getObjectCondition, isDeleting, setAnnotation } from "../../src/sdk/object.js";

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
    status: { conditions: [{ type: "Synced", status: "True" }, { type: "Ready", status: "False", reason: "Creating", message: "m" }] },
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

Obj.run();
