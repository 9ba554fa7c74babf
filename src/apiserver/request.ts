// The shape of one request to the embedded API server: the resource its path
// names (Route), what its handler works with (Call), and the checks of its
// kind, content type, host and fields that every verb shares.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { ApiError } from "./errors.js";
import { checkMetaTypes, decodeData } from "./meta.js";
import { defaultCRD } from "./crd.js";
import { CRD_KEY } from "./store.js";
import type { tableVersion } from "./table.js";
import type { ResourceType } from "./types.js";
import { isObject } from "../json.js";

/** Route is the resource a request's path names. */
export interface Route {
  group: string;
  version: string;
  type: ResourceType;
  namespace?: string;
  name?: string;
  subresource?: string;
}

export const apiVersionOf = (r: Route) => (r.group ? `${r.group}/${r.version}` : r.version);
export const asVersion = (o: JsonObject, r: Route): JsonObject => ({ ...o, apiVersion: apiVersionOf(r) });

export function checkKind(r: Route, body: JsonValue): JsonObject {
  if (!isObject(body)) throw new ApiError(400, "BadRequest", "the request body must be an object");
  if (body["kind"] !== undefined && body["kind"] !== r.type.kind)
    throw new ApiError(400, "BadRequest", `kind ${String(body["kind"])} does not match the resource (${r.type.kind})`);
  // As the API server: the version in the object must be the one the request is made in.
  if (body["apiVersion"] !== undefined && body["apiVersion"] !== apiVersionOf(r)) {
    throw new ApiError(
      400,
      "BadRequest",
      `the API version in the data (${String(body["apiVersion"])}) does not match the expected API version (${apiVersionOf(r)})`,
    );
  }
  return { ...body, apiVersion: apiVersionOf(r), kind: r.type.kind };
}

/**
 * decoded is a write's object as kube-apiserver reads it from the request:
 * labels and annotations must be strings; a ConfigMap's or Secret's data must
 * decode (a Secret's stringData is folded into data); a custom resource gets
 * its schema's defaults and loses the fields its schema does not declare,
 * which the request's fieldValidation (Strict, Warn the default, Ignore)
 * refuses, warns of, or passes over.
 */
export function decoded(c: Call, obj: JsonObject): JsonObject {
  const t = c.r.type;
  checkMetaTypes(t.kind, obj);
  if (t.group === "" && (t.kind === "ConfigMap" || t.kind === "Secret")) decodeData(t.kind, obj);
  if (c.typeKey === CRD_KEY) defaultCRD(obj);
  const schema = t.schemas?.[c.r.version];
  if (schema) unknownFields(c, schema.decode(obj));
  return obj;
}

/** unknownFields answers the unknown fields a decode dropped, as the request's fieldValidation says. */
function unknownFields(c: Call, unknown: string[]): void {
  const mode = fieldValidation(c.q);
  if (!unknown.length || mode === "Ignore") return;
  const said = unknown.map((p) => `unknown field ${JSON.stringify(p)}`);
  if (mode === "Strict")
    throw new ApiError(
      400,
      "BadRequest",
      `${c.r.type.kind} in version "${c.r.version}" cannot be handled as a ${c.r.type.kind}: strict decoding error: ${said.join(", ")}`,
    );
  c.warnings.push(...said);
}

function fieldValidation(q: URLSearchParams): "Ignore" | "Warn" | "Strict" {
  const v = q.get("fieldValidation") ?? "Warn";
  if (v === "" || v === "Warn") return "Warn";
  if (v === "Ignore" || v === "Strict") return v;
  throw new ApiError(400, "BadRequest", `fieldValidation must be one of Ignore, Warn or Strict, not ${JSON.stringify(v)}`);
}

// What a request body may be. A browser can POST text/plain, form data or
// multipart to any address without asking first: none of those is accepted,
// so a web page cannot write to the cluster.
const BODY_TYPES = new Set(["application/json", "application/yaml"]);
const PATCH_TYPES = new Set([
  "application/merge-patch+json",
  "application/strategic-merge-patch+json",
  "application/json-patch+json",
  "application/apply-patch+yaml",
  "application/apply-patch+json",
]);

export const contentType = (req: IncomingMessage) => (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();

/** checkContentType refuses a body of a type the method does not take (415, as the API server does). */
export function checkContentType(req: IncomingMessage, method: string): void {
  const ct = contentType(req);
  const allowed = method === "PATCH" ? PATCH_TYPES : BODY_TYPES;
  if (method === "DELETE" && ct === "" && req.headers["content-length"] === undefined && req.headers["transfer-encoding"] === undefined)
    return;
  if (!allowed.has(ct))
    throw new ApiError(
      415,
      "UnsupportedMediaType",
      `the body of the request was in an unknown format - accepted media types include: ${[...allowed].join(", ")}`,
    );
}

/**
 * checkHost refuses a request whose Host header is not this server's loopback
 * address: a page a browser loaded from elsewhere could otherwise reach it
 * through a name that resolves to 127.0.0.1 (DNS rebinding).
 */
export function checkHost(req: IncomingMessage, port: number): void {
  const host = (req.headers.host ?? "").toLowerCase();
  if ([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`].includes(host)) return;
  throw new ApiError(403, "Forbidden", `host ${JSON.stringify(req.headers.host ?? "")} is not this server: use 127.0.0.1:${port}`);
}

/** Call is one request for a resource (or a collection, or a status subresource). */
export interface Call {
  req: IncomingMessage;
  res: ServerResponse;
  q: URLSearchParams;
  r: Route;
  typeKey: string;
  isStatus: boolean;
  /** The Table version a GET asks for (kubectl get), if any. */
  tv: ReturnType<typeof tableVersion>;
  /** Warnings for the answer's Warning headers (unknown fields, ratcheted rules). */
  warnings: string[];
}

/** warned sets the answer's Warning headers, as kube-apiserver sends them (code 299, agent "-"). */
export function warned(c: Call): ServerResponse {
  const unique = [...new Set(c.warnings)];
  if (unique.length)
    c.res.setHeader(
      "Warning",
      unique.map((w) => `299 - ${JSON.stringify(w)}`),
    );
  return c.res;
}
