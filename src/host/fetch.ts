// What a step requires (extra resources), fetched from the API server as
// Crossplane's function runner fetches it.
import type { JsonObject } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import type { KubernetesObjectApi } from "@kubernetes/client-node";
import type { Fetch } from "../engine/composition.js";
import { ResourceSchema } from "../gen/fn/v1/run_function_pb.js";
import { metaOf, plain, str } from "./kube.js";

/** fetcher answers a step's resource selectors from the API server, sorted by namespace and name. */
export function fetcher(objects: KubernetesObjectApi): Fetch {
  return async (s) => {
    const sel =
      s.match.case === "matchLabels"
        ? Object.entries(s.match.value.labels)
            .map(([k, v]) => `${k}=${v}`)
            .join(",")
        : undefined;
    const list = await objects.list(
      s.apiVersion,
      s.kind,
      s.namespace,
      undefined,
      undefined,
      undefined,
      s.match.case === "matchName" ? `metadata.name=${s.match.value}` : undefined,
      sel,
    );
    // Sorted by namespace and name, as Crossplane's fetcher sorts them.
    const key = (o: JsonObject) => Buffer.from(`${str(metaOf(o)["namespace"]) ?? ""}/${String(metaOf(o)["name"])}`);
    let items = list.items.map((i) => plain(i)).sort((a, b) => Buffer.compare(key(a), key(b)));
    // A name is got, not listed, there: with no namespace it is a cluster-scoped object's name, and a
    // namespaced kind's objects of that name in any namespace are not it (Crossplane's Get finds none).
    if (s.match.case === "matchName" && !s.namespace) items = items.filter((o) => !str(metaOf(o)["namespace"])).slice(0, 1);
    return {
      $typeName: "apiextensions.fn.proto.v1.Resources",
      items: items.map((i) => create(ResourceSchema, { resource: i })),
    };
  };
}
