// Helpers for tests against the embedded API server.
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { ApiextensionsV1Api, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import type { JsonObject } from "@bufbuild/protobuf";
import type { DevCluster } from "../../src/apiserver/server.js";
import { REAL_APISERVER } from "./apiserver.js";
import { Budget } from "./budget.js";

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * until polls check every 20 ms and throws naming what it waited for. Its
 * limit, ms, is a Budget (test/support/budget.ts): on a busy machine it
 * stretches with the CPU pressure, up to SLOWEST times.
 */
export async function until(what: string, check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  // On kube-apiserver a fresh CRD is served seconds later, and a nested XR's needs one per level: four times as long.
  const budget = new Budget(REAL_APISERVER ? ms * 4 : ms);
  const started = performance.now();
  while (!(await Promise.resolve().then(check).catch(retryLater))) {
    if (budget.over()) throw new Error(`timed out after ${budget.describe(started)} waiting for ${what}`);
    await sleep(20);
  }
}

/**
 * retryLater answers "not yet" for a 429 from the API server, and throws
 * anything else: kube-apiserver refuses a freshly established CRD's objects
 * for a moment ("storage is (re)initializing"), which a poll waits out (the
 * host tests run on it in the real tier: test/support/apiserver.ts).
 */
function retryLater(err: unknown): false {
  if ((err as { code?: number }).code === 429) return false;
  throw err;
}

/** kubeconfigFor is a kubeconfig for c, or with port, for a proxy in front of it on that port. */
export function kubeconfigFor(c: Pick<DevCluster, "kubeconfig" | "port">, port = c.port): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(c.kubeconfig());
  if (port !== c.port) kc.clusters[0] = { ...kc.clusters[0]!, server: `http://127.0.0.1:${port}` };
  return kc;
}

const PRESERVE: JsonObject = { type: "object", "x-kubernetes-preserve-unknown-fields": true };

/** crd builds a CustomResourceDefinition for a kind: by default one version, v1, with a status subresource and any fields. */
export function crd(
  group: string,
  kind: string,
  plural: string,
  scope: "Namespaced" | "Cluster" = "Cluster",
  versions: JsonObject[] = [
    { name: "v1", served: true, storage: true, subresources: { status: {} }, schema: { openAPIV3Schema: PRESERVE } },
  ],
) {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      scope,
      versions,
    },
  };
}

/** specCRD is a namespaced CRD of one version whose objects' spec has the given schema (a rule's home in tests). */
export const specCRD = (group: string, spec: JsonObject, kind = "Thing", plural = "things") =>
  crd(group, kind, plural, "Namespaced", [
    { name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object", properties: { spec } } } },
  ]);

/**
 * typed is a CRD as @kubernetes/client-node's typed ApiextensionsV1Api wants
 * it: its models name the x-kubernetes-* schema fields x_kubernetes_*, and drop
 * the wire names a raw object carries (the API server then prunes what the
 * dropped preserve-unknown-fields would have kept, as a real one does).
 */
export function typed<T>(crd: T): T {
  const model = (k: string) => (k.startsWith("x-kubernetes-") ? k.replaceAll("-", "_") : k);
  const walk = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(walk)
      : v && typeof v === "object"
        ? Object.fromEntries(Object.entries(v).map(([k, x]) => [model(k), walk(x)]))
        : v;
  return walk(crd) as T;
}

export function apis(kc: KubeConfig) {
  return { crds: kc.makeApiClient(ApiextensionsV1Api), objects: kc.makeApiClient(CustomObjectsApi) };
}

/**
 * kubectlFor runs the real kubectl against c (in this process: kubectl runs
 * as a child, asynchronously, so the server keeps answering), with a
 * kubeconfig and cache in dir; it answers kubectl's exit code and what it
 * printed, both streams.
 */
export function kubectlFor(c: DevCluster, dir: string) {
  const kubeconfig = join(dir, `kubeconfig-${c.port}`);
  writeFileSync(kubeconfig, c.kubeconfig());
  return async (...args: string[]): Promise<{ code: number; out: string }> => {
    try {
      const r = await promisify(execFile)("kubectl", ["--kubeconfig", kubeconfig, "--cache-dir", join(dir, `cache-${c.port}`), ...args]);
      return { code: 0, out: r.stdout + r.stderr };
    } catch (err) {
      const e = err as { code: number; stdout?: string; stderr?: string };
      return { code: typeof e.code === "number" ? e.code : 1, out: (e.stdout ?? "") + (e.stderr ?? "") };
    }
  };
}

/**
 * caller makes JSON requests to c: body (an object, sent as JSON, or a string,
 * sent as is) with Content-Type application/json unless headers say another;
 * it answers the status, the decoded body and the response's headers.
 */
export const caller =
  (c: DevCluster) =>
  async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const r = await fetch(`${c.url}${path}`, {
      method,
      headers: { "Content-Type": "application/json", ...headers },
      ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
    });
    return { status: r.status, headers: r.headers, body: (await r.json()) as any };
  };

/** widgetCRD is the CRD of example.org's namespaced Widget, served and stored as v1, with spec's schema given. */
export const widgetCRD = (spec: JsonObject = {}): any => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "widgets.example.org" },
  spec: {
    group: "example.org",
    names: { kind: "Widget", plural: "widgets", listKind: "WidgetList" },
    scope: "Namespaced",
    versions: [{ name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object", properties: { spec } } } }],
  },
});
