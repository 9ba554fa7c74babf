// Throwaway PKI for TLS tests, made with the openssl command: a CA, a server
// certificate named as Crossplane names a function's, a client certificate as
// Crossplane's, and a second, unrelated CA with its own client certificate.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

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
  cleanup(): void;
}

/** FUNCTION_HOST is the name Crossplane dials: <function>.<namespace>. */
export const FUNCTION_HOST = "function-hello.crossplane-system";

function openssl(cwd: string, ...args: string[]): void {
  execFileSync("openssl", args, { cwd, stdio: "pipe" });
}

function makeCa(cwd: string, name: string): void {
  openssl(
    cwd,
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "30",
    "-subj",
    `/CN=${name}`,
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.crt`,
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  );
}

function makeLeaf(cwd: string, ca: string, name: string, ext: string, days = 30): void {
  writeFileSync(join(cwd, `${name}.ext`), ext);
  openssl(
    cwd,
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    `/CN=${name}/O=Crossplane`,
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.csr`,
  );
  openssl(
    cwd,
    "x509",
    "-req",
    "-in",
    `${name}.csr`,
    "-CA",
    `${ca}.crt`,
    "-CAkey",
    `${ca}.key`,
    "-CAcreateserial",
    "-days",
    String(days),
    "-out",
    `${name}.crt`,
    "-extfile",
    `${name}.ext`,
  );
}

/** makePki writes a fresh PKI into a temporary directory; the server's certificate lasts serverDays (30). */
export function makePki(opts: { serverDays?: number } = {}): TestPki {
  const dir = mkdtempSync(join(tmpdir(), "xfn-pki-"));
  makeCa(dir, "ca");
  makeCa(dir, "other-ca");
  const [fn, ns] = FUNCTION_HOST.split(".");
  makeLeaf(
    dir,
    "ca",
    "server",
    `subjectAltName=DNS:${fn},DNS:${fn}.${ns},DNS:${fn}.${ns}.svc\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n`,
    opts.serverDays,
  );
  makeLeaf(dir, "ca", "client", "subjectAltName=DNS:crossplane.crossplane-system\nextendedKeyUsage=clientAuth\n");
  makeLeaf(dir, "other-ca", "stranger", "subjectAltName=DNS:crossplane.crossplane-system\nextendedKeyUsage=clientAuth\n");
  const serverDir = join(dir, "server-dir");
  mkdirSync(serverDir);
  const read = (f: string) => readFileSync(join(dir, f));
  writeFileSync(join(serverDir, "tls.crt"), read("server.crt"));
  writeFileSync(join(serverDir, "tls.key"), read("server.key"));
  writeFileSync(join(serverDir, "ca.crt"), read("ca.crt"));
  return {
    dir,
    serverDir,
    ca: read("ca.crt"),
    client: { cert: read("client.crt"), key: read("client.key") },
    otherCa: read("other-ca.crt"),
    strangerClient: { cert: read("stranger.crt"), key: read("stranger.key") },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
