// The JSONPath of additionalPrinterColumns, table-driven from what
// kube-apiserver's printer columns accept (k8s.io/client-go/util/jsonpath).
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { evaluate, parseJsonPath } from "../../src/apiserver/jsonpath.js";
import { humanAge } from "../../src/apiserver/table.js";

const J = suite("dev-cluster: printer-column JSONPath");

const obj = {
  metadata: { name: "x", labels: { "app.kubernetes.io/name": "demo" }, creationTimestamp: "2026-01-01T00:00:00Z" },
  spec: { replicas: 3, ports: [{ port: 80 }, { port: 443 }], crossplane: { compositionRef: { name: "comp" } } },
  status: {
    conditions: [
      { type: "Synced", status: "True", observedGeneration: 2 },
      { type: "Ready", status: "False", reason: "Creating" },
    ],
  },
};

const cases: Record<string, { path: string; want: unknown[] }> = {
  Field: { path: ".spec.replicas", want: [3] },
  DollarRoot: { path: "$.spec.replicas", want: [3] },
  Braces: { path: "{.spec.replicas}", want: [3] },
  Nested: { path: ".spec.crossplane.compositionRef.name", want: ["comp"] },
  Missing: { path: ".spec.nope.deeper", want: [] },
  Index: { path: ".spec.ports[1].port", want: [443] },
  NegativeIndex: { path: ".spec.ports[-1].port", want: [443] },
  IndexOutOfRange: { path: ".spec.ports[5].port", want: [] },
  Wildcard: { path: ".spec.ports[*].port", want: [80, 443] },
  QuotedKey: { path: ".metadata.labels['app.kubernetes.io/name']", want: ["demo"] },
  FilterSingleQuotes: { path: ".status.conditions[?(@.type=='Ready')].status", want: ["False"] },
  FilterDoubleQuotes: { path: '.status.conditions[?(@.type=="Synced")].status', want: ["True"] },
  FilterNoMatch: { path: ".status.conditions[?(@.type=='Healthy')].status", want: [] },
  FilterNumber: { path: ".status.conditions[?(@.observedGeneration>=2)].type", want: ["Synced"] },
  FilterExists: { path: ".status.conditions[?(@.reason)].type", want: ["Ready"] },
  FilterNotEqual: { path: ".status.conditions[?(@.type!='Ready')].type", want: ["Synced"] },
};
for (const [name, tc] of Object.entries(cases)) {
  J(name, () => assert.equal(evaluate(parseJsonPath(tc.path), obj as never), tc.want));
}

J("BadPaths: each is refused naming where", () => {
  for (const bad of [".spec[", ".spec.[x]", "spec", ".a[?(@.b~='c')]", ".a[?(@.b==c)]"])
    assert.throws(() => parseJsonPath(bad), /invalid JSONPath/, bad);
});

const now = new Date("2026-01-10T00:00:00Z");
const ages: Record<string, [string, string]> = {
  Seconds: ["2026-01-09T23:59:15Z", "45s"],
  MinutesSeconds: ["2026-01-09T23:55:30Z", "4m30s"],
  Minutes: ["2026-01-09T23:00:00Z", "60m"],
  HoursMinutes: ["2026-01-09T19:30:00Z", "4h30m"],
  Hours: ["2026-01-09T00:00:00Z", "24h"],
  DaysHours: ["2026-01-06T12:00:00Z", "3d12h"],
  Days: ["2025-12-01T00:00:00Z", "40d"],
  Future: ["2026-01-11T00:00:00Z", "<invalid>"],
};
for (const [name, [t, want]] of Object.entries(ages)) J(`humanAge: ${name}`, () => assert.is(humanAge(t, now), want));

J.run();
