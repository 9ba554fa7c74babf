// Loading the server's certificates: every bad file is named before grpc-js
// sees it (grpc-js accepts any bytes and fails at bind time, like a port problem).
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { connect } from "node:net";
import { probeRoutes } from "../../src/http.js";
import { serve } from "../../src/server/server.js";
import { expiryNote, loadServerCredentials, TLS_HANDSHAKE_TIMEOUT_MS } from "../../src/server/tls.js";
import { memoryLog } from "../support/log.js";
import { makePki, type TestPki } from "../support/certs.js";

const T = suite("server: TLS certificates");
let pki: TestPki;
let scratch: string;
T.before(async () => {
  pki = await makePki();
  scratch = mkdtempSync(join(tmpdir(), "xfn-tls-"));
});
T.after(() => {
  pki.cleanup();
  rmSync(scratch, { recursive: true, force: true });
});

const cases: Record<string, { reason: string; file: "tls.crt" | "tls.key" | "ca.crt"; content: () => string; want: RegExp }> = {
  GarbageCert: {
    reason: "tls.crt is not PEM",
    file: "tls.crt",
    content: () => "not a certificate\n",
    want: /tls\.crt is not a valid PEM certificate/,
  },
  GarbageKey: {
    reason: "tls.key is not PEM",
    file: "tls.key",
    content: () => "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    want: /tls\.key is not a valid PEM private key/,
  },
  GarbageCA: { reason: "ca.crt is not PEM", file: "ca.crt", content: () => "junk", want: /ca\.crt is not a valid PEM certificate/ },
  KeyOfAnother: {
    reason: "the key belongs to the client certificate",
    file: "tls.key",
    content: () => pki.client.key.toString(),
    want: /tls\.key does not go with tls\.crt/,
  },
};
for (const [name, tc] of Object.entries(cases)) {
  T(`refused with the file named: ${name}`, () => {
    const dir = join(scratch, name);
    cpSync(pki.serverDir, dir, { recursive: true });
    writeFileSync(join(dir, tc.file), tc.content());
    assert.throws(
      () => loadServerCredentials(dir),
      (err: Error) => tc.want.test(err.message) && err.message.includes(dir),
      tc.reason,
    );
  });
}

T("good certificates load", () => {
  assert.ok(loadServerCredentials(pki.serverDir));
});

T.run();

const E = suite("server: certificate expiry and the TLS handshake");
let longLived: TestPki;
E.before(async () => {
  longLived = await makePki();
});
E.after(() => longLived.cleanup());

E("expiryNote: nothing before the last week, then when, then expired", () => {
  const now = new Date("2026-11-26T10:00:00Z");
  assert.is(expiryNote(new Date("2026-12-10T10:00:00Z"), now), undefined);
  assert.equal(expiryNote(new Date("2026-11-29T13:00:00Z"), now), {
    expired: false,
    text: "the serving certificate (tls.crt) expires at 2026-11-29T13:00:00.000Z, in 3 d 3 h",
  });
  assert.equal(expiryNote(new Date("2026-11-26T09:00:00Z"), now), {
    expired: true,
    text: "the serving certificate (tls.crt) expired at 2026-11-26T09:00:00.000Z",
  });
});

E("a serving certificate that expires within a week: a warning at start, and /readyz says so while ready", async () => {
  const short = await makePki({ serverDays: 1 });
  const mem = memoryLog();
  const s = await serve(
    async (req) => ({ meta: { tag: req.meta?.tag ?? "" } }) as never,
    { address: "127.0.0.1:0", tlsCertsDir: short.serverDir },
    mem.log,
  );
  try {
    const warn = mem.lines().find((l) => l["level"] === "warn" && /serving certificate \(tls\.crt\) expires at/.test(String(l["msg"])));
    assert.ok(warn, mem.text());
    assert.match(String(warn!["msg"]), /, in 0 d 23 h: Crossplane's calls will fail its handshake; renew it$/);
    const readyz = await probeRoutes(
      () => s.notReady(),
      () => s.certificateNote(),
    )["/readyz"]!(new URLSearchParams());
    assert.equal([readyz.status, readyz.body.startsWith("ok; the serving certificate (tls.crt) expires at ")], [200, true]);
    assert.is(s.certificateNote() === undefined, false);
  } finally {
    await s.stop(100);
    short.cleanup();
  }
  const fine = await serve(async () => ({}) as never, { address: "127.0.0.1:0", tlsCertsDir: longLived.serverDir }, memoryLog().log);
  try {
    assert.is(fine.certificateNote(), undefined, "30 days left: nothing to say");
  } finally {
    await fine.stop(100);
  }
});

E("a connection that never finishes its TLS handshake is closed after the handshake timeout", async () => {
  const s = await serve(
    async () => ({}) as never,
    { address: "127.0.0.1:0", tlsCertsDir: longLived.serverDir, tlsHandshakeTimeoutMs: 300 },
    memoryLog().log,
  );
  try {
    const started = Date.now();
    const closedAfter = await new Promise<number>((resolve, reject) => {
      const sock = connect(s.port, "127.0.0.1");
      sock.on("error", () => {});
      sock.on("close", () => resolve(Date.now() - started));
      setTimeout(() => reject(new Error("the silent connection is still open after 5 s")), 5000).unref();
    });
    assert.ok(closedAfter < 3000, `closed after ${closedAfter} ms`);
    assert.is(TLS_HANDSHAKE_TIMEOUT_MS, 10_000, "the default: 10 s");
  } finally {
    await s.stop(100);
  }
});

E.run();
