// Leader election: two hosts against one API server, one Lease. Only the
// leader reconciles; when it dies without letting go, the other takes over
// once the Lease expires and reconciles what comes next. The two never lead at once.
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { startDevCluster } from "../../src/apiserver/server.js";
import { loadDocs } from "../../src/engine/docs.js";
import { createRunner } from "../../src/engine/runner.js";
import { Host } from "../../src/host/host.js";
import { applyManifests } from "../../src/host/manifests.js";
import { Elector } from "../../src/host/leader.js";
import { kubeconfigFor, sleep, until } from "../support/cluster.js";
import { memoryLog } from "../support/log.js";
import { startProxy } from "../support/proxy.js";
import { ROOT } from "../support/spawn.js";

const DIR = join(ROOT, "test/fixtures/truth");

const L = suite("host loop: leader election");

L("two hosts, one Lease: one reconciles; kill it and the other takes over, never both at once", async () => {
  const c = await startDevCluster();
  const kc = kubeconfigFor(c);
  const mem = memoryLog();
  const host = async (identity: string) =>
    new Host({
      kc,
      runner: await createRunner(loadDocs(join(DIR, "functions.yaml")), join(DIR, "functions.yaml"), () => new Date()),
      log: mem.log.child({ replica: identity }),
      leaderElection: { namespace: "default", name: "xfn-host", identity, leaseDurationMs: 1000, renewDeadlineMs: 800, retryPeriodMs: 100 },
    });
  const a = await host("replica-a");
  const b = await host("replica-b");
  let both = false;
  const watch = setInterval(() => (both ||= a.isLeader() && b.isLeader()), 20);
  const xr = async (name: string) => (await fetch(`${c.url}/apis/example.org/v1/xvolumes/${name}`)).json() as Promise<any>;
  const synced = async (name: string) => (await xr(name)).status?.conditions?.some((x: any) => x.type === "Synced" && x.status === "True");
  try {
    await a.start();
    await b.start();
    await until("a leader", () => a.isLeader() || b.isLeader());
    const [leader, follower] = a.isLeader() ? [a, b] : [b, a];
    const mine = leader === a ? "replica-a" : "replica-b";
    await applyManifests(kc, [...loadDocs(join(DIR, "manifests.yaml"))], mem.log);
    await until("the XR kind served", async () => (await fetch(`${c.url}/apis/example.org/v1/xvolumes`)).ok, 10_000);
    const applyVolume = (name: string, disk: string) =>
      applyManifests(
        kc,
        [{ obj: { apiVersion: "example.org/v1", kind: "XVolume", metadata: { name }, spec: { disks: [{ name: disk }] } }, source: "test" }],
        mem.log,
      );
    await applyVolume("first", "a");
    await until("the first XR reconciled", () => synced("first"), 10_000);
    assert.equal(follower.controllerKinds(), [], "the follower runs no controller");
    assert.is(
      ((await (await fetch(`${c.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/xfn-host`)).json()) as any).spec.holderIdentity,
      mine,
    );

    await leader.crash(); // gone without letting go of the Lease
    await until("the follower to lead", () => follower.isLeader(), 5000);
    const lease = (await (await fetch(`${c.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/xfn-host`)).json()) as any;
    assert.is(lease.spec.holderIdentity, mine === "replica-a" ? "replica-b" : "replica-a");
    assert.ok(lease.spec.leaseTransitions >= 1);
    await applyVolume("second", "b");
    await until("the second XR reconciled by the new leader", () => synced("second"), 10_000);
    assert.not.ok(both, "never two leaders at once");
    assert.ok(mem.lines().some((l) => l["msg"] === "became the leader" && l["replica"] !== mine));
  } finally {
    clearInterval(watch);
    await a.stop();
    await b.stop();
    await c.stop();
  }
});

L("a leader whose Lease another takes stops reconciling and is told (xfn host exits); a stop is not a loss", async () => {
  const c = await startDevCluster();
  const kc = kubeconfigFor(c);
  const mem = memoryLog();
  let lost = 0;
  const mk = async () =>
    new Host({
      kc,
      runner: await createRunner(loadDocs(join(DIR, "functions.yaml")), join(DIR, "functions.yaml"), () => new Date()),
      log: mem.log,
      leaderElection: {
        namespace: "default",
        name: "xfn-host",
        identity: "me",
        leaseDurationMs: 1000,
        renewDeadlineMs: 500,
        retryPeriodMs: 100,
      },
      onLostLeadership: () => lost++,
    });
  const h = await mk();
  const url = `${c.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/xfn-host`;
  try {
    await h.start();
    await until("leading", () => h.isLeader());
    // Someone else writes the Lease as theirs, for a long time (a split brain, an operator's edit). The leader renews
    // every 100 ms, so the intruder's write may meet a newer version (409): it reads and writes again, as a client does.
    let put: Response | undefined;
    for (let attempt = 0; attempt < 20 && put?.status !== 200; attempt++) {
      const lease = (await (await fetch(url)).json()) as any;
      lease.spec = { ...lease.spec, holderIdentity: "intruder", leaseDurationSeconds: 3600, renewTime: new Date().toISOString() };
      put = await fetch(url, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(lease) });
      if (put.status !== 200 && put.status !== 409) break;
    }
    assert.is(put!.status, 200);
    await until("leadership lost and reported", () => !h.isLeader() && lost === 1, 5000);
    assert.ok(mem.lines().some((l) => l["msg"] === "stopped leading"));
  } finally {
    await h.stop();
  }
  const again = await mk();
  await again.start();
  // The intruder's Lease is long: campaign without leading, then stop; stopping is not a loss.
  await again.stop();
  const leader = await mk();
  const lease = (await (await fetch(url)).json()) as any;
  lease.spec = { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1 };
  await fetch(url, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(lease) });
  await leader.start();
  await until("leading again", () => leader.isLeader(), 5000);
  await leader.stop();
  await new Promise((r) => setTimeout(r, 200)); // a report would come from a callback after halting
  assert.is(lost, 1, "stop() is not reported as a lost Lease");
  await c.stop();
});

L(
  "a leader cut off from the API server (requests that never get an answer) steps down within its renew deadline, before another can take over",
  async () => {
    const c = await startDevCluster();
    const proxy = await startProxy(c.port);
    const cut = kubeconfigFor(c, proxy.port);
    const mem = memoryLog();
    const timing = { leaseDurationMs: 1500, renewDeadlineMs: 1000, retryPeriodMs: 100 };
    const times: Record<string, number> = {};
    const elector = (identity: string, kc = kubeconfigFor(c)) =>
      new Elector(kc, { namespace: "default", name: "xfn-host", identity, ...timing }, mem.log.child({ replica: identity }), {
        started: () => (times[`${identity} started`] = Date.now()),
        stopped: () => (times[`${identity} stopped`] = Date.now()),
      });
    const a = elector("replica-a", cut);
    const b = elector("replica-b");
    try {
      a.start();
      await until("replica-a leading", () => a.isLeader());
      b.start();
      await sleep(300);
      assert.not.ok(b.isLeader(), "replica-b waits while replica-a renews");
      // The network path between replica-a and the API server goes silent:
      // connections are accepted, nothing comes back, nothing is closed.
      proxy.blackhole();
      const cutAt = Date.now();
      await until("replica-b leading", () => b.isLeader(), 5000);
      assert.ok(times["replica-a stopped"], "replica-a stepped down");
      assert.ok(times["replica-a stopped"]! <= times["replica-b started"]!, "replica-a stepped down before replica-b took over");
      assert.ok(times["replica-a stopped"]! - cutAt < timing.renewDeadlineMs + 500, "within its renew deadline");
      assert.ok(
        mem.lines().some((l) => l["msg"] === "stopped leading" && /could not renew the lease within 1000 ms/.test(String(l["why"]))),
      );
    } finally {
      await a.stop(false);
      await b.stop();
      await proxy.close();
      await c.stop();
    }
  },
);

L.run();
