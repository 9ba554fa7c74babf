// Recorded stories: sequences of RunFunctionRequests as Crossplane sends them
// over successive reconciles, each with the response it must get. One test per
// reconcile, named after its story and step.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { parse } from "yaml";
import { RunFunctionRequestSchema, RunFunctionResponseSchema } from "xfn-runtime";
import { mismatches } from "../../src/testing/expect.js";
import { memoryLog } from "../../test/support/log.js";
import lifecycle from "./index.js";

interface Story {
  story: string;
  input: Record<string, JsonValue>;
  reconciles: Array<{ name: string; now: string; request: Record<string, JsonValue>; expect: Record<string, JsonValue> }>;
}

const dir = join(import.meta.dirname, "testdata/stories");
const files = readdirSync(dir)
  .filter((f) => f.endsWith(".yaml"))
  .sort();
const S = suite("lifecycle stories");

S("every failure-mode story is present", () => {
  assert.equal(files, [
    "external-name-learned-late.yaml",
    "external-name-provider-restart.yaml",
    "foreground-deletion.yaml",
    "nested-status.yaml",
    "same-name-while-deleting.yaml",
  ]);
});

for (const file of files) {
  const story = parse(readFileSync(join(dir, file), "utf8")) as Story;
  for (const [i, r] of story.reconciles.entries()) {
    S(`${file} #${i + 1}: ${r.name}`, async () => {
      assert.ok(Object.keys(r.expect ?? {}).length > 0, "a reconcile without expectations checks nothing");
      const req = fromJson(RunFunctionRequestSchema, { ...r.request, input: story.input } as JsonValue);
      const rsp = await lifecycle(req, { signal: new AbortController().signal, log: memoryLog().log, now: () => new Date(r.now) });
      const got = toJson(RunFunctionResponseSchema, rsp);
      const diffs = mismatches(got, r.expect);
      assert.equal(diffs, [], `${story.story}\n${diffs.join("\n")}\nfull response: ${JSON.stringify(got, null, 2)}`);
    });
  }
}

S.run();
