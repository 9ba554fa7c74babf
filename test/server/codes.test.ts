// The gRPC status codes a pool worker answers with (src/server/codes.ts,
// kept apart so that a worker loads no grpc-js) are grpc-js's own, and the
// service names the server registers (src/server/services.ts, kept apart so
// that the server's thread loads no protobuf-es) are the generated ones.
import { status } from "@grpc/grpc-js";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { Code } from "../../src/server/codes.js";
import { RUN_FUNCTION_SERVICE, RUN_FUNCTION_SERVICE_V1BETA1 } from "../../src/server/services.js";
import { FunctionRunnerService } from "../../src/gen/fn/v1/run_function_pb.js";
import { Health } from "../../src/gen/grpc/health/v1/health_pb.js";
import { HEALTH_SERVICE } from "../../src/server/health.js";
import { FunctionRunnerService as BetaFunctionRunnerService } from "../../src/gen/fn/v1beta1/zz_generated_run_function_pb.js";

test("every gRPC status code, by name and number, as @grpc/grpc-js has it", () => {
  const theirs = Object.fromEntries(Object.entries(status).filter(([k]) => Number.isNaN(Number(k))));
  assert.equal({ ...Code }, theirs);
});

test("the RunFunction services' names, v1 and v1beta1, as the generated descriptors have them", () => {
  assert.is(RUN_FUNCTION_SERVICE, FunctionRunnerService.typeName);
  assert.is(RUN_FUNCTION_SERVICE_V1BETA1, BetaFunctionRunnerService.typeName);
  assert.is(HEALTH_SERVICE, Health.typeName);
});

test.run();
