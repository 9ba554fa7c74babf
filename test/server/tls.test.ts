// Loading the server's certificates: every bad file is named before grpc-js
// sees it (grpc-js accepts any bytes and fails at bind time, like a port problem).
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { loadServerCredentials } from "../../src/server/tls.js";
import { makePki, type TestPki } from "../support/certs.js";

const T = suite("server: TLS certificates");
let pki: TestPki;
let scratch: string;
T.before(() => {
  pki = makePki();
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
