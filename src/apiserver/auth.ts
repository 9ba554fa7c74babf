// Who may use the embedded API server: with a token (xfn dev-cluster, xfn host
// --embedded), only a request carrying it, over TLS on a certificate made at
// start; the health and version endpoints answer anyone, as kube's do.
import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";

/** Paths answered without a credential, as kube-apiserver's system:public-info-viewer reads them. */
export const PUBLIC = new Set(["/healthz", "/readyz", "/livez", "/version"]);

/** authorized tells whether a request carries the server's bearer token (compared in constant time). */
export function authorized(req: IncomingMessage, token: Buffer): boolean {
  const h = req.headers.authorization;
  if (typeof h !== "string" || !h.startsWith("Bearer ")) return false;
  const given = Buffer.from(h.slice("Bearer ".length).trim());
  return given.length === token.length && timingSafeEqual(given, token);
}

/**
 * servingCertificate makes the TLS certificate the server serves with a
 * token: self-signed (its own CA, which the kubeconfig carries), EC P-256,
 * for 127.0.0.1 and localhost. Made at each start: it names no one, and lives
 * as long as the process.
 */
export async function servingCertificate(): Promise<{ key: string; cert: string }> {
  const { default: selfsigned } = await import("selfsigned");
  const now = Date.now();
  const pems = await selfsigned.generate([{ name: "commonName", value: "xfn-dev-cluster" }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    notBeforeDate: new Date(now - 60_000),
    notAfterDate: new Date(now + 365 * 86_400_000),
    extensions: [
      { name: "basicConstraints", cA: true },
      {
        name: "subjectAltName",
        altNames: [
          { type: 7, ip: "127.0.0.1" },
          { type: 2, value: "localhost" },
        ],
      },
    ],
  });
  return { key: pems.private, cert: pems.cert };
}
