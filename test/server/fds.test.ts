// Open file descriptors (fds.ts): a warning once past 80% of the limit, again
// only after the count has fallen below 60% and risen again; the real count
// read from /proc/self/fd follows descriptors opened and closed.
import { closeSync, openSync } from "node:fs";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { checkDescriptors, linux, watchDescriptors, type Descriptors } from "../../src/server/fds.js";
import { until } from "../support/cluster.js";
import { memoryLog } from "../support/log.js";

const F = suite("server: open file descriptors");

F("a warning past 80% of the limit, once per rise; none left to count with is all of them", () => {
  const mem = memoryLog();
  let open: number | undefined = 10;
  const d: Descriptors = { open: () => open, limit: () => 100 };
  const state = { warned: false };
  const warned: Array<string | undefined> = [];
  for (const n of [10, 79, 80, 95, 70, 61, 85, 59, 81, undefined]) {
    open = n;
    warned.push(checkDescriptors(d, 100, state, mem.log)?.replace(/;.*/, ""));
  }
  assert.equal(warned, [
    undefined,
    undefined,
    "open file descriptors: 80 of 100",
    undefined, // still high: said already
    undefined,
    undefined, // not below 60% yet
    undefined,
    undefined, // below 60%: the next rise warns
    "open file descriptors: 81 of 100",
    undefined, // said already
  ]);
  const fresh = { warned: false };
  open = undefined; // readdir failed with EMFILE
  assert.is(checkDescriptors(d, 100, fresh, mem.log)?.replace(/;.*/, ""), "open file descriptors: all 100");
  const lines = mem.lines();
  assert.is(lines.length, 3);
  assert.equal([lines[0]!["level"], lines[0]!["openFiles"], lines[0]!["limit"]], ["warn", 80, 100]);
  assert.match(
    String(lines[0]!["msg"]),
    /ending a worker does not give them back, and once they are gone the server accepts no connection; restart it$/,
  );
});

F("the count read from /proc follows descriptors opened and closed, against the real limit", () => {
  const limit = linux.limit()!;
  assert.ok(Number.isInteger(limit) && limit > 0, `limit ${limit}`);
  const before = linux.open()!;
  const fds = Array.from({ length: 40 }, () => openSync("/dev/null", "r"));
  try {
    assert.is(linux.open(), before + 40);
    // With the limit just above what is open now, the real count warns.
    const mem = memoryLog();
    assert.match(
      String(checkDescriptors(linux, before + 45, { warned: false }, mem.log)),
      new RegExp(`^open file descriptors: ${before + 40} of ${before + 45};`),
    );
  } finally {
    for (const fd of fds) closeSync(fd);
  }
  assert.is(linux.open(), before);
});

F("watchDescriptors checks on its interval and stops when cleared; without /proc it does nothing", async () => {
  const mem = memoryLog();
  let reads = 0;
  const timer = watchDescriptors(mem.log, { open: () => (reads++, 95), limit: () => 100 }, 10);
  assert.instance(timer, Object, "a timer where /proc answers");
  assert.is(timer!.hasRef(), false, "the check never keeps the process alive");
  await until("three checks", () => reads >= 3, 5_000);
  clearInterval(timer);
  const after = reads;
  assert.is(mem.lines().length, 1, "warned once");
  await new Promise((r) => setTimeout(r, 40));
  assert.is(reads, after, "stopped");
  const none = watchDescriptors(mem.log, {
    open: () => {
      throw Object.assign(new Error("no /proc"), { code: "ENOENT" });
    },
    limit: () => 100,
  });
  assert.is(none, undefined);
});

F.run();
