// Background traffic for bench/pool.ts, in its own process so that its work
// never delays the calls being timed: `node --import tsx bench/background.ts
// PORT N C` sends RunFunction calls for N composed resources, C at a time,
// until it is sent a message or killed; it prints how many it sent on exit.
import { frame, h2Caller } from "./h2.js";
import { request } from "./workload.js";

const [port, n, c] = process.argv.slice(2).map(Number) as [number, number, number];
const caller = await h2Caller(port);
const framed = frame(request(n));
let stop = false;
let sent = 0;
process.on("message", () => (stop = true));
process.on("SIGTERM", () => (stop = true));
process.send?.({ ready: true });
await Promise.all(
  Array.from({ length: c }, async () => {
    while (!stop) {
      await caller.call(framed);
      sent++;
    }
  }),
);
caller.close();
process.send?.({ sent });
process.exit(0);
