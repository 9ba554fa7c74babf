import { create, toBinary } from "@bufbuild/protobuf";
import { RunFunctionRequestSchema } from "./src/gen/fn/v1/run_function_pb.js";
import { decodeRequest } from "./src/wire/codec.js";
const marker = "Q".repeat(200);
const resources = { x: { resource: { spec: { s: marker } } } };
const bytes = toBinary(RunFunctionRequestSchema, create(RunFunctionRequestSchema, { observed: { resources }, desired: { resources } } as never));
const text = Buffer.from(bytes).toString("latin1");
const at = text.indexOf(marker);
const out = Uint8Array.from(bytes);
out[at + 100] = 0xff;
const o = decodeRequest(out).observed!.resources["x"]!.resource!;
for (let i = 0; i < 3; i++) try { const v = o["spec"]; console.log("READ", typeof v, JSON.stringify(v).slice(0, 80)); } catch (e) { console.log("THREW", (e as Error).message); }
