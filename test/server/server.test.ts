// The function server over real loopback sockets: both API versions, health,
// mTLS, bad input, limits, deadlines and shutdown.
import { X509Certificate } from "node:crypto";
import { connect } from "node:http2";
import { connect as tlsConnect } from "node:tls";
import { toBinary } from "@bufbuild/protobuf";
import { Client, credentials, status as Code } from "@grpc/grpc-js";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import type { RunFunction } from "../../src/function.js";
import { RunFunctionRequestSchema, Severity } from "../../src/gen/fn/v1/run_function_pb.js";
import * as response from "../../src/sdk/response.js";
import { Cancel, createHandler } from "../../src/server/handler.js";
import { CONNECTION_WINDOW, STREAM_WINDOW } from "../../src/server/limits.js";
import { serve, type RunningServer, type ServeOptions } from "../../src/server/server.js";
import { makePki, type TestPki } from "../support/certs.js";
import { codeOf, mtlsCredentials, rawClient, V1, V1BETA1 } from "../support/client.js";
import { memoryLog } from "../support/log.js";
import { until } from "../support/cluster.js";
import { request } from "../support/requests.js";

// echo returns the desired state it was given plus one resource and a result.
const echo: RunFunction = (req) => {
  const rsp = response.to(req);
  response.setDesiredComposedResource(rsp, "added", { kind: "Thing" });
  response.normal(rsp, "ok");
  return rsp;
};

async function start(fn: RunFunction, opts: ServeOptions = {}) {
  const mem = memoryLog();
  const srv = await serve(fn, { address: "127.0.0.1:0", insecure: true, ...opts }, mem.log);
  return { srv, client: rawClient(srv.port), mem };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---

const Serve = suite("server: RunFunction");

for (const [version, path] of [
  ["v1", V1],
  ["v1beta1", V1BETA1],
] as const) {
  Serve(`${version}: answers with the tag, the copied desired state and the function's additions`, async () => {
    const { srv, client } = await start(echo);
    try {
      const rsp = await client.run(request({ meta: { tag: "abc" }, desired: { resources: { kept: { resource: { kind: "Kept" } } } } }), {
        path,
      });
      assert.is(rsp.meta?.tag, "abc");
      assert.is(rsp.meta?.ttl?.seconds, 60n);
      assert.equal(Object.keys(rsp.desired?.resources ?? {}).sort(), ["added", "kept"]);
      assert.equal(
        rsp.results.map((r) => r.message),
        ["ok"],
      );
    } finally {
      client.close();
      await srv.stop(1000);
    }
  });
}

Serve("health: Check says SERVING; a Watch hears NOT_SERVING on stop and does not hold the shutdown", async () => {
  const { srv, client, mem } = await start(echo);
  // grpc.health.v1.HealthCheckRequest{service} and HealthCheckResponse{status} encoded by hand:
  // field 1; SERVING = 1, NOT_SERVING = 2.
  const req = (service: string) => (service ? Uint8Array.from([0x0a, service.length, ...Buffer.from(service)]) : new Uint8Array());
  const check = (service = "") => client.call(req(service), { path: "/grpc.health.v1.Health/Check" });
  const watch = new Client(`127.0.0.1:${srv.port}`, credentials.createInsecure());
  try {
    assert.equal([...(await check())], [0x08, 0x01]);
    assert.equal([...(await check("apiextensions.fn.proto.v1beta1.FunctionRunnerService"))], [0x08, 0x01]);
    const { code } = await codeOf(check("unknown.Service"));
    assert.is(code, Code.NOT_FOUND);
    // Bytes that are no HealthCheckRequest (a length past the end): refused naming why, and the server serves on.
    const bad = await codeOf(client.call(Uint8Array.from([0x0a, 0x05, 0x61]), { path: "/grpc.health.v1.Health/Check" }));
    assert.is(bad.code, Code.INVALID_ARGUMENT);
    assert.match(bad.details, /^cannot decode HealthCheckRequest: /);
    assert.equal([...(await check())], [0x08, 0x01]);

    const seen: number[][] = [];
    const stream = watch.makeServerStreamRequest(
      "/grpc.health.v1.Health/Watch",
      (b: Uint8Array) => Buffer.from(b),
      (b: Buffer) => b,
      req(""),
    );
    const ended = new Promise<void>((r) => stream.on("end", r).on("error", () => r()));
    stream.on("data", (d: Buffer) => seen.push([...d]));
    await until("the Watch's first status", () => seen.length === 1);
    await srv.stop(5000);
    await ended;
    assert.equal(seen, [
      [0x08, 0x01],
      [0x08, 0x02],
    ]);
    assert.not.ok(mem.text().includes("grace period over"), "the open Watch stream held the shutdown until the grace period ran out");
    assert.ok(mem.text().includes('"msg":"stopped"'));
  } finally {
    watch.close();
    client.close();
    await srv.stop(1000);
  }
});

Serve("a function that throws becomes a Fatal result, and the server keeps serving", async () => {
  let calls = 0;
  const { srv, client, mem } = await start((req) => {
    if (calls++ === 0) throw new Error("bucket name is taken");
    return echo(req, undefined as never);
  });
  try {
    const rsp = await client.run(request({ desired: { resources: { kept: { resource: {} } } } }));
    assert.is(rsp.results.length, 1);
    assert.is(rsp.results[0]!.severity, Severity.FATAL);
    assert.is(rsp.results[0]!.message, "function failed: bucket name is taken");
    assert.is(rsp.results[0]!.reason, "FunctionError");
    assert.is(rsp.meta?.tag, "tag-1");
    assert.ok(mem.text().includes("function threw"));
    const next = await client.run(request());
    assert.equal(
      next.results.map((r) => r.message),
      ["ok"],
    );
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

const returnCases: Record<string, { fn: RunFunction; want: RegExp }> = {
  NotAResponse: { fn: () => ({ hello: 1 }) as never, want: /function returned a plain object, not a RunFunctionResponse/ },
  Undefined: { fn: () => undefined as never, want: /function returned undefined, not a RunFunctionResponse/ },
  UnencodableAtTheSetter: {
    fn: (req) => {
      const rsp = response.to(req);
      response.setDesiredComposedResource(rsp, "x", { big: 10n as never });
      return rsp;
    },
    want: /function failed: cannot set desired composed resource "x": the value at \.big is a bigint, which JSON cannot hold/,
  },
  UnencodableAfterTheSetter: {
    fn: (req) => {
      const rsp = response.to(req);
      const r: Record<string, unknown> = { ok: 1 };
      response.setDesiredComposedResource(rsp, "x", r as never);
      r["big"] = 10n; // changed after the setter checked it: caught when the response is encoded
      return rsp;
    },
    want: /cannot encode the function's response: desired\.resources\[x\]\.resource\.big is a bigint, which JSON cannot hold/,
  },
  UndefinedInContext: {
    fn: (req) => {
      const rsp = response.to(req);
      rsp.context = { a: [1, undefined as never] };
      return rsp;
    },
    want: /context\.a\[1\] is undefined, which JSON cannot hold/,
  },
  DateInOutput: {
    fn: (req) => {
      const rsp = response.to(req);
      rsp.output = { when: new Date() as never };
      return rsp;
    },
    want: /output\.when is a Date, not a JSON object/,
  },
};
for (const [name, tc] of Object.entries(returnCases)) {
  Serve(`a bad return value becomes a Fatal result: ${name}`, async () => {
    const { srv, client } = await start(tc.fn);
    try {
      const rsp = await client.run(request());
      assert.is(rsp.results[0]?.severity, Severity.FATAL);
      assert.match(rsp.results[0]!.message, tc.want);
      assert.is(rsp.meta?.tag, "tag-1");
    } finally {
      client.close();
      await srv.stop(1000);
    }
  });
}

Serve("a wrong tag in the function's response is corrected to the request's", async () => {
  const { srv, client } = await start((req) => {
    const rsp = response.to(req);
    rsp.meta!.tag = "not-the-request-tag";
    return rsp;
  });
  try {
    assert.is((await client.run(request({ meta: { tag: "real" } }))).meta?.tag, "real");
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

// ---

const Bad = suite("server: bad input");

const good = toBinary(RunFunctionRequestSchema, request());
const badBytes: Record<string, { bytes: Uint8Array; want: RegExp }> = {
  Truncated: { bytes: good.subarray(0, good.length - 3), want: /cannot decode RunFunctionRequest/ },
  // Field 1 (meta, a message) sent as a varint.
  WrongWireType: { bytes: Uint8Array.of(0x08, 0x01), want: /cannot decode RunFunctionRequest/ },
  // Field 4 (input, a Struct) with {"k": "\xff"}: a string that is not UTF-8.
  InvalidUtf8InStruct: {
    bytes: Uint8Array.of(0x22, 0x0a, 0x0a, 0x08, 0x0a, 0x01, 0x6b, 0x12, 0x03, 0x1a, 0x01, 0xff),
    want: /cannot decode RunFunctionRequest .*a string is not valid UTF-8/,
  },
  // meta.tag = "\xff".
  InvalidUtf8InTag: { bytes: Uint8Array.of(0x0a, 0x03, 0x0a, 0x01, 0xff), want: /not valid for encoding utf-8/ },
  Garbage: { bytes: Uint8Array.from({ length: 64 }, (_, i) => (i * 37 + 11) & 0xff), want: /cannot decode RunFunctionRequest/ },
};

for (const [name, tc] of Object.entries(badBytes)) {
  Bad(`${name}: INVALID_ARGUMENT naming the cause, then the next request works`, async () => {
    const { srv, client, mem } = await start(echo);
    try {
      const { code, details } = await codeOf(client.call(tc.bytes));
      assert.is(code, Code.INVALID_ARGUMENT, details);
      assert.match(details, tc.want);
      assert.ok(mem.text().includes("INVALID_ARGUMENT"));
      const rsp = await client.run(request());
      assert.is(rsp.meta?.tag, "tag-1");
    } finally {
      client.close();
      await srv.stop(1000);
    }
  });
}

Bad("a peer sending garbage in a loop: the first refusal is logged with its peer, the rest summed up in one line", async () => {
  const { srv, client, mem } = await start(echo);
  try {
    for (let i = 0; i < 30; i++) assert.is((await codeOf(client.call(badBytes["Garbage"]!.bytes))).code, Code.INVALID_ARGUMENT);
    assert.is((await codeOf(client.call(Uint8Array.of(0x08, 0x01)))).code, Code.INVALID_ARGUMENT);
    assert.is((await client.run(request())).meta?.tag, "tag-1");
  } finally {
    client.close();
    await srv.stop(1000);
  }
  // Before, each refusal was a line of its own, and none named the peer.
  const bad = mem.lines().filter((l) => l["code"] === "INVALID_ARGUMENT" || l["refused"] !== undefined);
  assert.is(bad.length, 2, JSON.stringify(bad));
  assert.match(String(bad[0]!.msg), /^refused a request from 127\.0\.0\.1:\d+: cannot decode RunFunctionRequest \(64 bytes\): /);
  assert.match(String(bad[0]!["peer"]), /^127\.0\.0\.1:\d+$/);
  assert.is(bad[0]!["level"], "warn");
  // Logged when the server stops (flush): 30 more, the latest the wrong wire type.
  assert.match(
    String(bad[1]!.msg),
    /^refused 30 more bad requests in the last 5 s; the latest: refused a request from 127\.0\.0\.1:\d+: cannot decode RunFunctionRequest \(2 bytes\)/,
  );
  assert.is(bad[1]!["refused"], 30);
});

const fiveMB = () => request({ observed: { composite: { resource: { kind: "X", blob: "x".repeat(5 * 1024 * 1024) } } } });

Bad("a 5 MB request is refused at the default 4 MB limit with RESOURCE_EXHAUSTED naming the flag, and logged", async () => {
  const codes: string[] = [];
  const { srv, client, mem } = await start(echo, { onCall: (code) => codes.push(code) });
  try {
    const big = toBinary(RunFunctionRequestSchema, fiveMB());
    const { code, details } = await codeOf(client.call(big));
    assert.is(code, Code.RESOURCE_EXHAUSTED);
    // Before, grpc-js's words, and nothing in the server's log: "Received message larger than max (5242937 vs 4194304)".
    assert.is(
      details,
      `request is ${big.length} bytes, larger than this function's limit of 4194304 bytes (xfn serve --max-recv-message-size 4, in MB)`,
    );
    const line = mem.lines().find((l) => String(l.msg).startsWith("refused a request"));
    assert.ok(line, JSON.stringify(mem.lines()));
    assert.is(line!.msg, `refused a request from ${String(line!["peer"])}: ${details}`);
    assert.is(line!["level"], "warn");
    assert.is(line!["bytes"], big.length);
    assert.is(line!["limit"], 4194304);
    assert.match(String(line!["peer"]), /127\.0\.0\.1:\d+/);
    assert.equal(codes, ["RESOURCE_EXHAUSTED"]);
    assert.is((await client.run(request())).meta?.tag, "tag-1");
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

Bad("a 5 MB request is accepted with maxRecvMessageSizeMB 8", async () => {
  const { srv, client } = await start(echo, { maxRecvMessageSizeMB: 8 });
  try {
    const rsp = await client.run(fiveMB());
    assert.equal(
      rsp.results.map((r) => r.message),
      ["ok"],
    );
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

Bad("a response larger than Crossplane accepts is refused with a message naming its size", async () => {
  const { srv, client } = await start(
    (req) => {
      const rsp = response.to(req);
      response.setDesiredComposedResource(rsp, "big", { blob: "y".repeat(2048) });
      return rsp;
    },
    { maxResponseBytes: 1024 },
  );
  try {
    const { code, details } = await codeOf(client.run(request()));
    assert.is(code, Code.RESOURCE_EXHAUSTED);
    assert.match(details, /response is \d+ bytes, larger than the 1024-byte limit/);
    // The parts that make it large, largest first (crossplane #6392: which resource outgrew it?).
    assert.match(details, /; largest: "big" 2\.\d KiB \(2\d{3} bytes\)$/);
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

Bad("a response from 80% of the limit is answered with a Warning result naming its largest parts, and logged", async () => {
  const { srv, client, mem } = await start(
    (req) => {
      const rsp = response.to(req);
      response.setDesiredComposedResource(rsp, "big", { blob: "y".repeat(3000) });
      response.setDesiredComposedResource(rsp, "small", { blob: "z".repeat(300) });
      response.setDesiredCompositeStatus(rsp, { phase: "ok" });
      return rsp;
    },
    { maxResponseBytes: 4096 },
  );
  try {
    const rsp = await client.run(request());
    const warn = rsp.results.find((r) => r.severity === Severity.WARNING);
    assert.ok(warn, JSON.stringify(rsp.results));
    assert.match(
      warn.message,
      /^response is 3\.\d KiB \(\d+ bytes\), (8\d|9\d)% of the 4096-byte limit Crossplane accepts; largest: "big" /,
    );
    assert.match(warn.message, /"big" [^,]+, "small" [^,]+, the composite resource [^:]+: a little more and the call fails$/);
    assert.is(warn.reason, "ResponseNearLimit");
    assert.ok(mem.lines().some((l) => l["level"] === "warn" && String(l.msg) === warn.message));
    // Below 80%: nothing said.
    const small = await start((req) => response.to(req), { maxResponseBytes: 4096 });
    try {
      assert.equal((await small.client.run(request())).results, []);
    } finally {
      small.client.close();
      await small.srv.stop(1000);
    }
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

// ---

const Limits = suite("server: deadlines, concurrency, shutdown");

Limits("a hung function ends at the client's deadline, frees its slot, and sees its signal abort", async () => {
  let aborted = false;
  let calls = 0;
  const { srv, client, mem } = await start(
    (req, ctx) => {
      if (calls++ > 0) return echo(req, ctx);
      ctx.signal.addEventListener("abort", () => (aborted = true));
      return new Promise(() => {}); // never settles
    },
    { maxConcurrency: 1 },
  );
  try {
    const { code } = await codeOf(client.run(request(), { timeoutMs: 300 }));
    assert.is(code, Code.DEADLINE_EXCEEDED);
    // The only slot is free again: this call would queue forever otherwise.
    const rsp = await client.run(request(), { timeoutMs: 5000 });
    assert.equal(
      rsp.results.map((r) => r.message),
      ["ok"],
    );
    assert.ok(aborted, "the function's signal was aborted at the deadline");
    assert.ok(mem.text().includes("function did not finish before the client's deadline"));
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

Limits("a call whose deadline passes while it waits for a slot answers DEADLINE_EXCEEDED and never runs", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const tags: string[] = [];
  const { srv, client, mem } = await start(
    async (req, ctx) => {
      tags.push(req.meta?.tag ?? "");
      await gate;
      return echo(req, ctx);
    },
    { maxConcurrency: 1 },
  );
  try {
    const first = client.run(request({ meta: { tag: "first" } }));
    await sleep(100);
    const began = Date.now();
    const { code } = await codeOf(client.run(request({ meta: { tag: "queued" } }), { timeoutMs: 300 }));
    assert.is(code, Code.DEADLINE_EXCEEDED);
    assert.ok(Date.now() - began < 2000, "answered at the deadline, not when the slot came free");
    // The server ends the call on its own deadline timer or on the client's
    // cancel, about when the client gives up; free the slot only after it has
    // (a fixed sleep here could lose that race on a loaded machine).
    await until("the server to end the queued call", () =>
      mem.lines().some((l) => l["tag"] === "queued" && (l["code"] === "DEADLINE_EXCEEDED" || l["code"] === "CANCELLED")),
    );
    release();
    assert.is((await first).meta?.tag, "first");
    assert.is((await client.run(request({ meta: { tag: "after" } }))).meta?.tag, "after");
    assert.equal(tags, ["first", "after"], "the queued call never ran");
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

Limits("a call the client cancels ends: a running function sees its signal abort and frees its slot, a queued one never runs", async () => {
  const mem = memoryLog();
  const ran: string[] = [];
  let aborted = false;
  const h = createHandler(
    (req, ctx) => {
      const tag = req.meta?.tag ?? "";
      ran.push(tag);
      if (tag !== "hang") return echo(req, ctx);
      ctx.signal.addEventListener("abort", () => (aborted = true));
      return new Promise(() => {});
    },
    { maxConcurrency: 1, maxQueue: 4, maxResponseBytes: 1 << 22 },
    mem.log,
  );
  const bytes = (tag: string) => toBinary(RunFunctionRequestSchema, request({ meta: { tag } }));
  const hung = new Cancel();
  const queued = new Cancel();
  const first = h.handle(bytes("hang"), { version: "v1", deadline: Infinity, cancel: hung });
  const second = h.handle(bytes("queued"), { version: "v1", deadline: Infinity, cancel: queued });
  await sleep(50);
  assert.is(h.inFlight(), 2);
  queued.cancel();
  assert.equal(await second, { code: Code.CANCELLED, details: "call cancelled" });
  hung.cancel();
  assert.equal(await first, { code: Code.CANCELLED, details: "call cancelled" });
  assert.ok(aborted, "the running function saw its signal abort");
  const after = await h.handle(bytes("after"), { version: "v1", deadline: Infinity });
  assert.ok("ok" in after, "the slot is free again");
  assert.equal(ran, ["hang", "after"]);
  // Cancelled before it reached the handler: answered without running.
  const early = new Cancel();
  early.cancel();
  assert.equal(await h.handle(bytes("early"), { version: "v1", deadline: Infinity, cancel: early }), {
    code: Code.CANCELLED,
    details: "call cancelled",
  });
  assert.equal(ran, ["hang", "after"]);
});

Limits("a response hook (--record-dir) that throws is logged; the call is answered all the same", async () => {
  const mem = memoryLog();
  const h = createHandler(
    echo,
    {
      maxConcurrency: 1,
      maxQueue: 1,
      maxResponseBytes: 1 << 22,
      onResponse: () => {
        throw new Error("disk on fire");
      },
    },
    mem.log,
  );
  const res = await h.handle(toBinary(RunFunctionRequestSchema, request({ meta: { tag: "t" } })), { version: "v1", deadline: Infinity });
  assert.ok("ok" in res, JSON.stringify(res));
  assert.match(mem.text(), /disk on fire.*cannot record this call/);
});

Limits("the context: signal, log and now can be destructured; a signal first read after the call ended is already aborted", async () => {
  const mem = memoryLog(true);
  let late: boolean | undefined;
  let early: boolean | undefined;
  const h = createHandler(
    async (req, { signal, log, now }) => {
      log.info({ at: now().toISOString() }, "hello from the function");
      early = signal.aborted;
      return echo(req, { signal, log, now });
    },
    { maxConcurrency: 2, maxQueue: 2, maxResponseBytes: 1 << 22, now: () => new Date(0) },
    mem.log,
  );
  const bytes = (tag: string) => toBinary(RunFunctionRequestSchema, request({ meta: { tag } }));
  assert.ok("ok" in (await h.handle(bytes("fast"), { version: "v1", deadline: Infinity })));
  assert.is(early, false);
  assert.match(mem.text(), /"tag":"fast".*"at":"1970-01-01T00:00:00.000Z".*hello from the function/);
  const slow = createHandler(
    async (req, ctx) => {
      await sleep(150);
      late = ctx.signal.aborted;
      return echo(req, ctx);
    },
    { maxConcurrency: 1, maxQueue: 1, maxResponseBytes: 1 << 22 },
    mem.log,
  );
  assert.equal(await slow.handle(bytes("slow"), { version: "v1", deadline: Date.now() + 30 }), {
    code: Code.DEADLINE_EXCEEDED,
    details: "function did not finish before the deadline",
  });
  await sleep(250);
  assert.is(late, true);
});

Limits(
  "a full queue answers RESOURCE_EXHAUSTED instead of growing; the log has one line for the first refusal and one count for the rest",
  async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const started: string[] = [];
    const { srv, client, mem } = await start(
      async (req, ctx) => {
        started.push(req.meta?.tag ?? "");
        await gate;
        return echo(req, ctx);
      },
      { maxConcurrency: 1, maxQueue: 1 },
    );
    try {
      const first = client.run(request({ meta: { tag: "1" } }));
      await until("the first call to run", () => started.length === 1);
      const second = client.run(request({ meta: { tag: "2" } }));
      await sleep(100); // a queued call shows nowhere outside the server: give it time to arrive
      const { code, details } = await codeOf(client.run(request({ meta: { tag: "3" } })));
      assert.is(code, Code.RESOURCE_EXHAUSTED);
      // Refused when it starts, before its body is read: admission counts running and waiting calls.
      assert.match(details, /server busy: 2 requests running or waiting \(limit 2: --max-concurrency \+ --max-queue\)/);
      for (let i = 0; i < 5; i++) assert.is((await codeOf(client.run(request()))).code, Code.RESOURCE_EXHAUSTED);
      release();
      assert.equal([(await first).meta?.tag, (await second).meta?.tag], ["1", "2"]);
    } finally {
      client.close();
      await srv.stop(1000);
    }
    const busy = mem.lines().filter((l) => l["code"] === "RESOURCE_EXHAUSTED");
    assert.equal(
      busy.map((l) => [l["refused"] ?? null, String(l["msg"]).replace(/; the latest: .*/, "")]),
      [
        [null, "server busy: 2 requests running or waiting (limit 2: --max-concurrency + --max-queue); retry later"],
        [5, "refused 5 more calls in the last 5 s"],
      ],
    );
  },
);

Limits("grants a large request window: a 1 MiB stream window and a 16 MiB connection window, not HTTP/2's 64 KiB", async () => {
  const { srv, client } = await start(echo);
  const session = connect(`http://127.0.0.1:${srv.port}`);
  try {
    session.on("error", () => {});
    await until("the server's SETTINGS", () => session.remoteSettings?.initialWindowSize === STREAM_WINDOW);
    await until("the connection window update", () => (session.state.remoteWindowSize ?? 0) >= CONNECTION_WINDOW - 65_535);
    // A request many windows long goes through.
    const big = await client.run(request({ observed: { composite: { resource: { kind: "X", spec: { pad: "y".repeat(3 << 20) } } } } }));
    assert.equal(
      big.results.map((r) => r.message),
      ["ok"],
    );
  } finally {
    session.close();
    client.close();
    await srv.stop(1000);
  }
});

Limits("stop lets an in-flight request finish and refuses new connections", async () => {
  let running = false;
  const { srv, client } = await start(async (req, ctx) => {
    running = true;
    await sleep(300);
    return echo(req, ctx);
  });
  try {
    const inFlight = client.run(request({ meta: { tag: "slow" } }));
    await until("the call to run", () => running);
    const stopped = srv.stop(5000);
    assert.is((await inFlight).meta?.tag, "slow");
    await stopped;
    const late = rawClient(srv.port);
    const { code } = await codeOf(late.run(request(), { timeoutMs: 1000 }));
    late.close();
    assert.ok(code === Code.UNAVAILABLE || code === Code.DEADLINE_EXCEEDED, `got code ${code}`);
  } finally {
    client.close();
  }
});

Limits("stop cancels a function still running after the grace period", async () => {
  let aborted = false;
  let running = false;
  const { srv, client } = await start((_req, ctx) => {
    running = true;
    ctx.signal.addEventListener("abort", () => (aborted = true));
    return new Promise(() => {});
  });
  try {
    const call = codeOf(client.run(request(), { timeoutMs: 10_000 }));
    await until("the call to run", () => running);
    await srv.stop(200);
    const { code } = await call;
    assert.ok(aborted, "the function saw its signal abort");
    assert.ok(code === Code.UNAVAILABLE || code === Code.CANCELLED, `got code ${code}`);
  } finally {
    client.close();
  }
});

// ---

const Logs = suite("server: logs");

Logs("one debug line per request; credentials and connection details never logged", async () => {
  const secret = "s3cr3t-value";
  const b64 = Buffer.from(secret).toString("base64");
  const { srv, client, mem } = await start((req, ctx) => {
    ctx.log.info({ req }, "a careless function logs its whole request");
    return echo(req, ctx);
  });
  try {
    await client.run(
      request({
        credentials: { aws: { credentialData: { data: { key: b64 } } } },
        observed: { composite: { resource: { kind: "XBucket", metadata: { name: "b" } }, connectionDetails: { password: b64 } } },
      }),
    );
    const text = mem.text();
    assert.not.ok(text.includes(secret), "secret text leaked");
    assert.not.ok(text.includes(b64), "base64 secret leaked");
    assert.not.ok(text.includes([...Buffer.from(secret)].join(",")), "secret bytes leaked");
    assert.ok(text.includes("[REDACTED]"));
    const ran = mem.lines().filter((l) => l["msg"] === "ran function");
    assert.is(ran.length, 1);
    assert.is(ran[0]!["tag"], "tag-1");
    assert.is(ran[0]!["xr"], "XBucket/b");
    assert.is(ran[0]!["level"], "debug");
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

// ---

const Tls = suite("server: mTLS");

let pki: TestPki;
Tls.before(async () => {
  pki = await makePki();
});
Tls.after(() => pki.cleanup());

let tlsLog = memoryLog();
async function startTls(): Promise<RunningServer> {
  tlsLog = memoryLog();
  return serve(echo, { address: "127.0.0.1:0", tlsCertsDir: pki.serverDir }, tlsLog.log);
}

Tls("a client with a certificate from the CA, verifying <function>.<namespace>, is served", async () => {
  const srv = await startTls();
  const client = rawClient(srv.port, mtlsCredentials(pki));
  try {
    assert.ok(srv.mtls);
    assert.is((await client.run(request())).meta?.tag, "tag-1");
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

// Crossplane's own client certificate has its CA's subject name and no authority key identifier, which OpenSSL
// alone takes for a self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT): the server checks it against ca.crt itself.
Tls("a client certificate made as Crossplane makes it (its CA's name, no authority key id) is served", async () => {
  const leaf = new X509Certificate(pki.crossplane.cert);
  assert.is(leaf.subject, leaf.issuer);
  assert.is(leaf.subject, new X509Certificate(pki.ca).subject);
  const srv = await startTls();
  const client = rawClient(srv.port, mtlsCredentials(pki, "crossplane"));
  try {
    assert.is((await client.run(request())).meta?.tag, "tag-1");
    assert.is(tlsLog.lines().filter((l) => String(l.msg).startsWith("refused")).length, 0);
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

const refused: Record<string, { creds: () => ReturnType<typeof mtlsCredentials>; name?: string; reason?: string; hint?: string }> = {
  NoClientCertificate: {
    creds: () => mtlsCredentials(pki, "none"),
    reason: "ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE",
    // Also what Go's client (Crossplane's) makes of a certificate from another CA: test/e2e/go-client.test.ts.
    hint: " (the client sent no certificate: it has none, or none signed by this server's ca.crt, which Go clients such as Crossplane's then withhold)",
  },
  // Node closes such a socket after the handshake with no error of its own: the reason is the certificate's, not the reset that follows.
  CertificateFromAnotherCa: {
    creds: () => mtlsCredentials(pki, "strangerClient"),
    reason: "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    hint: " (the client's certificate is not signed by this server's ca.crt)",
  },
  ExpiredClientCertificate: {
    creds: () => mtlsCredentials(pki, "expiredClient"),
    reason: "CERT_HAS_EXPIRED",
    hint: " (the client's certificate has expired: renew it)",
  },
  SelfSignedWithCrossplanesName: {
    creds: () => mtlsCredentials(pki, "crossplaneSelfSigned"),
    reason: "DEPTH_ZERO_SELF_SIGNED_CERT",
    hint: " (the client's certificate is not signed by this server's ca.crt)",
  },
  ExpiredCertificateShapedAsCrossplanes: {
    creds: () => mtlsCredentials(pki, "crossplaneExpired"),
    reason: "CERT_HAS_EXPIRED",
    hint: " (the client's certificate has expired: renew it)",
  },
  ServerOnlyCertificateShapedAsCrossplanes: {
    creds: () => mtlsCredentials(pki, "crossplaneServerOnly"),
    reason: "INVALID_PURPOSE",
    hint: " (the client's certificate is not for client authentication (extKeyUsage clientAuth))",
  },
  PlaintextClient: { creds: () => credentials.createInsecure(), reason: "ERR_SSL_WRONG_VERSION_NUMBER", hint: "" },
  WrongServerName: { creds: () => mtlsCredentials(pki), name: "function-other.crossplane-system" },
};
for (const [name, tc] of Object.entries(refused)) {
  Tls(`refused: ${name}`, async () => {
    const srv = await startTls();
    const client = rawClient(srv.port, tc.creds(), tc.name);
    try {
      const { code } = await codeOf(client.run(request(), { timeoutMs: 3000 }));
      assert.ok(code === Code.UNAVAILABLE || code === Code.DEADLINE_EXCEEDED, `got code ${code}`);
      // Refused handshakes are logged with a reason (a wrong server name is the client's own refusal).
      if (tc.reason) {
        await until("the refusal logged", () => tlsLog.lines().some((l) => String(l.msg).startsWith("refused a TLS handshake")));
        const line = tlsLog.lines().find((l) => String(l.msg).startsWith("refused a TLS handshake"))!;
        assert.is(line["reason"], tc.reason);
        assert.match(String(line["peer"]), /^127\.0\.0\.1:\d+$/);
        assert.match(String(line.msg), new RegExp(`^refused a TLS handshake from 127\\.0\\.0\\.1:\\d+: ${tc.reason}`));
        assert.is(String(line.msg).slice(String(line.msg).indexOf(tc.reason) + tc.reason.length), tc.hint);
      }
      // The server is unharmed: a proper client still gets served.
      const ok = rawClient(srv.port, mtlsCredentials(pki));
      assert.is((await ok.run(request())).meta?.tag, "tag-1");
      ok.close();
    } finally {
      client.close();
      await srv.stop(1000);
    }
  });
}

Tls("a peer refused handshake after handshake: the first is logged, the rest counted in one warning, none lost", async () => {
  const srv = await startTls();
  const attempts = 25;
  try {
    for (let i = 0; i < attempts; i++) {
      // No client certificate: the server refuses once the handshake is done.
      await new Promise<void>((resolve) => {
        const socket = tlsConnect({ port: srv.port, host: "127.0.0.1", rejectUnauthorized: false, ALPNProtocols: ["h2"] });
        socket.on("error", () => {});
        socket.on("close", () => resolve());
      });
    }
    await until("every refusal seen", () => tlsLog.lines().length >= 2, 5_000);
    await new Promise((r) => setTimeout(r, 200)); // the last refusal's event may come just after its socket closes
  } finally {
    await srv.stop(1000); // what is counted is logged when the server stops
  }
  const refused = tlsLog.lines().filter((l) => String(l.msg).startsWith("refused "));
  assert.is(refused.length, 2, JSON.stringify(refused));
  assert.match(String(refused[0]!.msg), /^refused a TLS handshake from 127\.0\.0\.1:\d+: /);
  assert.match(
    String(refused[1]!.msg),
    /^refused 24 more TLS handshakes in the last 5 s; the latest: refused a TLS handshake from 127\.0\.0\.1:\d+: /,
  );
  assert.is(refused[1]!["refused"], attempts - 1);
});

Tls("refuses to start with neither TLS nor insecure, and names missing files", async () => {
  try {
    await serve(echo, { address: "127.0.0.1:0" }, memoryLog().log);
    assert.unreachable("started without TLS");
  } catch (err) {
    assert.match((err as Error).message, /refusing to serve without TLS: give --tls-certs-dir/);
  }
  try {
    await serve(echo, { address: "127.0.0.1:0", tlsCertsDir: pki.dir }, memoryLog().log);
    assert.unreachable("started without tls.crt");
  } catch (err) {
    assert.match((err as Error).message, new RegExp(`cannot load TLS certificates from ${pki.dir}: tls.crt: ENOENT`));
  }
});

Tls("refuses nonsense limits with a message naming the option", async () => {
  for (const [opt, want] of [
    [{ maxConcurrency: 0 }, /maxConcurrency must be a positive whole number, got 0/],
    [{ maxQueue: 1.5 }, /maxQueue must be a positive whole number, got 1\.5/],
    [{ bodyTimeoutMs: -1 }, /bodyTimeoutMs must be a positive whole number, got -1/],
    [{ bodyTimeoutMs: Number.NaN }, /bodyTimeoutMs must be a positive whole number, got NaN/],
    [{ maxRecvMessageSizeMB: -1 }, /--max-recv-message-size must be a positive number of MB, got -1/],
  ] as const) {
    try {
      await serve(echo, { address: "127.0.0.1:0", insecure: true, ...opt }, memoryLog().log);
      assert.unreachable(`started with ${JSON.stringify(opt)}`);
    } catch (err) {
      assert.match((err as Error).message, want);
    }
  }
});

Tls("insecure wins when both are given", async () => {
  const srv = await serve(echo, { address: "127.0.0.1:0", tlsCertsDir: pki.serverDir, insecure: true }, memoryLog().log);
  const client = rawClient(srv.port);
  try {
    assert.not.ok(srv.mtls);
    assert.is((await client.run(request())).meta?.tag, "tag-1");
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

Serve.run();
Bad.run();
Limits.run();
Logs.run();
Tls.run();
