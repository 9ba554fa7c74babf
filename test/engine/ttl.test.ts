// A Composition's pipeline TTL across its functions, as Crossplane keeps it
// (crossplane v2.4.0, internal/controller/apiextensions/composite/
// composition_functions.go: "the shortest non-zero TTL returned by any
// function"; zero means no limit): no function's TTL lengthens another's,
// whichever order they run in. Inside one xfn function the steps keep the same
// rule (test/pipeline.test.ts).
import { create } from "@bufbuild/protobuf";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import { test } from "uvu";
import * as assert from "uvu/assert";
import { runPipeline, type PipelineStep } from "../../src/engine/composition.js";
import type { Runner } from "../../src/engine/runner.js";
import { RunFunctionResponseSchema } from "../../src/gen/fn/v1/run_function_pb.js";

/** ttlOf runs one step per TTL (seconds; undefined: the response sets none) and returns the pipeline's TTL. */
async function ttlOf(ttls: (number | undefined)[]): Promise<number | undefined> {
  const runner: Runner = {
    async run(name) {
      const t = ttls[Number(name.slice(1))];
      return create(RunFunctionResponseSchema, {
        meta: { tag: "", ...(t === undefined ? {} : { ttl: create(DurationSchema, { seconds: BigInt(Math.floor(t)), nanos: 0 }) }) },
      });
    },
    close() {},
  };
  const steps: PipelineStep[] = ttls.map((_, i) => ({
    step: `s${i}`,
    functionName: `f${i}`,
    credentials: [],
    bootstrap: [],
    bootstrapSchemas: [],
  }));
  const r = await runPipeline(
    {
      steps,
      observed: {},
      context: undefined,
      credentials: [],
      fetch: () => ({ $typeName: "apiextensions.fn.proto.v1.Resources", items: [] }),
    },
    runner,
    Date.now() + 60_000,
  );
  return r.ttlSeconds;
}

test("the shortest non-zero TTL of any function, in any order; zero or none is no limit", async () => {
  const cases: [(number | undefined)[], number | undefined][] = [
    [[60, 10, 300], 10],
    [[10, 60], 10],
    [[300, 60], 60],
    [[0, 30], 30],
    [[30, 0], 30],
    [[undefined, 45], 45],
    [[0, 0], undefined],
    [[undefined], undefined],
  ];
  for (const [ttls, want] of cases) assert.is(await ttlOf(ttls), want, JSON.stringify(ttls));
});

test.run();
