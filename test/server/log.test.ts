// countDrops: lines a bounded log destination drops are counted and reported
// in one warning, and a warning that is itself dropped is retried with the
// count kept, so no dropped line goes untold.
import { EventEmitter } from "node:events";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { countDrops, createLogger, DROPPED_REPORT_MS } from "../../src/server/log.js";

const L = suite("server: dropped log lines");

/** A destination holding room lines at most; it drops the rest, as sonic-boom with maxLength does. */
function bounded(room: number) {
  const out = Object.assign(new EventEmitter(), {
    lines: [] as Record<string, unknown>[],
    room,
    write(s: string) {
      if (out.lines.length >= out.room) out.emit("drop", s);
      else out.lines.push(JSON.parse(s) as Record<string, unknown>);
    },
  });
  return out;
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

L("lines past the bound are counted and reported once, after the first drop", async () => {
  const out = bounded(3);
  const log = createLogger({ destination: out });
  countDrops(out, log, "testing");
  for (let i = 0; i < 10; i++) log.info({ i }, "line");
  assert.is(out.lines.length, 3);
  out.room = 100;
  await wait(DROPPED_REPORT_MS + 100);
  const reports = out.lines.filter((l) => l["droppedLines"] !== undefined);
  assert.equal(
    reports.map((l) => [l["level"], l["droppedLines"], l["msg"]]),
    [["warn", 7, "dropped 7 log lines: testing"]],
  );
});

L("a report that is itself dropped is tried again, with the lines dropped meanwhile added", async () => {
  const out = bounded(1);
  const log = createLogger({ destination: out });
  countDrops(out, log, "testing");
  log.info("kept");
  log.info("dropped 1");
  await wait(DROPPED_REPORT_MS + 100); // the report finds no room
  assert.is(out.lines.length, 1);
  log.info("dropped 2");
  out.room = 100;
  await wait(DROPPED_REPORT_MS + 100);
  const reports = out.lines.filter((l) => l["droppedLines"] !== undefined);
  assert.equal(
    reports.map((l) => l["droppedLines"]),
    [2],
  );
  assert.is(reports[0]!["msg"], "dropped 2 log lines: testing");
});

L("one dropped line reads in the singular", async () => {
  const out = bounded(0);
  const log = createLogger({ destination: out });
  countDrops(out, log, "testing");
  log.info("dropped");
  out.room = 100;
  await wait(DROPPED_REPORT_MS + 100);
  assert.is(out.lines[0]!["msg"], "dropped 1 log line: testing");
});

L.run();
