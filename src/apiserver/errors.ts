// Errors the embedded API server answers with: a Kubernetes Status's reason and
// HTTP code. Its own module, so that what validates (meta.ts, fielderr.ts,
// schema.ts) needs neither the store nor the HTTP server.
import type { JsonObject } from "@bufbuild/protobuf";

/** ApiError carries a Kubernetes Status reason and HTTP code. */
export class ApiError extends Error {
  /** The Status's details (name, group, kind, causes), when it has any. */
  details?: JsonObject;
  /** The Status's metadata (a 410 for an expired continue token carries a token to go on with). */
  metadata?: JsonObject;
  /** Sent as this plain text instead of a Status (kube-apiserver's "404 page not found" for a path it does not serve). */
  text?: string;
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}
