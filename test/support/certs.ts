// Throwaway PKI for TLS tests, made in Node (the selfsigned package, on Node's
// own WebCrypto; no openssl command needed): a CA, a server certificate named
// as Crossplane names a function's, a client certificate as Crossplane's, and
// a second, unrelated CA with its own client certificate.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import selfsigned from "selfsigned";

export interface Pem {
  cert: Buffer;
  key: Buffer;
}

export interface TestPki {
  dir: string;
  /** A directory laid out like Crossplane's server Secret: tls.crt, tls.key, ca.crt. */
  serverDir: string;
  ca: Buffer;
  client: Pem;
  otherCa: Buffer;
  /** A client certificate signed by the other CA. */
  strangerClient: Pem;
  /** A client certificate from the server's CA that expired a day ago. */
  expiredClient: Pem;
  /**
   * Client certificates shaped as Crossplane makes its own: the subject is the
   * CA's (CROSSPLANE_NAME), with no authority key identifier. crossplane is
   * Crossplane's client certificate; crossplaneExpired the same, expired;
   * crossplaneServerOnly one for server authentication only; and
   * crossplaneSelfSigned one with that name, signed by its own key.
   */
  crossplane: Pem;
  crossplaneExpired: Pem;
  crossplaneServerOnly: Pem;
  crossplaneSelfSigned: Pem;
  /**
   * Server Secret folders (tls.crt, tls.key, ca.crt) with a function's
   * certificate shaped as Crossplane's package runtime makes it (names of
   * FUNCTION_HOST, Crossplane's subject name, no authority key identifier),
   * from the CA, and the same signed by its own key.
   */
  crossplaneServerDir: string;
  crossplaneSelfSignedServerDir: string;
  cleanup(): void;
}

/** FUNCTION_HOST is the name Crossplane dials: <function>.<namespace>. */
export const FUNCTION_HOST = "function-hello.crossplane-system";

const DAY_MS = 86_400_000;

type Extension = NonNullable<Parameters<typeof selfsigned.generate>[1]>["extensions"] extends (infer E)[] | undefined ? E : never;

/** certificate makes an RSA 2048 key and a SHA-256 certificate for it, self-signed or signed by ca. */
/**
 * CROSSPLANE_NAME is the one subject name Crossplane gives every certificate
 * it makes, its CA's included (crossplane v2.4.0,
 * internal/initializer/cert_generator.go pkixName). The test CA has it too, as
 * Crossplane's does: so a certificate shaped as Crossplane's (issuer name =
 * subject name, no authority key identifier) can be made from it.
 */
export const CROSSPLANE_NAME = "C=Earth, ST=Earth, L=Earth, O=Crossplane, CN=Crossplane";
/** CROSSPLANE_NAME as the attributes the selfsigned package takes. */
export const CROSSPLANE_ATTRS = [
  { name: "countryName", value: "Earth" },
  { name: "ST", value: "Earth" },
  { name: "localityName", value: "Earth" },
  { name: "organizationName", value: "Crossplane" },
  { name: "commonName", value: "Crossplane" },
];

async function certificate(cn: string | null, days: number, extensions: Extension[], ca?: Pem, expired = false): Promise<Pem> {
  const attrs =
    cn === null
      ? CROSSPLANE_ATTRS
      : [{ name: "commonName", value: cn }, ...(ca ? [{ name: "organizationName", value: "Crossplane" }] : [])];
  const now = Date.now();
  const pems = await selfsigned.generate(attrs, {
    keySize: 2048,
    algorithm: "sha256",
    // A minute back, so a clock a little behind the signer's still accepts it.
    // Expired: valid for days, ending a day ago.
    notBeforeDate: new Date(expired ? now - (days + 1) * DAY_MS : now - 60_000),
    notAfterDate: new Date(expired ? now - DAY_MS : now + days * DAY_MS),
    extensions,
    ...(ca ? { ca: { key: ca.key.toString(), cert: ca.cert.toString() } } : {}),
  });
  return { cert: Buffer.from(pems.cert), key: Buffer.from(pems.private) };
}

const caExtensions: Extension[] = [
  { name: "basicConstraints", cA: true, critical: true },
  { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
];

const clientExtensions: Extension[] = [
  { name: "subjectAltName", altNames: [{ type: 2, value: "crossplane.crossplane-system" }] },
  { name: "extKeyUsage", clientAuth: true },
];

/** makePki writes a fresh PKI into a temporary directory; the server's certificate lasts serverDays (30). */
export async function makePki(opts: { serverDays?: number } = {}): Promise<TestPki> {
  const [fn, ns] = FUNCTION_HOST.split(".");
  const [ca, otherCa] = await Promise.all([certificate(null, 30, caExtensions), certificate("other-ca", 30, caExtensions)]);
  const crossplaneClient: Extension[] = [
    { name: "basicConstraints", cA: false, critical: true },
    { name: "keyUsage", digitalSignature: true, keyEncipherment: true, dataEncipherment: true },
    { name: "subjectAltName", altNames: [{ type: 2, value: "crossplane.crossplane-system" }] },
  ];
  const crossplaneServer: Extension[] = [
    ...crossplaneClient.slice(0, 2),
    { name: "subjectAltName", altNames: [`${fn}`, `${fn}.${ns}`, `${fn}.${ns}.svc`].map((value) => ({ type: 2, value })) },
    { name: "extKeyUsage", serverAuth: true },
  ];
  const [
    server,
    client,
    stranger,
    expired,
    crossplane,
    crossplaneExpired,
    crossplaneServerOnly,
    crossplaneSelfSigned,
    xpServer,
    xpSelfServer,
  ] = await Promise.all([
    certificate(
      "server",
      opts.serverDays ?? 30,
      [
        { name: "subjectAltName", altNames: [`${fn}`, `${fn}.${ns}`, `${fn}.${ns}.svc`].map((value) => ({ type: 2, value })) },
        { name: "extKeyUsage", serverAuth: true },
        { name: "keyUsage", digitalSignature: true, keyEncipherment: true },
      ],
      ca,
    ),
    certificate("client", 30, clientExtensions, ca),
    certificate("stranger", 30, clientExtensions, otherCa),
    certificate("expired", 30, clientExtensions, ca, true),
    certificate(null, 30, [...crossplaneClient, { name: "extKeyUsage", clientAuth: true }], ca),
    certificate(null, 30, [...crossplaneClient, { name: "extKeyUsage", clientAuth: true }], ca, true),
    certificate(null, 30, [...crossplaneClient, { name: "extKeyUsage", serverAuth: true }], ca),
    certificate(null, 30, [...crossplaneClient, { name: "extKeyUsage", clientAuth: true }]),
    certificate(null, 30, crossplaneServer, ca),
    certificate(null, 30, crossplaneServer),
  ]);
  const dir = mkdtempSync(join(tmpdir(), "xfn-pki-"));
  const write = (name: string, data: Buffer) => writeFileSync(join(dir, name), data, { mode: 0o600 });
  for (const [name, pem] of Object.entries({ ca, "other-ca": otherCa, server, client, stranger })) {
    write(`${name}.crt`, pem.cert);
    write(`${name}.key`, pem.key);
  }
  const serverDir = join(dir, "server-dir");
  mkdirSync(serverDir);
  writeFileSync(join(serverDir, "tls.crt"), server.cert);
  writeFileSync(join(serverDir, "tls.key"), server.key);
  writeFileSync(join(serverDir, "ca.crt"), ca.cert);
  const secretDir = (name: string, pem: Pem) => {
    const d = join(dir, name);
    mkdirSync(d);
    writeFileSync(join(d, "tls.crt"), pem.cert);
    writeFileSync(join(d, "tls.key"), pem.key);
    writeFileSync(join(d, "ca.crt"), ca.cert);
    return d;
  };
  return {
    dir,
    serverDir,
    ca: ca.cert,
    client,
    otherCa: otherCa.cert,
    strangerClient: stranger,
    expiredClient: expired,
    crossplane,
    crossplaneExpired,
    crossplaneServerOnly,
    crossplaneSelfSigned,
    crossplaneServerDir: secretDir("crossplane-server-dir", xpServer),
    crossplaneSelfSignedServerDir: secretDir("crossplane-self-signed-server-dir", xpSelfServer),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
