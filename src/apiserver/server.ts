// The embedded API server's HTTP face: enough of the Kubernetes API for
// kubectl and @kubernetes/client-node (discovery, get, list with selectors,
// watch with bookmarks and 410 Gone, create, update, status subresource,
// merge/JSON/apply patches, delete with propagation), on loopback.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { RequestCounts } from "./metrics.js";
import { authorized, PUBLIC, servingCertificate } from "./auth.js";
import { parseBody, readBody } from "./body.js";
import type { AddressInfo } from "node:net";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { stringify } from "yaml";
import { checkMetaTypes, decodeData } from "./meta.js";
import { typedErrors, typedMessage } from "./typed.js";
import { apply, jsonPatch, mergePatch } from "./patch.js";
import { kubeTimestamp } from "../sdk/object.js";
import { parseFieldSelector, parseSelector } from "./selector.js";
import { table, tableVersion } from "./table.js";
import { Journal } from "./persist.js";
import { Pages } from "./pages.js";
import { checkDepth, int64Param, resourceVersionParam } from "./query.js";
import { isReview, review, reviewResources } from "./reviews.js";
import { discovery, groups } from "./discovery.js";
import { document as openapiDocument, root as openapiRoot } from "./openapi.js";
import { ApiError } from "./errors.js";
import { forbidden, notSupported, OMIT, required, type FieldError } from "../schema/fielderr.js";
import { refusal } from "./refusal.js";
import { CRD_KEY, Store, typeKeyOf, type Writer } from "./store.js";
import { closeMatcher, offThread } from "../schema/offthread.js";
import {
  apiVersionOf,
  asVersion,
  checkContentType,
  checkHost,
  checkKind,
  contentType,
  decoded,
  warned,
  type Call,
  type Route,
} from "./request.js";
import { ensureMeta, type Watcher } from "./types.js";
import { isObject } from "../json.js";
import { messageOf } from "../sdk/errors.js";

/** DevClusterOptions configure an embedded API server. */
export interface DevClusterOptions {
  /** Port on 127.0.0.1; 0 picks a free one. */
  port?: number;
  /** File to persist state to (with a write-ahead log beside it), so a restart, or kill -9, loses no acknowledged write. */
  dataFile?: string;
  /** Log entries after which the state is written as a new snapshot (tests make it small). */
  compactAfter?: number;
  /** How long a list or watch from a resourceVersion newer than any waits for it. Default 3 s, as kube-apiserver. */
  freshWaitMs?: number;
  /** Events a watch can resume from; older versions get 410 Gone. */
  historySize?: number;
  /** How often watches with allowWatchBookmarks get a BOOKMARK. Default 10 s. */
  bookmarkIntervalMs?: number;
  /** A watch without timeoutSeconds ends after 1 to 2 times this. Default 30 minutes, kube-apiserver's --min-request-timeout. */
  watchMinTimeoutMs?: number;
  /**
   * A watch whose client leaves more than this many bytes of events unread is
   * ended, as kube-apiserver ends a watcher that does not keep up, so a client
   * that stops reading costs bounded memory. The events that replay a watch's
   * start are not counted. Default 16 MiB.
   */
  watchBufferBytes?: number;
  /**
   * A bearer token every request must carry (Authorization: Bearer), as
   * kube-apiserver requires a credential: written into kubeconfig(). Without
   * one, any local user could read every namespace, Secrets included. The
   * health and version endpoints answer without it, as kube's public-info
   * ones do. With a token the server speaks TLS, on a certificate made at
   * start whose CA kubeconfig() carries: kubectl sends no credential over
   * plain HTTP. xfn dev-cluster and xfn host --embedded make a random one.
   */
  token?: string;
}

/** DevCluster is a running embedded API server. */
export interface DevCluster {
  readonly url: string;
  readonly port: number;
  readonly store: Store;
  /** kubeconfig returns a kubeconfig (YAML) for this server. */
  kubeconfig(): string;
  /** stop ends every watch, closes the server and writes state out. */
  stop(): Promise<void>;
  /** journal is the persistence of a server started with dataFile. */
  readonly journal: Journal | undefined;
}

/** notServed is kube-apiserver's answer to a path no handler serves: a plain-text 404, no Status. */
const notServed = (message: string) => Object.assign(new ApiError(404, "NotFound", message), { text: "404 page not found\n" });

function status(res: ServerResponse, err: ApiError): void {
  if (err.text !== undefined) {
    res.writeHead(err.code, { "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff" });
    res.end(err.text);
    return;
  }
  const details = err.details;
  send(res, err.code, {
    kind: "Status",
    apiVersion: "v1",
    metadata: err.metadata ?? {},
    status: "Failure",
    message: err.message,
    reason: err.reason,
    ...(details ? { details } : {}),
    code: err.code,
  });
}

function send(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

function route(store: Store, path: string): Route | "discovery" | undefined {
  const segs = path.split("/").filter(Boolean).map(decodeURIComponent);
  let group: string;
  let version: string;
  let rest: string[];
  if (segs[0] === "api" && segs.length >= 2) [group, version, rest] = ["", segs[1]!, segs.slice(2)];
  else if (segs[0] === "apis" && segs.length >= 3) [group, version, rest] = [segs[1]!, segs[2]!, segs.slice(3)];
  else return undefined;
  if (rest.length === 0) return "discovery";
  let namespace: string | undefined;
  if (rest[0] === "namespaces" && rest.length >= 3 && !(group === "" && rest.length === 3 && ["status", "finalize"].includes(rest[2]!))) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const type = store.findType(group, version, rest[0]!);
  if (!type) throw notServed(`the server could not find the requested resource (${group ? `${group}/` : ""}${version} ${rest[0]})`);
  if (type.namespaced === false && namespace !== undefined) throw new ApiError(404, "NotFound", `${type.plural} is not namespaced`);
  return {
    group,
    version,
    type,
    ...(namespace !== undefined ? { namespace } : {}),
    ...(rest[1] !== undefined ? { name: rest[1] } : {}),
    ...(rest[2] !== undefined ? { subresource: rest[2] } : {}),
  };
}

/** TOO_LARGE_WAIT_MS is how long a request for a resourceVersion newer than any waits for it, as kube-apiserver's watch cache does. */
const TOO_LARGE_WAIT_MS = 3_000;

/** startDevCluster starts an embedded API server on 127.0.0.1. */
/** Served is what every request's handler works with: the store, and how to answer durably. */
interface Served {
  store: Store;
  /** reply answers once what the answer shows is durable. */
  reply: (res: ServerResponse, code: number, body: unknown) => Promise<void>;
  /** durable resolves once every change so far is on disk. */
  durable: () => Promise<void>;
  /** fresh waits for the store to reach a client's resourceVersion (504 past the wait). */
  fresh: (rv: string | null) => Promise<void>;
  bookmarkMs: number;
  bufferBytes: number;
  watchMinMs: number;
  /** Open watch streams, ended on stop. */
  streams: Set<ServerResponse>;
  /** The lists paged lists continue from. */
  pages: Pages;
  /** The bearer token requests must carry, if any (DevClusterOptions.token). */
  token?: Buffer;
  /** Requests and connections, counted for GET /metrics. */
  counts: RequestCounts;
}

const FIXED: Record<string, (s: Served, req: IncomingMessage, res: ServerResponse) => Promise<void>> = {
  "/healthz": async (_s, _req, res) => void res.end("ok"),
  "/readyz": async (_s, _req, res) => void res.end("ok"),
  "/livez": async (_s, _req, res) => void res.end("ok"),
  "/metrics": async (s, _req, res) => {
    res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4" });
    res.end(s.counts.text());
  },
  "/version": (s, _req, res) => s.reply(res, 200, { major: "1", minor: "31", gitVersion: "v1.31.0-xfn-dev", platform: "linux/amd64" }),
  "/api": (s, req, res) =>
    s.reply(res, 200, {
      kind: "APIVersions",
      versions: ["v1"],
      serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: req.headers.host ?? "" }],
    }),
  "/apis": (s, _req, res) => s.reply(res, 200, groups(s.store)),
  // Each group version's document (openapi.ts): kubectl explain reads them.
  "/openapi/v3": (s, _req, res) => s.reply(res, 200, openapiRoot(s.store.types.values())),
  "/openapi/v2": async (s, req, res) => {
    // kubectl asks for protobuf: an empty body is a valid, empty document.
    if ((req.headers.accept ?? "").includes("protobuf")) {
      res.writeHead(200, { "Content-Type": "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", "Content-Length": 0 });
      return void res.end();
    }
    return s.reply(res, 200, { swagger: "2.0", info: { title: "xfn dev-cluster", version: "v1.31.0" }, paths: {}, definitions: {} });
  },
};

type Verb = "list" | "watch" | "get" | "create" | "update" | "apply" | "patch" | "delete" | "deletecollection";

/** verbOf is what a request asks for, as kube-apiserver names it. */
function verbOf(method: string, c: Call): Verb {
  const collection = c.r.name === undefined;
  if (method === "GET") return !collection ? "get" : c.q.get("watch") === "true" || c.q.get("watch") === "1" ? "watch" : "list";
  if (method === "POST" && collection) return "create";
  if (method === "DELETE" && collection) return "deletecollection";
  if (collection) throw new ApiError(405, "MethodNotAllowed", `${method} is not allowed on a collection`);
  if (method === "PUT") return "update";
  if (method === "PATCH")
    return ["application/apply-patch+yaml", "application/apply-patch+json"].includes(contentType(c.req)) ? "apply" : "patch";
  if (method === "DELETE") return "delete";
  throw new ApiError(405, "MethodNotAllowed", `${method} is not supported`);
}

/**
 * dryRun reads the dryRun query parameter of a write, as kube-apiserver's
 * ValidateDryRun does: absent, a real write; "All" (however often), a dry run;
 * anything else, 422 Invalid on the write's options kind.
 */
function dryRun(c: Call, options: "CreateOptions" | "UpdateOptions" | "PatchOptions" | "DeleteOptions", body?: JsonValue): boolean {
  // A delete's options may come as its body (kubectl sends them so): DeleteOptions.dryRun.
  const inBody = isObject(body) && Array.isArray(body["dryRun"]) ? body["dryRun"].map(String) : [];
  const values = [...c.q.getAll("dryRun"), ...inBody];
  if (values.length === 0) return false;
  if (values.every((v) => v === "All")) return true;
  const go = `[]string{${values.map((v) => JSON.stringify(v)).join(", ")}}`;
  throw refusal("meta.k8s.io", options, "", [
    { type: "FieldValueNotSupported", field: "dryRun", value: OMIT, detail: `${go}: supported values: "All"` },
  ]);
}

/**
 * writer is who makes a write: the request's fieldManager, else the first part
 * of its User-Agent (kube's prefixFromUserAgent: "kubectl" from
 * "kubectl/v1.31.0 (linux/amd64) ..."), through the subresource it names.
 */
function writer(c: Call): Writer {
  const named = c.q.get("fieldManager");
  const agent = [...(c.req.headers["user-agent"] ?? "").split("/")[0]!]
    .filter((ch) => ch >= " " && ch !== "\u007f")
    .join("")
    .slice(0, 128);
  return { manager: named || agent || "unknown", ...(c.r.subresource ? { subresource: c.r.subresource } : {}) };
}

/** selectors reads a list's or watch's label and field selectors, refusing malformed ones. */
function selectors(c: Call) {
  let labels;
  try {
    labels = parseSelector(c.q.get("labelSelector") ?? "");
  } catch (err) {
    throw new ApiError(400, "BadRequest", messageOf(err));
  }
  let fields;
  try {
    fields = parseFieldSelector(c.q.get("fieldSelector") ?? "", c.r.type.kind, c.r.type.group);
  } catch (err) {
    throw new ApiError(400, "BadRequest", messageOf(err));
  }
  return { labels, fields };
}

/**
 * listMatch is a list's resourceVersionMatch, checked as kube-apiserver checks
 * ListOptions (apimachinery's ValidateListOptions): a refusal is a 422 naming
 * the field, Exact or NotOlderThan otherwise.
 */
function listMatch(q: URLSearchParams, rv: string | null, token: string | null): "Exact" | "NotOlderThan" | undefined {
  const match = q.get("resourceVersionMatch");
  if (!match) return undefined;
  const errs: FieldError[] = [];
  if (!rv) errs.push(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"));
  if (token) errs.push(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
  if (match !== "Exact" && match !== "NotOlderThan") errs.push(notSupported("resourceVersionMatch", match, ["Exact", "NotOlderThan", ""]));
  if (match === "Exact" && rv === "0")
    errs.push(forbidden("resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'));
  if (errs.length) throw refusal("meta.k8s.io", "ListOptions", "", errs);
  return match as "Exact" | "NotOlderThan";
}

/** typedItem is an item of a built-in kind's list: the object without its apiVersion and kind. */
function typedItem(o: JsonObject): JsonObject {
  const { apiVersion: _a, kind: _k, ...rest } = o;
  return rest;
}

const VERBS: Record<Verb, (s: Served, c: Call) => Promise<void>> = {
  async list(s, c) {
    const { labels, fields } = selectors(c);
    const { r, q, res } = c;
    const limit = int64Param(q, "limit") ?? 0;
    const token = q.get("continue") || null;
    const rv = resourceVersionParam(q);
    const match = listMatch(q, rv, token);
    if (token !== null && rv) throw new ApiError(400, "BadRequest", "specifying resource version is not allowed when using continue");
    await s.fresh(rv);
    // Exact: the list as it was at rv. Only the current state is kept, so an older version is gone,
    // as it is from kube-apiserver once etcd has compacted it.
    if (match === "Exact" && Number(rv) < s.store.rv)
      throw new ApiError(410, "Expired", `The resourceVersion for the provided list is too old.`);
    const page = s.pages.page({
      scope: [c.typeKey, r.namespace ?? "", q.get("labelSelector") ?? "", q.get("fieldSelector") ?? ""].join("\n"),
      limit,
      token,
      rv: s.store.rv,
      exact: labels.length === 0 && fields.length === 0,
      list: () => s.store.listKeyed(c.typeKey, r.namespace, labels, fields),
    });
    // A built-in kind's list holds its items without apiVersion and kind, as kube-apiserver's typed lists do; a custom
    // resource's items keep theirs.
    const items = page.items.map((o) => (r.type.crd ? asVersion(o, r) : typedItem(asVersion(o, r))));
    const metadata = {
      resourceVersion: String(page.resourceVersion),
      ...(page.continue ? { continue: page.continue } : {}),
      ...(page.remainingItemCount !== undefined ? { remainingItemCount: page.remainingItemCount } : {}),
    };
    if (c.tv) return s.reply(res, 200, table(r.type, r.version, c.tv, items, metadata, q.get("includeObject"), new Date()));
    return s.reply(res, 200, { apiVersion: apiVersionOf(r), kind: r.type.listKind, metadata, items });
  },
  watch,
  async get(s, c) {
    const { r, q, res, tv } = c;
    resourceVersionParam(q);
    const o = asVersion(s.store.get(c.typeKey, r.namespace, r.name!), r);
    if (tv)
      return s.reply(
        res,
        200,
        table(
          r.type,
          r.version,
          tv,
          [o],
          { resourceVersion: String(ensureMeta(o)["resourceVersion"]) },
          q.get("includeObject"),
          new Date(),
        ),
      );
    return s.reply(res, 200, o);
  },
  async create(s, c) {
    const text = await readBody(c.req);
    // Parsed on each run: a run the store stopped (writing) may have defaulted the body.
    const created = await writing(c, () =>
      s.store.create(c.typeKey, c.r.namespace, decoded(c, checkKind(c.r, parseBody(text, contentType(c.req) === "application/yaml"))), {
        warnings: c.warnings,
        dryRun: dryRun(c, "CreateOptions"),
        manager: writer(c),
      }),
    );
    return s.reply(warned(c), 201, asVersion(created, c.r));
  },
  async update(s, c) {
    const text = await readBody(c.req);
    const updated = await writing(c, () =>
      s.store.update(
        c.typeKey,
        c.r.namespace,
        c.r.name!,
        decoded(c, checkKind(c.r, parseBody(text, contentType(c.req) === "application/yaml"))),
        {
          status: c.isStatus,
          finalize: c.r.subresource === "finalize",
          warnings: c.warnings,
          dryRun: dryRun(c, "UpdateOptions"),
          manager: writer(c),
        },
      ),
    );
    return s.reply(warned(c), 200, asVersion(updated, c.r));
  },
  apply: serverSideApply,
  async patch(s, c) {
    const { r } = c;
    const ct = contentType(c.req);
    const text = await readBody(c.req);
    // Run again, on what the store then holds, when its validation ran long matches off the thread (offthread.ts).
    const updated = await writing(c, () => {
      const patch = parseBody(text, false);
      // The object as the request's version reads it: a patch made through another
      // served version than the one it was written in names that version.
      const current = asVersion(s.store.get(c.typeKey, r.namespace, r.name!), r);
      let next: JsonObject;
      if (ct === "application/merge-patch+json" || ct === "application/strategic-merge-patch+json")
        next = mergePatch(current, patch) as JsonObject;
      else if (ct === "application/json-patch+json") {
        next = jsonPatch(current, patch);
        // A JSON patch can add a deep value at a deep path: deeper than either. (A merge patch or an apply
        // puts each value where it was, so it nests no deeper than they do. managedFields, the server's
        // own mirror of the fields a few levels down, are not counted.)
        const meta = isObject(next["metadata"]) ? { ...next["metadata"], managedFields: null } : next["metadata"];
        checkDepth(meta === undefined ? next : { ...next, metadata: meta }, "the object");
      } else throw new ApiError(415, "UnsupportedMediaType", `the patch content type ${JSON.stringify(ct)} is not supported`);
      // A patch that names no resourceVersion never conflicts.
      const named = isObject(patch) && isObject(patch["metadata"]) && patch["metadata"]["resourceVersion"] !== undefined;
      if (!named) ensureMeta(next)["resourceVersion"] = ensureMeta(current)["resourceVersion"]!;
      return s.store.update(c.typeKey, r.namespace, r.name!, decoded(c, checkKind(r, next)), {
        status: c.isStatus,
        warnings: c.warnings,
        dryRun: dryRun(c, "PatchOptions"),
        manager: writer(c),
      });
    });
    return s.reply(warned(c), 200, asVersion(updated, r));
  },
  async delete(s, c) {
    const text = await readBody(c.req);
    const opts = text.trim() ? parseBody(text, false) : {};
    const policy = (c.q.get("propagationPolicy") ?? (isObject(opts) ? opts["propagationPolicy"] : undefined) ?? "Background") as string;
    if (!["Foreground", "Background", "Orphan"].includes(policy))
      throw new ApiError(400, "BadRequest", `propagationPolicy ${JSON.stringify(policy)} is not one of Foreground, Background, Orphan`);
    const pre = isObject(opts) && isObject(opts["preconditions"]) ? opts["preconditions"]["uid"] : undefined;
    const last = s.store.delete(c.typeKey, c.r.namespace, c.r.name!, policy as "Foreground", typeof pre === "string" ? pre : undefined, {
      dryRun: dryRun(c, "DeleteOptions", opts),
    });
    // Held by finalizers (or a namespace's termination): the object as it stays. Gone at once: a Status naming it, as
    // kube-apiserver's store answers for every kind served here (k8s.io/apiserver v0.36.3, registry/generic/registry
    // store.go finalizeDelete; none of these kinds sets ReturnDeletedObject).
    const m = ensureMeta(last);
    // A CRD is answered as it is: kube-apiserver holds it back (its customresourcecleanup finalizer) while its objects
    // go, and answers with it; here it goes at once, with them.
    if (m["deletionTimestamp"] === undefined && c.typeKey !== CRD_KEY)
      return s.reply(c.res, 200, {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Success",
        details: { name: c.r.name!, ...(c.r.type.group ? { group: c.r.type.group } : {}), kind: c.r.type.plural, uid: m["uid"] ?? "" },
      });
    return s.reply(c.res, 200, asVersion(last, c.r));
  },
  /** deletecollection deletes every object a list with the same selectors would hold, and answers with them as a list. */
  async deletecollection(s, c) {
    const { labels, fields } = selectors(c);
    const text = await readBody(c.req);
    const opts = text.trim() ? parseBody(text, false) : {};
    const policy = (c.q.get("propagationPolicy") ?? (isObject(opts) ? opts["propagationPolicy"] : undefined) ?? "Background") as string;
    if (!["Foreground", "Background", "Orphan"].includes(policy))
      throw new ApiError(400, "BadRequest", `propagationPolicy ${JSON.stringify(policy)} is not one of Foreground, Background, Orphan`);
    const dry = dryRun(c, "DeleteOptions", opts);
    const { r } = c;
    const items = s.store.list(c.typeKey, r.namespace, labels, fields).map((o) => {
      const m = ensureMeta(o);
      const ns = typeof m["namespace"] === "string" ? m["namespace"] : undefined;
      return asVersion(s.store.delete(c.typeKey, ns, String(m["name"]), policy as "Foreground", undefined, { dryRun: dry }), r);
    });
    return s.reply(c.res, 200, {
      apiVersion: apiVersionOf(r),
      kind: r.type.listKind,
      metadata: { resourceVersion: String(s.store.rv) },
      items,
    });
  },
};

/** serverSideApply merges an applied configuration into the object (creating it), by field managers. */
/** writing runs a store write with its long matches off the serving thread (offthread.ts); a rerun's warnings replace the last one's. */
async function writing<T>(c: Call, write: (again: boolean) => T): Promise<T> {
  const from = c.warnings.length;
  let runs = 0;
  return offThread(() => {
    c.warnings.length = from;
    return write(runs++ > 0);
  });
}

async function serverSideApply(s: Served, c: Call): Promise<void> {
  const { r, q } = c;
  const text = await readBody(c.req);
  const manager = q.get("fieldManager");
  if (!manager) throw refusal("meta.k8s.io", "PatchOptions", "", [required("fieldManager", "is required for apply patch")]);
  const dry = dryRun(c, "PatchOptions");
  const first = checkKind(r, parseBody(text, true));
  const applied = first;
  // The applied configuration is read against the schema before anything is
  // merged: an undeclared field or a value of the wrong kind fails the apply,
  // whatever fieldValidation says, with structured-merge-diff's words (typed.ts).
  const schema = r.type.schemas?.[r.version];
  checkMetaTypes(r.type.kind, applied);
  const typed = schema ? typedErrors(applied, schema.root) : [];
  if (typed.length) {
    const m = isObject(applied["metadata"]) ? applied["metadata"] : {};
    const gvk = `${r.type.group}/${r.version}, Kind=${r.type.kind}`;
    throw new ApiError(
      500,
      "",
      `failed to create typed patch object (${String(m["namespace"] ?? "")}/${String(m["name"] ?? "")}; ${gvk}): ${typedMessage(typed)}`,
    );
  }
  const am = isObject(applied["metadata"]) ? applied["metadata"] : {};
  if (am["name"] !== undefined && am["name"] !== r.name)
    throw new ApiError(400, "BadRequest", `the name of the object (${String(am["name"])}) does not match the name on the URL (${r.name})`);
  const done = await writing(c, (again) => {
    // A run the store stopped (writing) may have changed what it merged: read the body afresh.
    const applied = again ? checkKind(r, parseBody(text, true)) : first;
    // (find, not get: most applies make a new object, and a 404 error costs a stack trace each time.)
    const current = c.isStatus ? s.store.get(c.typeKey, r.namespace, r.name!) : s.store.find(c.typeKey, r.namespace, r.name!);
    const scope = c.isStatus
      ? (p: string[]) => p[0] === "status"
      : r.type.statusSubresource
        ? (p: string[]) => p[0] !== "status"
        : () => true;
    // Defaults go into the stored object, not the applier's intent, so the applier does not own them.
    const merged = apply(
      current,
      applied,
      manager,
      q.get("force") === "true",
      scope,
      kubeTimestamp(new Date()),
      c.isStatus ? "status" : "",
    );
    if (r.type.group === "" && (r.type.kind === "ConfigMap" || r.type.kind === "Secret")) decodeData(r.type.kind, merged);
    schema?.decode(merged);
    if (!current) {
      ensureMeta(merged)["name"] = r.name!;
      return { code: 201, obj: s.store.create(c.typeKey, r.namespace, merged, { warnings: c.warnings, dryRun: dry }) };
    }
    const updated: JsonObject = s.store.update(c.typeKey, r.namespace, r.name!, merged, {
      status: c.isStatus,
      applied: true,
      warnings: c.warnings,
      dryRun: dry,
    });
    return { code: 200, obj: updated };
  });
  return s.reply(warned(c), done.code, asVersion(done.obj, r));
}

/**
 * watch streams a collection's events from a resourceVersion, with bookmarks
 * when asked, until its timeout (timeoutSeconds, else 1 to 2 times the
 * minimum, as kube-apiserver's --min-request-timeout has it), the client
 * leaving, or the client not keeping up.
 */
async function watch(s: Served, c: Call): Promise<void> {
  const { r, q, req, res, tv } = c;
  const { labels, fields } = selectors(c);
  const rv = resourceVersionParam(q);
  if (q.get("resourceVersionMatch"))
    throw refusal("meta.k8s.io", "ListOptions", "", [forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch")]);
  const secs = int64Param(q, "timeoutSeconds") ?? 0;
  await s.fresh(rv);
  res.writeHead(200, { "Content-Type": "application/json", "Transfer-Encoding": "chunked" });
  // Send the headers now: clients wait for them before reading events.
  res.flushHeaders();
  s.streams.add(res);
  let unsubscribe = () => {};
  let bookmark: NodeJS.Timeout | undefined;
  let live = false;
  const timeout = setTimeout(() => end(), secs > 0 ? secs * 1000 : s.watchMinMs * (1 + Math.random()));
  const end = () => {
    unsubscribe();
    clearInterval(bookmark);
    clearTimeout(timeout);
    s.streams.delete(res);
    if (!res.writableEnded) res.end();
  };
  const w: Watcher = {
    typeKey: c.typeKey,
    ...(r.namespace !== undefined ? { namespace: r.namespace } : {}),
    labels,
    fields,
    send: (type, object) => {
      if (res.writableEnded) return;
      if (live && res.writableLength > s.bufferBytes) {
        // Not kept up with: ended (the client sees the watch end after what it has not read yet, and
        // watches again from the last resourceVersion it saw, as from kube-apiserver).
        end();
        return;
      }
      const out =
        type === "ERROR" || type === "BOOKMARK"
          ? object
          : tv
            ? table(
                r.type,
                r.version,
                tv,
                [asVersion(object, r)],
                { resourceVersion: String(ensureMeta(object)["resourceVersion"]) },
                q.get("includeObject"),
                new Date(),
              )
            : asVersion(object, r);
      res.write(`${JSON.stringify({ type, object: out })}\n`);
    },
    close: end,
  };
  req.on("close", end);
  await s.durable();
  if (res.writableEnded) return; // ended (closed, timed out) while waiting: nothing to subscribe
  unsubscribe = s.store.watch(w, rv || undefined);
  live = true;
  if (q.get("allowWatchBookmarks") === "true")
    bookmark = setInterval(() => s.store.bookmark(w, apiVersionOf(r), r.type.kind), s.bookmarkMs);
}

/** handle answers one request of the API: fixed paths, OpenAPI, reviews, discovery, then a verb on a resource. */
async function handle(served: Served, port: number, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { store, reply } = served;
  checkHost(req, port);
  const url = new URL(req.url ?? "/", "http://localhost");
  const path = url.pathname;
  if (served.token && !PUBLIC.has(path) && !authorized(req, served.token)) throw new ApiError(401, "Unauthorized", "Unauthorized");
  const fixed = Object.hasOwn(FIXED, path) ? FIXED[path] : undefined;
  if (fixed) return fixed(served, req, res);
  if (path.startsWith("/openapi/v3/")) {
    const doc = openapiDocument(store.types.values(), path.slice("/openapi/v3/".length));
    if (!doc) throw new ApiError(404, "NotFound", `the server could not find the requested resource (${path})`);
    return reply(res, 200, doc);
  }
  if (isReview(path)) {
    if (req.method === "POST") checkContentType(req, "POST");
    const body = req.method === "POST" ? parseBody(await readBody(req), contentType(req) === "application/yaml") : undefined;
    return reply(res, 201, review(path, req.method ?? "GET", body));
  }
  const r = route(store, path);
  if (r === undefined) throw new ApiError(404, "NotFound", `the server could not find the requested resource (${path})`);
  if (r === "discovery") {
    const segs = path.split("/").filter(Boolean);
    const reviews = segs[0] === "apis" ? reviewResources(`${segs[1]}/${segs[2]}`) : undefined;
    const d = reviews
      ? { kind: "APIResourceList", apiVersion: "v1", groupVersion: `${segs[1]}/${segs[2]}`, resources: reviews }
      : segs[0] === "api"
        ? discovery(store, "", segs[1]!)
        : discovery(store, segs[1]!, segs[2]!);
    if (!d) throw new ApiError(404, "NotFound", `the server could not find the requested resource (${path})`);
    return reply(res, 200, d);
  }
  const method = req.method ?? "GET";
  // A namespace's finalize subresource takes only PUT (kube registers only Update for it).
  const finalize = r.subresource === "finalize" && r.type.group === "" && r.type.plural === "namespaces";
  if (finalize && method !== "PUT")
    throw new ApiError(405, "MethodNotAllowed", `the server does not allow this method on the requested resource`);
  if (r.subresource !== undefined && r.subresource !== "status" && !finalize)
    throw new ApiError(404, "NotFound", `subresource ${r.subresource} is not served`);
  const isStatus = r.subresource === "status";
  if (isStatus && !r.type.statusSubresource) throw new ApiError(404, "NotFound", `${r.type.plural} has no status subresource`);
  if (["POST", "PUT", "PATCH", "DELETE"].includes(method)) checkContentType(req, method);
  const call: Call = {
    req,
    res,
    q: url.searchParams,
    r,
    typeKey: typeKeyOf(r.type.group, r.type.plural),
    isStatus,
    tv: method === "GET" ? tableVersion(req) : undefined,
    warnings: [],
  };
  return VERBS[verbOf(method, call)](served, call);
}

export async function startDevCluster(opts: DevClusterOptions = {}): Promise<DevCluster> {
  const store = new Store({ ...(opts.historySize ? { historySize: opts.historySize } : {}) });
  const journal = opts.dataFile ? Journal.open(opts.dataFile, store, opts.compactAfter) : undefined;
  // What a crash left half done (a terminating namespace, a cascade) is settled before the first request.
  store.collectGarbage();
  /** durable resolves once every change so far is on disk (at once without a data file). */
  const durable = async () => journal?.flush();
  /** reply answers once what the answer shows is durable: no client sees a version a crash could take back. */
  const reply = async (res: ServerResponse, code: number, body: unknown) => {
    await durable();
    send(res, code, body);
  };
  /**
   * fresh waits for the store to reach resourceVersion rv (a client's, from a
   * list or watch), as kube-apiserver waits for its cache; past the wait it is
   * 504 "Too large resource version", and the client lists again.
   */
  const fresh = async (rv: string | null) => {
    const want = rv ? Number(rv) : 0;
    if (!(want > store.rv)) return;
    const until = Date.now() + (opts.freshWaitMs ?? TOO_LARGE_WAIT_MS);
    while (want > store.rv && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    if (want <= store.rv) return;
    const err = new ApiError(504, "Timeout", `Timeout: Too large resource version: ${want}, current: ${store.rv}`);
    err.details = { causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }], retryAfterSeconds: 1 };
    throw err;
  };
  const served: Served = {
    store,
    reply,
    durable,
    fresh,
    bookmarkMs: opts.bookmarkIntervalMs ?? 10_000,
    bufferBytes: opts.watchBufferBytes ?? 16 * 1024 * 1024,
    watchMinMs: opts.watchMinTimeoutMs ?? 1_800_000,
    streams: new Set<ServerResponse>(),
    pages: new Pages(),
    ...(opts.token ? { token: Buffer.from(opts.token) } : {}),
    counts: new RequestCounts(),
  };
  const streams = served.streams;

  const tls = opts.token ? await servingCertificate() : undefined;
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    res.once("finish", () => served.counts.add(req, res.statusCode));
    handle(served, port, req, res).catch(async (err: unknown) => {
      if (res.headersSent) return void res.end();
      // A refused write may have changed nothing, or may have changed something (a
      // delete that collected garbage, say): answer once that is durable too.
      await durable().catch(() => {});
      if (err instanceof ApiError) return status(res, err);
      status(res, new ApiError(500, "InternalError", messageOf(err)));
    });
  };
  const server: Server = tls ? createHttpsServer({ key: tls.key, cert: tls.cert }, onRequest) : createServer(onRequest);
  server.on(tls ? "secureConnection" : "connection", () => served.counts.connections++);
  await new Promise<void>((resolve, reject) => {
    server.once("error", (e) => reject(new Error(`cannot listen on 127.0.0.1:${opts.port ?? 0}: ${e.message}`)));
    server.listen(opts.port ?? 0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `${tls ? "https" : "http"}://127.0.0.1:${port}`;
  return {
    url,
    port,
    store,
    kubeconfig: () =>
      stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [
          {
            name: "xfn-dev",
            cluster: tls
              ? { server: url, "certificate-authority-data": Buffer.from(tls.cert).toString("base64") }
              : // Plain HTTP on loopback; client-node only allows that with this flag set.
                { server: url, "insecure-skip-tls-verify": true },
          },
        ],
        users: [{ name: "xfn-dev", user: opts.token ? { token: opts.token } : {} }],
        contexts: [{ name: "xfn-dev", context: { cluster: "xfn-dev", user: "xfn-dev", namespace: "default" } }],
        "current-context": "xfn-dev",
      }),
    journal,
    async stop() {
      store.closeAllWatches();
      for (const s of streams) s.end();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await journal?.close();
      // The thread long matches run on (started by the first one): a write still waiting on it has been cut off above.
      await closeMatcher();
    },
  };
}
