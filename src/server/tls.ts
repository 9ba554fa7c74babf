// Loads mTLS material from a directory laid out as Crossplane mounts it
// (TLS_SERVER_CERTS_DIR=/tls/server for a function, TLS_CLIENT_CERTS_DIR for
// its client): tls.crt, tls.key and ca.crt.
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createSecureContext } from "node:tls";
import { ServerCredentials } from "@grpc/grpc-js";

/** TLS_FILES are the files expected in the certificates directory. */
export const TLS_FILES = { cert: "tls.crt", key: "tls.key", ca: "ca.crt" } as const;

/** TlsFiles is a certificates directory's contents, each file checked. */
export interface TlsFiles {
  cert: Buffer;
  key: Buffer;
  ca: Buffer;
}

/**
 * loadTlsFiles reads tls.crt, tls.key and ca.crt from dir and checks that each
 * is valid PEM and that the key goes with the certificate. grpc-js takes any
 * bytes and fails later, with an error that names no file (at bind time, like
 * a port problem, for a server; "PEM routines::no start line" for a client).
 * Errors say "cannot load <what> from <dir>: <file>: ...".
 */
export function loadTlsFiles(dir: string, what = "TLS certificates"): TlsFiles {
  const fail = (detail: string, err: unknown): never => {
    const why = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot load ${what} from ${dir}: ${detail}${why}`, { cause: err });
  };
  const read = (name: string): Buffer => {
    try {
      const b = readFileSync(join(dir, name));
      if (b.length === 0) throw new Error("file is empty");
      return b;
    } catch (err) {
      return fail(`${name}: `, err);
    }
  };
  const cert = read(TLS_FILES.cert);
  const key = read(TLS_FILES.key);
  const ca = read(TLS_FILES.ca);
  const check = (name: string, parse: () => unknown) => {
    try {
      parse();
    } catch (err) {
      fail(`${name} is not a valid PEM ${name === TLS_FILES.key ? "private key" : "certificate"}: `, err);
    }
  };
  check(TLS_FILES.cert, () => new X509Certificate(cert));
  check(TLS_FILES.key, () => createPrivateKey(key));
  check(TLS_FILES.ca, () => new X509Certificate(ca));
  try {
    createSecureContext({ cert, key, ca });
  } catch (err) {
    fail(`${TLS_FILES.key} does not go with ${TLS_FILES.cert}: `, err);
  }
  return { cert, key, ca };
}

/**
 * TLS_HANDSHAKE_TIMEOUT_MS bounds a TLS handshake: a connection that has not
 * finished one by then is closed (Node's own default is 120 s, long enough
 * for idle connections to pile up).
 */
export const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

/**
 * loadServerCredentials returns credentials that require and verify a client
 * certificate signed by ca.crt, with the serving certificate's expiry. Errors
 * name the directory and the file.
 */
export function loadServerCredentials(
  dir: string,
  handshakeTimeoutMs = TLS_HANDSHAKE_TIMEOUT_MS,
): { creds: ServerCredentials; notAfter: Date } {
  const { cert, key, ca } = loadTlsFiles(dir);
  let creds: ServerCredentials;
  try {
    // The third argument makes grpc-js require and verify the client certificate.
    creds = ServerCredentials.createSsl(ca, [{ cert_chain: cert, private_key: key }], true);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot load TLS certificates from ${dir}: ${why}`, { cause: err });
  }
  // grpc-js builds its TLS server from these options; the handshake timeout is a tls.Server one.
  const options = creds._getConstructorOptions.bind(creds);
  creds._getConstructorOptions = () => ({ ...options(), handshakeTimeout: handshakeTimeoutMs });
  return { creds, notAfter: new Date(new X509Certificate(cert).validTo) };
}

/** EXPIRY_WARNING_MS is how long before its expiry a serving certificate is warned of. */
export const EXPIRY_WARNING_MS = 7 * 24 * 3600 * 1000;

/** expiryNote says when the certificate expires if that is past or within a week, else undefined. */
export function expiryNote(notAfter: Date, now = new Date()): { expired: boolean; text: string } | undefined {
  const left = notAfter.getTime() - now.getTime();
  if (left > EXPIRY_WARNING_MS) return undefined;
  if (left <= 0) return { expired: true, text: `the serving certificate (tls.crt) expired at ${notAfter.toISOString()}` };
  const days = Math.floor(left / 86_400_000);
  const hours = Math.floor((left % 86_400_000) / 3_600_000);
  return { expired: false, text: `the serving certificate (tls.crt) expires at ${notAfter.toISOString()}, in ${days} d ${hours} h` };
}
