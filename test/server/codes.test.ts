// The gRPC status codes a pool worker answers with (src/server/codes.ts,
// kept apart so that a worker loads no grpc-js) are grpc-js's own.
import { status } from "@grpc/grpc-js";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { Code } from "../../src/server/codes.js";

test("every gRPC status code, by name and number, as @grpc/grpc-js has it", () => {
  const theirs = Object.fromEntries(Object.entries(status).filter(([k]) => Number.isNaN(Number(k))));
  assert.equal({ ...Code }, theirs);
});

test.run();
