// xfn trace: the tree crossplane beta trace prints (its printer's cases ported
// from crossplane/cli 3d72f9316e0703e8e9dbde50e5bc9114544c9199,
// cmd/crossplane/trace/internal/printer/default_test.go), read through
// discovery from recorded API answers shaped as a Crossplane cluster's, and
// what xfn's lifecycle steps record (waits, deletion waits, external names).
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ApiFailure, type Api } from "../../src/trace/api.js";
import { printable, safeJson } from "../../src/terminal.js";
import { safeYamlOf, toYamlStream } from "../../src/render/output.js";
import { parse as parseYaml } from "yaml";
import { Tracer, age, statusOf, table } from "../../src/trace/trace.js";

/** recorded is an Api that answers from a map of paths, as an API server would (404 otherwise). */
function recorded(objects: Record<string, JsonObject>, resources: Record<string, JsonObject[]>): Api & { gets: string[] } {
  const groups = [
    ...new Set(
      Object.keys(resources)
        .filter((gv) => gv.includes("/"))
        .map((gv) => gv.slice(0, gv.lastIndexOf("/"))),
    ),
  ];
  const gets: string[] = [];
  return {
    gets,
    async get(path: string) {
      gets.push(path);
      if (path === "/api") return { kind: "APIVersions", versions: ["v1"] };
      if (path === "/apis")
        return <JsonObject>{
          kind: "APIGroupList",
          groups: groups.map((g) => {
            const versions = Object.keys(resources)
              .filter((gv) => gv.startsWith(`${g}/`))
              .map((gv) => gv.slice(g.length + 1));
            return {
              name: g,
              versions: versions.map((v) => ({ groupVersion: `${g}/${v}`, version: v })),
              preferredVersion: { version: versions[0] },
            };
          }),
        };
      const gv = /^\/apis\/([^/]+\/[^/]+)$/.exec(path)?.[1] ?? (/^\/api\/([^/]+)$/.exec(path) ? "v1" : undefined);
      if (gv && resources[gv]) return { kind: "APIResourceList", groupVersion: gv, resources: resources[gv]! };
      const o = objects[path];
      if (o) return structuredClone(o);
      throw new ApiFailure(404, `the server could not find the requested resource`);
    },
  };
}

const cond = (type: string, status: string, reason = "", message = ""): JsonObject => ({
  type,
  status,
  ...(reason ? { reason } : {}),
  ...(message ? { message } : {}),
});

const res = (kind: string, plural: string, namespaced: boolean, shortNames: string[] = []): JsonObject => ({
  name: plural,
  singularName: kind.toLowerCase(),
  kind,
  namespaced,
  shortNames,
  verbs: ["get", "list"],
});

const T = suite("xfn trace");

T("crossplane's printer case ResourceWithChildren, read through discovery and resourceRefs", async () => {
  const G = "test.crossplane.io/v1";
  const o = (
    kind: string,
    name: string,
    conds: JsonObject[],
    extra: { ns?: string; resource?: string; refs?: Array<[string, string]> } = {},
  ) => ({
    apiVersion: G,
    kind,
    metadata: {
      name,
      ...(extra.ns ? { namespace: extra.ns } : {}),
      ...(extra.resource ? { annotations: { "crossplane.io/composition-resource-name": extra.resource } } : {}),
    },
    spec: extra.refs ? { crossplane: { resourceRefs: extra.refs.map(([k, n]) => ({ apiVersion: G, kind: k, name: n })) } } : {},
    status: { conditions: conds },
  });
  const at = (plural: string, name: string, ns?: string) => `/apis/${G}${ns ? `/namespaces/${ns}` : ""}/${plural}/${name}`;
  const api = recorded(
    {
      [at("objectstorages", "test-resource", "default")]: o(
        "ObjectStorage",
        "test-resource",
        [cond("Synced", "True"), cond("Ready", "True")],
        {
          ns: "default",
          refs: [["XObjectStorage", "test-resource-hash"]],
        },
      ),
      [at("xobjectstorages", "test-resource-hash")]: o(
        "XObjectStorage",
        "test-resource-hash",
        [cond("Synced", "True"), cond("Ready", "True")],
        {
          refs: [
            ["Bucket", "test-resource-bucket-hash"],
            ["User", "test-resource-user-hash"],
          ],
        },
      ),
      [at("buckets", "test-resource-bucket-hash")]: o(
        "Bucket",
        "test-resource-bucket-hash",
        [cond("Synced", "True"), cond("Ready", "True")],
        {
          resource: "one",
          refs: [
            ["User", "test-resource-child-1-bucket-hash"],
            ["User", "test-resource-child-mid-bucket-hash"],
            ["User", "test-resource-child-2-bucket-hash"],
          ],
        },
      ),
      [at("users", "test-resource-child-1-bucket-hash")]: o(
        "User",
        "test-resource-child-1-bucket-hash",
        [
          cond("Synced", "True"),
          cond(
            "Ready",
            "False",
            "SomethingWrongHappened",
            "Error with bucket child 1: Sint eu mollit tempor ad minim do commodo irure. Magna labore irure magna. Non cillum id nulla. Anim culpa do duis consectetur.",
          ),
        ],
        { resource: "two" },
      ),
      [at("users", "test-resource-child-mid-bucket-hash")]: o(
        "User",
        "test-resource-child-mid-bucket-hash",
        [cond("Synced", "False", "CantSync", "Sync error with bucket child mid"), cond("Ready", "True", "AllGood")],
        { resource: "three" },
      ),
      [at("users", "test-resource-child-2-bucket-hash")]: o(
        "User",
        "test-resource-child-2-bucket-hash",
        [cond("Synced", "True"), cond("Ready", "False", "SomethingWrongHappened", "Error with bucket child 2")],
        { resource: "four", refs: [["User", "test-resource-child-2-1-bucket-hash"]] },
      ),
      [at("users", "test-resource-child-2-1-bucket-hash")]: o("User", "test-resource-child-2-1-bucket-hash", [cond("Synced", "True")]),
      [at("users", "test-resource-user-hash")]: o("User", "test-resource-user-hash", [cond("Ready", "True"), cond("Synced", "Unknown")]),
    },
    {
      [G]: [
        res("ObjectStorage", "objectstorages", true),
        res("XObjectStorage", "xobjectstorages", false),
        res("Bucket", "buckets", false),
        res("User", "users", false),
      ],
    },
  );
  const tree = await new Tracer(api, { wide: false }).trace("objectstorage", "test-resource");
  // crossplane/cli's expected output, as its test has it (there without AGE: these objects have no creationTimestamp).
  const want = `
NAME                                                   SYNCED    READY   STATUS
ObjectStorage/test-resource (default)                  True      True    
└─ XObjectStorage/test-resource-hash                   True      True    
   ├─ Bucket/test-resource-bucket-hash                 True      True    
   │  ├─ User/test-resource-child-1-bucket-hash        True      False   SomethingWrongHappened: ...rure magna. Non cillum id nulla. Anim culpa do duis consectetur.
   │  ├─ User/test-resource-child-mid-bucket-hash      False     True    CantSync: Sync error with bucket child mid
   │  └─ User/test-resource-child-2-bucket-hash        True      False   SomethingWrongHappened: Error with bucket child 2
   │     └─ User/test-resource-child-2-1-bucket-hash   True      -       
   └─ User/test-resource-user-hash                     Unknown   True    
`;
  assert.is(`\n${table(tree, { wide: false, age: false })}`, want);
  const wideTree = await new Tracer(api, { wide: true }).trace("objectstorages.test.crossplane.io", "test-resource", "default");
  const wantWide = `
NAME                                                   RESOURCE   SYNCED    READY   STATUS
ObjectStorage/test-resource (default)                             True      True    
└─ XObjectStorage/test-resource-hash                              True      True    
   ├─ Bucket/test-resource-bucket-hash                 one        True      True    
   │  ├─ User/test-resource-child-1-bucket-hash        two        True      False   SomethingWrongHappened: Error with bucket child 1: Sint eu mollit tempor ad minim do commodo irure. Magna labore irure magna. Non cillum id nulla. Anim culpa do duis consectetur.
   │  ├─ User/test-resource-child-mid-bucket-hash      three      False     True    CantSync: Sync error with bucket child mid
   │  └─ User/test-resource-child-2-bucket-hash        four       True      False   SomethingWrongHappened: Error with bucket child 2
   │     └─ User/test-resource-child-2-1-bucket-hash              True      -       
   └─ User/test-resource-user-hash                                Unknown   True    
`;
  assert.is(`\n${table(wideTree, { wide: true, age: false, xfn: false })}`, wantWide);
});

T("STATUS as crossplane trace's getResourceStatus chooses it", () => {
  const o = (conds: JsonObject[], deleting = false): JsonObject => ({
    metadata: deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {},
    status: { conditions: conds },
  });
  const cases: Array<[string, JsonObject, { synced: string; ready: string; status: string }]> = [
    [
      "both true: the Ready reason",
      o([cond("Synced", "True", "ReconcileSuccess"), cond("Ready", "True", "Available")]),
      { synced: "True", ready: "True", status: "Available" },
    ],
    ["deleting wins", o([cond("Synced", "False", "X", "y")], true), { synced: "False", ready: "-", status: "Deleting" }],
    [
      "Synced not True first",
      o([cond("Synced", "False", "ReconcileError", "boom"), cond("Ready", "False", "Creating", "c")]),
      { synced: "False", ready: "False", status: "ReconcileError: boom" },
    ],
    [
      "then Ready",
      o([cond("Synced", "True"), cond("Ready", "False", "Creating", "wait")]),
      { synced: "True", ready: "False", status: "Creating: wait" },
    ],
    ["none", o([]), { synced: "-", ready: "-", status: "" }],
  ];
  for (const [name, obj, want] of cases) assert.equal(statusOf(obj, false), want, name);
  assert.is(age(undefined), "-");
  assert.equal([age(5), age(65), age(3600 * 5 + 180), age(86400 * 2 + 3600 * 4)], ["5s", "1m5s", "5h3m", "2d4h"]);
});

T("xfn's records: a resource that waits (and one not created yet), external names, and what holds a deletion", async () => {
  const G = "example.org/v1";
  const P = "ec2.example.org/v1";
  const xr = {
    apiVersion: G,
    kind: "XNet",
    metadata: {
      name: "net",
      creationTimestamp: "2026-11-26T09:00:00Z",
      deletionTimestamp: "2026-11-26T09:10:00Z",
      finalizers: ["composite.apiextensions.crossplane.io"],
    },
    spec: {
      crossplane: {
        resourceRefs: [
          { apiVersion: P, kind: "VPC", name: "net-vpc" },
          { apiVersion: P, kind: "Subnet", name: "net-subnet" },
          { apiVersion: P, kind: "Gateway", name: "net-gone" },
        ],
      },
    },
    status: {
      conditions: [cond("Ready", "False", "Deleting", "deleting: waiting for subnet (finalizers: ec2/held)")],
      externalNames: { vpc: "vpc-0abc" },
      waiting: { route: { for: ["subnet:status.atProvider.id"], since: "2026-11-26T09:01:00Z" } },
      deletion: { order: [["subnet"], ["vpc"]] },
    },
  };
  const mr = (kind: string, name: string, resource: string, extra: JsonObject = {}) => ({
    apiVersion: P,
    kind,
    metadata: {
      name,
      creationTimestamp: "2026-11-26T09:00:30Z",
      annotations: { "crossplane.io/composition-resource-name": resource },
      ...extra,
    },
    status: { conditions: [cond("Synced", "True", "ReconcileSuccess"), cond("Ready", "True", "Available")] },
  });
  const api = recorded(
    {
      "/apis/example.org/v1/xnets/net": xr,
      "/apis/ec2.example.org/v1/vpcs/net-vpc": mr("VPC", "net-vpc", "vpc"),
      "/apis/ec2.example.org/v1/subnets/net-subnet": mr("Subnet", "net-subnet", "subnet", {
        deletionTimestamp: "2026-11-26T09:10:01Z",
        finalizers: ["ec2/held"],
      }),
    },
    {
      [G]: [res("XNet", "xnets", false)],
      [P]: [res("VPC", "vpcs", false), res("Subnet", "subnets", false), res("Gateway", "gateways", false)],
    },
  );
  const now = () => new Date("2026-11-26T09:12:00Z");
  const tree = await new Tracer(api, { wide: true, now }).trace("XNet", "net");
  assert.equal(
    tree.children.map((c) => [c.kind, c.name, c.externalName ?? "", c.deletion ?? "", c.waitingFor ?? [], c.error ?? ""]),
    [
      ["VPC", "net-vpc", "vpc-0abc", "deleted after subnet", [], ""],
      ["Subnet", "net-subnet", "", "deleting: held by finalizers ec2/held", [], ""],
      ["Gateway", "net-gone", "", "", [], 'gateways.ec2.example.org "net-gone" not found'],
      ["", "route", "", "", ["subnet:status.atProvider.id"], ""],
    ],
  );
  const out = table(tree, { wide: true });
  assert.match(out, /^NAME\s+RESOURCE\s+SYNCED\s+READY\s+AGE\s+EXTERNAL-NAME\s+WAITS\s+STATUS\n/);
  assert.match(out, /\n├─ VPC\/net-vpc\s+vpc\s+True\s+True\s+11m30s\s+vpc-0abc\s+deleted after subnet\s+Available\n/);
  assert.match(out, /\n├─ Gateway\/net-gone\s+-\s+-\s+-\s+-\s+Error: gateways\.ec2\.example\.org "net-gone" not found\n/);
  assert.match(
    out,
    /\n└─ \(route\)\s+route\s+-\s+-\s+-\s+for subnet:status\.atProvider\.id\s+Waiting: not created until subnet:status\.atProvider\.id \(since 2026-11-26T09:01:00Z\)\n/,
  );
  const short = table(tree, { wide: false });
  assert.match(short, /\n├─ Subnet\/net-subnet\s+True\s+True\s+11m30s\s+Deleting; deleting: held by finalizers ec2\/held\n/);
});

T("printable: every control character shown as a visible escape; text and non-Latin letters as they are", () => {
  const cases: [string, string, string][] = [
    ["plain text", "Available: ready", "Available: ready"],
    ["non-Latin letters and emoji stay", "bücket 東京 🙂", "bücket 東京 🙂"],
    ["ESC as kubectl shows it", "\x1b[31mred\x1b[0m", "^[[31mred^[[0m"],
    ["an OSC title with its bell", "\x1b]0;t\x07", "^[]0;t\\x07"],
    ["newline, carriage return, tab", "a\nb\rc\td", "a\\nb\\rc\\td"],
    ["NUL, DEL, a C1 CSI", "\x00\x7f\x9b", "\\x00\\x7f\\x9b"],
    ["bidi overrides and isolates", "\u202eabc\u2066", "\\u202eabc\\u2066"],
  ];
  for (const [name, input, want] of cases) assert.is(printable(input), want, name);
  assert.is(printable("a\n\tb\x1b", { lines: true }), "a\n\tb^[", "lines keeps newlines and tabs");
});

T("machine output (JSON, YAML) escapes C1 and bidi controls, and reads back as the same value", () => {
  const hostile = { msg: "ok\u202etxt.exe \u009b31m red \u0085 next \u2066iso\u2069 \u001b[2J", plain: "letters ÄÖ 日本" };
  const json = safeJson(JSON.stringify(hostile, null, 2));
  // eslint-disable-next-line no-control-regex -- the controls are what is looked for
  assert.not.match(json, /[\u007f-\u009f\u202a-\u202e\u2066-\u2069\u001b]/);
  assert.match(json, /\\u202e/);
  assert.equal(JSON.parse(json), hostile);
  const yaml = safeYamlOf(hostile);
  // eslint-disable-next-line no-control-regex -- the controls are what is looked for
  assert.not.match(yaml, /[\u007f-\u009f\u202a-\u202e\u2066-\u2069\u001b]/);
  assert.equal(parseYaml(yaml), hostile);
  assert.match(yaml, /plain: letters ÄÖ 日本/, "other text stays as it is");
  // render's stream writer, the same.
  const stream = toYamlStream([hostile]);
  // eslint-disable-next-line no-control-regex -- the controls are what is looked for
  assert.not.match(stream, /[\u007f-\u009f\u202a-\u202e\u2066-\u2069\u001b]/);
  assert.equal(parseYaml(stream.replace(/^---\n/, "")), hostile);
});

T("bad input: an unknown kind, a missing XR, an ambiguous name, each one clear line", async () => {
  const api = recorded(
    {},
    { "a.example.org/v1": [res("Widget", "widgets", false)], "b.example.org/v1": [res("Widget", "widgets", false)] },
  );
  const t = new Tracer(api);
  const msg = async (p: Promise<unknown>) =>
    p.then(
      () => "resolved",
      (e: Error) => e.message,
    );
  assert.is(await msg(t.trace("nope", "x")), 'the server doesn\'t have a resource type "nope"');
  assert.is(
    await msg(t.trace("widgets", "x")),
    '"widgets" is ambiguous: widgets.a.example.org, widgets.b.example.org; name the group (widgets.a.example.org)',
  );
  assert.is(await msg(t.trace("widgets.a.example.org", "x")), 'widgets.a.example.org "x" not found');
});

T.run();
