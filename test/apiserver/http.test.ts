// The embedded API server over HTTP, driven by the real @kubernetes/client-node
// and the real kubectl.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoordinationV1Api, makeInformer, PatchStrategy, setHeaderOptions, type KubernetesObject } from "@kubernetes/client-node";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse as parseYaml } from "yaml";
import { startDevCluster, type DevCluster } from "../../src/apiserver/server.js";
import { apis, crd, kubeconfigFor, sleep, until, typed } from "../support/cluster.js";
import { needs } from "../support/needs.js";
import { kubeFetch } from "../support/kubefetch.js";
import { XFN } from "../support/spawn.js";

const CRD = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "widgets.example.org" },
  spec: {
    group: "example.org",
    names: { kind: "Widget", plural: "widgets", singular: "widget", listKind: "WidgetList" },
    scope: "Namespaced",
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
      },
    ],
  },
};
const widget = (name: string, labels: Record<string, string> = {}) => ({
  apiVersion: "example.org/v1",
  kind: "Widget",
  metadata: { name, labels },
  spec: { size: 1 },
});
function clients(c: DevCluster) {
  const kc = kubeconfigFor(c);
  return { kc, ...apis(kc) };
}

const H = suite("dev-cluster over HTTP");
/** The tests that drive the real kubectl. */
const HK = needs(H, "kubectl");
let scratch: string;
H.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-dc-"));
});
H.after(() => rmSync(scratch, { recursive: true, force: true }));

H("client-node: CRD, create, list by label, merge patch, status, delete", async () => {
  const c = await startDevCluster();
  try {
    const { crds, objects } = clients(c);
    await crds.createCustomResourceDefinition({ body: typed(CRD) as never });
    const base = { group: "example.org", version: "v1", namespace: "default", plural: "widgets" };
    await objects.createNamespacedCustomObject({ ...base, body: widget("a", { app: "x" }) });
    await objects.createNamespacedCustomObject({ ...base, body: widget("b", { app: "y" }) });
    const list = (await objects.listNamespacedCustomObject({ ...base, labelSelector: "app=x" })) as { items: KubernetesObject[] };
    assert.equal(
      list.items.map((o) => o.metadata?.name),
      ["a"],
    );
    const patched = (await objects.patchNamespacedCustomObject(
      { ...base, name: "a", body: { spec: { size: 7 } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    )) as any;
    assert.is(patched.spec.size, 7);
    const st = (await objects.patchNamespacedCustomObjectStatus(
      { ...base, name: "a", body: { status: { phase: "Ready" } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    )) as any;
    assert.is(st.status.phase, "Ready");
    await objects.deleteNamespacedCustomObject({ ...base, name: "b" });
    try {
      await objects.getNamespacedCustomObject({ ...base, name: "b" });
      assert.unreachable("b still there");
    } catch (err) {
      assert.is((err as { code: number }).code, 404);
    }
  } finally {
    await c.stop();
  }
});

H("schema defaults are stored on write, by the version written: absent fields only, at any depth, not owned by an applier", async () => {
  const c = await startDevCluster();
  try {
    const call = async (method: string, path: string, body?: unknown, type = "application/json") => {
      const r = await fetch(`${c.url}${path}`, {
        method,
        headers: { "content-type": type },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { code: r.status, body: (await r.json()) as any };
    };
    const schema = (mode: string) => ({
      type: "object",
      properties: {
        spec: {
          type: "object",
          properties: {
            mode: { type: "string", default: mode },
            ports: {
              type: "array",
              items: { type: "object", properties: { port: { type: "integer" }, protocol: { type: "string", default: "TCP" } } },
            },
            labels: { type: "object", additionalProperties: { type: "object", properties: { weight: { type: "integer", default: 1 } } } },
          },
        },
      },
    });
    const gadgets = crd("example.org", "Gadget", "gadgets", "Cluster", [
      { name: "v2", served: true, storage: true, schema: { openAPIV3Schema: schema("fast") } },
      { name: "v1", served: true, storage: false, schema: { openAPIV3Schema: schema("legacy") } },
    ]);
    assert.is((await call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", gadgets)).code, 201);
    const gadget = (name: string, spec: unknown) => ({ apiVersion: "example.org/v2", kind: "Gadget", metadata: { name }, spec });

    const a = await call(
      "POST",
      "/apis/example.org/v2/gadgets",
      gadget("a", { ports: [{ port: 80 }, { port: 53, protocol: "UDP" }], labels: { x: {}, y: { weight: 5 } } }),
    );
    assert.is(a.code, 201);
    assert.equal(a.body.spec, {
      mode: "fast",
      ports: [
        { port: 80, protocol: "TCP" },
        { port: 53, protocol: "UDP" },
      ],
      labels: { x: { weight: 1 }, y: { weight: 5 } },
    });
    // Written through v1, the v1 default is stored; every version then reads it.
    const b = await call("POST", "/apis/example.org/v1/gadgets", { ...gadget("b", {}), apiVersion: "example.org/v1" });
    assert.is(b.body.spec.mode, "legacy");
    assert.is((await call("GET", "/apis/example.org/v2/gadgets/b")).body.spec.mode, "legacy");
    // An explicit value stays; a field a merge patch removes comes back as the default.
    const cc = await call("POST", "/apis/example.org/v2/gadgets", gadget("c", { mode: "slow" }));
    assert.is(cc.body.spec.mode, "slow");
    const patched = await call("PATCH", "/apis/example.org/v2/gadgets/c", { spec: { mode: null } }, "application/merge-patch+json");
    assert.is(patched.body.spec.mode, "fast");
    // Server-side apply: the default is stored, but the applier does not own it.
    const d = await call(
      "PATCH",
      "/apis/example.org/v2/gadgets/d?fieldManager=me",
      gadget("d", { ports: [] }),
      "application/apply-patch+yaml",
    );
    assert.is(d.code, 201);
    assert.is(d.body.spec.mode, "fast");
    const mine = d.body.metadata.managedFields.find((f: any) => f.manager === "me");
    assert.equal(mine.fieldsV1, { "f:spec": { "f:ports": {} } });
  } finally {
    await c.stop();
  }
});

H(
  "resourceVersionMatch on a list, as kube-apiserver takes it (apimachinery ValidateListOptions): Exact at an older version is 410, never newer data",
  async () => {
    const c = await startDevCluster();
    const get = async (query: string) => {
      const r = await fetch(`${c.url}/api/v1/namespaces/default/configmaps?${query}`);
      return { status: r.status, body: (await r.json()) as any };
    };
    const post = (name: string) =>
      fetch(`${c.url}/api/v1/namespaces/default/configmaps`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name } }),
      });
    try {
      await post("a");
      const then = (await get("")).body.metadata.resourceVersion as string;
      await post("b");
      const now = (await get("")).body.metadata.resourceVersion as string;
      // Exact at the current version: the list as it is; at an older one: 410, not the newer list.
      const exact = await get(`resourceVersion=${now}&resourceVersionMatch=Exact`);
      assert.is(exact.status, 200);
      assert.equal(
        exact.body.items.map((i: any) => i.metadata.name),
        ["a", "b"],
      );
      const old = await get(`resourceVersion=${then}&resourceVersionMatch=Exact`);
      assert.is(old.status, 410);
      assert.equal([old.body.reason, old.body.message], ["Expired", "The resourceVersion for the provided list is too old."]);
      assert.is((await get(`resourceVersion=${then}&resourceVersionMatch=NotOlderThan`)).body.items.length, 2);
      // Refusals, in kube's words.
      const cases: Array<[string, string]> = [
        [
          "resourceVersionMatch=Exact",
          "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ],
        [
          "resourceVersion=0&resourceVersionMatch=Exact",
          'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
        ],
        [
          "resourceVersion=1&resourceVersionMatch=Latest",
          'resourceVersionMatch: Unsupported value: "Latest": supported values: "Exact", "NotOlderThan", ""',
        ],
        ["watch=true&resourceVersionMatch=NotOlderThan", "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch"],
      ];
      for (const [query, want] of cases) {
        const r = await get(query);
        assert.is(r.status, 422, query);
        assert.is(r.body.message, `ListOptions.meta.k8s.io "" is invalid: ${want}`, query);
      }
    } finally {
      await c.stop();
    }
  },
);

H("an informer sees changes, and after its watch is cut past the history (410 Gone) it relists and carries on", async () => {
  const c = await startDevCluster({ historySize: 5 });
  try {
    const { kc, crds, objects } = clients(c);
    await crds.createCustomResourceDefinition({ body: typed(CRD) as never });
    const base = { group: "example.org", version: "v1", namespace: "default", plural: "widgets" };
    const path = "/apis/example.org/v1/namespaces/default/widgets";
    const informer = makeInformer(kc, path, () => objects.listNamespacedCustomObject(base) as never);
    const seen: string[] = [];
    let connects = 0;
    informer.on("add", (o) => seen.push(`add ${o.metadata?.name}`));
    informer.on("update", (o) => seen.push(`update ${o.metadata?.name}`));
    informer.on("delete", (o) => seen.push(`delete ${o.metadata?.name}`));
    informer.on("connect", () => connects++);
    await informer.start();
    try {
      await objects.createNamespacedCustomObject({ ...base, body: widget("one") });
      await until("add one", () => seen.includes("add one"));
      // Cut every watch and forget the history: the informer's resume gets 410 Gone.
      c.store.closeAllWatches();
      c.store.compact();
      await objects.createNamespacedCustomObject({ ...base, body: widget("two") });
      await until("add two after the relist", () => seen.includes("add two"));
      await objects.deleteNamespacedCustomObject({ ...base, name: "one" });
      await until("delete one", () => seen.includes("delete one"));
      assert.ok(connects >= 2, `the informer reconnected (${connects})`);
      assert.is(informer.list().length, 1);
    } finally {
      await informer.stop();
    }
  } finally {
    await c.stop();
  }
});

H("a watch with allowWatchBookmarks gets BOOKMARK events carrying the current resourceVersion; timeoutSeconds ends it", async () => {
  const c = await startDevCluster({ bookmarkIntervalMs: 50 });
  try {
    const r = await fetch(
      `${c.url}/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&timeoutSeconds=1&resourceVersion=${c.store.rv}`,
    );
    const text = await r.text(); // ends when the server times the watch out
    const events = text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; object: { metadata: { resourceVersion: string } } });
    assert.ok(events.length >= 3, `${events.length} events`);
    assert.ok(events.every((e) => e.type === "BOOKMARK"));
    assert.is(events[0]!.object.metadata.resourceVersion, String(c.store.rv));
  } finally {
    await c.stop();
  }
});

H("a watch without timeoutSeconds is ended too, after 1 to 2 times the minimum (kube-apiserver: 30 to 60 minutes)", async () => {
  const c = await startDevCluster({ watchMinTimeoutMs: 300 });
  try {
    const started = Date.now();
    const r = await fetch(`${c.url}/api/v1/namespaces/default/configmaps?watch=true`);
    assert.is(r.status, 200);
    await r.text(); // ends when the server ends the watch
    const took = Date.now() - started;
    assert.ok(took >= 290 && took < 1500, `ended after ${took} ms`);
  } finally {
    await c.stop();
  }
});

H(
  "a watch whose client stops reading is ended once its unread events pass the bound; watching again from the last version loses nothing",
  async () => {
    const c = await startDevCluster({ watchBufferBytes: 1024 * 1024 });
    const core = `${c.url}/api/v1/namespaces/default/configmaps`;
    const create = (i: number) =>
      fetch(core, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `cm-${i}` }, data: { x: "y".repeat(400_000) } }),
      });
    /** watch reads a watch from rv to its end (or for ms), returning the names it saw and the last resourceVersion. */
    const watch = (rv: string, paused: Promise<void> | undefined, ms: number) =>
      new Promise<{ names: string[]; rv: string; ended: boolean }>((resolve, reject) => {
        const names: string[] = [];
        let last = rv;
        let rest = "";
        const req = request(`${core}?watch=true&resourceVersion=${rv}`, (res) => {
          if (paused) {
            res.pause(); // a client that stops reading
            void paused.then(() => res.resume());
          }
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            const lines = (rest + chunk).split("\n");
            rest = lines.pop()!;
            for (const l of lines) {
              const e = JSON.parse(l);
              names.push(e.object.metadata.name);
              last = e.object.metadata.resourceVersion;
            }
          });
          res.on("end", () => {
            clearTimeout(t);
            resolve({ names, rv: last, ended: true });
          });
        });
        const t = setTimeout(() => {
          req.destroy();
          resolve({ names, rv: last, ended: false });
        }, ms);
        req.on("error", reject);
        req.end();
      });
    try {
      const start = ((await (await fetch(core)).json()) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
      let resume = () => {};
      const stalled = watch(start, new Promise<void>((r) => (resume = r)), 10_000);
      await sleep(100);
      // 60 x 400 KB: far more than the socket buffers and the 1 MiB bound hold.
      for (let i = 0; i < 60; i++) assert.is((await create(i)).status, 201);
      resume();
      const first = await stalled;
      assert.ok(first.ended, "the server ended the watch");
      assert.ok(first.names.length > 0 && first.names.length < 60, `some events, not all: ${first.names.length}`);
      assert.equal(
        first.names,
        Array.from({ length: first.names.length }, (_, i) => `cm-${i}`),
        "in order, none skipped",
      );
      // As a client does after a watch ends: watch again from the last version seen, and get the rest.
      const second = await watch(first.rv, undefined, 3000);
      assert.equal(
        second.names,
        Array.from({ length: 60 - first.names.length }, (_, i) => `cm-${first.names.length + i}`),
      );
    } finally {
      await c.stop();
    }
  },
);

H("with --data, a restart loses nothing", async () => {
  const data = join(scratch, "state.json");
  const c1 = await startDevCluster({ dataFile: data });
  const port = c1.port;
  const a = clients(c1);
  await a.crds.createCustomResourceDefinition({ body: typed(CRD) as never });
  const created = (await a.objects.createNamespacedCustomObject({
    group: "example.org",
    version: "v1",
    namespace: "default",
    plural: "widgets",
    body: widget("kept"),
  })) as any;
  await c1.stop();
  const c2 = await startDevCluster({ dataFile: data, port });
  try {
    const got = (await clients(c2).objects.getNamespacedCustomObject({
      group: "example.org",
      version: "v1",
      namespace: "default",
      plural: "widgets",
      name: "kept",
    })) as any;
    assert.is(got.metadata.uid, created.metadata.uid);
    assert.is(got.metadata.resourceVersion, created.metadata.resourceVersion);
  } finally {
    await c2.stop();
  }
});

H("bad requests get Kubernetes Status errors naming the problem", async () => {
  const c = await startDevCluster();
  try {
    const call = async (method: string, path: string, body?: string, contentType = "application/json") => {
      const r = await fetch(`${c.url}${path}`, {
        method,
        ...(body !== undefined ? { body, headers: { "Content-Type": contentType } } : {}),
      });
      return { code: r.status, body: (await r.json()) as { kind: string; reason: string; message: string } };
    };
    const cases: Array<[Promise<{ code: number; body: { kind: string; reason: string; message: string } }>, number, RegExp]> = [
      [call("POST", "/api/v1/namespaces/default/configmaps", "{not json"), 400, /cannot decode the request body/],
      [
        call("POST", "/api/v1/namespaces/default/configmaps", JSON.stringify({ kind: "Secret", metadata: { name: "x" } })),
        400,
        /kind Secret does not match the resource \(ConfigMap\)/,
      ],
      [
        call("GET", "/api/v1/namespaces/default/configmaps?labelSelector=a%20in%20b"),
        400,
        /^unable to parse requirement: found 'b' expected: '\('$/,
      ],
      [
        call("GET", "/api/v1/namespaces/default/configmaps?labelSelector=app%3Da%3Db"),
        400,
        /^found '=', expected: ',' or 'end of string'$/,
      ],
      [call("GET", "/api/v1/namespaces/default/configmaps?fieldSelector=foo"), 400, /^invalid selector: 'foo'; can't understand 'foo'$/],
      [call("GET", "/api/v1/namespaces/default/configmaps?fieldSelector=spec.x%3D1"), 400, /^field label not supported: spec\.x$/],
      [
        call("PATCH", "/api/v1/namespaces/default/configmaps/nope", "{}", "application/merge-patch+json"),
        404,
        /configmaps "nope" not found/,
      ],
      [call("DELETE", "/api/v1/namespaces/default/configmaps/nope"), 404, /not found/],
      [
        call("POST", "/api/v1/namespaces/missing/configmaps", JSON.stringify({ metadata: { name: "x" } })),
        404,
        /namespaces "missing" not found/,
      ],
      // kube-apiserver's MaxRequestBodyBytes: 3 MiB, for every kind.
      [
        call(
          "POST",
          "/api/v1/namespaces/default/configmaps",
          JSON.stringify({ metadata: { name: "big" }, data: { x: "y".repeat(3 * 1024 * 1024) } }),
        ),
        413,
        /^Request entity too large: limit is 3145728$/,
      ],
    ];
    await call("POST", "/api/v1/namespaces/default/configmaps", JSON.stringify({ metadata: { name: "cm" } }));
    cases.push([
      call("PATCH", "/api/v1/namespaces/default/configmaps/cm", "{}", "text/plain"),
      415,
      /the body of the request was in an unknown format - accepted media types include: application\/merge-patch\+json/,
    ]);
    cases.push([
      call("PATCH", "/api/v1/namespaces/default/configmaps/cm", "data: {a: b}", "application/apply-patch+yaml"),
      422,
      /^PatchOptions\.meta\.k8s\.io "" is invalid: fieldManager: Required value: is required for apply patch$/,
    ]);
    cases.push([
      call("DELETE", "/api/v1/namespaces/default/configmaps/cm?propagationPolicy=Sometimes"),
      400,
      /propagationPolicy "Sometimes"/,
    ]);
    for (const [p, code, msg] of cases) {
      const r = await p;
      assert.is(r.code, code, r.body.message);
      assert.is(r.body.kind, "Status");
      assert.match(r.body.message, msg);
    }
    // A resource no one serves is no Status: kube-apiserver's plain-text 404 (the differential tier's kubectl/crd).
    for (const path of ["/apis/nope.example.org/v1/things", "/api/v1/namespaces/default/nothings"]) {
      const r = await fetch(`${c.url}${path}`);
      assert.equal([r.status, r.headers.get("content-type"), await r.text()], [404, "text/plain; charset=utf-8", "404 page not found\n"]);
    }
  } finally {
    await c.stop();
  }
});

/** raw sends one HTTP request with the headers given as they are (Host included), and reads the answer. */
function raw(port: number, method: string, path: string, headers: Record<string, string>, body?: string) {
  return new Promise<{ code: number; body: any }>((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method, path, headers, setHost: false }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => {
        let body: unknown;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          body = text;
        }
        resolve({ code: res.statusCode ?? 0, body });
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

H("only JSON, YAML and patch bodies, only this server's Host: a web page cannot write to it", async () => {
  const c = await startDevCluster();
  const host = { Host: `127.0.0.1:${c.port}` };
  try {
    const cm = JSON.stringify({ metadata: { name: "from-a-page" } });
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""]) {
      const r = await raw(
        c.port,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        { ...host, ...(type ? { "Content-Type": type } : {}) },
        cm,
      );
      assert.is(r.code, 415, type);
      assert.is(r.body.reason, "UnsupportedMediaType");
    }
    const put = await raw(c.port, "PUT", "/api/v1/namespaces/default/configmaps/x", { ...host, "Content-Type": "text/plain" }, cm);
    assert.is(put.code, 415);
    for (const evil of ["evil.example:80", `evil.example:${c.port}`, "127.0.0.1:1"]) {
      const r = await raw(c.port, "GET", "/api/v1/namespaces/default/configmaps", { Host: evil });
      assert.is(r.code, 403, evil);
      assert.match(r.body.message, /is not this server: use 127\.0\.0\.1:/);
    }
    // No Host at all: Node refuses an HTTP/1.1 request without one before it reaches the server's code.
    assert.is((await raw(c.port, "GET", "/api/v1/namespaces/default/configmaps", {})).code, 400);
    for (const ok of [`localhost:${c.port}`, `127.0.0.1:${c.port}`]) {
      assert.is((await raw(c.port, "GET", "/api/v1/namespaces/default/configmaps", { Host: ok })).code, 200, ok);
    }
    const yaml = await raw(
      c.port,
      "POST",
      "/api/v1/namespaces/default/configmaps",
      { ...host, "Content-Type": "application/yaml" },
      "metadata: {name: from-yaml}\n",
    );
    assert.is(yaml.code, 201);
    const list = await raw(c.port, "GET", "/api/v1/namespaces/default/configmaps", host);
    assert.equal(
      list.body.items.map((i: any) => i.metadata.name),
      ["from-yaml"],
    );
  } finally {
    await c.stop();
  }
});

H("names and apiVersions are checked as kube-apiserver checks them", async () => {
  const c = await startDevCluster();
  try {
    const post = (body: unknown) =>
      fetch(`${c.url}/api/v1/namespaces/default/configmaps`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    const v2 = await post({ apiVersion: "v2", kind: "ConfigMap", metadata: { name: "x" } });
    assert.is(v2.status, 400);
    assert.match(((await v2.json()) as any).message, /the API version in the data \(v2\) does not match the expected API version \(v1\)/);
    for (const name of ["a..b", "A", "a_b", "-a"]) {
      const r = await post({ metadata: { name } });
      assert.is(r.status, 422, name);
      assert.match(((await r.json()) as any).message, /metadata\.name: Invalid value/);
    }
    assert.is((await post({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a.b-c" } })).status, 201);
  } finally {
    await c.stop();
  }
});

H(
  "a list or watch from a resourceVersion newer than any waits for it, then answers 504 Too large resource version, as kube-apiserver does",
  async () => {
    const c = await startDevCluster({ freshWaitMs: 300 });
    try {
      const rv = c.store.rv;
      for (const q of [`?watch=true&resourceVersion=${rv + 100}`, `?resourceVersion=${rv + 100}`]) {
        const t = Date.now();
        const r = await fetch(`${c.url}/api/v1/namespaces/default/configmaps${q}`);
        assert.is(r.status, 504, q);
        assert.ok(Date.now() - t >= 250, "it waited");
        const body = (await r.json()) as any;
        assert.is(body.reason, "Timeout");
        assert.match(body.message, new RegExp(`Too large resource version: ${rv + 100}, current: ${rv}`));
        assert.equal(body.details.causes, [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }]);
      }
      // A version that is reached while the request waits is served.
      const pending = fetch(`${c.url}/api/v1/namespaces/default/configmaps?resourceVersion=${c.store.rv + 1}`);
      await sleep(50);
      await fetch(`${c.url}/api/v1/namespaces/default/configmaps`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ metadata: { name: "arrives" } }),
      });
      assert.is((await pending).status, 200);
    } finally {
      await c.stop();
    }
  },
);

/**
 * kubectlCluster starts `xfn dev-cluster` as its own process, writing a
 * kubeconfig named for suffix, and returns kubectl pointed at it, the server's
 * URL (from its first log line) and stop. It stops the process if it never serves.
 */
async function kubectlCluster(suffix: string) {
  const kubeconfig = join(scratch, `kubeconfig${suffix}`);
  const cache = join(scratch, `kube-cache${suffix}`);
  const child = spawn(process.execPath, [XFN, "dev-cluster", "--kubeconfig", kubeconfig]);
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const stop = () => child.kill("SIGTERM");
  try {
    await until("dev-cluster to serve", () => out.includes("dev-cluster serving"), 15_000);
  } catch (err) {
    stop();
    throw err;
  }
  const flags = ["--kubeconfig", kubeconfig, "--cache-dir", cache];
  const kubectl = (...args: string[]) => execFileSync("kubectl", [...flags, ...args], { encoding: "utf8", stdio: "pipe" });
  return { kubectl, flags, kubeconfig, url: JSON.parse(out.split("\n")[0]!).url as string, stop };
}

H(
  "xfn dev-cluster serves TLS and requires the bearer token of its kubeconfig, as kube-apiserver a credential: 401 without it",
  async () => {
    const kubeconfig = join(scratch, "kubeconfig-auth");
    const child = spawn(process.execPath, [XFN, "dev-cluster", "--kubeconfig", kubeconfig]);
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    try {
      await until("dev-cluster to serve", () => out.includes("dev-cluster serving"), 15_000);
      const line = JSON.parse(out.split("\n")[0]!) as { url: string };
      assert.match(line.url, /^https:\/\/127\.0\.0\.1:\d+$/, "TLS: kubectl sends no credential over plain HTTP");
      const kc = parseYaml(readFileSync(kubeconfig, "utf8")) as any;
      const token = kc.users[0].user.token as string;
      assert.ok(token && token.length >= 32, "a token of its own in the kubeconfig");
      // The same server and CA without the token: another local user's request.
      const anonFile = join(scratch, "kubeconfig-anon");
      writeFileSync(anonFile, JSON.stringify({ ...kc, users: [{ name: kc.users[0].name, user: {} }] }));
      const anon = kubeFetch(anonFile);
      const secrets = "/api/v1/namespaces/default/secrets";
      for (const authorization of [undefined, "Bearer wrong", `Basic ${token}`]) {
        const r = await anon(secrets, authorization ? { headers: { authorization } } : {});
        assert.is(r.status, 401, String(authorization));
        assert.equal(await r.json(), {
          kind: "Status",
          apiVersion: "v1",
          metadata: {},
          status: "Failure",
          message: "Unauthorized",
          reason: "Unauthorized",
          code: 401,
        });
      }
      assert.is((await kubeFetch(kubeconfig)(secrets)).status, 200);
      for (const open of ["/healthz", "/readyz", "/livez", "/version"]) assert.is((await anon(open)).status, 200, open);
    } finally {
      child.kill("SIGTERM");
    }
  },
);

HK("kubectl against xfn dev-cluster: create a CRD, apply server-side, get by label, watch, delete", async () => {
  const { kubectl, flags, stop } = await kubectlCluster("");
  try {
    const crdFile = join(scratch, "crd.json");
    writeFileSync(crdFile, JSON.stringify(CRD));
    assert.match(kubectl("create", "-f", crdFile), /widgets\.example\.org created/);
    const w = join(scratch, "w.yaml");
    writeFileSync(w, "apiVersion: example.org/v1\nkind: Widget\nmetadata: {name: w1, labels: {app: demo}}\nspec: {size: 3}\n");
    const watch = spawn("kubectl", [...flags, "get", "widgets", "-w", "--output-watch-events"]);
    let watched = "";
    watch.stdout.on("data", (d) => (watched += d));
    try {
      await sleep(500);
      assert.match(kubectl("apply", "--server-side", "-f", w), /widget\.example\.org\/w1 serverside-applied/);
      assert.match(kubectl("get", "widgets", "-l", "app=demo", "-o", "name"), /widget\.example\.org\/w1/);
      assert.is(kubectl("get", "widgets", "-l", "app=other", "-o", "name").trim(), "");
      assert.match(kubectl("get", "widget", "w1", "-o", "jsonpath={.spec.size}"), /^3$/);
      assert.match(kubectl("delete", "widget", "w1"), /deleted/);
      await until("kubectl get -w to show ADDED and DELETED", () => /ADDED\s+w1\s/.test(watched) && /DELETED\s+w1\s/.test(watched));
    } finally {
      watch.kill();
    }
  } finally {
    stop();
  }
});

HK("kubectl get prints a CRD's printer columns, kubectl describe shows the object's Events", async () => {
  const { kubectl, kubeconfig, stop } = await kubectlCluster("-cols");
  const api = kubeFetch(kubeconfig);
  try {
    const withColumns = structuredClone(CRD) as any;
    withColumns.spec.versions[0].additionalPrinterColumns = [
      { name: "SYNCED", type: "string", jsonPath: ".status.conditions[?(@.type=='Synced')].status" },
      { name: "READY", type: "string", jsonPath: ".status.conditions[?(@.type=='Ready')].status" },
      { name: "SIZE", type: "integer", jsonPath: ".spec.size" },
      { name: "AGE", type: "date", jsonPath: ".metadata.creationTimestamp" },
    ];
    const file = join(scratch, "crd-cols.json");
    writeFileSync(file, JSON.stringify(withColumns));
    kubectl("create", "-f", file);
    const post = (path: string, body: unknown) =>
      api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const base = "/apis/example.org/v1/namespaces/default/widgets";
    const w = (await (await post(base, widget("w1"))).json()) as any;
    await api(`${base}/w1/status`, {
      method: "PATCH",
      headers: { "Content-Type": "application/merge-patch+json" },
      body: JSON.stringify({
        status: {
          conditions: [
            { type: "Synced", status: "True", reason: "ReconcileSuccess" },
            { type: "Ready", status: "False", reason: "Creating" },
          ],
        },
      }),
    });
    const table = kubectl("get", "widgets");
    assert.match(table, /^NAME\s+SYNCED\s+READY\s+SIZE\s+AGE\s*$/m);
    assert.match(table, /^w1\s+True\s+False\s+1\s+\d+s\s*$/m);

    const event = (name: string, involvedName: string, message: string) => ({
      metadata: { name },
      involvedObject: { apiVersion: "example.org/v1", kind: "Widget", name: involvedName, namespace: "default", uid: w.metadata.uid },
      reason: "ComposeResources",
      message,
      type: "Warning",
      source: { component: "xfn-host" },
      count: 1,
      firstTimestamp: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
      lastTimestamp: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    });
    assert.is((await post("/api/v1/namespaces/default/events", event("w1.1", "w1", "bucket: external name is still held"))).status, 201);
    assert.is((await post("/api/v1/namespaces/default/events", event("other.1", "other", "not about w1"))).status, 201);
    const described = kubectl("describe", "widget", "w1");
    assert.match(described, /Events:[\s\S]*Warning\s+ComposeResources\s+\S+\s+xfn-host\s+bucket: external name is still held/);
    assert.not.match(described, /not about w1/);
  } finally {
    stop();
  }
});

H("events select by involvedObject, as kubectl describe asks; a field selector on a field events do not index is 400", async () => {
  const c = await startDevCluster();
  try {
    const post = (path: string, body: unknown) =>
      fetch(`${c.url}${path}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const event = (name: string, involvedName: string) => ({
      metadata: { name },
      involvedObject: { apiVersion: "example.org/v1", kind: "Widget", name: involvedName, namespace: "default" },
      reason: "ComposeResources",
      message: `about ${involvedName}`,
      type: "Warning",
      source: { component: "xfn-host" },
    });
    assert.is((await post("/api/v1/namespaces/default/events", event("w1.1", "w1"))).status, 201);
    assert.is((await post("/api/v1/namespaces/default/events", event("other.1", "other"))).status, 201);
    const sel = await fetch(`${c.url}/api/v1/events?fieldSelector=involvedObject.name%3Dw1,involvedObject.kind%3DWidget`);
    assert.equal(
      ((await sel.json()) as any).items.map((i: any) => i.metadata.name),
      ["w1.1"],
    );
    const bad = await fetch(`${c.url}/api/v1/namespaces/default/configmaps?fieldSelector=data.x%3Dy`);
    assert.is(bad.status, 400);
    assert.match(((await bad.json()) as any).message, /field label not supported: data\.x/);
  } finally {
    await c.stop();
  }
});

H("Leases (coordination.k8s.io/v1) are served, with resourceVersion conflicts, for leader election", async () => {
  const c = await startDevCluster();
  try {
    const kc = kubeconfigFor(c);
    const leases = kc.makeApiClient(CoordinationV1Api);
    const body = { metadata: { name: "xfn-host" }, spec: { holderIdentity: "a", leaseDurationSeconds: 15 } };
    const made = await leases.createNamespacedLease({ namespace: "default", body });
    const got = await leases.readNamespacedLease({ namespace: "default", name: "xfn-host" });
    assert.is(got.spec?.holderIdentity, "a");
    await leases.replaceNamespacedLease({
      namespace: "default",
      name: "xfn-host",
      body: { ...got, spec: { ...got.spec, holderIdentity: "b" } },
    });
    const stale = await leases
      .replaceNamespacedLease({ namespace: "default", name: "xfn-host", body: { ...made, spec: { ...made.spec, holderIdentity: "c" } } })
      .then(
        () => 0,
        (err: { code?: number }) => err.code,
      );
    assert.is(stale, 409);
    assert.is((await leases.readNamespacedLease({ namespace: "default", name: "xfn-host" })).spec?.holderIdentity, "b");
  } finally {
    await c.stop();
  }
});

HK(
  "kubectl prints the server's refusals as against a real cluster: 422 Invalid with the field, strict decoding of unknown fields",
  async () => {
    const { kubectl, stop } = await kubectlCluster("-invalid");
    try {
      const crdFile = join(scratch, "gadgets-crd.yaml");
      writeFileSync(
        crdFile,
        JSON.stringify(
          crd("example.org", "Gadget", "gadgets", "Namespaced", [
            {
              name: "v1",
              served: true,
              storage: true,
              schema: {
                openAPIV3Schema: {
                  type: "object",
                  properties: { spec: { type: "object", properties: { size: { type: "string", enum: ["small", "large"] } } } },
                },
              },
            },
          ]),
        ),
      );
      kubectl("create", "-f", crdFile);
      const fail = (file: string, obj: unknown) => {
        writeFileSync(file, JSON.stringify(obj));
        try {
          kubectl("create", "-f", file);
        } catch (err) {
          return String((err as { stderr: string }).stderr);
        }
        return "created";
      };
      const gadget = (spec: unknown) => ({
        apiVersion: "example.org/v1",
        kind: "Gadget",
        metadata: { name: "a", namespace: "default" },
        spec,
      });
      assert.is(
        fail(join(scratch, "g1.json"), gadget({ size: "huge" })).trim(),
        'The Gadget "a" is invalid: spec.size: Unsupported value: "huge": supported values: "small", "large"',
      );
      assert.match(
        fail(join(scratch, "g2.json"), gadget({ size: "small", colour: "red" })),
        /Error from server \(BadRequest\): error when creating ".*g2\.json": Gadget in version "v1" cannot be handled as a Gadget: strict decoding error: unknown field "spec\.colour"/,
      );
    } finally {
      stop();
    }
  },
);

H.run();
