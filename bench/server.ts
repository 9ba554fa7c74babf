// One benchmark server in its own process, so its CPU and memory are its own.
//   node --import tsx bench/server.ts <xfn|xfn-pool|peer|floor|send-floor> <port>
// The parent asks for usage over IPC.
import { Server, ServerCredentials, status, type sendUnaryData, type ServerUnaryCall } from "@grpc/grpc-js";
import { pino } from "pino";
import { join } from "node:path";
import { tuneHeap } from "../src/server/heap.js";
import { createLogger } from "../src/server/log.js";
import { DEFAULT_WORKERS } from "../src/server/limits.js";
import { rawService, serve } from "../src/server/server.js";
import { decodeRequest, encodeResponse } from "../src/wire/codec.js";
import { composed, EXT, holds, xfnFunction } from "./workload.js";

const [kind, portArg] = process.argv.slice(2);
const port = Number(portArg);
const address = `127.0.0.1:${port}`;

async function startXfn() {
  const fn = xfnFunction();
  await serve(fn, { address, insecure: true, maxRecvMessageSizeMB: 8 }, createLogger({ destination: { write: () => {} } }));
}

async function startXfnPool() {
  // As `xfn serve bench/fn.ts` runs it by default: the function on a pool of
  // worker threads (compiled lib/, so `npm run build` first). Ready once a worker has loaded it.
  const srv = await serve(
    null,
    {
      address,
      insecure: true,
      maxRecvMessageSizeMB: 8,
      workers: {
        workers: DEFAULT_WORKERS,
        script: new URL("../lib/server/worker-entry.js", import.meta.url),
        workerData: {
          xfnWorker: true,
          module: join(import.meta.dirname, "fn.ts"),
          label: "bench",
          debug: false,
          maxResponseBytes: 8 << 20,
        },
      },
    },
    createLogger({ destination: { write: () => {} } }),
  );
  await srv.loaded;
}

async function startPeer() {
  const sdk = await import("@crossplane-org/function-sdk-typescript");
  const compose = (req: any, rsp: any) => {
    const xr = req.observed.composite.resource;
    const n = Number(xr.spec.count);
    const observed = req.observed.resources ?? {};
    const names: Record<string, string> = {};
    let drifted = 0;
    for (let i = 0; i < n; i++) {
      const key = `instance-${i}`;
      const obj = composed(xr, i) as any;
      const seen = observed[key]?.resource;
      if (seen?.spec !== undefined && !holds(seen.spec, obj.spec)) drifted++;
      const ext = seen?.metadata?.annotations?.[EXT];
      if (ext) {
        names[key] = ext;
        obj.metadata.annotations = { [EXT]: ext };
      }
      const ready = (seen?.status?.conditions ?? []).some((c: any) => c.type === "Ready" && c.status === "True");
      rsp.desired.resources[key] = sdk.Resource.fromJSON({ resource: obj, ready: ready ? "READY_TRUE" : "READY_FALSE" });
    }
    return sdk.setDesiredCompositeStatus({ rsp, status: { externalNames: names, drifted } });
  };
  sdk.serve(compose as never, { argv: ["--insecure", "--address", address], logger: pino({ level: "silent" }) });
}

function startFloor(send: boolean) {
  // floor: reads the tag (RunFunctionRequest.meta = 1, RequestMeta.tag = 1) and
  // answers an otherwise empty response: the bytes moved, nothing more.
  // send-floor: answers with the bytes of xfn's response to the same request,
  // worked out on the first request with that tag and kept: the request moved
  // in and the response moved out, which any server doing this job pays.
  const server = new Server({ "grpc.max_receive_message_length": 8 * 1024 * 1024 });
  const fn = xfnFunction();
  const answers = new Map<string, Buffer>();
  const tagOf = (b: Buffer): Buffer => {
    let i = 0;
    const varint = () => {
      let v = 0;
      let s = 0;
      for (;;) {
        const x = b[i++]!;
        v += (x & 0x7f) * 2 ** s;
        if (x < 0x80) return v;
        s += 7;
      }
    };
    while (i < b.length) {
      const key = varint();
      const wt = key & 7;
      if (wt === 2) {
        const len = varint();
        if (key >>> 3 === 1) {
          const m = b.subarray(i, i + len);
          if (m[0] === 0x0a) return m.subarray(2, 2 + m[1]!);
          return Buffer.alloc(0);
        }
        i += len;
      } else if (wt === 0) varint();
      else return Buffer.alloc(0);
    }
    return Buffer.alloc(0);
  };
  server.addService(rawService("apiextensions.fn.proto.v1.FunctionRunnerService"), {
    RunFunction: (call: ServerUnaryCall<Buffer, Buffer>, cb: sendUnaryData<Buffer>) => {
      const tag = tagOf(call.request);
      if (send) {
        const key = tag.toString();
        const known = answers.get(key);
        if (known) return cb(null, known);
        // A failure answers INTERNAL, so the bench reports it instead of waiting out the deadline.
        (async () => Buffer.from(encodeResponse(await fn(decodeRequest(call.request), { now: () => new Date(0) } as never))))().then(
          (out) => {
            answers.set(key, out);
            cb(null, out);
          },
          (err: unknown) => cb({ code: status.INTERNAL, details: `send-floor: ${err instanceof Error ? err.message : String(err)}` }),
        );
        return;
      }
      const meta = Buffer.concat([Buffer.from([0x0a, tag.length]), tag]);
      cb(null, Buffer.concat([Buffer.from([0x0a, meta.length]), meta]));
    },
  });
  server.bindAsync(address, ServerCredentials.createInsecure(), () => {});
}

// Every server runs with the V8 heap growing factor `xfn serve` sets (src/server/heap.ts). The xfn
// servers start as a user's does; the floors and the peer get it so that each ratio compares the
// work done per call, not how V8 sizes a heap after an idle spell (with V8's defaults, send-floor at
// N = 100 c = 1 cost 1.0 ms per call in one run and 2.3 in the next).
tuneHeap();
if (kind === "xfn") await startXfn();
else if (kind === "xfn-pool") await startXfnPool();
else if (kind === "peer") await startPeer();
else if (kind === "floor" || kind === "send-floor") startFloor(kind === "send-floor");
else throw new Error(`unknown server ${kind}`);

process.on("message", (m: { cmd: string }) => {
  // exit ends the process normally, so that a --cpu-prof profile is written.
  if (m.cmd === "exit") process.exit(0);
  if (m.cmd === "usage") {
    const cpu = process.cpuUsage();
    process.send!({ cpuMicros: cpu.user + cpu.system, maxRssKiB: process.resourceUsage().maxRSS });
  }
});
process.send!({ ready: true });
