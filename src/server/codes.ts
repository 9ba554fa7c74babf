// gRPC status codes, for the code a pool worker loads. They are the numbers
// every gRPC implementation uses (@grpc/grpc-js names them `status`); taking
// them from grpc-js would load all of it, and protobufjs, which it requires,
// into every worker, where nothing speaks gRPC.
import type { status } from "@grpc/grpc-js";

/** Code is the gRPC status codes by name; test/server/codes.test.ts holds them to grpc-js's. */
export const Code = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const satisfies Record<keyof typeof status, status>;

/** Code is grpc-js's status type, so a code from here and one from grpc-js are one type. */
export type Code = status;
