// Fair shares of admission places and body slots between connections (src/server/shares.ts).
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { Shares, type Ticket } from "../../src/server/shares.js";

const S = suite("server: shares");

/** open admits a call from conn and asks for its body slot, recording what happens to it. */
function opener(shares: Shares, events: string[]) {
  return (conn: string, name: string): Ticket | undefined => {
    const t = shares.admit(conn, (held, limit) => events.push(`${name} evicted (${held}/${limit})`));
    if (!t) {
      events.push(`${name} refused`);
      return undefined;
    }
    t.acquire(() => events.push(`${name} reads`));
    return t;
  };
}

S("one connection alone may use every place; one more is refused", () => {
  const events: string[] = [];
  const shares = new Shares(3, 2);
  const open = opener(shares, events);
  const [a, b, c] = ["a1", "a2", "a3"].map((n) => open("A", n));
  a!.handed();
  b!.handed();
  open("A", "a4");
  assert.equal(events, ["a1 reads", "a2 reads", "a4 refused"]);
  assert.is(shares.inFlight(), 3);
  a!.release();
  assert.equal(events.slice(3), ["a3 reads"], "a freed body slot goes to the next waiting call");
  c!.release();
  assert.is(shares.inFlight(), 1);
});

S("a full server makes room for another connection from the fullest one's newest unread call", () => {
  const events: string[] = [];
  const shares = new Shares(4, 2);
  const open = opener(shares, events);
  for (const n of ["a1", "a2", "a3", "a4"]) open("A", n);
  const b1 = open("B", "b1");
  assert.equal(events, ["a1 reads", "a4 evicted (4/4)", "b1 reads"]);
  assert.is(shares.inFlight(), 4);
  // B now holds 1 and A 3: A gives another up only while it holds more than B's next would leave it.
  open("B", "b2");
  assert.equal(events.slice(3), ["a3 evicted (3/4)"], "b2 waits: b1 is B's one arriving body");
  open("B", "b3");
  assert.equal(events.slice(4), ["b3 refused"], "A holds 2, B 2: no one gives up a place");
  b1!.release();
  assert.equal(events.slice(5), ["b2 reads"]);
});

S("calls with the function are never evicted; an arriving one is, when none is unread", () => {
  const events: string[] = [];
  const shares = new Shares(3, 6);
  const open = opener(shares, events);
  const [a1, a2] = [open("A", "a1"), open("A", "a2")];
  open("A", "a3");
  a1!.handed();
  a2!.handed();
  open("B", "b1");
  assert.equal(events, ["a1 reads", "a2 reads", "a3 reads", "a3 evicted (3/3)", "b1 reads"]);
  open("C", "c1");
  assert.equal(events.slice(5), ["c1 refused"], "A's two calls are with the function");
});

S("one connection has at most half the body slots arriving; the rest go to others", () => {
  const events: string[] = [];
  const shares = new Shares(20, 4);
  const open = opener(shares, events);
  const a = ["a1", "a2", "a3", "a4"].map((n) => open("A", n)!);
  open("B", "b1");
  assert.equal(events, ["a1 reads", "a2 reads", "b1 reads"]);
  a[0]!.handed();
  assert.equal(events.slice(3), ["a3 reads"], "a1's request is in: A may read another");
  open("A", "a5");
  a[1]!.release();
  assert.equal(events.slice(4), ["a4 reads"], "a2 gave up its slot, a4 is next in line");
  a[2]!.handed();
  assert.equal(events.slice(5), [], "a1 with the function, a3, a4 and b1 hold all four slots");
  a[0]!.release();
  assert.equal(events.slice(5), ["a5 reads"]);
});

S("release is idempotent, and a waiting call released leaves the line", () => {
  const events: string[] = [];
  const shares = new Shares(10, 1);
  const open = opener(shares, events);
  const a1 = open("A", "a1")!;
  const a2 = open("A", "a2")!;
  a2.release();
  a2.release();
  a1.release();
  a1.release();
  assert.is(shares.inFlight(), 0);
  open("A", "a3");
  assert.equal(events, ["a1 reads", "a3 reads"]);
});

S.run();
