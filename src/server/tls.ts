// Loads the server's mTLS material from a directory laid out as Crossplane
// mounts it (TLS_SERVER_CERTS_DIR=/tls/server): tls.crt, tls.key and ca.crt.
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createSecureContext } from "node:tls";
import { ServerCredentials } from "@grpc/grpc-js";

/** TLS_FILES are the files expected in the certificates directory. */
export const TLS_FILES = { cert: "tls.crt", key: "tls.key", ca: "ca.crt" } as const;

/**
 * loadServerCredentials returns credentials that require and verify a client
 * certificate signed by ca.crt. Errors name the directory and the file.
 */
export function loadServerCredentials(dir: string): ServerCredentials {
  const read = (name: string): Buffer => {
    try {
      const b = readFileSync(join(dir, name));
      if (b.length === 0) throw new Error("file is empty");
      return b;
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw new Error(`cannot load TLS certificates from ${dir}: ${name}: ${why}`, { cause: err });
    }
  };
  const cert = read(TLS_FILES.cert);
  const key = read(TLS_FILES.key);
  const ca = read(TLS_FILES.ca);
  // grpc-js takes any bytes here and fails only when it binds, with an error
  // that reads like a port problem; check each file first and name it.
  const check = (name: string, parse: () => unknown) => {
    try {
      parse();
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw new Error(
        `cannot load TLS certificates from ${dir}: ${name} is not a valid PEM ${name === TLS_FILES.key ? "private key" : "certificate"}: ` +
          why,
        {
          cause: err,
        },
      );
    }
  };
  check(TLS_FILES.cert, () => new X509Certificate(cert));
  check(TLS_FILES.key, () => createPrivateKey(key));
  check(TLS_FILES.ca, () => new X509Certificate(ca));
  try {
    createSecureContext({ cert, key, ca });
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot load TLS certificates from ${dir}: ${TLS_FILES.key} does not go with ${TLS_FILES.cert}: ${why}`, {
      cause: err,
    });
  }
  try {
    // The third argument makes grpc-js require and verify the client certificate.
    return ServerCredentials.createSsl(ca, [{ cert_chain: cert, private_key: key }], true);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot load TLS certificates from ${dir}: ${why}`, { cause: err });
  }
}
