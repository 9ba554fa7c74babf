// Small helpers the host's modules share for reading Kubernetes objects held
// as plain JSON and for talking to client-node.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { loadYaml, type KubernetesObject } from "@kubernetes/client-node";
import { isObject, metaOf } from "../json.js";
import { kubeTimestamp } from "../sdk/object.js";
import { messageOf } from "../sdk/errors.js";

export { isObject, metaOf };
export const str = (v: JsonValue | undefined) => (typeof v === "string" ? v : undefined);
export const conditionsOf = (o: JsonObject): JsonObject[] => {
  const s = o["status"];
  return isObject(s) && Array.isArray(s["conditions"]) ? (s["conditions"] as JsonObject[]) : [];
};
export const keyOf = (namespace: string | undefined, name: string) => `${namespace ?? ""}/${name}`;
export const now = () => kubeTimestamp(new Date());

/** errorCode is the HTTP status of a client-node error, if it has one. */
export const errorCode = (err: unknown): number | undefined =>
  (err as { code?: number }).code ?? (err as { statusCode?: number }).statusCode;

/**
 * apiMessage is what the API server said about a failed request: its Status
 * message; or a body of plain text (kube-apiserver's "404 page not found" for a
 * kind it does not serve) with the HTTP status; or the error's own message.
 */
export function apiMessage(err: unknown): string {
  const body = (err as { body?: unknown }).body;
  if (typeof body === "string") {
    try {
      const parsed = JSON.parse(body) as { message?: string };
      if (parsed.message) return parsed.message;
    } catch {
      const code = errorCode(err);
      const text = body.trim();
      if (code !== undefined && text !== "" && text.length <= 500 && !text.includes("\n")) return `${text} (HTTP ${code})`;
    }
  } else if (isObject(body) && typeof body["message"] === "string") return body["message"];
  return messageOf(err);
}

/**
 * plain turns an object client-node deserialized (timestamps as Date) back into
 * the API's JSON, with timestamps as Kubernetes writes them.
 */
export function plain(o: unknown): JsonObject {
  return JSON.parse(
    JSON.stringify(o, function (this: Record<string, unknown>, key, value: unknown) {
      const raw = this[key];
      return raw instanceof Date ? kubeTimestamp(raw) : value;
    }),
  ) as JsonObject;
}

/**
 * kubeObject readies a plain JSON object for client-node's KubernetesObjectApi.
 * For kinds it has models of (CustomResourceDefinition, Deployment, ...) that
 * API writes the model's fields by their TypeScript names, so fields whose JSON
 * names differ (`x-kubernetes-preserve-unknown-fields`, `default`, `enum`,
 * `$ref`) would be dropped without a word: a CRD would lose what keeps its
 * objects from being pruned. client-node's own loader turns JSON into its model.
 */
export function kubeObject(o: JsonObject): KubernetesObject {
  return loadYaml(JSON.stringify(o));
}

export { holds } from "../sdk/holds.js";

/** Ref names one object. */
export interface Ref {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
}

/** refOf returns an object's reference. */
export function refOf(o: JsonObject): Ref {
  const m = metaOf(o);
  return {
    apiVersion: String(o["apiVersion"]),
    kind: String(o["kind"]),
    name: String(m["name"]),
    ...(m["namespace"] ? { namespace: String(m["namespace"]) } : {}),
  };
}
