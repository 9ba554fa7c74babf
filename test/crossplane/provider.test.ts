// The tier's test provider (issue 58, item 4) on a real control plane:
// crossplane-runtime v2's managed reconciler (the version of
// test/anchors/versions.json) over a fake cloud that outlives the provider.
// What each test expects is what that reconciler does, read at
// crossplane-runtime v2.4.0 pkg/reconciler/managed/reconciler.go: the
// finalizer, the name-as-external-name initialiser, the create-pending and
// create-succeeded annotations, late-init persisted only under a policy with
// LateInitialize, the refusal to go on after a create with no recorded result.
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
// @ts-expect-error -- a plain .mjs script without types
import { build } from "../../scripts/anchors.mjs";
import { needs } from "../support/needs.js";
import { eventually as eventuallyOn, startControlPlane, type ControlPlane } from "./controlplane.js";
import { kubectl, kubectlApply } from "./functions.js";
import { BUCKETS, INSTANCES, installProviderCrds, startProvider, type Provider } from "./provider.js";

const P = suite("the test provider: crossplane-runtime's managed reconciler over a fake cloud that outlives it");
const G = needs(P, "go1.26");
let cp: ControlPlane | undefined;
let provider: Provider | undefined;

G.before(async () => {
  cp = await startControlPlane();
  await installProviderCrds(cp);
  provider = await startProvider(cp, { poll: "1s", readyAfter: "2s", creationGracePeriod: "1s" });
});
G.after(async () => {
  await provider?.stop();
  await cp?.stop();
});

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
interface Managed {
  metadata: {
    name: string;
    uid: string;
    resourceVersion: string;
    annotations?: Record<string, string>;
    finalizers?: string[];
  };
  spec: { forProvider?: Record<string, unknown>; managementPolicies?: string[] };
  status?: { atProvider?: Record<string, unknown>; conditions?: Condition[] };
}

const get = async (kind: string, name: string): Promise<Managed> =>
  JSON.parse(await kubectl(cp!, "get", kind, name, "-o", "json")) as Managed;
const condition = (o: Managed, type: string) => o.status?.conditions?.find((c) => c.type === type);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** eventually is controlplane's eventually with this suite's logs. */
const eventually = <T>(what: string, check: () => Promise<T | undefined | false | null | "" | 0>, ms = 60_000) =>
  eventuallyOn(what, check, ms, () => `the provider's log ends:\n${provider!.logTail(40)}`);

const bucket = (name: string, forProvider: Record<string, unknown>, managementPolicies?: string[]) => ({
  apiVersion: "s3.aws.upbound.io/v1beta1",
  kind: "Bucket",
  metadata: { name },
  spec: { forProvider, ...(managementPolicies ? { managementPolicies } : {}) },
});
const instance = (name: string, managementPolicies?: string[]) => ({
  apiVersion: "rds.aws.upbound.io/v1beta1",
  kind: "Instance",
  metadata: { name },
  spec: { forProvider: { region: "eu-west-1", instanceClass: "db.t3.micro" }, ...(managementPolicies ? { managementPolicies } : {}) },
});
const creates = (kind: string, token: string) => provider!.ops().filter((o) => o.op === "create" && o.kind === kind && o.token === token);

G(
  "a Bucket's life: finalizer, its name as external name, created once, late-initialized, ready, updated, deleted with its cloud resource",
  async () => {
    await kubectlApply(cp!, bucket("life", { region: "eu-west-1" }));
    const ready = await eventually("the Bucket ready and synced", async () => {
      const b = await get(BUCKETS, "life");
      return condition(b, "Ready")?.status === "True" && condition(b, "Synced")?.status === "True" && b;
    });
    assert.equal(ready.metadata.finalizers, ["finalizer.managedresource.crossplane.io"]);
    assert.is(ready.metadata.annotations?.["crossplane.io/external-name"], "life");
    assert.ok(ready.metadata.annotations?.["crossplane.io/external-create-succeeded"], "no create-succeeded annotation");
    // The cloud's default, late-initialized into spec (the default policy is "*").
    assert.is(ready.spec.forProvider?.["storageClass"], "STANDARD");
    assert.is(ready.status?.atProvider?.["state"], "available");
    assert.is(creates("Bucket", ready.metadata.uid).length, 1);
    assert.equal(provider!.objects("Bucket").find((o) => o.id === "life")?.params, { region: "eu-west-1", storageClass: "STANDARD" });

    await kubectl(cp!, "patch", BUCKETS, "life", "--type=merge", "-p", JSON.stringify({ spec: { forProvider: { region: "us-east-1" } } }));
    await eventually(
      "the cloud resource updated",
      async () => provider!.objects("Bucket").find((o) => o.id === "life")?.params["region"] === "us-east-1",
    );

    await kubectl(cp!, "delete", BUCKETS, "life", "--wait=true", "--timeout=60s");
    assert.is(
      provider!.objects("Bucket").find((o) => o.id === "life"),
      undefined,
      "the cloud resource outlived its Bucket",
    );
    assert.is(provider!.ops().filter((o) => o.op === "delete" && o.id === "life").length, 1);
  },
);

G(
  "management policies: Observe only adopts what the cloud has and never creates; without LateInitialize the spec is left alone and the object settles",
  async () => {
    // Observe only, nothing in the cloud: no create, ever; the resource says it is not there.
    await kubectlApply(cp!, bucket("observed", { region: "eu-west-1" }, ["Observe"]));
    await eventually("the Observe-only Bucket reports no external resource", async () => {
      const b = await get(BUCKETS, "observed");
      return condition(b, "Synced")?.status === "False" && /does not exist|not exist/i.test(condition(b, "Synced")?.message ?? "");
    });
    assert.is(creates("Bucket", (await get(BUCKETS, "observed")).metadata.uid).length, 0);

    // Without LateInitialize the cloud's default stays out of spec, and the object stops changing: no endless reconcile.
    await kubectlApply(cp!, bucket("strict", { region: "eu-west-1" }, ["Observe", "Create", "Update", "Delete"]));
    const b = await eventually("the strict Bucket ready", async () => {
      const o = await get(BUCKETS, "strict");
      return condition(o, "Ready")?.status === "True" && o;
    });
    assert.is(b.spec.forProvider?.["storageClass"], undefined);
    assert.is(b.status?.atProvider?.["storageClass"], "STANDARD");
    await sleep(4_000); // four polls
    const later = await get(BUCKETS, "strict");
    assert.is(later.metadata.resourceVersion, b.metadata.resourceVersion, "the object kept changing while nothing changed");
    assert.is(creates("Bucket", b.metadata.uid).length, 1);
    await kubectl(cp!, "delete", BUCKETS, "observed", "strict", "--wait=true", "--timeout=60s");
  },
);

G(
  "an Instance the cloud names late: with LateInitialize its ID is persisted; without it a restarted provider forgets the ID and creates a second (failure mode 4's story)",
  async () => {
    await kubectlApply(cp!, instance("kept"));
    await kubectlApply(cp!, instance("lost", ["Observe", "Create", "Update", "Delete"]));
    const kept = await eventually("the ID persisted as external name under the default policy", async () => {
      const o = await get(INSTANCES, "kept");
      return o.metadata.annotations?.["crossplane.io/external-name"] ? o : undefined;
    });
    assert.match(kept.metadata.annotations!["crossplane.io/external-name"]!, /^in-[0-9a-f]{8}$/);
    const lost = await eventually("the other Instance ready, its ID only in status", async () => {
      const o = await get(INSTANCES, "lost");
      return condition(o, "Ready")?.status === "True" && o;
    });
    assert.is(lost.metadata.annotations?.["crossplane.io/external-name"], undefined);
    const id = lost.status?.atProvider?.["id"];
    assert.match(String(id), /^in-[0-9a-f]{8}$/);

    await provider!.kill();
    await provider!.start();
    await eventually(
      "the restarted provider creates the unnamed Instance again",
      async () => creates("Instance", lost.metadata.uid).length === 2,
    );
    const clouds = provider!.objects("Instance").filter((o) => o.token === lost.metadata.uid);
    assert.is(clouds.length, 2, "two cloud resources for one Instance");
    // The named one is observed, not created again.
    await sleep(2_000);
    assert.is(creates("Instance", kept.metadata.uid).length, 1);
    await kubectl(cp!, "delete", INSTANCES, "kept", "lost", "--wait=true", "--timeout=60s");
  },
);

G(
  "a provider killed after the cloud made a Bucket and before it recorded the result: the restarted provider refuses to go on rather than risk a second",
  async () => {
    provider!.set("crash-after-create", "");
    await kubectlApply(cp!, bucket("crashed", { region: "eu-west-1" }));
    assert.is(await provider!.exited(60_000), 3);
    await provider!.start();
    const b = await eventually("the Bucket says its create result is unknown", async () => {
      const o = await get(BUCKETS, "crashed");
      return /cannot determine creation result/.test(condition(o, "Synced")?.message ?? "") ? o : undefined;
    });
    assert.ok(b.metadata.annotations?.["crossplane.io/external-create-pending"], "no create-pending annotation");
    assert.is(b.metadata.annotations?.["crossplane.io/external-create-succeeded"], undefined);
    await sleep(2_000);
    assert.is(creates("Bucket", b.metadata.uid).length, 1);
    // What the message tells an operator to do, once the cloud has been checked: the reconcile goes on, and finds it.
    await kubectl(cp!, "annotate", BUCKETS, "crashed", "crossplane.io/external-create-pending-");
    await eventually(
      "the Bucket adopted after the annotation is removed",
      async () => condition(await get(BUCKETS, "crashed"), "Ready")?.status === "True",
    );
    assert.is(creates("Bucket", b.metadata.uid).length, 1);
    await kubectl(cp!, "delete", BUCKETS, "crashed", "--wait=true", "--timeout=60s");
  },
);

G(
  "a failing cloud: the Bucket says why and recovers once the cloud does; the provider without its --state, or with a cloud folder it cannot make, refuses to start, naming why",
  async () => {
    provider!.set("fail-create", "quota exceeded for buckets in eu-west-1");
    await kubectlApply(cp!, bucket("refused", { region: "eu-west-1" }));
    await eventually("the cloud's refusal on the Bucket", async () =>
      /quota exceeded for buckets in eu-west-1/.test(condition(await get(BUCKETS, "refused"), "Synced")?.message ?? ""),
    );
    provider!.set("fail-create", undefined);
    await eventually(
      "the Bucket created once the cloud takes it",
      async () => condition(await get(BUCKETS, "refused"), "Ready")?.status === "True",
    );
    await kubectl(cp!, "delete", BUCKETS, "refused", "--wait=true", "--timeout=60s");

    const bin = (build("provider") as { provider: string }).provider;
    const r = spawnSync(bin, [`--kubeconfig=${cp!.kubeconfig}`], { encoding: "utf8", timeout: 30_000 });
    assert.is(r.status, 2);
    assert.match(r.stderr, /--state is required/);
    // A cloud folder it cannot make: the start fails with the provider's own words from its log.
    writeFileSync(join(cp!.dir, "cloud-blocked"), "a file where the folder would be");
    const err = await startProvider(cp!, { name: "blocked" }).then(
      () => undefined,
      (e: Error) => e.message,
    );
    assert.match(err ?? "started", /blocked ended \(1\) while starting; its log ends:[\s\S]*cannot make the cloud's folder/);
  },
);

P.run();
