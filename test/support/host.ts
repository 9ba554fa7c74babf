// Hosts for tests: an embedded API server and a host (not yet started)
// running the functions of a folder's functions.yaml, and the nested fixture
// (three levels of XRs) brought up to its deepest composed resource.
import { join } from "node:path";
import { startCluster } from "./apiserver.js";
import { loadDocs } from "../../src/engine/docs.js";
import { createRunner } from "../../src/engine/runner.js";
import { Host, type HostOptions } from "../../src/host/host.js";
import { applyManifests } from "../../src/host/manifests.js";
import { apis, kubeconfigFor, until } from "./cluster.js";
import { memoryLog } from "./log.js";
import { ROOT } from "./spawn.js";

/** hostFor starts an embedded API server and makes a host running dir's functions.yaml (start it yourself). */
export async function hostFor(dir: string, opts: Partial<HostOptions> = {}) {
  const c = await startCluster();
  const kc = kubeconfigFor(c);
  const mem = memoryLog();
  const runner = await createRunner(loadDocs(join(dir, "functions.yaml")), join(dir, "functions.yaml"), () => new Date());
  const host = new Host({ kc, runner, log: mem.log, baseBackoffMs: 50, maxBackoffMs: 1000, ...opts });
  return { c, kc, mem, host, dir, ...apis(kc) };
}

/** NESTED is the fixture of three nested XR levels (XPlatform, XNetwork, XCluster). */
export const NESTED = join(ROOT, "test/fixtures/nested");

/** nestedUp applies the nested fixture and the XPlatform team-a, and waits for its subnet, two levels down. */
export async function nestedUp(h: Awaited<ReturnType<typeof hostFor>>): Promise<void> {
  await applyManifests(
    h.kc,
    [
      ...loadDocs(join(NESTED, "manifests.yaml")),
      { obj: { apiVersion: "nest.example.org/v1", kind: "XPlatform", metadata: { name: "team-a" }, spec: {} }, source: "test" },
    ],
    h.mem.log,
  );
  await until(
    "the subnet, two levels down",
    async () =>
      ((await h.objects.listClusterCustomObject({ group: "ec2.example.org", version: "v1", plural: "subnets" })) as { items: unknown[] })
        .items.length === 1,
    10_000,
  );
}
