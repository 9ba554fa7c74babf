// The bench's Go peer (bench/go/main.go, built by bench/go.ts from Debian's
// packages with types protoc-gen-go generates): it builds, and answers the
// bench request as the other bench servers do, so `npm run bench` compares
// like with like.
import { fromBinary } from "@bufbuild/protobuf";
import { spawn } from "node:child_process";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { buildGoFunction, procUsage } from "../../bench/go.js";
import { request } from "../../bench/workload.js";
import { Ready, RunFunctionResponseSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { rawClient } from "../support/client.js";
import { needs } from "../support/needs.js";

const G = needs(suite("bench: the Go peer"), "go");

G("builds from Debian's packages and answers the bench request as the other servers do", async () => {
  const child = spawn(buildGoFunction(), ["-address", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "pipe"] });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let out = "";
      child.stdout.on("data", (d: Buffer) => {
        out += d;
        const m = /listening (\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      child.once("exit", (code) => reject(new Error(`the Go peer exited with ${code}: ${out}`)));
    });
    const c = rawClient(port);
    try {
      const n = 10;
      const rsp = fromBinary(RunFunctionResponseSchema, await c.call(request(n)));
      assert.is(rsp.meta?.tag, `bench-${n}`);
      assert.is(Number(rsp.meta?.ttl?.seconds), 60);
      const names = Object.keys(rsp.desired!.resources).sort();
      assert.equal(names, Array.from({ length: n }, (_, i) => `instance-${i}`).sort());
      const status = rsp.desired!.composite!.resource!["status"] as Record<string, unknown>;
      assert.is(status["drifted"], 0, "every observed spec holds what is composed");
      assert.is(Object.keys(status["externalNames"] as object).length, n);
      for (const [name, r] of Object.entries(rsp.desired!.resources)) {
        assert.ok(r.ready === Ready.TRUE || r.ready === Ready.FALSE, name);
        const meta = r.resource!["metadata"] as { annotations?: Record<string, string>; labels: Record<string, string> };
        assert.match(meta.annotations?.["crossplane.io/external-name"] ?? "", /^i-[a-z]{17}$/, name);
        assert.is(meta.labels["bench.xfn.dev/index"], name.slice("instance-".length));
      }
      // Some ready, some not: the request's Ready conditions are 80 % True.
      assert.ok(Object.values(rsp.desired!.resources).some((r) => r.ready === Ready.FALSE));
      const usage = procUsage(child.pid!);
      assert.ok(usage.maxRssKiB > 1000 && usage.cpuMicros >= 0, JSON.stringify(usage));
    } finally {
      c.close();
    }
  } finally {
    child.kill();
  }
});

G.run();
