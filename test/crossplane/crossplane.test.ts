// Crossplane core, built from its Go module, under the real control plane
// (issue 58), and the first answer taken from it as the oracle: the status
// real Crossplane writes on an XRD is the status `xfn host` writes on the same
// XRD, on a second real control plane, in the same run.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { until } from "../support/cluster.js";
import { needs } from "../support/needs.js";
import { XFN } from "../support/spawn.js";
import { kubectl, startControlPlane, type ControlPlane } from "./controlplane.js";
import { startCrossplane, type Crossplane } from "./crossplane.js";

const X = suite("Crossplane core from its Go module, under the real control plane");
const G = needs(X, "go1.26");
let real: ControlPlane | undefined;
let xp: Crossplane | undefined;
let hosted: ControlPlane | undefined;

G.before(async () => {
  [real, hosted] = await Promise.all([startControlPlane(), startControlPlane()]);
  xp = await startCrossplane(real);
});
G.after(async () => {
  await xp?.stop();
  await Promise.all([real?.stop(), hosted?.stop()]);
});

/** waitFor is the support until(), with what tail() gives (a log) in its error. */
const waitFor = (what: string, check: () => Promise<boolean>, ms: number, tail: () => string) =>
  until(what, check, ms).catch((err: Error) => {
    throw new Error(`${err.message}\n${tail()}`);
  });

const XRD = {
  apiVersion: "apiextensions.crossplane.io/v2",
  kind: "CompositeResourceDefinition",
  metadata: { name: "xbuckets.example.org" },
  spec: {
    group: "example.org",
    names: { kind: "XBucket", plural: "xbuckets" },
    scope: "Namespaced",
    versions: [
      {
        name: "v1",
        served: true,
        referenceable: true,
        schema: {
          openAPIV3Schema: { type: "object", properties: { spec: { type: "object", properties: { region: { type: "string" } } } } },
        },
      },
    ],
  },
};

/** status is an XRD's status with what differs by run (transition times) left out. */
async function status(cp: ControlPlane): Promise<unknown> {
  const o = JSON.parse(await kubectl(cp, "get", "xrd", XRD.metadata.name, "-o", "json")) as { status?: { conditions?: object[] } };
  const s = o.status ?? {};
  return { ...s, conditions: (s.conditions ?? []).map((c) => ({ ...c, lastTransitionTime: "<time>" })) };
}
/** established is whether the XRD's status says Established=True (false while it cannot be read). */
const established = async (cp: ControlPlane) => {
  try {
    const { conditions } = (await status(cp)) as { conditions: { type: string; status: string }[] };
    return conditions.some((c) => c.type === "Established" && c.status === "True");
  } catch {
    return false;
  }
};

G("core init installs Crossplane's CRDs and core start serves: its XRD kind is established", async () => {
  const crd = JSON.parse(await kubectl(real!, "get", "crd", "compositeresourcedefinitions.apiextensions.crossplane.io", "-o", "json")) as {
    status: { conditions: { type: string; status: string }[] };
  };
  assert.ok(crd.status.conditions.some((c) => c.type === "Established" && c.status === "True"));
  assert.match(await kubectl(real!, "-n", "crossplane-system", "get", "secrets", "-o", "name"), /secret\/crossplane-tls-client/);
});

G("an XRD's status: what real Crossplane writes is what xfn host writes", async () => {
  const file = join(hosted!.dir, "xrd.json");
  writeFileSync(file, JSON.stringify(XRD));
  await kubectl(real!, "apply", "-f", file);
  await waitFor(
    "real Crossplane to establish the XRD",
    () => established(real!),
    60_000,
    () => xp!.logTail(),
  );
  const host = spawn(process.execPath, [XFN, "host", "--kubeconfig", hosted!.kubeconfig, "--manifests", file], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  host.stdout.on("data", (d) => (log += d));
  host.stderr.on("data", (d) => (log += d));
  try {
    await waitFor(
      "xfn host to establish the XRD",
      () => established(hosted!),
      60_000,
      () => log.slice(-3000),
    );
    // Real Crossplane's answer, read in this run, is the expected one.
    assert.equal(await status(hosted!), await status(real!));
  } finally {
    host.kill("SIGTERM");
    await new Promise((r) => host.once("exit", r));
  }
});

X.run();
