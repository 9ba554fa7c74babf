// Admission before the body: RunFunction is served as a client-streaming
// method (the same on the wire as unary), so a call is admitted or refused
// when it starts, and a refused call's body is never read.
import { Client, credentials, status as Code, type ServiceError } from "@grpc/grpc-js";
import { connect, type ClientHttp2Stream } from "node:http2";
import { toBinary } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { RunFunctionRequestSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import * as response from "../../src/sdk/response.js";
import { serve } from "../../src/server/server.js";
import { codeOf, rawClient, V1 } from "../support/client.js";
import { until } from "../support/cluster.js";
import { memoryLog } from "../support/log.js";
import { request } from "../support/requests.js";

const A = suite("server: admission");

/** gated serves a function that holds every call until release(), one running at a time. */
async function gated(maxQueue: number) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let count = 0;
  const srv = await serve(
    async (req) => {
      count++;
      await gate;
      return response.to(req);
    },
    { address: "127.0.0.1:0", insecure: true, maxConcurrency: 1, maxQueue },
    memoryLog().log,
  );
  return { srv, release, started: () => count };
}

A("calls over --max-concurrency + --max-queue are refused at once, before their large bodies are read", async () => {
  const { srv, release, started } = await gated(1);
  const c = rawClient(srv.port);
  try {
    const held = [c.run(request({ meta: { tag: "1" } })), c.run(request({ meta: { tag: "2" } }))];
    for (const h of held) h.catch(() => {});
    await until("one running", () => started() === 1);
    await new Promise((r) => setTimeout(r, 100));
    // 3 MiB each: refused without waiting for 60 MiB to cross the socket.
    const big = toBinary(RunFunctionRequestSchema, request({ input: { blob: "x".repeat(3 << 20) } }));
    const t = Date.now();
    const refused = await Promise.all(Array.from({ length: 20 }, () => codeOf(c.call(big))));
    assert.ok(
      refused.every((r) => r.code === Code.RESOURCE_EXHAUSTED),
      refused.map((r) => r.details).join("; "),
    );
    assert.ok(Date.now() - t < 5_000, `refusing took ${Date.now() - t} ms`);
    release();
    assert.equal(
      (await Promise.all(held)).map((r) => r.meta?.tag),
      ["1", "2"],
    );
    assert.is((await c.run(request({ meta: { tag: "after" } }))).meta?.tag, "after", "slots are given back");
  } finally {
    c.close();
    await srv.stop(1000);
  }
});

A("an admitted call waits for a body slot (2 x --max-concurrency) unread, and ends at its deadline if none frees", async () => {
  const { srv, release, started } = await gated(10);
  const c = rawClient(srv.port);
  try {
    // Two bodies read: one running, one queued in the handler. The third waits unread.
    const held = [c.run(request(), { timeoutMs: 30_000 }), c.run(request(), { timeoutMs: 30_000 })];
    // Handled here too: if an assertion below fails, closing the client cancels them, and that must not end the run unreported.
    for (const h of held) h.catch(() => {});
    await until("one running", () => started() === 1);
    // The third call goes out on a bare HTTP/2 stream with grpc-timeout, as a client that keeps no timer of its
    // own: what comes back is the server's answer. (A grpc-js client's own timer races the server's answer, sent
    // 100 ms early; with the event loop held longer than that, beside CPU-bound processes, the client's won.)
    const waited = await bareCall(srv.port, toBinary(RunFunctionRequestSchema, request({ meta: { tag: "3" } })), "1000m");
    assert.is(waited.code, Code.DEADLINE_EXCEEDED);
    assert.match(waited.details, /the deadline passed while the request waited to be read/);
    release();
    await Promise.all(held);
  } finally {
    c.close();
    await srv.stop(1000);
  }
});

A("a call whose request never arrives, sent without a deadline, ends at --timeout and gives back its body slot", async () => {
  let ran = 0;
  const mem = memoryLog();
  const srv = await serve(
    (req) => (ran++, response.to(req)),
    { address: "127.0.0.1:0", insecure: true, maxConcurrency: 1, maxQueue: 4, timeoutMs: 600 },
    mem.log,
  );
  const client = new Client(`127.0.0.1:${srv.port}`, credentials.createInsecure());
  const c = rawClient(srv.port);
  try {
    // Both body slots (2 x --max-concurrency) taken by calls that open a stream and then send
    // nothing, with no deadline: a client that stalls, or vanished on a half-open connection.
    const stalled = Array.from(
      { length: 2 },
      () =>
        new Promise<ServiceError>((resolve, reject) => {
          client.makeClientStreamRequest(
            V1,
            (b: Uint8Array) => Buffer.from(b),
            (b: Buffer) => b,
            (err: ServiceError | null) => (err ? resolve(err) : reject(new Error("answered"))),
          );
        }),
    );
    await new Promise((r) => setTimeout(r, 100));
    const good = await c.run(request({ meta: { tag: "after" } }), { timeoutMs: 10_000 });
    assert.is(good.meta?.tag, "after", "served once the stalled calls gave their slots back");
    for (const err of await Promise.all(stalled)) {
      assert.is(err.code, Code.DEADLINE_EXCEEDED);
      assert.is(err.details, "the request did not arrive within the server's --timeout of 0.6 s");
    }
    assert.is(ran, 1);
  } finally {
    client.close();
    c.close();
    await srv.stop(1000);
  }
});

A("a request whose body stops arriving ends at the caller's deadline, named so", async () => {
  const srv = await serve((req) => response.to(req), { address: "127.0.0.1:0", insecure: true }, memoryLog().log);
  const client = new Client(`127.0.0.1:${srv.port}`, credentials.createInsecure());
  try {
    const err = await new Promise<ServiceError>((resolve, reject) => {
      client.makeClientStreamRequest(
        V1,
        (b: Uint8Array) => Buffer.from(b),
        (b: Buffer) => b,
        { deadline: Date.now() + 800 },
        (e: ServiceError | null) => (e ? resolve(e) : reject(new Error("answered"))),
      );
    });
    assert.is(err.code, Code.DEADLINE_EXCEEDED);
    assert.is(err.details, "the deadline passed while the request was arriving");
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

A("a call that sends no request or two is INVALID_ARGUMENT, as a unary method must", async () => {
  const srv = await serve((req) => response.to(req), { address: "127.0.0.1:0", insecure: true }, memoryLog().log);
  const client = new Client(`127.0.0.1:${srv.port}`, credentials.createInsecure());
  const send = (n: number) =>
    new Promise<ServiceError>((resolve, reject) => {
      const call = client.makeClientStreamRequest(
        V1,
        (b: Uint8Array) => Buffer.from(b),
        (b: Buffer) => b,
        (err: ServiceError | null) => (err ? resolve(err) : reject(new Error("accepted"))),
      );
      for (let i = 0; i < n; i++) call.write(toBinary(RunFunctionRequestSchema, request()));
      call.end();
    });
  try {
    for (const n of [0, 2]) {
      const err = await send(n);
      assert.is(err.code, Code.INVALID_ARGUMENT);
      assert.match(err.details, new RegExp(`expected one RunFunctionRequest, got ${n} messages`));
    }
  } finally {
    client.close();
    await srv.stop(1000);
  }
});

/** bareCall sends one RunFunction request on a bare HTTP/2 stream with a grpc-timeout header, and resolves with the status answered. */
function bareCall(port: number, body: Uint8Array, timeout: string): Promise<{ code: number; details: string }> {
  return new Promise((resolve, reject) => {
    const session = connect(`http://127.0.0.1:${port}`);
    session.on("error", reject);
    const guard = setTimeout(() => {
      session.destroy();
      reject(new Error("the server did not answer within 10 s"));
    }, 10_000);
    const s = session.request({
      ":method": "POST",
      ":path": V1,
      "content-type": "application/grpc",
      te: "trailers",
      "grpc-timeout": timeout,
    });
    const prefix = Buffer.alloc(5);
    prefix.writeUInt32BE(body.length, 1);
    s.end(Buffer.concat([prefix, body]));
    const answered = (h: Record<string, unknown>) => {
      if (h["grpc-status"] === undefined) return;
      clearTimeout(guard);
      session.close();
      resolve({ code: Number(h["grpc-status"]), details: decodeURIComponent(String(h["grpc-message"] ?? "")) });
    };
    s.on("response", answered);
    s.on("trailers", answered);
    s.on("error", reject);
  });
}

/**
 * slowStreams opens n RunFunction streams on one HTTP/2 connection, each declaring a
 * 100 kB request and sending it a byte per stream every 100 ms: a client that holds
 * places without ever finishing a request. statuses lists the grpc-status of those answered.
 */
function slowStreams(port: number, n: number) {
  const session = connect(`http://127.0.0.1:${port}`);
  const statuses: { code: number; details: string }[] = [];
  const open = new Set<ClientHttp2Stream>();
  for (let i = 0; i < n; i++) {
    const s = session.request({ ":method": "POST", ":path": V1, "content-type": "application/grpc", te: "trailers" });
    const prefix = Buffer.alloc(5);
    prefix.writeUInt32BE(100_000, 1);
    s.write(prefix);
    open.add(s);
    const answered = (h: Record<string, unknown>) => {
      if (h["grpc-status"] === undefined) return;
      open.delete(s);
      statuses.push({ code: Number(h["grpc-status"]), details: decodeURIComponent(String(h["grpc-message"] ?? "")) });
    };
    s.on("response", answered);
    s.on("trailers", answered);
    s.on("error", () => open.delete(s));
  }
  const trickle = setInterval(() => {
    for (const s of open) if (s.writable) s.write(Buffer.alloc(1));
  }, 100);
  return {
    statuses,
    close() {
      clearInterval(trickle);
      session.destroy();
    },
  };
}

for (const n of [200, 1000])
  A(`${n} slow streams on one connection do not lock out another client: its calls answer within 1 s`, async () => {
    const mem = memoryLog();
    // The defaults: 16 running + 128 waiting admitted, 32 body slots.
    const srv = await serve((req) => response.to(req), { address: "127.0.0.1:0", insecure: true }, mem.log);
    const hog = slowStreams(srv.port, n);
    const c = rawClient(srv.port);
    try {
      // 144 admitted (16 reading their bodies, slowly), the rest refused at once.
      await until("the slow client holds every place", () => srv.inFlight() === 144 && hog.statuses.length === n - 144);
      assert.ok(hog.statuses.every((s) => s.code === Code.RESOURCE_EXHAUSTED));
      await new Promise((r) => setTimeout(r, 300));
      for (let i = 0; i < 10; i++) {
        const r = await c.run(request({ meta: { tag: `one-${i}` } }), { timeoutMs: 1_000 });
        assert.is(r.meta?.tag, `one-${i}`);
      }
      const many = await Promise.all(
        Array.from({ length: 20 }, (_, i) => c.run(request({ meta: { tag: `many-${i}` } }), { timeoutMs: 1_000 })),
      );
      assert.equal(
        many.map((r) => r.meta?.tag),
        Array.from({ length: 20 }, (_, i) => `many-${i}`),
      );
      // Each of the other client's calls took a place from the slow one, which was told why.
      const evicted = hog.statuses.slice(n - 144);
      assert.ok(evicted.length >= 1 && evicted.length <= 30, `${evicted.length} slow streams gave their places up`);
      assert.match(evicted[0]!.details, /^server busy: this connection holds 144 of the 144 requests the server admits /);
      for (const s of evicted) {
        assert.is(s.code, Code.RESOURCE_EXHAUSTED);
        assert.match(s.details, /another connection's call took this one's place; retry later$/);
      }
      assert.ok(srv.inFlight() <= 144, `${srv.inFlight()} in flight`);
    } finally {
      hog.close();
      c.close();
      await srv.stop(1000);
    }
  });

A("a request that trickles in loses its body slot after the body timeout, named so", async () => {
  const srv = await serve((req) => response.to(req), { address: "127.0.0.1:0", insecure: true, bodyTimeoutMs: 300 }, memoryLog().log);
  const hog = slowStreams(srv.port, 1);
  try {
    await until("the slow request is refused", () => hog.statuses.length === 1);
    assert.equal(hog.statuses, [
      { code: Code.DEADLINE_EXCEEDED, details: "the request did not finish arriving within 0.3 s of the server starting to read it" },
    ]);
    assert.is(srv.inFlight(), 0);
  } finally {
    hog.close();
    await srv.stop(1000);
  }
});

A.run();
