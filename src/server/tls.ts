// Loads mTLS material from a directory laid out as Crossplane mounts it
// (TLS_SERVER_CERTS_DIR=/tls/server for a function, TLS_CLIENT_CERTS_DIR for
// its client): tls.crt, tls.key and ca.crt.
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { isIP } from "node:net";
import { createSecureContext, type TLSSocket } from "node:tls";
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
 * ClientCheck decides on a connection's client certificate once its TLS
 * handshake is done: undefined accepts it; otherwise it is the reason the
 * connection is refused (an OpenSSL verification code, as Node names them).
 */
export type ClientCheck = (socket: TLSSocket) => string | undefined;

/**
 * loadServerCredentials returns credentials that ask for a client certificate,
 * the check that the server runs on each handshake's certificate before the
 * connection serves (checkClientCertificate), and the serving certificate's
 * expiry. Errors name the directory and the file.
 */
export function loadServerCredentials(
  dir: string,
  handshakeTimeoutMs = TLS_HANDSHAKE_TIMEOUT_MS,
): { creds: ServerCredentials; notAfter: Date; checkClient: ClientCheck } {
  const { cert, key, ca } = loadTlsFiles(dir);
  let creds: ServerCredentials;
  try {
    // The third argument makes grpc-js ask for a client certificate.
    creds = ServerCredentials.createSsl(ca, [{ cert_chain: cert, private_key: key }], true);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot load TLS certificates from ${dir}: ${why}`, { cause: err });
  }
  // grpc-js builds its TLS server from these options; the handshake timeout is
  // a tls.Server one. OpenSSL still verifies every client certificate, but
  // its verdict is read by checkClientCertificate instead of ending the
  // handshake at once: the server refuses the connection unless the check
  // accepts it (server.ts), and refuses to serve if it cannot run the check.
  const options = creds._getConstructorOptions.bind(creds);
  creds._getConstructorOptions = () => ({ ...options(), handshakeTimeout: handshakeTimeoutMs, rejectUnauthorized: false });
  return { creds, notAfter: new Date(new X509Certificate(cert).validTo), checkClient: checkClientCertificate(ca) };
}

/** OIDs of the extended key usages that allow a certificate to authenticate a TLS client or server. */
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";
const SERVER_AUTH = "1.3.6.1.5.5.7.3.1";
const ANY_EXTENDED_KEY_USAGE = "2.5.29.37.0";

/** certificates parses every certificate in a PEM bundle. */
function certificates(pem: Buffer): X509Certificate[] {
  return [...pem.toString("latin1").matchAll(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)].map(
    (m) => new X509Certificate(m[0]),
  );
}

/**
 * issuedByName checks a peer's certificate that OpenSSL refused only as
 * self-signed (DEPTH_ZERO_SELF_SIGNED_CERT) as a chain of two, and returns
 * undefined if it holds, else OpenSSL's code for what fails.
 *
 * Crossplane signs every certificate it makes, its CA's included, with one
 * subject name (C=Earth, ST=Earth, L=Earth, O=Crossplane, CN=Crossplane:
 * crossplane v2.4.0 internal/initializer/cert_generator.go pkixName), and
 * Go's x509 writes no authority key identifier when a certificate's issuer
 * name is its subject name. OpenSSL takes such a certificate for a
 * self-signed one, looks for it among the trusted certificates, and refuses
 * it; Go, which checks signatures while it builds a chain, accepts it. So
 * Crossplane's client certificate, and the server certificates its package
 * runtime makes for functions, fail OpenSSL alone. What is checked here: a
 * certificate of ca.crt with that name that may sign certificates
 * (checkIssued), whose key made the signature (verify); both within their
 * validity; and the peer's certificate for the use (client or server
 * authentication) where it lists its uses.
 */
function issuedByName(leaf: X509Certificate, cas: X509Certificate[], usage: string, t: number): string | undefined {
  const issuer = cas.find((ca) => ca.ca && ca.subject === leaf.issuer && leaf.checkIssued(ca) && leaf.verify(ca.publicKey));
  if (!issuer) return "DEPTH_ZERO_SELF_SIGNED_CERT";
  for (const c of [leaf, issuer]) {
    if (t < Date.parse(c.validFrom)) return "CERT_NOT_YET_VALID";
    if (t > Date.parse(c.validTo)) return "CERT_HAS_EXPIRED";
  }
  const uses = leaf.keyUsage as string[] | undefined;
  if (uses && !uses.includes(usage) && !uses.includes(ANY_EXTENDED_KEY_USAGE)) return "INVALID_PURPOSE";
  return undefined;
}

/** OpenSSL's verdict on a TLS socket's peer certificate, as Node names it. */
const verdict = (socket: TLSSocket) => String(socket.authorizationError ?? "UNABLE_TO_VERIFY_LEAF_SIGNATURE");

/**
 * checkClientCertificate accepts what OpenSSL accepts, and one thing more:
 * Crossplane's own client certificate, which OpenSSL alone refuses as
 * self-signed (see issuedByName).
 */
export function checkClientCertificate(caPem: Buffer, now: () => number = Date.now): ClientCheck {
  const cas = certificates(caPem);
  return (socket) => {
    if (socket.authorized) return undefined;
    const leaf = socket.getPeerX509Certificate();
    if (!leaf) return "ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE";
    const code = verdict(socket);
    return code === "DEPTH_ZERO_SELF_SIGNED_CERT" ? issuedByName(leaf, cas, CLIENT_AUTH, now()) : code;
  };
}

/**
 * checkServerCertificate is the client's side of checkClientCertificate: it
 * accepts a server whose certificate OpenSSL accepted for serverName, or one
 * OpenSSL refused only as self-signed that holds as a chain of two from
 * ca.crt (a function's certificate made by Crossplane's package runtime) and
 * names serverName (X509Certificate checkHost or checkIP, OpenSSL's own name check). It returns undefined, or why
 * the server is refused.
 */
export function checkServerCertificate(
  caPem: Buffer,
  now: () => number = Date.now,
): (socket: TLSSocket, serverName: string) => string | undefined {
  const cas = certificates(caPem);
  return (socket, serverName) => {
    if (socket.authorized) return undefined;
    const leaf = socket.getPeerX509Certificate();
    if (!leaf) return "the server sent no certificate";
    const code = verdict(socket);
    if (code !== "DEPTH_ZERO_SELF_SIGNED_CERT") return code;
    const why = issuedByName(leaf, cas, SERVER_AUTH, now());
    if (why) return why;
    const named = isIP(serverName) ? leaf.checkIP(serverName) : leaf.checkHost(serverName, { wildcards: true, partialWildcards: false });
    return named === undefined ? `ERR_TLS_CERT_ALTNAME_INVALID (the certificate does not name ${serverName})` : undefined;
  };
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
