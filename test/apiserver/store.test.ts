// The embedded API server's semantics, at the store level.
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { apply } from "../../src/apiserver/patch.js";
import { parseSelector, matches } from "../../src/apiserver/selector.js";
import { CRD_KEY, Store, typeKeyOf } from "../../src/apiserver/store.js";
import type { Watcher } from "../../src/apiserver/types.js";

const W = typeKeyOf("example.org", "widgets");
const crd = (statusSub = true): JsonObject => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "widgets.example.org" },
  spec: {
    group: "example.org",
    names: { kind: "Widget", plural: "widgets" },
    scope: "Namespaced",
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
        ...(statusSub ? { subresources: { status: {} } } : {}),
      },
    ],
  },
});
const widget = (name: string, extra: JsonObject = {}): JsonObject => {
  const { metadata, ...rest } = extra;
  return {
    apiVersion: "example.org/v1",
    kind: "Widget",
    metadata: { name, ...((metadata as JsonObject) ?? {}) },
    spec: { size: 1 },
    ...rest,
  };
};

function store(opts = {}) {
  const s = new Store(opts);
  s.create(CRD_KEY, undefined, crd());
  return s;
}

function recorder(typeKey: string, labels = ""): Watcher & { events: Array<[string, string]>; closed: boolean } {
  const w = {
    typeKey,
    labels: parseSelector(labels),
    fields: [],
    events: [] as Array<[string, string]>,
    closed: false,
    send(type: string, o: JsonObject) {
      w.events.push([type, type === "ERROR" ? String(o["code"]) : String((o["metadata"] as JsonObject)["name"] ?? "")]);
    },
    close() {
      w.closed = true;
    },
  };
  return w;
}

const S = suite("dev-cluster store");

S("a CRD serves its kind and is marked Established", () => {
  const s = store();
  assert.ok(s.findType("example.org", "v1", "widgets"));
  const c = s.get(CRD_KEY, undefined, "widgets.example.org");
  assert.ok((c["status"] as any).conditions.some((x: any) => x.type === "Established" && x.status === "True"));
});

S("resourceVersions increase; a stale update is a 409 Conflict; spec changes bump generation", () => {
  const s = store();
  const a = s.create(W, "default", widget("a"));
  const rv1 = Number((a["metadata"] as any).resourceVersion);
  const b = s.update(W, "default", "a", { ...a, spec: { size: 2 } });
  assert.ok(Number((b["metadata"] as any).resourceVersion) > rv1);
  assert.is((b["metadata"] as any).generation, 2);
  assert.throws(() => s.update(W, "default", "a", { ...a, spec: { size: 3 } }), /the object has been modified/);
});

S("the status subresource: create and the main resource ignore status, /status changes only status", () => {
  const s = store();
  const a = s.create(W, "default", widget("a", { status: { phase: "ignored?" } }));
  assert.is(a["status"], undefined, "create drops a custom resource's status (PrepareForCreate)");
  const first = s.update(W, "default", "a", { ...a, status: { phase: "Pending" } }, { status: true });
  const u = s.update(W, "default", "a", { ...first, spec: { size: 5 }, status: { phase: "nope" } });
  assert.is((u["status"] as any)?.phase, "Pending", "an update via the main resource does not change status");
  const st = s.update(W, "default", "a", { ...u, spec: { size: 99 }, status: { phase: "Ready" } }, { status: true });
  assert.equal([(st["spec"] as any).size, (st["status"] as any).phase], [5, "Ready"]);
});

S("finalizers: delete sets deletionTimestamp; removing the last finalizer deletes", () => {
  const s = store();
  s.create(W, "default", widget("a", { metadata: { finalizers: ["example.org/hold"] } }));
  const d = s.delete(W, "default", "a");
  assert.ok((d["metadata"] as any).deletionTimestamp);
  const cur = s.get(W, "default", "a");
  assert.throws(
    () => s.update(W, "default", "a", { ...cur, metadata: { ...(cur["metadata"] as any), finalizers: ["example.org/hold", "new"] } }),
    /metadata\.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers \[\]string\{"[^"]+"\}$/,
  );
  s.update(W, "default", "a", { ...cur, metadata: { ...(cur["metadata"] as any), finalizers: [] } });
  assert.throws(() => s.get(W, "default", "a"), /not found/);
});

S("foreground deletion waits for blocking dependents; background deletion collects orphans", () => {
  const s = store();
  const owner = s.create(W, "default", widget("owner"));
  const ref = (block: boolean) => ({
    metadata: {
      ownerReferences: [
        {
          apiVersion: "example.org/v1",
          kind: "Widget",
          name: "owner",
          uid: (owner["metadata"] as any).uid,
          controller: true,
          blockOwnerDeletion: block,
        },
      ],
    },
  });
  s.create(W, "default", widget("held", { metadata: { ...ref(true).metadata, finalizers: ["example.org/hold"] } }));
  s.create(W, "default", widget("free", ref(false)));
  s.delete(W, "default", "owner", "Foreground");
  assert.ok((s.get(W, "default", "owner")["metadata"] as any).finalizers.includes("foregroundDeletion"));
  assert.throws(() => s.get(W, "default", "free"), /not found/, "a non-blocking dependent is deleted");
  assert.ok((s.get(W, "default", "held")["metadata"] as any).deletionTimestamp, "the blocking dependent is being deleted");
  const held = s.get(W, "default", "held");
  s.update(W, "default", "held", { ...held, metadata: { ...(held["metadata"] as any), finalizers: [] } });
  assert.throws(() => s.get(W, "default", "owner"), /not found/, "the owner goes once its blocking dependent is gone");

  const o2 = s.create(W, "default", widget("o2"));
  s.create(
    W,
    "default",
    widget("child", {
      metadata: { ownerReferences: [{ apiVersion: "example.org/v1", kind: "Widget", name: "o2", uid: (o2["metadata"] as any).uid }] },
    }),
  );
  s.delete(W, "default", "o2", "Orphan");
  assert.not.ok((s.get(W, "default", "child")["metadata"] as any).ownerReferences, "orphaned, not deleted");
  const o3 = s.create(W, "default", widget("o3"));
  s.create(
    W,
    "default",
    widget("child3", {
      metadata: { ownerReferences: [{ apiVersion: "example.org/v1", kind: "Widget", name: "o3", uid: (o3["metadata"] as any).uid }] },
    }),
  );
  s.delete(W, "default", "o3");
  assert.throws(() => s.get(W, "default", "child3"), /not found/, "background: the dependent is collected");
});

const ownedBy = (owner: JsonObject, block = true): JsonObject => ({
  metadata: {
    ownerReferences: [
      {
        apiVersion: "example.org/v1",
        kind: "Widget",
        name: (owner["metadata"] as any).name,
        uid: (owner["metadata"] as any).uid,
        controller: true,
        blockOwnerDeletion: block,
      },
    ],
  },
});

S("garbage collection follows chains of owners, and an owner waits only for dependents that still name it", () => {
  const s = store();
  const a = s.create(W, "default", widget("a"));
  const b = s.create(W, "default", widget("b", ownedBy(a)));
  s.create(W, "default", widget("c", ownedBy(b)));
  s.delete(W, "default", "a");
  for (const n of ["a", "b", "c"]) assert.throws(() => s.get(W, "default", n), /not found/, `${n} is collected`);

  // A foreground owner blocked by a held dependent is released when the dependent stops naming it.
  const owner = s.create(W, "default", widget("owner"));
  s.create(W, "default", widget("held", { metadata: { ...(ownedBy(owner)["metadata"] as JsonObject), finalizers: ["example.org/hold"] } }));
  s.delete(W, "default", "owner", "Foreground");
  assert.ok(s.get(W, "default", "owner"), "waits for held");
  const held = s.get(W, "default", "held");
  s.update(W, "default", "held", { ...held, metadata: { ...(held["metadata"] as any), ownerReferences: [] } });
  assert.throws(() => s.get(W, "default", "owner"), /not found/, "held no longer names it: the owner goes");
  assert.ok(s.get(W, "default", "held"), "held stays: it has no owner left to be collected for");
});

S("after a restart, objects whose owners vanished are collected at the next write", () => {
  const s = store();
  const o = s.create(W, "default", widget("o"));
  s.create(W, "default", widget("dep", ownedBy(o, false)));
  const snap = s.snapshot();
  // The owner is gone from the saved state (it was removed while its dependent's removal was lost).
  snap.objects = snap.objects.filter((x) => (x.object["metadata"] as any).name !== "o");
  const again = new Store();
  again.restore(snap);
  assert.ok(again.get(W, "default", "dep"));
  again.create(W, "default", widget("unrelated"));
  assert.throws(() => again.get(W, "default", "dep"), /not found/);
});

S("watches: replay from a version, selector transitions become ADDED/DELETED, 410 Gone when too old", () => {
  const s = store({ historySize: 5 });
  const a = s.create(W, "default", widget("a", { metadata: { labels: { app: "x" } } }));
  const from = String(s.rv);
  const w = recorder(W, "app=x");
  s.watch(w, from);
  s.update(W, "default", "a", { ...a, metadata: { ...(a["metadata"] as any), labels: { app: "y" } } });
  const b = s.create(W, "default", widget("b", { metadata: { labels: { app: "y" } } }));
  s.update(W, "default", "b", { ...b, metadata: { ...(b["metadata"] as any), labels: { app: "x" } } });
  assert.equal(w.events, [
    ["DELETED", "a"],
    ["ADDED", "b"],
  ]);
  for (let i = 0; i < 10; i++) s.create(W, "default", widget(`n${i}`));
  const old = recorder(W);
  s.watch(old, from);
  assert.equal(old.events, [["ERROR", "410"]]);
  assert.ok(old.closed);
  const fresh = recorder(W, "app=x");
  s.watch(fresh, undefined);
  assert.equal(fresh.events, [["ADDED", "b"]], "no version: the current objects first");
});

S("an object leaving a selector's scope is DELETED as it last matched, at the change's resourceVersion", () => {
  // kube-apiserver v1.36.3 (the differential's kubectl/watch sequence; apiserver v0.36.3 cache_watcher.go
  // convertToWatchEvent): the previous object's content, the event's version.
  const s = store();
  const a = s.create(W, "default", widget("a", { metadata: { labels: { app: "x" } } }));
  const seen: JsonObject[] = [];
  const w = { ...recorder(W, "app=x"), send: (_t: string, o: JsonObject) => seen.push(o) };
  s.watch(w, String(s.rv));
  const moved = s.update(W, "default", "a", { ...a, metadata: { ...(a["metadata"] as any), labels: { app: "y" } } }) as JsonObject;
  assert.is(seen.length, 1);
  assert.equal((seen[0]!["metadata"] as JsonObject)["labels"], { app: "x" }, "the labels it matched with");
  assert.is((seen[0]!["metadata"] as JsonObject)["resourceVersion"], (moved["metadata"] as JsonObject)["resourceVersion"]);
  assert.equal(((a["metadata"] as JsonObject)["labels"] as JsonObject)["app"], "x", "the stored previous version is not changed");
});

S("deleting a CRD deletes its objects, ends its watches and stops serving it", () => {
  const s = store();
  s.create(W, "default", widget("a"));
  const w = recorder(W);
  s.watch(w, String(s.rv));
  s.delete(CRD_KEY, undefined, "widgets.example.org");
  assert.equal(w.events, [["DELETED", "a"]]);
  assert.ok(w.closed);
  assert.is(s.findType("example.org", "v1", "widgets"), undefined);
});

S("deleting a CRD while changes wait to be durable (--data-dir): its watches get the DELETED events first, then end", () => {
  const s = store();
  s.create(W, "default", widget("a"));
  s.holdEvents = true;
  const w = recorder(W);
  s.watch(w, String(s.rv));
  s.delete(CRD_KEY, undefined, "widgets.example.org");
  assert.equal(w.events, [], "nothing is sent before it is durable");
  assert.not.ok(w.closed, "nor is the watch ended before its DELETED events are sent");
  s.release(s.rv);
  assert.equal(w.events, [["DELETED", "a"]]);
  assert.ok(w.closed);
});

S("bad writes are refused with Kubernetes reasons", () => {
  const s = store();
  assert.throws(() => s.create(W, "nope", widget("a")), /namespaces "nope" not found/);
  for (const bad of ["Bad_Name", "a..b", "-a", "a.", ".a", "x".repeat(254)])
    assert.throws(() => s.create(W, "default", widget(bad)), /metadata\.name: Invalid value: .*(RFC 1123 subdomain|no more than 253)/, bad);
  s.create(W, "default", widget("a.b-c.d"));
  assert.throws(
    () => s.create(typeKeyOf("", "namespaces"), undefined, { apiVersion: "v1", kind: "Namespace", metadata: { name: "a.b" } }),
    /Namespace "a\.b" is invalid: metadata\.name: Invalid value: "a\.b": must not contain dots/,
  );
  assert.throws(
    () => s.create(typeKeyOf("", "namespaces"), undefined, { apiVersion: "v1", kind: "Namespace", metadata: { name: "A_b" } }),
    /RFC 1123 label must consist of .* \(e\.g\. 'my-name', or '123-abc', regex used for validation is '\[a-z0-9\]\(\[-a-z0-9\]\*\[a-z0-9\]\)\?'\)/,
  );
  s.create(W, "default", widget("a"));
  assert.throws(() => s.create(W, "default", widget("a")), /already exists/);
  assert.throws(
    () => s.create(CRD_KEY, undefined, { ...crd(), metadata: { name: "wrong" } }),
    /CustomResourceDefinition\.apiextensions\.k8s\.io "wrong" is invalid: metadata\.name: Invalid value: "wrong": must be spec\.names\.plural\+"\."\+spec\.group/,
  );
  // Core kinds are named without a group (kube's qualified resource for the core group).
  s.create(typeKeyOf("", "configmaps"), "default", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } });
  assert.throws(
    () => s.create(typeKeyOf("", "configmaps"), "default", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } }),
    (e: any) => e.message === 'configmaps "c" already exists',
  );
  const g = s.create(W, "default", { apiVersion: "example.org/v1", kind: "Widget", metadata: { generateName: "gen-" } });
  assert.match(String((g["metadata"] as any).name), /^gen-[0-9a-f]{5}$/);
});

S("a snapshot restores every object with its identity and version", () => {
  const s = store();
  const a = s.create(W, "default", widget("a"));
  const r = new Store();
  r.restore(JSON.parse(JSON.stringify(s.snapshot())));
  const back = r.get(W, "default", "a");
  assert.equal(back["metadata"], a["metadata"]);
  assert.is(r.rv, s.rv);
  const w = recorder(W);
  r.watch(w, String(s.rv - 1));
  assert.equal(w.events, [["ERROR", "410"]], "history does not survive a restart: resume means relist");
});

const SSA = suite("server-side apply");
const t = "2026-01-01T00:00:00Z";
const all = () => true;

SSA("applies, then removes what the manager stops applying", () => {
  const one = apply(
    undefined,
    { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", labels: { a: "1" } }, data: { x: "1", y: "2" } },
    "host",
    false,
    all,
    t,
  );
  assert.equal(one["data"], { x: "1", y: "2" });
  const two = apply(one, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" }, data: { x: "1" } }, "host", false, all, t);
  assert.equal(two["data"], { x: "1" });
  assert.is((two["metadata"] as any).labels, undefined);
  assert.equal(
    (two["metadata"] as any).managedFields.map((m: any) => m.manager),
    ["host"],
  );
});

SSA("a field another manager owns with a different value conflicts, unless forced", () => {
  const a = apply(undefined, { apiVersion: "v1", kind: "ConfigMap", data: { x: "1", keep: "k" } }, "alice", false, all, t);
  assert.throws(
    () => apply(a, { apiVersion: "v1", kind: "ConfigMap", data: { x: "2" } }, "bob", false, all, t),
    /Apply failed with 1 conflict: conflict with "alice": \.data\.x/,
  );
  const same = apply(a, { apiVersion: "v1", kind: "ConfigMap", data: { x: "1" } }, "bob", false, all, t);
  assert.equal(same["data"], { x: "1", keep: "k" }, "agreeing on a value is no conflict");
  const forced = apply(a, { apiVersion: "v1", kind: "ConfigMap", data: { x: "2" } }, "bob", true, all, t);
  assert.equal(forced["data"], { x: "2", keep: "k" });
  const alice2 = apply(forced, { apiVersion: "v1", kind: "ConfigMap", data: { keep: "k" } }, "alice", false, all, t);
  assert.equal(alice2["data"], { x: "2", keep: "k" }, "alice no longer owns x, so dropping it does not remove bob's value");
});

const Sel = suite("label selectors");
const selCases: Record<string, [string, Record<string, string>, boolean]> = {
  Equals: ["a=b", { a: "b" }, true],
  DoubleEquals: ["a==b", { a: "c" }, false],
  NotEquals: ["a!=b", {}, true],
  In: ["env in (prod, stage)", { env: "stage" }, true],
  NotIn: ["env notin (prod)", { env: "prod" }, false],
  Exists: ["app.kubernetes.io/name", { "app.kubernetes.io/name": "x" }, true],
  NotExists: ["!a", { a: "1" }, false],
  All: ["a=1,b in (2,3),!c", { a: "1", b: "3" }, true],
  Empty: ["", { any: "x" }, true],
  // From apimachinery's labels selector_test.go (TestSelectorMatches, TestLexerSequence's shapes).
  EmptyValueIn: ["a in ()", { a: "" }, true],
  SpacesAround: ["  x = y  ,  z ", { x: "y", z: "" }, true],
  InAsValue: ["a=in", { a: "in" }, true],
  GreaterThan: ["n>5", { n: "6" }, true],
  LessThanNotInteger: ["n<5", { n: "x" }, false],
  NotExistsAbsent: ["!a", {}, true],
  TrailingEmptyValue: ["a=", { a: "" }, true],
};
for (const [name, [sel, labels, want]] of Object.entries(selCases)) Sel(name, () => assert.is(matches(parseSelector(sel), labels), want));
// What parsing refuses, with apimachinery's words (labels/selector.go's Parser).
const badSelectors: Record<string, [string, string]> = {
  ValueWithEquals: ["app=a=b", "found '=', expected: ',' or 'end of string'"],
  InWithoutParens: ["a in b", "unable to parse requirement: found 'b' expected: '('"],
  UnclosedIn: ["a in (b", "unable to parse requirement: found '', expected: ',' or ')'"],
  TrailingComma: ["a=b,", "found '', expected: identifier after ','"],
  LeadingOperator: ["=a", "found '=', expected: !, identifier, or 'end of string'"],
  BadKey: ["-a=b", 'unable to parse requirement: key: Invalid value: "-a": name part must consist of'],
  BadValue: ["a=b_", 'unable to parse requirement: values[0][a]: Invalid value: "b_": a valid label must be an empty string'],
  NotIntegerGt: [
    "a>b",
    `unable to parse requirement: values[0]: Invalid value: "b": for 'Gt', 'Lt' operators, the value must be an integer`,
  ],
  NotWithValue: ["!a=b", "found '=', expected: ',' or 'end of string'"],
  UnknownSymbol: ["a=>b", "unable to parse requirement: found '>', expected: identifier"],
};
for (const [name, [sel, want]] of Object.entries(badSelectors))
  Sel(`refused: ${name}`, () =>
    assert.throws(
      () => parseSelector(sel),
      (e: Error) => e.message.startsWith(want) || (console.error(`${sel}: ${e.message}`), false),
    ),
  );

S.run();
SSA.run();
Sel.run();
