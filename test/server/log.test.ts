// countDrops: lines a bounded log destination drops are counted and reported
// in one warning, and a warning that is itself dropped is retried with the
// count kept, so no dropped line goes untold.
import { EventEmitter } from "node:events";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { countDrops, createLogger, DROPPED_REPORT_MS, redactForDisplay, refusals } from "../../src/server/log.js";
import { memoryLog } from "../support/log.js";

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

L("a worker's report of lines it dropped, dropped in turn, counts the lines it told of", async () => {
  const out = bounded(0);
  const log = createLogger({ destination: out });
  countDrops(out, log, "testing");
  out.emit(
    "drop",
    `${JSON.stringify({ level: "warn", droppedLines: 120, worker: 2, msg: "dropped 120 log lines: the function logged faster" })}\n`,
  );
  out.emit("drop", `${JSON.stringify({ level: "info", droppedLines: 5, msg: "a function's own field of that name" })}\n`);
  out.emit("drop", '{"droppedLines": not json');
  out.room = 100;
  await wait(DROPPED_REPORT_MS + 100);
  assert.is(out.lines[0]!["msg"], "dropped 122 log lines: testing");
});

const X = suite("server: secrets kept out of the log");

X("redactSecrets: secret-bearing keys replaced at any depth; values written as JSON writes them", () => {
  const mem = memoryLog();
  const when = new Date(0);
  mem.log.info(
    {
      req: { credentials: { a: "s3cret" }, items: [{ connectionDetails: { p: "s3cret" } }] },
      when,
      url: new URL("https://example.org/a"),
      custom: { toJSON: () => ({ credentialData: "s3cret", kept: 1 }) },
    },
    "x",
  );
  const line = mem.lines()[0]!;
  assert.not.ok(mem.text().includes("s3cret"));
  assert.equal(line["req"], { credentials: "[REDACTED]", items: [{ connectionDetails: "[REDACTED]" }] });
  assert.is(line["when"], "1970-01-01T00:00:00.000Z");
  assert.is(line["url"], "https://example.org/a");
  assert.equal(line["custom"], { credentialData: "[REDACTED]", kept: 1 });
});

X("an object that refers to itself more than once is logged at once, its cycles shown as such, secrets still redacted", () => {
  const mem = memoryLog();
  const a: Record<string, unknown> = { n: 1, credentials: { k: "s3cret" } };
  a["x"] = a;
  a["y"] = a;
  const list: unknown[] = [a];
  list.push(list, list);
  mem.log.info({ a, list }, "cyclic"); // before: 2^32 copies, never returned
  const line = mem.lines()[0]!;
  assert.equal(line["a"], { n: 1, credentials: "[REDACTED]", x: "[Circular]", y: "[Circular]" });
  assert.equal(line["list"], [{ n: 1, credentials: "[REDACTED]", x: "[Circular]", y: "[Circular]" }, "[Circular]", "[Circular]"]);
  const shown = redactForDisplay(a) as Record<string, unknown>;
  assert.is(shown["x"], shown, "a cycle stays a cycle in the copy");
  assert.is(shown["credentials"], "[REDACTED]");
});

X("a key named __proto__ is logged as data, at the top level renamed, never failing the call that logs it", () => {
  const mem = memoryLog();
  const fromWire = JSON.parse('{"__proto__": {"x": 1}, "y": 2, "nested": {"__proto__": {"credentials": "s3cret"}}}') as object;
  mem.log.info(fromWire, "proto key"); // before: TypeError "serializers[key] is not a function"
  const line = mem.lines()[0]!;
  assert.equal(line["[__proto__]"], { x: 1 });
  assert.is(line["y"], 2);
  assert.equal(JSON.stringify(line["nested"]), '{"__proto__":{"credentials":"[REDACTED]"}}');
});

X("redactForDisplay copies plain objects and arrays only, and keeps a custom inspect hook", () => {
  const date = new Date(0);
  const map = new Map([["credentials", "x"]]);
  const bare = Object.assign(Object.create(null) as Record<string, unknown>, { credentials: "x", k: 1 });
  const out = redactForDisplay({ date, map, bare, list: [{ connection_details: "x" }] }) as Record<string, unknown>;
  assert.is(out["date"], date);
  assert.is(out["map"], map);
  assert.equal({ ...(out["bare"] as object) }, { credentials: "[REDACTED]", k: 1 });
  assert.is(Object.getPrototypeOf(out["bare"]), null);
  assert.equal(out["list"], [{ connection_details: "[REDACTED]" }]);
  const hook = () => "shown";
  const hooked = redactForDisplay({ [Symbol.for("nodejs.util.inspect.custom")]: hook, credentials: "x" }) as Record<symbol, unknown>;
  assert.is(hooked[Symbol.for("nodejs.util.inspect.custom")], hook);
});

const R = suite("server: refused calls in the log");

R("the first refusal is logged at once, the rest of the period counted in one warning, and a quiet period starts over", async () => {
  const mem = memoryLog();
  const busy = refusals(mem.log, 100);
  const warned = () => mem.lines().map((l) => [l["refused"] ?? null, l["msg"]]);
  busy.refused({ code: "RESOURCE_EXHAUSTED" }, "busy 1");
  for (let i = 2; i <= 5; i++) busy.refused({ code: "RESOURCE_EXHAUSTED" }, `busy ${i}`);
  assert.equal(warned(), [[null, "busy 1"]]);
  await wait(150);
  busy.refused({ code: "RESOURCE_EXHAUSTED" }, "busy 6");
  assert.equal(warned(), [
    [null, "busy 1"],
    [4, "refused 4 more calls in the last 0.1 s; the latest: busy 5"],
  ]);
  await wait(150); // one refused in that period: counted; then a quiet period
  await wait(150);
  busy.refused({ code: "RESOURCE_EXHAUSTED" }, "busy 7");
  assert.equal(warned().slice(2), [
    [1, "refused 1 more call in the last 0.1 s; the latest: busy 6"],
    [null, "busy 7"],
  ]);
  busy.refused({ code: "RESOURCE_EXHAUSTED" }, "busy 8");
  busy.flush();
  assert.equal(warned().slice(4), [[1, "refused 1 more call in the last 0.1 s; the latest: busy 8"]], "flush logs what is counted");
  busy.flush();
  assert.is(mem.lines().length, 5, "nothing twice");
});

L.run();
X.run();
R.run();
