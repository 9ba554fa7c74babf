// CRDs kube-apiserver refuses, each with a line of its refusal (field path and message), read at
// apiextensions-apiserver v0.36.3 (pkg/apis/apiextensions/validation/validation.go
// ValidateCustomResourceDefinition, its OpenAPI and x-kubernetes-validations checks;
// pkg/apiserver/schema/validation.go for the structural ones). The embedded API server is held to them
// in test/apiserver/crd.test.ts; the Go tier (test/crossplane/kubecel.test.ts) holds these lines to
// kube's own ValidateCustomResourceDefinition, so a line written here by hand cannot drift.
import { widgetCRD } from "./cluster.js";

// A CRD of one version (or of the same schema in every version) is checked as kube's internal CRD holds
// it, the schema moved to spec.validation (apiextensions-apiserver v0.36.3 pkg/apis/apiextensions/v1/conversion.go),
// so errors name that path; the differential tier (test/crossplane/differential.test.ts) sees kube say so.
const ROOT = "spec.validation.openAPIV3Schema";
const base = widgetCRD;
/**
 * shown is a rule as kube shows it in a refusal: its internal ValidationRule marshalled to JSON
 * (apimachinery v0.36.3 util/validation/field/errors.go ErrorBody; apiextensions types_jsonschema.go).
 */
export const shown = (rule: string, messageExpression = "") =>
  JSON.stringify({
    Rule: rule,
    Message: "",
    MessageExpression: messageExpression,
    Reason: null,
    FieldPath: "",
    OptionalOldSelf: null,
  }).replace(/[<>&]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);

/** CRD_CASES: name to a CRD and a line of kube's refusal of it. */
export const CRD_CASES: Record<string, { crd: any; want: string }> = {
  NoSchema: {
    crd: (() => {
      const c = base();
      delete c.spec.versions[0].schema;
      return c;
    })(),
    // A version without a schema is named by its own path: nothing is moved to spec.validation.
    want: "spec.versions[0].schema.openAPIV3Schema: Required value",
  },
  UntypedField: {
    crd: base({ type: "object", properties: { size: {} } }),
    want: `${ROOT}.properties[spec].properties[size].type: Required value: must not be empty for specified object fields`,
  },
  UntypedItems: {
    crd: base({ type: "object", properties: { list: { type: "array", items: {} } } }),
    want: `${ROOT}.properties[spec].properties[list].items.type: Required value: must not be empty for specified array items`,
  },
  ArrayWithoutItems: {
    crd: base({ type: "object", properties: { list: { type: "array" } } }),
    want: `${ROOT}.properties[spec].properties[list].items: Required value: must be specified`,
  },
  RootNotObject: {
    crd: (() => {
      const c = base();
      c.spec.versions[0].schema.openAPIV3Schema = { type: "string" };
      return c;
    })(),
    want: `${ROOT}.type: Invalid value: "string": must be object at the root`,
  },
  UniqueItems: {
    crd: base({ type: "object", properties: { list: { type: "array", uniqueItems: true, items: { type: "string" } } } }),
    want: `${ROOT}.properties[spec].properties[list].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic`,
  },
  PropertiesAndAdditional: {
    crd: base({ type: "object", properties: { a: { type: "string" } }, additionalProperties: { type: "string" } }),
    want: `${ROOT}.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive`,
  },
  Ref: {
    crd: base({ type: "object", $ref: "#/definitions/Spec" }),
    want: `${ROOT}.properties[spec].$ref: Forbidden: $ref is not supported`,
  },
  TypeUnderAnyOf: {
    crd: base({ type: "object", anyOf: [{ type: "object", required: ["a"] }] }),
    want: `${ROOT}.properties[spec].anyOf[0].type: Forbidden: must be empty to be structural`,
  },
  MetadataBeyondName: {
    crd: (() => {
      const c = base();
      c.spec.versions[0].schema.openAPIV3Schema.properties.metadata = { type: "object", properties: { labels: { type: "object" } } };
      return c;
    })(),
    want: `${ROOT}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified`,
  },
  DefaultOfWrongType: {
    crd: base({ type: "object", properties: { size: { type: "integer", default: "three" } } }),
    // kube-openapi names the default's own (empty) path: as kube-apiserver v1.36.3 answered the generated differential.
    want: `${ROOT}.properties[spec].properties[size].default: Invalid value: "string":  in body must be of type integer: "string"`,
  },
  // List and map types (apiextensions-apiserver v0.36.3 pkg/apis/apiextensions/validation/validation.go,
  // ValidateCustomResourceDefinitionOpenAPISchema and validateMapListKeysMapSet; kube-apiserver refused
  // a nullable set item alike in the generated differential).
  SetOfObjectsNotAtomic: {
    crd: base({
      type: "object",
      properties: {
        l: { type: "array", "x-kubernetes-list-type": "set", items: { type: "object", properties: { a: { type: "string" } } } },
      },
    }),
    want: `${ROOT}.properties[spec].properties[l].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set`,
  },
  NullableSetItems: {
    crd: base({
      type: "object",
      properties: { l: { type: "array", "x-kubernetes-list-type": "set", items: { type: "string", nullable: true } } },
    }),
    want: `${ROOT}.properties[spec].properties[l].items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is set`,
  },
  MapListKeyNeitherRequiredNorDefaulted: {
    crd: base({
      type: "object",
      properties: {
        l: {
          type: "array",
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["k"],
          items: { type: "object", properties: { k: { type: "string" } } },
        },
      },
    }),
    want: `${ROOT}.properties[spec].properties[l].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property`,
  },
  ListTypeOnAString: {
    crd: base({ type: "object", properties: { s: { type: "string", "x-kubernetes-list-type": "set" } } }),
    want: `${ROOT}.properties[spec].properties[s].type: Invalid value: "string": must be array if x-kubernetes-list-type is specified`,
  },
  MapKeysOnASet: {
    crd: base({
      type: "object",
      properties: { l: { type: "array", "x-kubernetes-list-type": "set", "x-kubernetes-list-map-keys": ["k"], items: { type: "string" } } },
    }),
    want: `${ROOT}.properties[spec].properties[l].x-kubernetes-list-type: Invalid value: "set": must be map if x-kubernetes-list-map-keys is non-empty`,
  },
  // How a rule uses oldSelf (the rule loop of ValidateCustomResourceDefinitionOpenAPISchema; found by
  // kube's crd_validation_expressions_test.go schemas in the differential).
  OldSelfInAtomicListItems: {
    crd: base({
      type: "object",
      properties: {
        list: {
          type: "array",
          maxItems: 5,
          items: { type: "string", maxLength: 5, "x-kubernetes-validations": [{ rule: "self == oldSelf" }] },
        },
      },
    }),
    want: `${ROOT}.properties[spec].properties[list].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within ${ROOT}.properties[spec].properties[list]`,
  },
  OptionalOldSelfWithoutOldSelf: {
    crd: base({
      type: "object",
      "x-kubernetes-validations": [{ rule: "self.a == 'x'", optionalOldSelf: true }],
      properties: { a: { type: "string", maxLength: 5 } },
    }),
    want: `${ROOT}.properties[spec].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule`,
  },
  UnknownReason: {
    crd: base({ type: "object", "x-kubernetes-validations": [{ rule: "true", reason: "Bogus" }] }),
    want: `${ROOT}.properties[spec].x-kubernetes-validations[0].reason: Unsupported value: "Bogus": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"`,
  },
  FieldPathNowhere: {
    crd: base({ type: "object", properties: { a: { type: "string" } }, "x-kubernetes-validations": [{ rule: "true", fieldPath: ".b" }] }),
    want: `${ROOT}.properties[spec].x-kubernetes-validations[0].fieldPath: Invalid value: ".b": must be a valid path`,
  },
  EmptyRule: {
    crd: base({ type: "object", "x-kubernetes-validations": [{ rule: "  " }] }),
    want: `${ROOT}.properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified`,
  },
  RuleOverUndefinedField: {
    crd: base({ type: "object", properties: { a: { type: "string" } }, "x-kubernetes-validations": [{ rule: "self.nope > 0" }] }),
    want: `${ROOT}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: ${shown("self.nope > 0")}: compilation failed: ERROR: <input>:1:5: undefined field 'nope'\n | self.nope > 0\n | ....^`,
  },
  RuleOverUndefinedItemField: {
    crd: base({
      type: "object",
      properties: { items: { type: "array", items: { type: "object", properties: { a: { type: "integer" } } } } },
      "x-kubernetes-validations": [{ rule: "self.items.all(i, i.b > 0)" }],
    }),
    want: `x-kubernetes-validations[0].rule: Invalid value: ${shown("self.items.all(i, i.b > 0)")}: compilation failed: ERROR: <input>:1:`,
  },
  RuleOperatorTypesDoNotMatch: {
    crd: base({
      type: "object",
      properties: { size: { type: "integer" }, name: { type: "string" } },
      "x-kubernetes-validations": [{ rule: "self.size + self.name == 1" }],
    }),
    want: `${ROOT}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: ${shown("self.size + self.name == 1")}: compilation failed: ERROR: <input>:1:11: found no matching overload for '_+_' applied to '(int, string)'`,
  },
  RuleComparesAcrossTypesInAMacro: {
    crd: base({
      type: "object",
      properties: { tags: { type: "array", items: { type: "string" } } },
      "x-kubernetes-validations": [{ rule: "self.tags.all(t, t > 1)" }],
    }),
    want: `${ROOT}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: ${shown("self.tags.all(t, t > 1)")}: compilation failed: ERROR: <input>:1:20: found no matching overload for '_>_' applied to '(string, int)'`,
  },
  RuleCallsACoreFunctionOnTheWrongType: {
    crd: base({
      type: "object",
      properties: { size: { type: "integer" } },
      "x-kubernetes-validations": [{ rule: "self.size.startsWith('a')" }],
    }),
    want: `${ROOT}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: ${shown("self.size.startsWith('a')")}: compilation failed: ERROR: <input>:1:21: found no matching overload for 'startsWith' applied to 'int.(string)'`,
  },
  MessageExpressionTypesDoNotMatch: {
    crd: base({
      type: "object",
      properties: { size: { type: "integer" } },
      "x-kubernetes-validations": [{ rule: "self.size > 0", messageExpression: "'size ' + self.size" }],
    }),
    want: `${ROOT}.properties[spec].x-kubernetes-validations[0].messageExpression: Invalid value: ${shown("self.size > 0", "'size ' + self.size")}: messageExpression compilation failed: ERROR: <input>:1:9: found no matching overload for '_+_' applied to '(string, int)'`,
  },
  RuleNotBool: {
    crd: base({ type: "object", properties: { a: { type: "string" } }, "x-kubernetes-validations": [{ rule: "self.a" }] }),
    want: `${ROOT}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: ${shown("self.a")}: cel expression must evaluate to a bool`,
  },
  MessageExpressionNotString: {
    crd: base({ type: "object", "x-kubernetes-validations": [{ rule: "true", messageExpression: "1 + 1" }] }),
    want: `${ROOT}.properties[spec].x-kubernetes-validations[0].messageExpression: Invalid value: ${shown("true", "1 + 1")}: messageExpression must evaluate to a string`,
  },
  RootRuleOverLabels: {
    crd: (() => {
      const c = base({ type: "object" });
      c.spec.versions[0].schema.openAPIV3Schema["x-kubernetes-validations"] = [{ rule: "self.metadata.labels.size() > 0" }];
      return c;
    })(),
    want: `${ROOT}.x-kubernetes-validations[0].rule: Invalid value: ${shown("self.metadata.labels.size() > 0")}: compilation failed: ERROR: <input>:1:14: undefined field 'labels'`,
  },
  GroupWithoutDot: {
    crd: (() => {
      const c = base();
      c.spec.group = "example";
      c.metadata.name = "widgets.example";
      return c;
    })(),
    want: `spec.group: Invalid value: "example": should be a domain with at least one dot`,
  },
  BadScope: {
    crd: (() => {
      const c = base();
      c.spec.scope = "Global";
      return c;
    })(),
    want: `spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"`,
  },
  KindIsListKind: {
    crd: (() => {
      const c = base();
      c.spec.names.listKind = "Widget";
      return c;
    })(),
    want: `spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same`,
  },
  TwoStorageVersions: {
    crd: (() => {
      const c = base();
      c.spec.versions.push({ ...c.spec.versions[0], name: "v2" });
      return c;
    })(),
    want:
      'spec.versions: Invalid value: [{"Name":"v1","Served":true,"Storage":true,"Deprecated":false,"DeprecationWarning":null,"Schema":null,' +
      '"Subresources":null,"AdditionalPrinterColumns":null,"SelectableFields":null},{"Name":"v2","Served":true,"Storage":true,' +
      '"Deprecated":false,"DeprecationWarning":null,"Schema":null,"Subresources":null,"AdditionalPrinterColumns":null,' +
      '"SelectableFields":null}]: must have exactly one version marked as storage version',
  },
  BadVersionName: {
    crd: (() => {
      const c = base();
      c.spec.versions[0].name = "V1";
      return c;
    })(),
    want: `spec.versions[0].name: Invalid value: "V1": a DNS-1035 label must consist of lower case alphanumeric characters or '-'`,
  },
};
