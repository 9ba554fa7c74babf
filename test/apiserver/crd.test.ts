// CRDs refused as kube-apiserver refuses them, each case with the field path
// and message kube gives (apiextensions-apiserver's validation.go
// ValidateCustomResourceDefinition and its OpenAPI and x-kubernetes-validations
// checks; pkg/apiserver/schema/validation.go at kubernetes 21e7f350 for the
// structural ones), and status.storedVersions kept as the CRD strategy keeps it.
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { CRD_KEY, Store } from "../../src/apiserver/store.js";
import { startDevCluster } from "../../src/apiserver/server.js";
import { caller, widgetCRD } from "../support/cluster.js";
import { CRD_CASES as CASES } from "../support/crdcases.js";
import { hasAfterIndex } from "../../src/schema/cel.js";

const C = suite("dev-cluster: CRDs as kube-apiserver validates them");

const base = widgetCRD;

/** refused creates crd in a new store and answers the error message (or "" if it was stored). */
function refused(crd: JsonObject): string {
  try {
    new Store().create(CRD_KEY, undefined, crd);
    return "";
  } catch (err) {
    return (err as Error).message;
  }
}

/** writer creates Widgets in s, answering "stored" or the refusal's message. */
const writer = (s: Store) => (name: string, spec: JsonObject) => {
  try {
    s.create("example.org/widgets", "default", { apiVersion: "example.org/v1", kind: "Widget", metadata: { name }, spec });
    return "stored";
  } catch (err) {
    return (err as Error).message;
  }
};

for (const [name, { crd, want }] of Object.entries(CASES))
  C(name, () => {
    const got = refused(crd);
    assert.ok(got.startsWith('CustomResourceDefinition.apiextensions.k8s.io "'), got || "stored");
    assert.ok(got.includes(want), `${got}\n  wanted: ${want}`);
  });

C("a good CRD with every construct kube allows is stored", () => {
  const spec = {
    type: "object",
    properties: {
      size: { type: "integer", default: 3 },
      port: { "x-kubernetes-int-or-string": true, anyOf: [{ type: "integer" }, { type: "string" }] },
      labels: { type: "object", additionalProperties: { type: "string" } },
      list: { type: "array", items: { type: "string" }, "x-kubernetes-list-type": "set" },
      raw: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
    },
    oneOf: [{ required: ["size"] }, { required: ["port"] }],
    "x-kubernetes-validations": [
      { rule: "self.size > 0", fieldPath: ".size", reason: "FieldValueInvalid" },
      // A root rule reads metadata.name; kube's url library is not here, so its rule is stored and fails only when run.
      { rule: "self.labels.all(k, self.labels[k].size() < 64) && self.list.all(x, x != '')" },
      // format(), not '...' + string(self.size): a concatenation is estimated at any length, and kube refuses it for cost.
      { rule: "!has(self.raw) || self.raw.anything == 1", messageExpression: "'size is %d'.format([self.size])" },
      { rule: "isURL(self.labels['u'])" },
      // Mixed numbers compare in kube (CrossTypeNumericComparisons); a comparison with null is left to run.
      { rule: "self.size < 2.5 && self.size != null" },
    ],
  };
  const crd = base(spec);
  crd.spec.versions[0].schema.openAPIV3Schema.properties.metadata = {
    type: "object",
    properties: { name: { type: "string", maxLength: 20 } },
  };
  assert.is(refused(crd), "");
});

C("status.storedVersions records each storage version; a version still stored cannot be dropped", () => {
  const s = new Store();
  const v = (name: string, storage: boolean) => ({
    name,
    served: true,
    storage,
    schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
  });
  const one = base();
  one.spec.versions = [v("v1alpha1", true)];
  const made = s.create(CRD_KEY, undefined, { ...one, status: { storedVersions: ["bogus"] } });
  assert.equal((s.get(CRD_KEY, undefined, "widgets.example.org")["status"] as any).storedVersions, ["v1alpha1"]);
  const two = { ...structuredClone(one), metadata: made["metadata"] };
  two.spec.versions = [v("v1alpha1", false), v("v1", true)];
  s.update(CRD_KEY, undefined, "widgets.example.org", two);
  assert.equal((s.get(CRD_KEY, undefined, "widgets.example.org")["status"] as any).storedVersions, ["v1alpha1", "v1"]);
  const dropped = { ...structuredClone(two), metadata: { name: "widgets.example.org" } };
  dropped.spec.versions = [v("v1", true)];
  assert.throws(
    () => s.update(CRD_KEY, undefined, "widgets.example.org", dropped),
    (e: any) => e.message.includes('status.storedVersions[0]: Invalid value: "v1alpha1": must appear in spec.versions'),
  );
  // Once a storage migration takes v1alpha1 out of status.storedVersions, the version can go.
  const current = s.get(CRD_KEY, undefined, "widgets.example.org");
  s.update(
    CRD_KEY,
    undefined,
    "widgets.example.org",
    { ...current, status: { ...(current["status"] as any), storedVersions: ["v1"] } },
    { status: true },
  );
  s.update(CRD_KEY, undefined, "widgets.example.org", dropped);
  assert.equal((s.get(CRD_KEY, undefined, "widgets.example.org")["spec"] as any).versions.length, 1);
});

C("rules see date-time and date strings as timestamps, duration as durations and byte as bytes (kube's UnstructuredToVal)", () => {
  const s = new Store();
  const rules = [
    "self.at < timestamp('2030-01-01T00:00:00Z')",
    "self.d > duration('1m')",
    "size(self.b) == 3",
    "self.day.getFullYear() == 2026",
    "self.at + self.d > self.at",
  ];
  const crd = base({
    type: "object",
    "x-kubernetes-validations": rules.map((rule) => ({ rule })),
    properties: {
      at: { type: "string", format: "date-time" },
      d: { type: "string", format: "duration" },
      b: { type: "string", format: "byte" },
      day: { type: "string", format: "date" },
    },
  });
  s.create(CRD_KEY, undefined, crd);
  const write = writer(s);
  assert.is(write("ok", { at: "2026-11-27T10:00:00Z", d: "5m", b: "AQID", day: "2026-05-01" }), "stored");
  const refused = write("no", { at: "2031-01-01T00:00:00Z", d: "30s", b: "AQ==", day: "2025-05-01" });
  for (const r of rules.slice(0, 4)) assert.ok(refused.includes(`failed rule: ${r}`), `${r}: ${refused}`);
  assert.not.ok(refused.includes(rules[4]!), refused);
});

C("Kubernetes' CEL libraries: quantity, url and ip/cidr, as kube's library/quantity.go, urls.go, ip.go and cidr.go answer", () => {
  const rules = [
    "quantity(self.mem).isLessThan(quantity('64Gi'))",
    "quantity(self.mem).compareTo(quantity('512Mi')) >= 0",
    "isQuantity(self.mem) && quantity(self.cpu).add(quantity('500m')).isGreaterThan(quantity('1'))",
    "quantity('1.5').asApproximateFloat() == 1.5 && quantity('2k').asInteger() == 2000 && !quantity('1500m').isInteger()",
    "quantity('1Ki').sub(24).asInteger() == 1000 && quantity('-3').sign() == -1 && quantity('1e3').compareTo(quantity('1k')) == 0",
    "isURL(self.endpoint) && url(self.endpoint).getScheme() == 'https' && url(self.endpoint).getHostname() == 'example.com' && url(self.endpoint).getPort() == '8443'",
    "!isURL('example.com') && isURL('/healthz') && url('https://example.com').getEscapedPath() == ''",
    "isIP(self.addr) && ip(self.addr).family() == 4 && cidr(self.net).containsIP(self.addr) && cidr(self.net).prefixLength() == 16",
    "!isIP('010.0.0.1') && isCIDR('fd00::/8') && cidr('fd00::/8').containsIP(ip('fd00::1')) && !cidr('10.0.0.0/8').containsIP('11.0.0.1')",
  ];
  const s = new Store();
  const props = Object.fromEntries(["mem", "cpu", "endpoint", "addr", "net"].map((k) => [k, { type: "string" }]));
  s.create(CRD_KEY, undefined, base({ type: "object", properties: props, "x-kubernetes-validations": rules.map((rule) => ({ rule })) }));
  const write = writer(s);
  assert.is(
    write("ok", { mem: "1Gi", cpu: "750m", endpoint: "https://example.com:8443/x", addr: "10.1.2.3", net: "10.1.0.0/16" }),
    "stored",
  );
  const refused = write("no", { mem: "100Gi", cpu: "1", endpoint: "ftp://x", addr: "10.2.0.1", net: "10.1.0.0/16" });
  for (const i of [0, 5, 7]) assert.ok(refused.includes(`failed rule: ${rules[i]}`), `${rules[i]}: ${refused}`);
  for (const i of [1, 2, 3, 4, 6, 8]) assert.not.ok(refused.includes(`failed rule: ${rules[i]}`), `${rules[i]}: ${refused}`);
  assert.match(
    write("bad", { mem: "lots", cpu: "1", endpoint: "/", addr: "10.1.0.1", net: "10.1.0.0/16" }),
    /quantities must match the regular expression/,
  );
});

C("library values compare with ==, cost 1 each in the estimate; cidr().masked(), string() of an IP or CIDR and ip.isCanonical", () => {
  // Found by the differential tier (cel/quantity, cel/cidrmasked, cel/ipcanonical): kube-apiserver v1.36.3 accepts these
  // CRDs (k8s.io/apiserver v0.36.3 library/cost.go charges _==_ of two quantities, IPs, CIDRs or semvers 1) and evaluates
  // them as its types do (ip_test.go, cidr_test.go: canonical forms as netip writes them).
  const rules = [
    "quantity(self.mem) == quantity('1Gi')",
    "cidr(self.net).masked() == cidr('10.0.0.0/8')",
    "ip.isCanonical(self.addr)",
    "string(cidr('2001:db8:0:0:1::1/64').masked()) == '2001:db8::/64' && string(ip('2001:DB8::1')) == '2001:db8::1'",
    "ip('::1') == ip('0:0::1') && ip('10.0.0.1') != ip('10.0.0.2') && semver('1.0.0') == semver('1.0.0')",
  ];
  const s = new Store();
  const props = Object.fromEntries(["mem", "net", "addr"].map((k) => [k, { type: "string", maxLength: 64 }]));
  s.create(CRD_KEY, undefined, base({ type: "object", properties: props, "x-kubernetes-validations": rules.map((rule) => ({ rule })) }));
  const write = writer(s);
  assert.is(write("ok", { mem: "1024Mi", net: "10.1.2.3/8", addr: "2001:db8::1" }), "stored");
  const refused = write("no", { mem: "2Gi", net: "10.0.0.0/16", addr: "2001:DB8::1" });
  for (const i of [0, 1, 2]) assert.ok(refused.includes(`failed rule: ${rules[i]}`), `${rules[i]}: ${refused}`);
  for (const i of [3, 4]) assert.not.ok(refused.includes(`failed rule: ${rules[i]}`), `${rules[i]}: ${refused}`);
});

C("Kubernetes' CEL libraries: semver, format and url's getQuery, as kube's semverlib.go, format.go and urls.go answer", () => {
  // Each rule is true of the "ok" widget; cases from kube's semver_test.go, format_test.go and urls_test.go.
  const rules = [
    "isSemver(self.v) && semver(self.v).major() == 1 && semver(self.v).minor() == 2 && semver(self.v).patch() == 3",
    "!isSemver('v1.0.0') && isSemver('v1.0', true) && semver('01.01.01', true).compareTo(semver('1.1.1')) == 0",
    "!isSemver('1.0') && !isSemver('01.1.1') && isSemver('1.0.0-alpha.1+build.5') && !isSemver('1.0.0-01')",
    "semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1')) && semver('1.0.0-alpha.beta').isLessThan(semver('1.0.0-beta'))",
    "semver('1.0.0-rc.1').isLessThan(semver('1.0.0')) && semver('2.0.0').isGreaterThan(semver('1.99.99'))",
    "semver('1.0.0+a').compareTo(semver('1.0.0+b')) == 0 && semver('1.2.3').compareTo(semver('0.1.2')) == 1",
    "!format.dns1123Label().validate(self.name).hasValue() && format.dns1123Label().validate('Bad_Name').hasValue()",
    "format.named('dns1123Subdomain').hasValue() && !format.named('nope').hasValue()",
    "!format.named('dns1123Subdomain').value().validate('a.b.c').hasValue()",
    "!format.dns1123LabelPrefix().validate('my-prefix-').hasValue() && format.dns1123Label().validate('my-prefix-').hasValue()",
    "!format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue() && format.uuid().validate('x').value() == ['does not match the UUID format']",
    "!format.byte().validate('aGVsbG8=').hasValue() && !format.date().validate('2021-01-01').hasValue() && format.datetime().validate('2021').hasValue()",
    "!format.qualifiedName().validate('apiextensions.k8s.io/v1beta1').hasValue() && !format.labelValue().validate('').hasValue()",
    "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
    "url('https://example.com/?a=1%202&b').getQuery()['a'] == ['1 2'] && url('https://example.com/').getQuery() == {}",
    // ext/sets.go and ext/strings.go (sets_test.go, strings_test.go), namespaced as in kube.
    "sets.contains([1, 2, 3], [3, 1]) && !sets.contains([1], [2]) && sets.contains([[1], [2]], [[2]]) && sets.contains([1.0], [1])",
    "sets.equivalent([1, 2], [2, 1, 1]) && sets.intersects([{'a': 1}], [{'a': 1}, {'b': 2}]) && !sets.intersects([1], [])",
    `strings.quote('first\\nsecond') == '"first\\\\nsecond"' && strings.quote('verbatim') == '"verbatim"' && strings.quote('a"b') == '"a\\\\"b"'`,
  ];
  const s = new Store();
  const props = { v: { type: "string", maxLength: 64 }, name: { type: "string", maxLength: 64 } };
  s.create(CRD_KEY, undefined, base({ type: "object", properties: props, "x-kubernetes-validations": rules.map((rule) => ({ rule })) }));
  const write = writer(s);
  assert.is(write("ok", { v: "1.2.3", name: "my-name" }), "stored");
  const refused = write("no", { v: "1.2.4", name: "My_Name" });
  assert.match(refused, `failed rule: ${rules[0]}`);
  assert.match(refused, `failed rule: ${rules[6]}`);
  // semver() of what is not a version is the rule's error, in blang/semver's words.
  const s2 = new Store();
  s2.create(
    CRD_KEY,
    undefined,
    base({ type: "object", properties: props, "x-kubernetes-validations": [{ rule: "semver(self.v).major() > 0" }] }),
  );
  assert.match(writer(s2)("w", { v: "1.0" }), "No Major.Minor.Patch elements found evaluating rule: semver(self.v).major() > 0");
  assert.match(writer(s2)("w", { v: "1.02.0" }), 'Minor number must not contain leading zeroes "02"');
});

C("has() after an index or a call (which cel-go takes) tests the field; has() of a plain chain is left to cel-js's macro", () => {
  const table: Array<[string, string]> = [
    ["has(self.items[0].name)", "xfnHasField(self.items[0], 'name')"],
    ["has(self.a.b)", "has(self.a.b)"],
    ["!has(self.m['k'].x) || has(self.items[1].y)", "!xfnHasField(self.m['k'], 'x') || xfnHasField(self.items[1], 'y')"],
    ["'has(x[0].y)' == self.s", "'has(x[0].y)' == self.s"],
  ];
  for (const [rule, want] of table) assert.is(hasAfterIndex(rule), want, rule);
  const s = new Store();
  const item = { type: "object", properties: { name: { type: "string" } } };
  s.create(
    CRD_KEY,
    undefined,
    base({
      type: "object",
      properties: { items: { type: "array", items: item } },
      "x-kubernetes-validations": [{ rule: "has(self.items[0].name)" }],
    }),
  );
  const write = writer(s);
  assert.is(write("a", { items: [{ name: "x" }] }), "stored");
  assert.match(write("b", { items: [{}] }), /failed rule: has\(self\.items\[0\]\.name\)/);
});

C("a set of scalars compares as a set in rules (transition rules too), as kube compares set lists", () => {
  const s = new Store();
  s.create(
    CRD_KEY,
    undefined,
    base({
      type: "object",
      properties: { tags: { type: "array", items: { type: "string" }, "x-kubernetes-list-type": "set" } },
      "x-kubernetes-validations": [
        { rule: "self.tags == ['b', 'a'] || size(self.tags) != 2", message: "not the set {a, b}" },
        { rule: "self.tags == oldSelf.tags", message: "tags are immutable" },
        { rule: "self.tags[0] != ''" },
      ],
    }),
  );
  const write = writer(s);
  assert.is(write("w", { tags: ["a", "b"] }), "stored");
  const update = (tags: string[]) => {
    try {
      s.update("example.org/widgets", "default", "w", { ...s.get("example.org/widgets", "default", "w"), spec: { tags } });
      return "stored";
    } catch (err) {
      return (err as Error).message;
    }
  };
  assert.is(update(["b", "a"]), "stored", "the same set in another order is the same set");
  const changed = update(["a", "c"]);
  assert.match(changed, /not the set \{a, b\}/);
  assert.match(changed, /tags are immutable/);
});

C("a set of objects and a map list compare as sets in rules, element by element as values, as kube compares them", () => {
  const s = new Store();
  const item = { type: "object", properties: { name: { type: "string" }, port: { type: "integer" } }, required: ["name"] };
  s.create(
    CRD_KEY,
    undefined,
    base({
      type: "object",
      properties: {
        ports: { type: "array", items: { ...item, "x-kubernetes-map-type": "atomic" }, "x-kubernetes-list-type": "set" },
        named: { type: "array", items: item, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"] },
      },
      "x-kubernetes-validations": [
        { rule: "self.ports == oldSelf.ports", message: "ports are immutable" },
        { rule: "self.named == oldSelf.named", message: "named is immutable" },
        { rule: "{'name': 'a', 'port': 1} in self.ports", message: "a:1 must be a port" },
        { rule: "self.named == [{'name': 'y', 'port': 2}, {'name': 'x', 'port': 1}] || size(self.named) != 2", message: "not {x:1, y:2}" },
      ],
    }),
  );
  const a = { name: "a", port: 1 };
  const b = { name: "b", port: 2 };
  assert.is(
    writer(s)("w", {
      ports: [a, b],
      named: [
        { name: "x", port: 1 },
        { name: "y", port: 2 },
      ],
    }),
    "stored",
  );
  const update = (spec: JsonObject) => {
    try {
      s.update("example.org/widgets", "default", "w", { ...s.get("example.org/widgets", "default", "w"), spec });
      return "stored";
    } catch (err) {
      return (err as Error).message;
    }
  };
  assert.is(
    update({
      ports: [b, a],
      named: [
        { port: 2, name: "y" },
        { name: "x", port: 1 },
      ],
    }),
    "stored",
    "the same sets in another order",
  );
  const changed = update({
    ports: [a, { name: "b", port: 3 }],
    named: [
      { name: "x", port: 1 },
      { name: "y", port: 3 },
    ],
  });
  assert.match(changed, /ports are immutable/);
  assert.match(changed, /named is immutable/);
  assert.match(changed, /not \{x:1, y:2\}/);
  assert.match(
    update({
      ports: [b],
      named: [
        { name: "x", port: 1 },
        { name: "y", port: 2 },
      ],
    }),
    /a:1 must be a port/,
  );
});

C("a null field of an object is absent to a rule (has() is false), as in kube; in a map it is a value", () => {
  const s = new Store();
  const crd = base({
    type: "object",
    properties: {
      note: { type: "string", nullable: true },
      tags: { type: "object", additionalProperties: { type: "string", nullable: true } },
    },
    "x-kubernetes-validations": [
      { rule: "!has(self.note)", message: "note is set" },
      { rule: "!('a' in self.tags) || self.tags.a == null" },
    ],
  });
  s.create(CRD_KEY, undefined, crd);
  const write = writer(s);
  assert.is(write("a", { note: null, tags: { a: null } }), "stored");
  assert.match(write("b", { note: "hi", tags: {} }), /note is set/);
});

C("an embedded resource must say its apiVersion and kind, and its metadata keeps only ObjectMeta's fields", async () => {
  const c = await startDevCluster();
  const call = caller(c);
  try {
    const embedded = { type: "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true };
    assert.is(
      (
        await call(
          "POST",
          "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
          base({ type: "object", properties: { template: embedded } }),
        )
      ).status,
      201,
    );
    const path = "/apis/example.org/v1/namespaces/default/widgets";
    const w = (name: string, template: unknown) => ({
      apiVersion: "example.org/v1",
      kind: "Widget",
      metadata: { name },
      spec: { template },
    });
    const missing = await call("POST", path, w("a", { metadata: { name: "x" } }));
    assert.is(missing.status, 422);
    assert.match(missing.body.message, /spec\.template\.apiVersion: Required value: must not be empty/);
    assert.match(missing.body.message, /spec\.template\.kind: Required value: must not be empty/);
    const badKind = await call("POST", path, w("b", { apiVersion: "v1", kind: "Config_Map" }));
    assert.match(
      badKind.body.message,
      /spec\.template\.kind: Invalid value: "Config_Map": may have mixed case, but should otherwise match/,
    );
    const made = await call(
      "POST",
      path,
      w("c", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x", colour: "red" }, data: { a: "1" } }),
    );
    assert.is(made.status, 201, JSON.stringify(made.body));
    assert.equal(made.body.spec.template, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x" }, data: { a: "1" } });
    assert.match(made.headers.get("warning") ?? "", /unknown field \\"spec\.template\.metadata\.colour\\"/);
  } finally {
    await c.stop();
  }
});

C.run();
