// Background traffic for bench/pool.ts, in its own process so that its work
// never delays the calls being timed: `node --import tsx bench/background.ts
// PORT N C` sends RunFunction calls for N composed resources, C at a time,
// until it is sent a message or killed; it then reports how many calls
// succeeded and why any failed.
import { frame, h2Caller } from "./h2.js";
import { request } from "./workload.js";

const [port, n, c] = process.argv.slice(2).map(Number) as [number, number, number];
const caller = await h2Caller(port);
const framed = frame(request(n));
let stop = false;
let sent = 0;
const errors: string[] = [];
process.on("message", () => (stop = true));
process.on("SIGTERM", () => (stop = true));
process.send?.({ ready: true });
await Promise.all(
  Array.from({ length: c }, async () => {
    while (!stop) {
      try {
        await caller.call(framed);
        sent++;
      } catch (err) {
        // Reported, not fatal: the parent says how the background calls went.
        errors.push((err as Error).message);
      }
    }
  }),
);
caller.close();
process.send?.({ sent, errors });
process.exit(0);
