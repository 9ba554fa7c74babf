// Which function answered (src/server/served-by.ts): the headers xfn serve sends, read back.
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { describeServedBy, readServedBy, servedByHeaders } from "../../src/server/served-by.js";
import * as response from "../../src/sdk/response.js";
import { serve } from "../../src/server/server.js";
import { memoryLog } from "../support/log.js";
import { request } from "../support/requests.js";
import { dial } from "../../src/client/client.js";

const S = suite("server: served-by headers");

const STARTED = new Date("2026-11-26T10:00:00.000Z");

S("any module path comes back whole through printable-ASCII headers", () => {
  for (const module of ["/srv/functions/hello/index.ts", "C:\\fns\\a b.ts", "/tmp/100%/fn.ts", "/home/zoë/函数/index.ts", "/x/😀.ts"]) {
    const h = servedByHeaders(module, STARTED, 42);
    for (const v of Object.values(h)) assert.match(v, /^[\x20-\x7e]*$/, v);
    assert.equal(readServedBy(h), { module, started: STARTED, pid: 42 });
  }
});

S("headers missing or malformed read as not said", () => {
  const h = servedByHeaders("/m.ts", STARTED, 42);
  const cases: Record<string, string>[] = [
    {},
    { ...h, "xfn-module": "%E0%A4%A" },
    { ...h, "xfn-started": "yesterday" },
    { ...h, "xfn-pid": "x" },
    { "xfn-started": h["xfn-started"]!, "xfn-pid": "42" },
  ];
  for (const c of cases) assert.is(readServedBy(c), undefined, JSON.stringify(c));
});

S("described with the time it has been serving", () => {
  const s = { module: "/m.ts", started: STARTED, pid: 7 };
  const at = (ms: number) => describeServedBy(s, new Date(STARTED.getTime() + ms));
  assert.is(at(5_000), "answered by xfn serve /m.ts (pid 7), serving since 2026-11-26T10:00:00.000Z (5 s ago)");
  assert.match(at(125_000), /\(2 min ago\)$/);
  assert.match(at(3 * 3600_000 + 60_000), /\(3 h 1 min ago\)$/);
  assert.match(at(50 * 3600_000), /\(2 d 2 h ago\)$/);
  assert.match(at(-1000), /\(in the future: the clocks differ\)$/);
  assert.match(describeServedBy(undefined), /^the server did not say which function answered/);
});

S("serve sends its headers with answers, and refuses a header it cannot send", async () => {
  const headers = servedByHeaders("/m.ts", STARTED, 42);
  const srv = await serve((req) => response.to(req), { address: "127.0.0.1:0", insecure: true, headers }, memoryLog().log);
  const c = dial(`127.0.0.1:${srv.port}`, { insecure: true });
  try {
    let got: Record<string, string> = {};
    await c.run(request(), { onHeaders: (h) => (got = h) });
    assert.equal(readServedBy(got), { module: "/m.ts", started: STARTED, pid: 42 });
  } finally {
    c.close();
    await srv.stop(1000);
  }
  for (const [bad, want] of [
    [{ "Xfn-Module": "a" }, /response header "Xfn-Module": a name must be lower-case/],
    [{ "grpc-status": "0" }, /not grpc-\*/],
    [{ "xfn-module": "zoë" }, /response header xfn-module: "zoë" is not printable ASCII/],
  ] as const) {
    try {
      await serve((req) => response.to(req), { address: "127.0.0.1:0", insecure: true, headers: bad }, memoryLog().log);
      assert.unreachable(JSON.stringify(bad));
    } catch (err) {
      assert.match((err as Error).message, want);
    }
  }
});

S.run();
