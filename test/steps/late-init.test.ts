import { suite } from "uvu";
import * as assert from "uvu/assert";
import { externalName, lateInit } from "../../src/steps/index.js";
import { run } from "../support/steps.js";

const L = suite("step lateInit");
const observedWith = (policies?: string[]) => ({
  kind: "Instance",
  metadata: { name: "i", annotations: { "crossplane.io/external-name": "i-1" } },
  spec: { ...(policies ? { managementPolicies: policies } : {}), forProvider: { region: "eu-west-1", size: "large", zone: "a" } },
});

const cases: Record<string, { policies?: string[]; desiredPolicies?: string[]; copies: boolean }> = {
  DefaultPolicyIsAll: { copies: true },
  Star: { policies: ["*"], copies: true },
  LateInitializeListed: { policies: ["Observe", "Create", "Update", "Delete", "LateInitialize"], copies: true },
  WithoutLateInitialize: { policies: ["Observe", "Create", "Update", "Delete"], copies: false },
  DesiredPolicyWins: { policies: ["*"], desiredPolicies: ["Observe", "Create"], copies: false },
};
for (const [name, tc] of Object.entries(cases)) {
  L(`policy: ${name}`, () => {
    const want = {
      kind: "Instance",
      spec: { ...(tc.desiredPolicies ? { managementPolicies: tc.desiredPolicies } : {}), forProvider: { size: "small" } },
    };
    const rsp = run([lateInit({ fields: ["spec.forProvider.region", "spec.forProvider.size"] })], {
      observed: { inst: observedWith(tc.policies) },
      desired: { inst: want },
    });
    const fp = (rsp.desired!.resources["inst"]!.resource!["spec"] as Record<string, Record<string, unknown>>)["forProvider"];
    assert.is(fp!["size"], "small", "never overrides a desired value");
    assert.is(fp!["region"], tc.copies ? "eu-west-1" : undefined);
    assert.is(fp!["zone"], undefined, "only configured fields");
  });
}

L("nothing configured, nothing copied; a resource not observed yet is left alone", () => {
  const rsp = run([lateInit()], { observed: { inst: observedWith() }, desired: { inst: { kind: "Instance" }, other: { kind: "X" } } });
  assert.equal(rsp.desired!.resources["inst"]!.resource, { kind: "Instance" });
  const r2 = run([lateInit({ fields: ["spec.forProvider.region"] })], { desired: { other: { kind: "X" } } });
  assert.equal(r2.desired!.resources["other"]!.resource, { kind: "X" });
});

L("external names persist without LateInitialize", () => {
  const rsp = run([externalName(), lateInit({ fields: ["spec.forProvider.region"] })], {
    observed: { inst: observedWith(["Observe", "Create", "Update", "Delete"]) },
    desired: { inst: { kind: "Instance", spec: { managementPolicies: ["Observe", "Create", "Update", "Delete"] } } },
  });
  assert.equal(rsp.desired!.composite!.resource, { status: { externalNames: { inst: "i-1" } } });
  const meta = rsp.desired!.resources["inst"]!.resource!["metadata"] as Record<string, Record<string, string>>;
  assert.is(meta["annotations"]!["crossplane.io/external-name"], "i-1");
});

L("bad configuration is refused naming the field", () => {
  assert.throws(() => lateInit({ fields: ["status.atProvider.id"] }), /"status\.atProvider\.id" must be under spec/);
  assert.throws(() => lateInit({ fields: ["spec..x"] }), /unexpected "\." at position 5/);
});

L.run();
