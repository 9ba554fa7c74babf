// Applies the manifests given to `xfn host --manifests` (and used by tests to
// set up a cluster): server-side apply, CRDs and XRDs before what they serve.
import { PatchStrategy, type KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Doc } from "../engine/docs.js";
import { objectClient } from "./client.js";
import { kubeObject } from "./host.js";
import { messageOf } from "../sdk/errors.js";

const ORDER = ["CustomResourceDefinition", "Namespace", "CompositeResourceDefinition", "Composition"];

/** applyManifests server-side applies every document under dir, CRDs and XRDs first. */
export async function applyManifests(kc: KubeConfig, docs: Doc[], log: Logger, timeoutMs = 60_000): Promise<void> {
  const api = objectClient(kc, timeoutMs);
  const rank = (d: Doc) => {
    const i = ORDER.indexOf(String(d.obj["kind"]));
    return i < 0 ? ORDER.length : i;
  };
  for (const d of [...docs].sort((a, b) => rank(a) - rank(b))) {
    try {
      await api.patch(kubeObject(d.obj), undefined, undefined, "xfn-host-manifests", true, PatchStrategy.ServerSideApply);
      log.info({ kind: d.obj["kind"], name: (d.obj["metadata"] as { name?: string } | undefined)?.name }, "applied manifest");
      // A new CRD is served at once here, but give discovery a moment on a real cluster.
      if (d.obj["kind"] === "CustomResourceDefinition") await new Promise((r) => setTimeout(r, 50));
    } catch (err) {
      throw new Error(`cannot apply ${d.source}: ${(err as { body?: { message?: string } }).body?.message ?? messageOf(err)}`);
    }
  }
}
