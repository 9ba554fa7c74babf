// Fair shares of the server's places between connections.
//
// A call holds an admission place from the moment it starts until it is
// answered, and a body slot from when its request starts being read until it
// is answered (see serve). Crossplane calls a function over one connection and
// may use every place alone. What must not happen is one connection that opens
// many streams and sends their bodies slowly, or not at all, holding every
// place while other callers are refused or wait behind it. So:
//
//   - when the server is full and a call comes from a connection holding
//     fewer places than the fullest one, the fullest connection gives up its
//     newest call that is not yet with the function (one still waiting to be
//     read, else one still arriving): that call is answered RESOURCE_EXHAUSTED
//     and the newcomer takes its place;
//   - one connection may have at most half of the body slots arriving at once,
//     and slots go to the first waiting call whose connection is under that
//     share, so a connection trickling its bodies leaves the other half free.
//
// Calls already with the function are never given up: they cost the server
// work, not just a place.

/** Evicted is told that its call must give its place up, with how many places its connection held and the limit. */
export type Evicted = (held: number, limit: number) => void;

/** Stage is where an admitted call is: waiting for a body slot, reading its body, with the function, or done. */
type Stage = "unread" | "arriving" | "handed" | "done";

interface Connection {
  readonly key: unknown;
  readonly tickets: Set<Ticket>;
  arriving: number;
}

/** Ticket is one admitted call's hold on its places. */
export class Ticket {
  stage: Stage = "unread";
  holdsBody = false;
  read: (() => void) | undefined;
  constructor(
    readonly shares: Shares,
    readonly conn: Connection,
    readonly evicted: Evicted,
  ) {}

  /** acquire asks for a body slot; read is called once one is granted (at once, if one is free). */
  acquire(read: () => void): void {
    if (this.stage !== "unread" || this.read) return;
    this.read = read;
    this.shares.queue(this);
  }

  /** handed says the request is in and with the function: its connection's arriving share is freed. */
  handed(): void {
    if (this.stage !== "arriving") return;
    this.stage = "handed";
    this.conn.arriving--;
    this.shares.grant();
  }

  /** release gives every place back; the call is done. Safe to call more than once. */
  release(): void {
    this.shares.release(this);
  }
}

/** Shares hands out admission places and body slots fairly between connections. */
export class Shares {
  private readonly conns = new Map<unknown, Connection>();
  private admitted = 0;
  private bodiesUsed = 0;
  private readonly waiting: Ticket[] = [];
  /** Bodies one connection may have arriving at once. */
  readonly arrivingShare: number;

  constructor(
    readonly admitLimit: number,
    readonly bodySlots: number,
  ) {
    this.arrivingShare = Math.max(1, Math.floor(bodySlots / 2));
  }

  /** inFlight is the number of calls admitted and not yet done. */
  inFlight(): number {
    return this.admitted;
  }

  /**
   * admit admits a call from the connection named by key, making room by
   * evicting another connection's call if the server is full and that
   * connection holds more; undefined means refuse it.
   */
  admit(key: unknown, evicted: Evicted): Ticket | undefined {
    let conn = this.conns.get(key);
    if (this.admitted >= this.admitLimit && !this.makeRoom(conn)) return undefined;
    if (!conn) {
      conn = { key, tickets: new Set(), arriving: 0 };
      this.conns.set(key, conn);
    }
    const t = new Ticket(this, conn, evicted);
    conn.tickets.add(t);
    this.admitted++;
    return t;
  }

  /** makeRoom evicts the fullest other connection's newest call not yet with the function, if it holds more than mine would. */
  private makeRoom(mine: Connection | undefined): boolean {
    const own = mine?.tickets.size ?? 0;
    let fullest: Connection | undefined;
    for (const c of this.conns.values()) if (c !== mine && (!fullest || c.tickets.size > fullest.tickets.size)) fullest = c;
    if (!fullest || fullest.tickets.size <= own + 1) return false;
    let victim: Ticket | undefined;
    for (const t of fullest.tickets) {
      // Sets keep insertion order: the last one found of a stage is the newest.
      if (t.stage === "unread") victim = t;
      else if (t.stage === "arriving" && victim?.stage !== "unread") victim = t;
    }
    if (!victim) return false;
    const held = fullest.tickets.size;
    victim.release();
    victim.evicted(held, this.admitLimit);
    return true;
  }

  /** queue puts a ticket in line for a body slot. */
  queue(t: Ticket): void {
    this.waiting.push(t);
    this.grant();
  }

  /** grant hands free body slots to waiting calls, first come first served among connections under their share. */
  grant(): void {
    for (let i = 0; i < this.waiting.length && this.bodiesUsed < this.bodySlots;) {
      const t = this.waiting[i]!;
      if (t.conn.arriving >= this.arrivingShare) {
        i++;
        continue;
      }
      this.waiting.splice(i, 1);
      this.bodiesUsed++;
      t.conn.arriving++;
      t.stage = "arriving";
      t.holdsBody = true;
      t.read!();
    }
  }

  release(t: Ticket): void {
    if (t.stage === "done") return;
    const was = t.stage;
    t.stage = "done";
    this.admitted--;
    t.conn.tickets.delete(t);
    if (t.conn.tickets.size === 0) this.conns.delete(t.conn.key);
    if (was === "arriving") t.conn.arriving--;
    if (was === "unread" && t.read) {
      const i = this.waiting.indexOf(t);
      if (i >= 0) this.waiting.splice(i, 1);
    }
    if (t.holdsBody) {
      t.holdsBody = false;
      this.bodiesUsed--;
      this.grant();
    }
  }
}
