// Loads the server's mTLS material from a directory laid out as Crossplane
// mounts it (TLS_SERVER_CERTS_DIR=/tls/server): tls.crt, tls.key and ca.crt.
import { readFileSync } from "node:fs";
import { join } from "node:path";
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
  try {
    // The third argument makes grpc-js require and verify the client certificate.
    return ServerCredentials.createSsl(ca, [{ cert_chain: cert, private_key: key }], true);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new Error(`cannot load TLS certificates from ${dir}: ${why}`, { cause: err });
  }
}
