// Applies the manifests given to `xfn host --manifests` (and used by tests to
// set up a cluster): server-side apply, CRDs and XRDs before what they serve.
import { PatchStrategy, type KubeConfig } from "@kubernetes/client-node";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import type { Doc } from "../engine/docs.js";
import { objectClient } from "./client.js";
import { kubeObject } from "./host.js";
import { apiMessage, errorCode } from "./kube.js";
import { messageOf } from "../sdk/errors.js";

const ORDER = ["CustomResourceDefinition", "Namespace", "CompositeResourceDefinition", "Composition"];

/**
 * NOT_SERVED_YET is how @kubernetes/client-node says it found no resource for
 * an object's apiVersion and kind in discovery: the kind of an XR whose XRD was
 * just applied, until the host has made its CRD and the API server serves it
 * (a second or more on a real cluster; at once on the embedded one).
 */
const NOT_SERVED_YET = /^(Failed to fetch resource metadata for|Unrecognized API version and kind)/;

/**
 * applicable is obj without what the API server gives an object and a server-side
 * apply may not name: a uid (kube-apiserver refuses an apply that names a uid
 * no object has, 409 "uid mismatch"; xfn render's example XRs carry one) and
 * a resourceVersion.
 */
function applicable(obj: JsonObject): JsonObject {
  const meta = obj["metadata"];
  if (typeof meta !== "object" || meta === null || Array.isArray(meta)) return obj;
  const { uid: _uid, resourceVersion: _rv, ...rest } = meta;
  return { ...obj, metadata: rest };
}

/**
 * applyManifests server-side applies every document under dir, CRDs and XRDs
 * first. An object whose kind is not served yet, or that the API server asks
 * to send again (429), is applied again, backing off, until it is or
 * timeoutMs has passed.
 */
export async function applyManifests(kc: KubeConfig, docs: Doc[], log: Logger, timeoutMs = 60_000): Promise<void> {
  const api = objectClient(kc, timeoutMs);
  const rank = (d: Doc) => {
    const i = ORDER.indexOf(String(d.obj["kind"]));
    return i < 0 ? ORDER.length : i;
  };
  for (const d of [...docs].sort((a, b) => rank(a) - rank(b))) {
    const kind = `${String(d.obj["apiVersion"])} ${String(d.obj["kind"])}`;
    const name = (d.obj["metadata"] as { name?: string } | undefined)?.name;
    const started = Date.now();
    let lastBusy: boolean | undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        await api.patch(kubeObject(applicable(d.obj)), undefined, undefined, "xfn-host-manifests", true, PatchStrategy.ServerSideApply);
        log.info({ kind: d.obj["kind"], name }, "applied manifest");
        break;
      } catch (err) {
        const why = apiMessage(err);
        const waited = Date.now() - started;
        // 429: kube-apiserver refuses the objects of a CRD it has just established for a moment ("storage is
        // (re)initializing", Retry-After 1), found running the host's tests on it; the embedded server never does.
        const busy = errorCode(err) === 429;
        if (!(busy || NOT_SERVED_YET.test(messageOf(err))) || waited >= timeoutMs)
          throw new Error(
            `cannot apply ${d.source}: ${why}` +
              (waited >= timeoutMs
                ? ` (${kind} was still not served after ${Math.round(waited / 1000)} s: is its CRD or XRD among the manifests?)`
                : ""),
          );
        // Said once for each reason to wait (a kind not served yet, then a 429 while its storage starts, is two).
        if (busy !== lastBusy)
          log.info(
            { kind: d.obj["kind"], name },
            busy
              ? `${kind}: the API server asks to come back (${why}): applying it again`
              : `${kind} is not served yet: applying it again once it is`,
          );
        lastBusy = busy;
        await new Promise((r) => setTimeout(r, Math.min(2_000, 50 * 2 ** attempt, Math.max(1, timeoutMs - waited))));
      }
    }
  }
}
