// The embedded API server's limits on what one request may hold: how deeply
// its JSON nests (kube-apiserver's decoder allows 10,000 levels; this server
// takes 1,000, with room below where its stack would run out, and says so),
// and how large a stored object may be (etcd's default 1.5 MiB request limit,
// answered with etcd's words), and what its CEL rules may cost (kube's
// per-call limit and per-request budget, with the errors of
// apiextensions-apiserver's pkg/apiserver/schema/cel/validation.go). Each
// refusal leaves the server serving.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import type { JsonObject } from "@bufbuild/protobuf";
import { MAX_DEPTH } from "../../src/apiserver/query.js";
import { CRD_KEY, Store, typeKeyOf } from "../../src/apiserver/store.js";
import { startDevCluster } from "../../src/apiserver/server.js";
import { crd } from "../support/cluster.js";
import { kubeFetch } from "../support/kubefetch.js";
import { XFN } from "../support/spawn.js";

const L = suite("dev-cluster: request limits");

let scratch: string;
L.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-limits-"));
});
L.after(() => rmSync(scratch, { recursive: true, force: true }));

const BASE = "/apis/example.org/v1/namespaces/default/widgets";
/** nested is JSON text nesting depth objects ({"a":{"a":...1}}). */
const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
const widget = (name: string, specJson: string) =>
  `{"apiVersion":"example.org/v1","kind":"Widget","metadata":{"name":"${name}"},"spec":${specJson}}`;

L("JSON nested to the limit round-trips (create, get, patch, watch, restart); one level more is a 400 naming the limit", async () => {
  const dataFile = join(scratch, "state.json");
  let c = await startDevCluster({ dataFile });
  const call = async (method: string, path: string, body?: string, type = "application/json") => {
    const r = await fetch(`${c.url}${path}`, { method, headers: { "Content-Type": type }, ...(body ? { body } : {}) });
    return { status: r.status, text: await r.text() };
  };
  try {
    await call(
      "POST",
      "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
      JSON.stringify(crd("example.org", "Widget", "widgets", "Namespaced")),
    );
    // The object's root and spec's nested objects (the first is spec's value): MAX_DEPTH levels in all.
    const deepest = MAX_DEPTH - 1;
    const made = await call("POST", BASE, widget("deep", nested(deepest)));
    assert.is(made.status, 201, made.text.slice(0, 300));
    const watch = await fetch(`${c.url}${BASE}?watch=true&timeoutSeconds=1`);
    assert.match(await watch.text(), /"type":"ADDED"/);
    assert.is((await call("GET", `${BASE}/deep`)).status, 200);
    const patched = await call("PATCH", `${BASE}/deep`, `{"metadata":{"labels":{"x":"y"}}}`, "application/merge-patch+json");
    assert.is(patched.status, 200, patched.text.slice(0, 300));
    await c.stop();
    c = await startDevCluster({ dataFile });
    assert.is((await call("GET", `${BASE}/deep`)).status, 200, "read back after a restart");

    for (const [what, send] of [
      ["a create", () => call("POST", BASE, widget("deeper", nested(deepest + 1)))],
      [
        "YAML",
        () =>
          call(
            "POST",
            BASE,
            `apiVersion: example.org/v1\nkind: Widget\nmetadata: {name: y}\nspec: ${nested(deepest + 1)}\n`,
            "application/yaml",
          ),
      ],
      [
        "a JSON patch that deepens the object",
        () =>
          call(
            "PATCH",
            `${BASE}/deep`,
            JSON.stringify([{ op: "add", path: `/spec${"/a".repeat(deepest - 1)}/b`, value: { c: 1 } }]),
            "application/json-patch+json",
          ),
      ],
      ["a body past 10,000 levels", () => call("POST", BASE, widget("deepest", nested(20_000)))],
    ] as const) {
      const r = await send();
      assert.is(r.status, 400, `${what}: ${r.text.slice(0, 300)}`);
      // (YAML is read by a recursive reader that stops sooner, about 900 levels, and says so.)
      assert.match(
        JSON.parse(r.text).message,
        what === "YAML" ? /nests deeper than the YAML reader follows/ : new RegExp(`nests deeper than ${MAX_DEPTH} levels`),
        what,
      );
    }
    assert.is((await call("GET", `${BASE}/deep`)).status, 200, "still serving");
  } finally {
    await c.stop();
  }
});

L("an object larger than etcd's 1.5 MiB is refused as etcd refuses it; smaller ones are stored", async () => {
  const c = await startDevCluster();
  const call = async (method: string, path: string, body: unknown) => {
    const r = await fetch(`${c.url}${path}`, { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    return { status: r.status, body: (await r.json()) as any };
  };
  try {
    await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd("example.org", "Widget", "widgets", "Namespaced"));
    const w = (name: string, bytes: number) => ({
      apiVersion: "example.org/v1",
      kind: "Widget",
      metadata: { name },
      spec: { blob: "x".repeat(bytes) },
    });
    assert.is((await call("POST", BASE, w("fits", 1_400_000))).status, 201);
    const big = await call("POST", BASE, w("big", 1_700_000));
    assert.is(big.status, 500);
    assert.is(big.body.message, "etcdserver: request is too large");
    assert.is(big.body.reason, "");
    // Growing a stored object past the limit is refused the same way, and it stays as it was.
    const grown = await fetch(`${c.url}${BASE}/fits`, {
      method: "PATCH",
      headers: { "Content-Type": "application/merge-patch+json" },
      body: JSON.stringify({ spec: { more: "y".repeat(400_000) } }),
    });
    assert.is(grown.status, 500);
    const kept = await call("GET", `${BASE}/fits`, undefined);
    assert.is(kept.body.spec.more, undefined);
  } finally {
    await c.stop();
  }
});

/** specStore is a store serving Widgets whose spec has the given schema. */
function specStore(spec: JsonObject): Store {
  const s = new Store();
  const schema = { openAPIV3Schema: { type: "object", properties: { spec: { type: "object", ...spec } } } };
  s.create(
    CRD_KEY,
    undefined,
    crd("example.org", "Widget", "widgets", "Namespaced", [{ name: "v1", served: true, storage: true, schema }]) as JsonObject,
  );
  return s;
}

/**
 * ruled is a store serving Widgets whose spec has the given rules over a string s and an integer list l
 * of at most maxItems (bounds kube's cost estimate needs to take the CRD at all).
 */
const ruled = (rules: string[], maxItems = 100): Store =>
  specStore({
    "x-kubernetes-validations": rules.map((rule) => ({ rule })),
    properties: { s: { type: "string", maxLength: 20_000 }, l: { type: "array", maxItems, items: { type: "integer" } } },
  });
const write = (s: Store, spec: JsonObject) => {
  try {
    s.create(typeKeyOf("example.org", "widgets"), "default", {
      apiVersion: "example.org/v1",
      kind: "Widget",
      metadata: { name: "w" },
      spec,
    });
    return "stored";
  } catch (err) {
    return (err as Error).message;
  }
};
const list = (n: number) => Array.from({ length: n }, (_, i) => i);

L("a rule past kube's per-call cost limit is stopped with kube's error, before it runs long or grows the heap", () => {
  const nested = "self.l.all(x, self.l.all(y, self.l.all(z, x + y + z >= 0)))";
  assert.is(write(ruled([nested]), { l: list(10) }), "stored", "a small list is cheap");
  assert.is(
    write(ruled([nested]), { l: list(100) }),
    `Widget.example.org "w" is invalid: spec: Invalid value: "object": 'operation cancelled: actual cost limit exceeded': ` +
      `no further validation rules will be run due to call cost exceeds limit for rule: ${nested}`,
  );
  // A string that would be 400 million characters is refused before it is made.
  const before = process.memoryUsage().heapUsed;
  const blowup = "self.s.replace('a', self.s).size() > 0";
  assert.match(write(ruled([blowup]), { s: "a".repeat(20_000) }), /call cost exceeds limit for rule: self\.s\.replace/);
  assert.ok(process.memoryUsage().heapUsed - before < 100_000_000, "the heap did not grow by the string");
});

L("rules that each fit but together pass the request's budget stop there, with kube's error", () => {
  const rules = Array.from({ length: 25 }, (_, i) => `self.l.all(x, self.l.all(y, x + y >= ${-i}))`);
  assert.is(write(ruled(rules.slice(0, 1), 250), { l: list(250) }), "stored", "one rule fits its call limit");
  assert.is(
    write(ruled(rules, 250), { l: list(250) }),
    'Widget.example.org "w" is invalid: spec: Invalid value: "object": validation failed due to running out of cost budget, no further validation rules will be run',
  );
});

L(
  "10,000 values a 1,000-value enum refuses: answered at once, in a bounded body that says how many more; other clients answered meanwhile",
  async () => {
    const c = await startDevCluster();
    try {
      const values = Array.from({ length: 1000 }, (_, i) => `value-${i}`);
      const schema = { type: "object", properties: { l: { type: "array", items: { type: "string", enum: values } } } };
      const made = await fetch(`${c.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(
          crd("example.org", "Widget", "widgets", "Namespaced", [
            { name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object", properties: { spec: schema } } } },
          ]),
        ),
      });
      assert.is(made.status, 201);
      const started = Date.now();
      const refused = fetch(`${c.url}${BASE}`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: widget("w", JSON.stringify({ l: Array.from({ length: 10_000 }, (_, i) => `bad-${i}`) })),
      });
      // Another client, while that one is validated.
      assert.is((await fetch(`${c.url}/readyz`)).status, 200);
      const r = await refused;
      const text = await r.text();
      const took = Date.now() - started;
      assert.is(r.status, 422);
      assert.ok(text.length < 3 * 1024 * 1024, `a body of ${text.length} bytes`);
      const body = JSON.parse(text) as { message: string; details: { causes: Array<{ field: string; message: string }> } };
      assert.match(
        body.message,
        /^Widget\.example\.org "w" is invalid: \[spec\.l\[0\]: Unsupported value: "bad-0": supported values: "value-0", "value-1", /,
      );
      assert.match(body.message, /\(and \d+ more errors, not shown: the answer holds at most 1 MiB of them\)$/);
      assert.ok(body.details.causes.length >= 1 && body.details.causes.length < 10_000, `${body.details.causes.length} causes`);
      assert.is(body.details.causes[0]!.field, "spec.l[0]");
      assert.ok(took < 5_000, `took ${took} ms`);
    } finally {
      await c.stop();
    }
  },
);

L("a set list is checked for duplicates in linear time: 100,000 items, one repeated, answered with the repeat", () => {
  const s = specStore({
    properties: {
      names: { type: "array", items: { type: "string" }, "x-kubernetes-list-type": "set" },
      things: {
        type: "array",
        items: { type: "object", "x-kubernetes-map-type": "atomic", properties: { a: { type: "integer" }, b: { type: "integer" } } },
        "x-kubernetes-list-type": "set",
      },
    },
  });
  const names = Array.from({ length: 100_000 }, (_, i) => `n${i}`);
  names.push("n7");
  const things = [
    { a: 1, b: 2 },
    { b: 2, a: 1 },
  ];
  assert.throws(
    () =>
      s.create(typeKeyOf("example.org", "widgets"), "default", {
        apiVersion: "example.org/v1",
        kind: "Widget",
        metadata: { name: "w" },
        spec: { names, things },
      }),
    (e: Error) => e.message.includes('spec.names[100000]: Duplicate value: "n7"') && e.message.includes("spec.things[1]: Duplicate value"),
  );
  // An update of such a set is matched to the old one (for ratcheting) by the same keys, not pairwise.
  const key = typeKeyOf("example.org", "widgets");
  const made = s.create(key, "default", {
    apiVersion: "example.org/v1",
    kind: "Widget",
    metadata: { name: "ok" },
    spec: { names: names.slice(0, -1) },
  });
  const reversed = names.slice(0, -1).reverse();
  const updated = s.update(key, "default", "ok", { ...made, spec: { names: [...reversed, "new"] } });
  assert.is(((updated["spec"] as JsonObject)["names"] as string[]).length, 100_001);
});

L(
  "while requests that each spend a whole CEL budget and a pattern's worst case keep it busy, `xfn dev-cluster` answers others and stops on SIGTERM",
  async () => {
    const data = join(scratch, "busy.json");
    const child = spawn(process.execPath, [XFN, "dev-cluster", "--port", "0", "--data", data, "--kubeconfig", `${data}.kubeconfig`]);
    let out = "";
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    const api = await new Promise<ReturnType<typeof kubeFetch>>((resolve, reject) => {
      child.stdout.on("data", (d) => {
        out += d;
        if (/"port":(\d+)/.test(out)) resolve(kubeFetch(`${data}.kubeconfig`));
      });
      child.stderr.on("data", (d) => (out += d));
      void exited.then((code) => reject(new Error(`dev-cluster exited with ${code}: ${out}`)));
    });
    const post = (path: string, body: unknown) =>
      api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    // 25 rules that each fit kube's estimate and per-call limit but together spend the request's budget, and the
    // pattern that once held the event loop for 30 s on 32 bytes (RE2 now: linear in a 100 KB value).
    const rules = Array.from({ length: 25 }, (_, i) => ({ rule: `self.l.all(x, self.l.all(y, x + y >= ${-i}))` }));
    const schema = {
      type: "object",
      properties: { l: { type: "array", maxItems: 250, items: { type: "integer" } }, s: { type: "string", pattern: "^(a+)+$" } },
      "x-kubernetes-validations": rules,
    };
    const made = await post(
      "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
      crd("example.org", "Widget", "widgets", "Namespaced", [
        { name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object", properties: { spec: schema } } } },
      ]),
    );
    assert.is(made.status, 201);
    const heavy = (i: number) =>
      post(BASE, {
        apiVersion: "example.org/v1",
        kind: "Widget",
        metadata: { name: `w${i}` },
        spec: { l: list(250), s: `${"a".repeat(100_000)}!` },
      }).then(
        async (r) => [r.status, ((await r.json()) as { message: string }).message] as const,
        () => [0, "connection closed"] as const,
      );
    const first = await heavy(0);
    assert.is(first[0], 422);
    assert.match(first[1], "validation failed due to running out of cost budget");
    assert.match(first[1], "spec.s: Invalid value:");
    // Four more at once: another client is answered while they are validated, and SIGTERM stops the server.
    const busy = [1, 2, 3, 4].map(heavy);
    const started = Date.now();
    const ready = await api("/readyz");
    assert.is(ready.status, 200);
    assert.ok(Date.now() - started < 20_000, "answered while the heavy requests were being validated");
    child.kill("SIGTERM");
    let limit: NodeJS.Timeout | undefined;
    const code = await Promise.race([exited, new Promise<string>((r) => (limit = setTimeout(() => r("still running"), 20_000)))]);
    clearTimeout(limit);
    if (code === "still running") child.kill("SIGKILL");
    assert.is(code, 0, "stopped on SIGTERM");
    for (const [status] of await Promise.all(busy)) assert.ok(status === 422 || status === 0, `a heavy request was answered ${status}`);
  },
);

L.run();
