// A function's console as log lines (console.ts): each console call one line,
// at the level its method implies, formatted as Node formats it, secrets
// redacted; raw writes to a stream one line each; long text cut.
import { Console } from "node:console";
import { inspect } from "node:util";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { CONSOLE_LINE_CHARS, consoleText, routeConsole, routeStream, shownDepth } from "../../src/server/console.js";
import { decodeRequest, encodeRequest } from "../../src/wire/codec.js";
import { isUnread } from "../../src/wire/struct/lazy.js";
import { memoryLog } from "../support/log.js";
import { request } from "../support/requests.js";

const C = suite("server: the function's console");

/** routed returns a console (not the global one) whose output goes to a memory log. */
function routed(debug = true) {
  const mem = memoryLog(debug);
  const target = new Console({ stdout: process.stdout, stderr: process.stderr });
  routeConsole(mem.log, target);
  const seen = () => mem.lines().map((l) => [l["level"], l["source"], l["msg"]]);
  return { target, mem, seen };
}

C("each method writes one line at its level, formatted as Node formats it", () => {
  const { target, seen } = routed();
  target.log("a %s and %d", "string", 42);
  target.info({ a: 1 });
  target.warn("careful");
  target.error("broken:", [1, 2]);
  target.debug("detail");
  target.assert(1 + 1 === 3, "arithmetic");
  target.count("calls");
  assert.equal(seen(), [
    ["info", "console.log", "a string and 42"],
    ["info", "console.info", "{ a: 1 }"],
    ["warn", "console.warn", "careful"],
    ["error", "console.error", "broken: [ 1, 2 ]"],
    ["debug", "console.debug", "detail"],
    ["error", "console.assert", "Assertion failed: arithmetic"],
    ["info", "console.count", "calls: 1"],
  ]);
});

C("console.debug is left out, not even formatted, when the server does not log at debug level", () => {
  const { target, seen } = routed(false);
  let formatted = 0;
  const costly = {
    [Symbol.for("nodejs.util.inspect.custom")]: () => {
      formatted++;
      return "costly";
    },
  };
  target.debug("hidden", costly);
  target.log("shown");
  assert.equal(seen(), [["info", "console.log", "shown"]]);
  assert.is(formatted, 0);
});

C("shownDepth: how deep Node will print the arguments", () => {
  assert.equal(
    [
      shownDepth("log", ["text", {}]),
      shownDepth("log", ["%o", {}]),
      shownDepth("error", ["%j", {}]),
      shownDepth("dir", [{}]),
      shownDepth("dir", [{}, { depth: 5 }]),
      shownDepth("dir", [{}, { depth: null }]),
      shownDepth("table", [[]]),
    ],
    [2, 4, Infinity, 2, 5, Infinity, 2],
  );
});

C("a function that makes util.inspect print deeper still gets every secret it shows redacted", () => {
  const { target, mem } = routed();
  const before = inspect.defaultOptions.depth;
  inspect.defaultOptions.depth = null; // a common debugging habit
  try {
    assert.is(shownDepth("log", [{}]), Infinity);
    const req = request({
      observed: {
        resources: { bucket: { resource: { kind: "Bucket" }, connectionDetails: { password: Buffer.from("s3cret").toString("base64") } } },
      },
    });
    target.log(req); // connectionDetails is 4 levels down: req, observed, resources, bucket
    const msg = String(mem.lines()[0]!["msg"]);
    assert.match(msg, /connectionDetails: '\[REDACTED\]'/);
    assert.not.ok(msg.includes("s3cret") || msg.includes("115, 51, 99"), msg);
  } finally {
    inspect.defaultOptions.depth = before;
  }
});

C("only what will be shown is copied: a large request's deep values stay undecoded, and what is shown is still redacted", () => {
  const { target, mem } = routed();
  const big = "v".repeat(400);
  const req = decodeRequest(
    encodeRequest(request({ observed: { composite: { resource: { kind: "X", spec: { big, nested: { big } } } } } })),
  );
  const resource = req.observed!.composite!.resource!;
  target.log(req); // req, observed, composite, resource: the spec is deeper than Node prints
  assert.ok(isUnread(resource, "spec"), "the spec was decoded for nothing");
  assert.match(String(mem.lines()[0]!["msg"]), /resource: \[Object\]|resource: \{/);
  target.dir(req, { depth: null });
  assert.not.ok(isUnread(resource, "spec"), "shown whole: read");
  assert.ok(String(mem.lines()[1]!["msg"]).includes(big));
  const deep = { a: { b: { c: { d: { credentials: "s3cret" } } } } };
  target.log("%j", deep);
  target.dir(deep, { depth: 10 });
  assert.not.ok(mem.text().includes("s3cret"));
});

C("group indentation and tables are Node's own; a multi-line value stays one line of the log", () => {
  const { target, mem } = routed();
  target.group("outer");
  target.log("inside");
  target.groupEnd();
  target.table([{ a: 1 }]);
  const msgs = mem.lines().map((l) => l["msg"]);
  assert.equal(msgs.slice(0, 2), ["outer", "  inside"]);
  assert.is(mem.lines()[2]!["source"], "console.table");
  assert.match(String(msgs[2]), /┌.*\n.*a.*\n/s);
  assert.is(mem.lines().length, 3);
});

C("secret-bearing fields of plain objects are redacted before formatting; other objects print as they are", () => {
  const { target, mem } = routed();
  const req = { meta: { tag: "t" }, credentials: { aws: { password: "hunter2" } }, nested: [{ connectionDetails: { k: "v" } }] };
  target.log("req %o", req);
  target.log(new Date(0), new Map([["credentials", "shown: a Map is not a plain object"]]));
  const [first, second] = mem.lines().map((l) => String(l["msg"]));
  assert.not.ok(first!.includes("hunter2"));
  assert.match(first!, /credentials: '\[REDACTED\]'/);
  assert.match(first!, /connectionDetails: '\[REDACTED\]'/);
  assert.is(req.credentials.aws.password, "hunter2", "the function's own object is not changed");
  assert.is(second, "1970-01-01T00:00:00.000Z Map(1) { 'credentials' => 'shown: a Map is not a plain object' }");
});

C("a decoded resource (its values read lazily from the request's bytes) prints as plain data, redacted", () => {
  const { target, mem } = routed();
  const big = "v".repeat(400); // values this large are decoded only when read
  const req = decodeRequest(
    encodeRequest(request({ observed: { composite: { resource: { kind: "X", spec: { big, connectionDetails: { a: "b" } } } } } })),
  );
  target.log(req.observed!.composite!.resource);
  const msg = String(mem.lines()[0]!["msg"]);
  assert.ok(msg.includes(big.slice(0, 50)), msg);
  assert.match(msg, /connectionDetails: '\[REDACTED\]'/);
  assert.not.match(msg, /Getter/);
});

C("a getter of the function's own is not run: it prints as [Getter], as it would, and a throwing one does not throw", () => {
  const { target, mem } = routed();
  let runs = 0;
  const obj = {
    get credentials() {
      runs++;
      return "s3cret";
    },
    get broken(): string {
      throw new Error("getter ran");
    },
    plain: 1,
  };
  target.log(obj);
  assert.is(runs, 0);
  assert.is(mem.lines()[0]!["msg"], "{ credentials: [Getter], broken: [Getter], plain: 1 }");
});

C("an argument that cannot be walked (a Proxy whose traps throw) prints as a placeholder; console.log does not throw", () => {
  const { target, mem } = routed();
  const hostile = new Proxy(
    {},
    {
      ownKeys() {
        throw new Error("no keys for you");
      },
    },
  );
  target.log("before", hostile, "after");
  assert.is(mem.lines()[0]!["msg"], "before [cannot be shown: no keys for you] after");
});

C("a console call made while formatting another (an inspect hook that logs) keeps each line's source", () => {
  const { target, seen } = routed();
  const noisy = {
    [Symbol.for("nodejs.util.inspect.custom")]: () => {
      target.warn("inspected");
      return "noisy";
    },
  };
  target.error(noisy);
  assert.equal(seen(), [
    ["warn", "console.warn", "inspected"],
    ["error", "console.error", "noisy"],
  ]);
});

C("consoleText drops the final newline and cuts long text, saying how much", () => {
  assert.is(consoleText("one\n"), "one");
  assert.is(consoleText("two\nlines"), "two\nlines");
  assert.is(consoleText("x".repeat(CONSOLE_LINE_CHARS)), "x".repeat(CONSOLE_LINE_CHARS));
  assert.is(consoleText(`${"x".repeat(CONSOLE_LINE_CHARS + 10)}\n`), `${"x".repeat(CONSOLE_LINE_CHARS)}... (10 more characters cut)`);
});

C(
  "routeStream: each write is a line from its source, strings and bytes alike; the callback is called; empty writes log nothing",
  async () => {
    const mem = memoryLog();
    const stream = { write: (): boolean => false } as unknown as NodeJS.WriteStream;
    routeStream(stream, mem.log, "warn", "process.stderr");
    let called = 0;
    assert.is(
      stream.write("text\n", () => called++),
      true,
    );
    stream.write(Buffer.from("bytes ü"), "utf8", () => called++);
    stream.write("");
    await new Promise((r) => setImmediate(r));
    assert.is(called, 2);
    assert.equal(
      mem.lines().map((l) => [l["level"], l["source"], l["msg"]]),
      [
        ["warn", "process.stderr", "text"],
        ["warn", "process.stderr", "bytes ü"],
      ],
    );
  },
);

C.run();
