// Errors the embedded API server answers with: a Kubernetes Status's reason and
// HTTP code. Its own module, so that what validates (meta.ts, fielderr.ts,
// schema.ts) needs neither the store nor the HTTP server.

/** ApiError carries a Kubernetes Status reason and HTTP code. */
export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}
