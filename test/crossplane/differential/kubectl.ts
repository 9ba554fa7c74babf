// Sequences of the requests the kubectl commands users run send (kubectl
// v1.36.3, read with -v=8): create, get, label, patch of each kind, server-side
// apply and its conflicts, dry runs, finalizers, errors, Tables, a CRD's
// defaults, pruning, status subresource and discovery, and a namespace's
// deletion. Each sequence works in a namespace of its own.
import type { JsonObject } from "@bufbuild/protobuf";
import { crd as crdOf } from "../../support/cluster.js";
import type { Sequence, Step } from "../differential.js";

const TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
const CM = (ns: string) => `/api/v1/namespaces/${ns}/configmaps`;
const namespace = (ns: string): Step => ({
  name: `kubectl create namespace ${ns}`,
  method: "POST",
  path: "/api/v1/namespaces?fieldManager=kubectl-create&fieldValidation=Strict",
  body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
});

const configmaps: Sequence = {
  id: "kubectl/configmap",
  source: "kubectl create configmap, get, label, patch (strategic, merge, json), replace, delete",
  steps: [
    namespace("diff-cm"),
    {
      name: "kubectl create configmap web --from-literal=k=v",
      method: "POST",
      path: `${CM("diff-cm")}?fieldManager=kubectl-create&fieldValidation=Strict`,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "web", labels: { app: "web" } }, data: { k: "v" } },
    },
    { name: "kubectl get configmap web -o yaml", path: `${CM("diff-cm")}/web` },
    { name: "kubectl get configmaps -l app=web -o yaml", path: `${CM("diff-cm")}?labelSelector=app%3Dweb` },
    { name: "kubectl get configmaps -l app!=web -o yaml", path: `${CM("diff-cm")}?labelSelector=app%21%3Dweb` },
    { name: "kubectl get configmap web (a Table)", path: `${CM("diff-cm")}/web`, accept: TABLE },
    {
      name: "kubectl label configmap web tier=front",
      method: "PATCH",
      path: `${CM("diff-cm")}/web?fieldManager=kubectl-label`,
      type: "merge",
      body: { metadata: { labels: { tier: "front" } } },
    },
    {
      name: "kubectl patch configmap web -p (strategic)",
      method: "PATCH",
      path: `${CM("diff-cm")}/web?fieldManager=kubectl-patch`,
      type: "strategic",
      body: { data: { k2: "v2" } },
    },
    {
      name: "kubectl patch configmap web --type=json (remove k)",
      method: "PATCH",
      path: `${CM("diff-cm")}/web?fieldManager=kubectl-patch`,
      type: "json-patch",
      body: [{ op: "remove", path: "/data/k" }],
    },
    {
      name: "kubectl patch --type=json on a path that is not there",
      method: "PATCH",
      path: `${CM("diff-cm")}/web?fieldManager=kubectl-patch`,
      type: "json-patch",
      body: [{ op: "remove", path: "/data/nothing" }],
    },
    {
      name: "kubectl replace with a stale resourceVersion",
      method: "PUT",
      path: `${CM("diff-cm")}/web?fieldManager=kubectl-replace`,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "web", resourceVersion: "1" }, data: { k: "v" } },
    },
    {
      name: "kubectl create configmap web again",
      method: "POST",
      path: `${CM("diff-cm")}?fieldManager=kubectl-create`,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "web" } },
    },
    {
      name: "kubectl create configmap Bad_Name",
      method: "POST",
      path: `${CM("diff-cm")}?fieldManager=kubectl-create`,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "Bad_Name" } },
    },
    {
      name: "kubectl create -f with an unknown field (--validate=strict)",
      method: "POST",
      path: `${CM("diff-cm")}?fieldManager=kubectl-create&fieldValidation=Strict`,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "strict" }, bogus: 1 },
    },
    { name: "kubectl get configmap nothing", path: `${CM("diff-cm")}/nothing` },
    { name: "kubectl delete configmap web", method: "DELETE", path: `${CM("diff-cm")}/web` },
    { name: "kubectl get configmap web after its delete", path: `${CM("diff-cm")}/web` },
  ],
};

const apply: Sequence = {
  id: "kubectl/apply",
  source: "kubectl apply --server-side (and --dry-run=server, diff, --force-conflicts)",
  steps: [
    namespace("diff-apply"),
    {
      name: "kubectl apply --server-side",
      method: "PATCH",
      path: `${CM("diff-apply")}/cfg?fieldManager=kubectl&fieldValidation=Strict&force=false`,
      type: "apply",
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg", labels: { a: "1" } }, data: { k: "v", j: "w" } },
    },
    {
      name: "kubectl diff (a server-side dry-run apply)",
      method: "PATCH",
      path: `${CM("diff-apply")}/cfg?fieldManager=kubectl&fieldValidation=Strict&force=false&dryRun=All`,
      type: "apply",
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg" }, data: { k: "changed" } },
    },
    {
      name: "another manager applies k to another value: a conflict",
      method: "PATCH",
      path: `${CM("diff-apply")}/cfg?fieldManager=other&force=false`,
      type: "apply",
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg" }, data: { k: "theirs" } },
    },
    {
      name: "kubectl apply --server-side --force-conflicts by the other manager",
      method: "PATCH",
      path: `${CM("diff-apply")}/cfg?fieldManager=other&force=true`,
      type: "apply",
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg" }, data: { k: "theirs" } },
    },
    {
      name: "kubectl apply --server-side leaving out j (removed: kubectl owned it alone)",
      method: "PATCH",
      path: `${CM("diff-apply")}/cfg?fieldManager=kubectl&force=false`,
      type: "apply",
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg", labels: { a: "1" } }, data: {} },
    },
    {
      name: "kubectl create --dry-run=server",
      method: "POST",
      path: `${CM("diff-apply")}?fieldManager=kubectl-create&dryRun=All`,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "dry" }, data: { k: "v" } },
    },
    { name: "kubectl get configmap dry (never written)", path: `${CM("diff-apply")}/dry` },
    {
      name: "an apply without a fieldManager",
      method: "PATCH",
      path: `${CM("diff-apply")}/cfg`,
      type: "apply",
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg" } },
    },
  ],
};

const finalizers: Sequence = {
  id: "kubectl/finalizers",
  source: "kubectl patch (a finalizer), delete --wait=false, get, patch (the finalizer removed)",
  steps: [
    namespace("diff-fin"),
    {
      name: "kubectl create configmap held with a finalizer",
      method: "POST",
      path: `${CM("diff-fin")}?fieldManager=kubectl-create`,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "held", finalizers: ["example.com/hold"] } },
    },
    { name: "kubectl delete configmap held --wait=false", method: "DELETE", path: `${CM("diff-fin")}/held` },
    { name: "kubectl get configmap held (being deleted)", path: `${CM("diff-fin")}/held` },
    {
      name: "kubectl label a configmap being deleted",
      method: "PATCH",
      path: `${CM("diff-fin")}/held?fieldManager=kubectl-label`,
      type: "merge",
      body: { metadata: { labels: { late: "yes" } } },
    },
    {
      name: "kubectl patch: a new finalizer on a configmap being deleted",
      method: "PATCH",
      path: `${CM("diff-fin")}/held?fieldManager=kubectl-patch`,
      type: "merge",
      body: { metadata: { finalizers: ["example.com/hold", "example.com/another"] } },
    },
    {
      name: "kubectl patch: the finalizers removed",
      method: "PATCH",
      path: `${CM("diff-fin")}/held?fieldManager=kubectl-patch`,
      type: "merge",
      body: { metadata: { finalizers: null } },
    },
    { name: "kubectl get configmap held (gone)", path: `${CM("diff-fin")}/held` },
  ],
};

const WIDGETS = "/apis/diff.xfn.dev/v1/namespaces/diff-crd/widgets";
const WIDGET_CRD = crdOf("diff.xfn.dev", "Widget", "widgets", "Namespaced", [
  {
    name: "v1",
    served: true,
    storage: true,
    subresources: { status: {} },
    additionalPrinterColumns: [{ name: "Size", type: "string", jsonPath: ".spec.size" }],
    schema: {
      openAPIV3Schema: {
        type: "object",
        properties: {
          spec: {
            type: "object",
            properties: {
              size: { type: "string", enum: ["small", "large"], default: "small" },
              replicas: { type: "integer", minimum: 1, default: 1 },
              tags: { type: "array", items: { type: "string" }, maxItems: 3 },
            },
          },
          status: { type: "object", properties: { phase: { type: "string" } } },
        },
      },
    },
  },
] as JsonObject[]);
(WIDGET_CRD.spec.names as Record<string, unknown>)["shortNames"] = ["wd"];
const crd: Sequence = {
  id: "kubectl/crd",
  source: "kubectl apply -f crd.yaml, create -f widget.yaml, get, patch --subresource=status, api-resources",
  steps: [
    namespace("diff-crd"),
    {
      name: "kubectl create -f crd.yaml (defaults, an enum, a status subresource, a printer column)",
      method: "POST",
      path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?fieldManager=kubectl-create",
      body: WIDGET_CRD,
      served: WIDGETS,
    },
    // kube-apiserver publishes a CRD's OpenAPI a moment after serving it: the next step waits for it.
    { name: "kubectl api-resources (the group's discovery)", path: "/apis/diff.xfn.dev/v1", served: "/openapi/v3/apis/diff.xfn.dev/v1" },
    // Descriptions are left out: the embedded server's are its own words (kube's are its API reference's prose).
    { name: "kubectl explain widgets (the group version's OpenAPI v3)", path: "/openapi/v3/apis/diff.xfn.dev/v1", ignore: ["description"] },
    {
      name: "kubectl create -f widget.yaml (defaults applied, an unknown field pruned)",
      method: "POST",
      path: `${WIDGETS}?fieldManager=kubectl-create`,
      body: { apiVersion: "diff.xfn.dev/v1", kind: "Widget", metadata: { name: "w" }, spec: { unknown: 1 }, status: { phase: "ignored" } },
    },
    {
      name: "kubectl create -f with an enum value not allowed and too many tags",
      method: "POST",
      path: `${WIDGETS}?fieldManager=kubectl-create`,
      body: {
        apiVersion: "diff.xfn.dev/v1",
        kind: "Widget",
        metadata: { name: "bad" },
        spec: { size: "huge", replicas: 0, tags: ["a", "b", "c", "d"] },
      },
    },
    { name: "kubectl get widgets (a Table with the printer column)", path: WIDGETS, accept: TABLE },
    {
      name: "kubectl patch widget w --subresource=status",
      method: "PATCH",
      path: `${WIDGETS}/w/status?fieldManager=kubectl-patch`,
      type: "merge",
      body: { status: { phase: "Ready" }, spec: { size: "large" } },
    },
    { name: "kubectl get widget w", path: `${WIDGETS}/w` },
    {
      name: "kubectl get wd (a short name is kubectl's; the server knows the plural)",
      path: "/apis/diff.xfn.dev/v1/namespaces/diff-crd/wd",
    },
    {
      name: "kubectl delete crd widgets.diff.xfn.dev",
      method: "DELETE",
      path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.diff.xfn.dev",
    },
  ],
};

const namespaces: Sequence = {
  id: "kubectl/namespace",
  source: "kubectl delete namespace, then create in it",
  steps: [
    namespace("diff-ns"),
    {
      // Its finalizer keeps the namespace terminating (no one removes it), so what follows does not race the namespace
      // controller of the real control plane.
      name: "kubectl create configmap in it, with a finalizer",
      method: "POST",
      path: `${CM("diff-ns")}?fieldManager=kubectl-create`,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "inside", finalizers: ["example.com/hold"] } },
    },
    { name: "kubectl delete namespace diff-ns --wait=false", method: "DELETE", path: "/api/v1/namespaces/diff-ns" },
    {
      name: "kubectl create configmap in a namespace being deleted",
      method: "POST",
      path: `${CM("diff-ns")}?fieldManager=kubectl-create`,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "late" } },
    },
    {
      name: "kubectl create configmap in a namespace that does not exist",
      method: "POST",
      path: `${CM("diff-nowhere")}?fieldManager=kubectl-create`,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "lost" } },
    },
  ],
};

const watches: Sequence = {
  id: "kubectl/watch",
  source: "kubectl get -w (a list, then a watch from its resourceVersion) over creates, updates, a label selector and deletes",
  steps: [
    namespace("diff-watch"),
    { name: "kubectl get configmaps -w (the list it starts from)", path: CM("diff-watch") },
    {
      name: "kubectl create configmap a",
      method: "POST",
      path: `${CM("diff-watch")}?fieldManager=kubectl-create`,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a", labels: { app: "x" } }, data: { k: "v" } },
    },
    {
      name: "kubectl label configmap a app=y --overwrite",
      method: "PATCH",
      path: `${CM("diff-watch")}/a?fieldManager=kubectl-label`,
      type: "merge",
      body: { metadata: { labels: { app: "y" } } },
    },
    {
      name: "kubectl create configmap b",
      method: "POST",
      path: `${CM("diff-watch")}?fieldManager=kubectl-create`,
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "b", labels: { app: "x" } } },
    },
    { name: "kubectl delete configmap a", method: "DELETE", path: `${CM("diff-watch")}/a` },
    { name: "the events since the list", path: CM("diff-watch"), watchFrom: 1 },
    { name: "the events since the list, -l app=x", path: `${CM("diff-watch")}?labelSelector=app%3Dx`, watchFrom: 1 },
    { name: "the events since b was created", path: CM("diff-watch"), watchFrom: 4 },
    {
      name: "a watch of one object (fieldSelector metadata.name=b)",
      path: `${CM("diff-watch")}?fieldSelector=metadata.name%3Db`,
      watchFrom: 1,
    },
    { name: "a watch from resourceVersion 1, older than either server keeps", path: CM("diff-watch"), watchAt: "1" },
    { name: "a watch from a resourceVersion that is not a number", path: CM("diff-watch"), watchAt: "abc" },
    {
      name: "kubectl delete namespace diff-watch",
      method: "DELETE",
      path: "/api/v1/namespaces/diff-watch",
      ifAnyOk: 0,
      compare: false,
    },
  ],
};

export const SEQUENCES: Sequence[] = [configmaps, apply, finalizers, crd, namespaces, watches];
