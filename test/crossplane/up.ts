// npm run crossplane:up: the real control plane of the real-Crossplane tier,
// kept running for a user's own experiments. When it is ready it prints
// `KUBECONFIG=<path>`; SIGTERM or Ctrl-C stops every process it started.
// (The example functions join it as issue 58 goes on; today: etcd,
// kube-apiserver, kube-controller-manager and Crossplane core.)
import { startControlPlane } from "./controlplane.js";
import { startCrossplane } from "./crossplane.js";

const cp = await startControlPlane({ log: (s) => process.stderr.write(`${s}\n`) });
const xp = await startCrossplane(cp).catch(async (err: Error) => {
  await cp.stop();
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
});
process.stdout.write(`KUBECONFIG=${cp.kubeconfig}\n`);
process.stderr.write(`kube-apiserver at ${cp.url}; kubectl at ${cp.kubectl}; logs in ${cp.dir}. Ctrl-C stops it.\n`);
let stopping = false;
const stop = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  process.stderr.write(`${signal} received: stopping the control plane\n`);
  await xp.stop();
  await cp.stop();
  process.exit(0);
};
// Installed after the control plane's own handlers, which would end its processes with SIGKILL.
process.removeAllListeners("SIGINT");
process.removeAllListeners("SIGTERM");
process.on("SIGINT", () => void stop("SIGINT"));
process.on("SIGTERM", () => void stop("SIGTERM"));
