// `xfn inspect`'s command line: flags it cannot use are refused naming why,
// and a socket it cannot listen on stops it with an error, exit code 1.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { run } from "../support/spawn.js";

const C = suite("cli: xfn inspect");

let scratch: string;
C.before(() => {
  scratch = mkdtempSync(join(tmpdir(), "xfn-inspect-cli-"));
});
C.after(() => rmSync(scratch, { recursive: true, force: true }));

C("a --function without NAME=MODULE, a --queue of 0 and a --max-recv-msg-size that is not a number are refused", async () => {
  const fn = await run(["inspect", "--socket", join(scratch, "s1"), "--function", "function-hello"]);
  assert.is.not(fn.code, 0);
  assert.match(fn.stderr, 'expected NAME=MODULE, got "function-hello"');
  const queue = await run(["inspect", "--socket", join(scratch, "s2"), "--queue", "0"]);
  assert.is.not(queue.code, 0);
  assert.match(queue.stderr, "--queue must be a whole number above 0");
  const size = await run(["inspect", "--socket", join(scratch, "s3"), "--max-recv-msg-size", "lots"]);
  assert.is.not(size.code, 0);
  assert.match(size.stderr, "--max-recv-msg-size must be a whole number above 0");
});

C("a socket in a folder that does not exist: exit 1, naming the socket", async () => {
  const socket = join(scratch, "no/such/folder/socket");
  const r = await run(["inspect", "--socket", socket, "--dir", join(scratch, "cases")], { timeoutMs: 20_000 });
  assert.is(r.code, 1);
  assert.match(r.stdout + r.stderr, "cannot start the pipeline inspector");
  assert.match(r.stdout + r.stderr, `cannot listen on ${socket}`);
});

C.run();
