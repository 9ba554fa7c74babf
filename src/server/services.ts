// The gRPC services the server registers, by their full names (the wire
// contract's package and service). Named here rather than read from the
// generated descriptors, which would load protobuf-es into the server's
// thread for two strings; test/server/codes.test.ts holds them to the
// generated services' names.

/** RUN_FUNCTION_SERVICE is FunctionRunnerService of apiextensions.fn.proto.v1. */
export const RUN_FUNCTION_SERVICE = "apiextensions.fn.proto.v1.FunctionRunnerService";
/** RUN_FUNCTION_SERVICE_V1BETA1 is the same service of the v1beta1 package, which Crossplane still calls. */
export const RUN_FUNCTION_SERVICE_V1BETA1 = "apiextensions.fn.proto.v1beta1.FunctionRunnerService";
