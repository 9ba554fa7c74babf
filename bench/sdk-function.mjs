// The bench function on @crossplane-org/function-sdk-typescript, as plain
// JavaScript (no TypeScript loader), for bench/startup.ts to time how long the
// TypeScript SDK takes from `node` to its first answer.
//   node bench/sdk-function.mjs <port> [host]   (host: 127.0.0.1; 0.0.0.0 in an image)
import * as sdk from "@crossplane-org/function-sdk-typescript";
import { pino } from "pino";

const compose = (req, rsp) => {
  const xr = req.observed.composite.resource;
  const n = Number(xr.spec.count);
  const observed = req.observed.resources ?? {};
  for (let i = 0; i < n; i++) {
    const key = `instance-${i}`;
    const ready = (observed[key]?.resource?.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
    rsp.desired.resources[key] = sdk.Resource.fromJSON({
      resource: { apiVersion: "ec2.aws.upbound.io/v1beta1", kind: "Instance", spec: { forProvider: { region: xr.spec.region } } },
      ready: ready ? "READY_TRUE" : "READY_FALSE",
    });
  }
  return rsp;
};
sdk.serve(compose, {
  argv: ["--insecure", "--address", `${process.argv[3] ?? "127.0.0.1"}:${process.argv[2]}`],
  logger: pino({ level: "silent" }),
});
