// xfn host runs module functions on worker threads of their own (engine/runner.ts,
// Isolation): a function stuck on the CPU for one XR has its call ended at the
// deadline and its worker replaced, while the host reconciles other XRs and stops
// on request. In the host's own thread the stuck call held everything.
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster } from "../../src/apiserver/server.js";
import { loadDocs } from "../../src/engine/docs.js";
import { createRunner } from "../../src/engine/runner.js";
import { Host } from "../../src/host/host.js";
import { applyManifests } from "../../src/host/manifests.js";
import { apis, kubeconfigFor, until } from "../support/cluster.js";
import { memoryLog } from "../support/log.js";
import { ROOT } from "../support/spawn.js";

const I = suite("host: module functions on worker threads");
const DIR = join(ROOT, "test/fixtures/isolation");
const XJOBS = { group: "example.org", version: "v1", plural: "xjobs" };
const cond = (o: any, type: string) => (o?.status?.conditions ?? []).find((c: any) => c.type === type);

I(
  "a function stuck on the CPU for one XR: its call ends at the deadline, another XR is reconciled meanwhile, the host stops at once",
  async () => {
    const c = await startDevCluster();
    const kc = kubeconfigFor(c);
    const mem = memoryLog();
    const runner = await createRunner(loadDocs(join(DIR, "functions.yaml")), join(DIR, "functions.yaml"), () => new Date(), undefined, {
      log: mem.log,
    });
    const host = new Host({ kc, runner, log: mem.log, baseBackoffMs: 50, maxBackoffMs: 1000, functionTimeoutMs: 2_000 });
    const { objects } = apis(kc);
    const job = (name: string, mode: string) => ({
      obj: { apiVersion: "example.org/v1", kind: "XJob", metadata: { name }, spec: { mode } },
      source: "test",
    });
    try {
      await host.start();
      await applyManifests(kc, [...loadDocs(join(DIR, "manifests.yaml")), job("stuck", "spin")], mem.log);
      // Both workers up (the second loads while the first takes the stuck call), and that call under way.
      await until("both workers up", () => mem.text().includes('"msg":"function workers ready"'), 10_000);
      await new Promise((r) => setTimeout(r, 300));
      await applyManifests(kc, [job("fine", "ok")], mem.log);
      await until(
        "the other XR reconciled while the first one's function spins",
        async () => cond(await objects.getClusterCustomObject({ ...XJOBS, name: "fine" }), "Synced")?.status === "True",
        10_000,
      ).catch((err: Error) => {
        throw new Error(`${err.message}; the host's log:\n${mem.text().split("\n").slice(-40).join("\n")}`);
      });
      await until(
        "the stuck XR's call ended at its deadline, naming it",
        async () =>
          /deadline|timed out|DEADLINE_EXCEEDED/i.test(
            cond(await objects.getClusterCustomObject({ ...XJOBS, name: "stuck" }), "Synced")?.message ?? "",
          ),
        15_000,
      );
      assert.match(mem.text(), /the function's worker .*stuck|terminat|replac/);
    } finally {
      const stopping = Date.now();
      await host.stop();
      await c.stop();
      assert.ok(Date.now() - stopping < 5_000, `the host stopped in ${Date.now() - stopping} ms`);
    }
  },
);

I.run();
