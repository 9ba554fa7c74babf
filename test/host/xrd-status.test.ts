// What the host writes to an XRD's status, from Crossplane's own code and
// tests (crossplane 2d040d2d: apis/apiextensions/v1/conditions.go,
// apis/core/v2/condition.go's Equal and SetConditions and their tests,
// internal/controller/apiextensions/definition/reconciler_test.go's
// WatchingComposite and TerminatingComposite cases).
import type { JsonObject } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { isEstablished, setConditions, xrdStatusPatch } from "../../src/host/xrd-status.js";

const X = suite("host: an XRD's status");
const NOW = "2026-11-28T10:00:00Z";
const THEN = "2026-11-01T10:00:00Z";

const established = (over: JsonObject = {}): JsonObject => ({
  type: "Established",
  status: "True",
  lastTransitionTime: THEN,
  reason: "WatchingCompositeResource",
  observedGeneration: 2,
  ...over,
});

const setCases: Record<string, { reason: string; current: JsonObject[]; generation: number; want: JsonObject[] | undefined }> = {
  Added: {
    reason: "a condition of a type not there is added, with the generation and now",
    current: [],
    generation: 2,
    want: [established({ lastTransitionTime: NOW })],
  },
  Equal: {
    reason: "an equal condition is kept as it is, its lastTransitionTime too: nothing changed",
    current: [established()],
    generation: 2,
    want: undefined,
  },
  EqualWithoutGeneration: {
    reason: "Equal compares observedGeneration only when both have one",
    current: [established({ observedGeneration: undefined as never })].map((c) => {
      const { observedGeneration: _, ...rest } = c;
      return rest;
    }),
    generation: 2,
    want: undefined,
  },
  NewGeneration: {
    reason: "a new generation replaces the condition (ControllerNeedsRestart reads it)",
    current: [established({ observedGeneration: 1 })],
    generation: 2,
    want: [established({ lastTransitionTime: NOW })],
  },
  OthersKept: {
    reason: "conditions of other types stay, in their place",
    current: [{ type: "Responsive", status: "True", reason: "WatchCircuitClosed", lastTransitionTime: THEN }],
    generation: 2,
    want: [
      { type: "Responsive", status: "True", reason: "WatchCircuitClosed", lastTransitionTime: THEN },
      established({ lastTransitionTime: NOW }),
    ],
  },
};
for (const [name, tc] of Object.entries(setCases)) {
  X(`setConditions: ${name}`, () => {
    assert.equal(
      setConditions(tc.current, [{ type: "Established", status: "True", reason: "WatchingCompositeResource" }], tc.generation, NOW),
      tc.want,
      tc.reason,
    );
  });
}

const xrd = (over: JsonObject = {}): JsonObject => ({
  apiVersion: "apiextensions.crossplane.io/v2",
  kind: "CompositeResourceDefinition",
  metadata: { name: "xvolumes.example.org", generation: 2 },
  spec: { group: "example.org", names: { kind: "XVolume", plural: "xvolumes" } },
  ...over,
});
const serving = { serving: { apiVersion: "example.org/v1", kind: "XVolume" } };
/**
 * The claim type Crossplane writes when no claim is served: both types are struct fields of its XRD status, so
 * written even when empty (real Crossplane v2.4.0 wrote it so in test/crossplane/crossplane.test.ts).
 */
const NO_CLAIM = { apiVersion: "", kind: "" };

const patchCases: Record<
  string,
  { reason: string; xrd: JsonObject; phase: Parameters<typeof xrdStatusPatch>[1]; want: JsonObject | undefined }
> = {
  Serving: {
    reason: "serving its XR kind: Established=True WatchingCompositeResource and the controller's type, as the reconciler's last write",
    xrd: xrd(),
    phase: serving,
    want: {
      status: {
        conditions: [established({ lastTransitionTime: NOW })],
        controllers: { compositeResourceClaimType: NO_CLAIM, compositeResourceType: { apiVersion: "example.org/v1", kind: "XVolume" } },
      },
    },
  },
  AlreadySaid: {
    reason: "a status that says so already needs no write",
    xrd: xrd({ status: { conditions: [established()], controllers: { compositeResourceType: serving.serving } } }),
    phase: serving,
    want: undefined,
  },
  NewReferenceableVersion: {
    reason: "the controller's type follows the referenceable version (reconciler_test's 'old' -> 'new' API version)",
    xrd: xrd({
      status: { conditions: [established()], controllers: { compositeResourceType: { apiVersion: "example.org/v0", kind: "XVolume" } } },
    }),
    phase: serving,
    want: { status: { controllers: { compositeResourceClaimType: NO_CLAIM, compositeResourceType: serving.serving } } },
  },
  Terminating: {
    reason: "while the XRD is deleted: Established=False TerminatingCompositeResource",
    xrd: xrd({ status: { conditions: [established()] } }),
    phase: { terminating: true },
    want: {
      status: {
        conditions: [
          { type: "Established", status: "False", lastTransitionTime: NOW, reason: "TerminatingCompositeResource", observedGeneration: 2 },
        ],
      },
    },
  },
  ClaimsNotServed: {
    reason: "an XRD offering claims: the host serves none and says so in Offered (a difference from Crossplane, listed in docs/host.md)",
    xrd: xrd({
      spec: { group: "example.org", names: { kind: "XVolume", plural: "xvolumes" }, claimNames: { kind: "Volume", plural: "volumes" } },
    }),
    phase: serving,
    want: {
      status: {
        conditions: [
          established({ lastTransitionTime: NOW }),
          {
            type: "Offered",
            status: "False",
            lastTransitionTime: NOW,
            reason: "ClaimsNotServed",
            message: "xfn host does not serve claims: create the XRs directly",
            observedGeneration: 2,
          },
        ],
        controllers: { compositeResourceClaimType: NO_CLAIM, compositeResourceType: serving.serving },
      },
    },
  },
};
for (const [name, tc] of Object.entries(patchCases)) {
  X(`xrdStatusPatch: ${name}`, () => {
    assert.equal(xrdStatusPatch(tc.xrd, tc.phase, NOW), tc.want, tc.reason);
  });
}

X("isEstablished: a CRD is established by its Established=True condition only (xcrd.IsEstablished)", () => {
  assert.ok(isEstablished({ status: { conditions: [{ type: "Established", status: "True" }] } }));
  assert.not.ok(isEstablished({ status: { conditions: [{ type: "Established", status: "False" }] } }));
  assert.not.ok(isEstablished({ status: { conditions: [{ type: "NamesAccepted", status: "True" }] } }));
  assert.not.ok(isEstablished({}));
  assert.not.ok(isEstablished(undefined));
});

X.run();
