// The host's own tests on the real kube-apiserver (issue 58, item 7): the
// host loop's tests (test/host/host.test.ts: reconcile, events, the failure
// modes) and its kill -9 end-to-end test (test/e2e/host-crash.test.ts), run
// again here with XFN_TEST_APISERVER=kube-apiserver, so each starts the real
// control plane (test/crossplane/controlplane.ts) where it would start the
// embedded API server (test/support/apiserver.ts says how they reach it).
// Their expectations are what the embedded server's tests already assert: a
// difference fails here, and is fixed or written in docs/dev-cluster.md.
import { suite } from "uvu";
import { has, needs } from "../support/needs.js";

if (has("go1.26")) {
  // Read when the files below are first evaluated (test/support/apiserver.ts's REAL_APISERVER).
  process.env["XFN_TEST_APISERVER"] = "kube-apiserver";
  await import("../host/host.test.js");
  await import("../e2e/host-crash.test.js");
} else {
  const G = needs(suite("the host's own tests on the real kube-apiserver"), "go1.26");
  G("test/host/host.test.ts and test/e2e/host-crash.test.ts against kube-apiserver", () => {});
  G.run();
}
