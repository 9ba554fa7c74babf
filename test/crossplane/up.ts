// npm run crossplane:up: the real control plane of the real-Crossplane tier,
// kept running for a user's own experiments: etcd, kube-apiserver,
// kube-controller-manager, Crossplane core, the tier's test provider (Buckets
// and Instances over a fake cloud, test/crossplane/provider.ts), a local
// registry, and the example functions (functions/hello, functions/lifecycle)
// installed from their .xpkg as the tier installs them
// (test/crossplane/functions.ts). When it is ready
// it prints `KUBECONFIG=<path>`; SIGTERM or Ctrl-C stops every process and
// container it started. Without podman the functions are left out, and it
// says so (podman runs their images).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TOOLS } from "../support/needs.js";
import { startControlPlane } from "./controlplane.js";
import { startCrossplane, type Crossplane } from "./crossplane.js";
import { buildXpkg, installFunction, startRegistry, type InstalledFunction, type Registry } from "./functions.js";
import { installProviderCrds, startProvider, type Provider } from "./provider.js";

const say = (s: string) => process.stderr.write(`${s}\n`);
// A control plane that cannot be built or started (no Go, a failed build, a process that ended) is said in a
// line naming which and why (its log's tail), not a stack; what had started is stopped by startControlPlane.
const cp = await startControlPlane({ log: say }).catch((err: Error) => {
  say(`crossplane:up: cannot start the control plane: ${err.message}`);
  process.exit(1);
});
const work = mkdtempSync(join(tmpdir(), "xfn-crossplane-up-"));
// Removed however the process ends: another module's signal handler (the containers' sweep) may exit first.
process.on("exit", () => rmSync(work, { recursive: true, force: true }));
// Set once Crossplane is up; a signal may come before, while it starts.
const started: { xp?: Crossplane } = {};
let registry: Registry | undefined;
let provider: Provider | undefined;
const functions: InstalledFunction[] = [];
let stopping = false;
const stopAll = async () => {
  for (const f of functions) await f.stop().catch(() => {});
  await registry?.stop().catch(() => {});
  await provider?.stop().catch(() => {});
  await started.xp?.stop().catch(() => {});
  await cp.stop();
  rmSync(work, { recursive: true, force: true });
};
const fail = async (err: Error) => {
  say(`crossplane:up: ${err.message}`);
  stopping = true;
  await stopAll();
  process.exit(1);
};
// Installed after the control plane's own handlers, which would end its processes with SIGKILL.
process.removeAllListeners("SIGINT");
process.removeAllListeners("SIGTERM");
for (const signal of ["SIGINT", "SIGTERM"] as const)
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    say(`${signal} received: stopping the control plane`);
    void stopAll().then(() => process.exit(0));
  });

const xp = await startCrossplane(cp, say).catch(fail);
if (xp) started.xp = xp;
try {
  if (!stopping) {
    await installProviderCrds(cp);
    provider = await startProvider(cp, { poll: "5s", readyAfter: "3s", log: say });
  }
} catch (err) {
  await fail(err as Error);
}
const podmanMissing = TOOLS.podman.missing();
if (podmanMissing) {
  say(`the example functions are not installed: ${podmanMissing} (Debian: apt-get install ${TOOLS.podman.packages})`);
} else {
  try {
    registry = await startRegistry(join(work, "registry"), say);
    for (const name of ["hello", "lifecycle"]) {
      if (stopping) break;
      say(`building and installing function-${name} from its .xpkg`);
      const xpkg = await buildXpkg(name, work);
      functions.push(
        await installFunction(cp, registry, `function-${name}`, xpkg, {
          work,
          clientCertsDir: xp.clientCertsDir,
          crossplaneLog: () => xp.logTail(),
        }),
      );
    }
  } catch (err) {
    await fail(err as Error);
  }
}
if (!stopping) {
  process.stdout.write(`KUBECONFIG=${cp.kubeconfig}\n`);
  say(`kube-apiserver at ${cp.url}; kubectl at ${cp.kubectl}; logs in ${cp.dir}.`);
  if (provider) say(`the test provider reconciles Buckets and Instances; its fake cloud is ${provider.state}.`);
  if (registry) say(`registry at ${registry.host}; functions installed: ${functions.map((f) => f.name).join(", ")}.`);
  say(
    "Try: kubectl apply -f examples/host/xrd.yaml, then examples/composition.yaml and examples/xr.yaml (the Bucket CRD is the provider's). Ctrl-C stops it.",
  );
}
