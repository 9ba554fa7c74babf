// The names Crossplane gives, as xfn render and xfn host give them. Cases
// ported from crossplane/crossplane at 2d040d2daf4e001799c4154a4a09b9e1f40d7fde:
// internal/names/names_test.go (TestChildName) and validate_test.go
// (TestValidateNameChars), case names kept. renderUID's expected values are
// Python's uuid.uuid5(uuid.UUID(int=0), ...), the same algorithm as Go's
// uuid.NewSHA1(uuid.Nil, ...) that internal/render/composite/render.go uses.
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { childName, gvkString, renderUID, validateName } from "../../src/engine/names.js";

const Child = suite("names: childName (crossplane internal/names TestChildName)");
const UID = "75e4a668-035f-4ce8-8c45-f4d3ac850155";
const childCases: Record<string, { parent: string; uid: string; child: string; want: string }> = {
  ShortName: { parent: "cool-resource-", uid: UID, child: "database", want: "cool-resource-38ce86992a27" },
  LongNameRequiresTruncation: {
    parent: "very-long-parent-name-".repeat(3),
    uid: UID,
    child: "database",
    want: "very-long-parent-name-very-long-parent-name-very-l-38ce86992a27",
  },
  ParentWithoutHyphen: { parent: "resource", uid: UID, child: "database", want: "resource-38ce86992a27" },
  ParentWithHyphen: { parent: "resource-", uid: UID, child: "database", want: "resource-38ce86992a27" },
  TruncateAndAddHyphen: {
    parent: "very-long-parent-name-without-ending-hyphen".repeat(2),
    uid: UID,
    child: "database",
    want: "very-long-parent-name-without-ending-hyphenvery-lo-38ce86992a27",
  },
  EmptyParentName: { parent: "", uid: UID, child: "database", want: "38ce86992a27" },
  DifferentUIDSameNameA: { parent: "parent-", uid: "uid-123", child: "database", want: "parent-5f968d238736" },
  DifferentUIDSameNameB: { parent: "parent-", uid: "uid-456", child: "database", want: "parent-bd4f105d0576" },
  SameUIDDifferentChildA: { parent: "parent-", uid: UID, child: "database", want: "parent-38ce86992a27" },
  SameUIDDifferentChildB: { parent: "parent-", uid: UID, child: "storage", want: "parent-abcd22a110fe" },
};
for (const [name, c] of Object.entries(childCases)) {
  Child(name, () => {
    const got = childName(c.parent, c.uid, c.child);
    assert.is(got, c.want);
    assert.ok(got.length <= 63);
  });
}
Child("a prefix whose cut ends on a hyphen keeps it and adds none (the branch TruncateAndAddHyphen does not take)", () => {
  // 51 characters, the 51st a hyphen: the cut keeps all 51.
  const parent = `${"a".repeat(50)}-and-more`;
  assert.is(childName(parent, UID, "database"), `${"a".repeat(50)}-38ce86992a27`);
});
Child.run();

const Validate = suite("names: validateName (crossplane internal/names TestValidateNameChars)");
const validateCases: Record<string, { name: string; group: string; kind: string; want: boolean }> = {
  ValidDNS1123Name: { name: "valid-resource-name", group: "apps", kind: "Deployment", want: true },
  ValidSingleChar: { name: "a", group: "v1", kind: "Pod", want: true },
  ValidWithNumbers: { name: "resource-123", group: "apps", kind: "Deployment", want: true },
  ValidRBACWithColon: { name: "system:admin:user", group: "rbac.authorization.k8s.io", kind: "Role", want: true },
  ValidClusterRoleWithColon: { name: "system:controller:admin", group: "rbac.authorization.k8s.io", kind: "ClusterRole", want: true },
  ValidRoleBindingWithColon: {
    name: "system:serviceaccount:kube-system:default",
    group: "rbac.authorization.k8s.io",
    kind: "RoleBinding",
    want: true,
  },
  ValidClusterRoleBindingWithColon: {
    name: "cluster-admin:system:masters",
    group: "rbac.authorization.k8s.io",
    kind: "ClusterRoleBinding",
    want: true,
  },
  InvalidStartsWithHyphen: { name: "-invalid-name", group: "apps", kind: "Deployment", want: false },
  InvalidEndsWithHyphen: { name: "invalid-name-", group: "v1", kind: "Pod", want: false },
  InvalidUppercase: { name: "Invalid-Name", group: "apps", kind: "Deployment", want: false },
  InvalidSpecialChars: { name: "invalid@name", group: "v1", kind: "Service", want: false },
  InvalidTooLong: { name: `a${"b".repeat(253)}`, group: "apps", kind: "Deployment", want: false },
  ValidExactly253Chars: { name: `a${"b".repeat(251)}c`, group: "apps", kind: "Deployment", want: true },
  InvalidEmpty: { name: "", group: "v1", kind: "Pod", want: false },
  InvalidUnderscores: { name: "invalid_name", group: "v1", kind: "Service", want: false },
  InvalidNonRBACWithColon: { name: "invalid:name", group: "apps", kind: "Deployment", want: false },
};
for (const [name, c] of Object.entries(validateCases)) {
  Validate(name, () => assert.is(validateName(c.name, c.group, c.kind), c.want));
}
Validate("dots separate labels; an empty label is refused", () => {
  assert.ok(validateName("a.b-c.d", "", "ConfigMap"));
  assert.not.ok(validateName("a..b", "", "ConfigMap"));
  assert.not.ok(validateName("a.-b", "", "ConfigMap"));
});
Validate.run();

const UIDs = suite("names: renderUID (crossplane render's uid for an XR without one)");
UIDs("gvk is written as Go writes a GroupVersionKind", () => {
  assert.is(gvkString("example.org/v1alpha1", "XBucket"), "example.org/v1alpha1, Kind=XBucket");
  assert.is(gvkString("v1", "ConfigMap"), "/v1, Kind=ConfigMap");
});
UIDs("a version 5 UUID of <gvk>\\0<namespace>\\0<name> in the nil namespace", () => {
  assert.is(renderUID("example.org/v1alpha1", "XBucket", "", "my-bucket"), "f70ef0ce-2b73-5b7b-a497-0ba62f7c6f04");
  assert.is(renderUID("example.xfn.dev/v1alpha1", "XBuckets", "", "team-a"), "f850f271-32bf-579c-b4c8-2a43f6b45f9f");
  assert.is(renderUID("example.org/v1alpha1", "XNet", "team-a", "net"), "638a90c4-11c3-5dce-9d4b-a8126243d667");
});
UIDs.run();
