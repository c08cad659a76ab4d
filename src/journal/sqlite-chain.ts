import type Database from "better-sqlite3";
import { ChainWalker, GENESIS, eventHash, type VerifyResult } from "./chain.js";
import type { StoredEvent } from "./events.js";
import { type Db, type Row, toStored } from "./sqlite-schema.js";

/**
 * SQLite's chain: one chain through every event of every session, in the
 * order of seq. The head row catches events removed at the end, and an anchor
 * (left by a prune) is where a pruned chain starts.
 */
export type NewRow = Omit<Row, "seq" | "prev_hash" | "hash">;

/** The statements a commit runs; the writer thread (sqlite-writer.ts) prepares the same ones on its own connection. */
export const CHAIN_SQL = {
  session: "INSERT OR IGNORE INTO sessions (id, kind, started, title, workspace) VALUES (?,?,?,?,?)",
  event: "INSERT INTO events (seq, session, session_seq, time, kind, actor, generation, payload, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?)",
  head: "INSERT INTO head (one, seq, hash) VALUES (1, ?, ?) ON CONFLICT(one) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
  last: "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1",
  anchor: "SELECT seq, hash FROM anchors ORDER BY seq DESC LIMIT 1",
};

/** Where the chain ends: a seq and the hash the next event follows from. */
export interface ChainEnd {
  seq: number;
  hash: string;
}

/** One events row's values, in CHAIN_SQL.event's order. */
export type EventValues = [number, string, number, string, string, string, number, string, string, string];

/**
 * Chains rows after end: each one's seq, prev_hash and hash, the rows' values
 * and the new end; the stored events when asked (a commit on the writer thread
 * makes them while the thread writes).
 */
export function link(end: ChainEnd, rows: NewRow[]): { values: EventValues[]; stored: () => StoredEvent[]; end: ChainEnd } {
  let { seq, hash: prev } = end;
  const values: EventValues[] = [];
  for (const r of rows) {
    seq += 1;
    const ev = { ...r, seq };
    const hash = eventHash(prev, ev);
    values.push([ev.seq, ev.session, ev.session_seq, ev.time, ev.kind, ev.actor, ev.generation, ev.payload, prev, hash]);
    prev = hash;
  }
  const stored = () =>
    values.map(([seq, session, session_seq, time, kind, actor, generation, payload, prev_hash, hash]) => toStored({ seq, session, session_seq, time, kind, actor, generation, payload, prev_hash, hash }));
  return { values, stored, end: { seq, hash: prev } };
}

/** Appends to the chain; the caller holds the transaction. */
export class SqliteChain {
  private readonly insert: Database.Statement;
  private readonly setHead: Database.Statement;
  private readonly lastEvent: Database.Statement;
  private readonly lastAnchor: Database.Statement;

  constructor(db: Db) {
    this.insert = db.prepare(CHAIN_SQL.event);
    this.setHead = db.prepare(CHAIN_SQL.head);
    this.lastEvent = db.prepare(CHAIN_SQL.last);
    this.lastAnchor = db.prepare(CHAIN_SQL.anchor);
  }

  /** The last event in the chain, if any. */
  last(): ChainEnd | undefined {
    return this.lastEvent.get() as ChainEnd | undefined;
  }

  /** Where the next event follows from: the last event, else the latest anchor (a prune's), else genesis. */
  end(): ChainEnd {
    return this.last() ?? (this.lastAnchor.get() as ChainEnd | undefined) ?? { seq: 0, hash: GENESIS };
  }

  /** Appends rows after the chain's end (read here, under the caller's write transaction), and moves the head. */
  append(rows: NewRow[]): StoredEvent[] {
    const l = link(this.end(), rows);
    for (const v of l.values) this.insert.run(...v);
    this.setHead.run(l.end.seq, l.end.hash);
    return l.stored();
  }
}

/** Walks the whole chain and reports the first broken link. */
export function verifySqlite(db: Db): VerifyResult {
  const anchors = db.prepare("SELECT seq, hash FROM anchors ORDER BY seq").all() as { seq: number; hash: string }[];
  const anchor = anchors[anchors.length - 1];
  const walk = new ChainWalker(anchor ?? { seq: 0, hash: GENESIS }, "");
  let prunedNamed = anchor === undefined;
  for (const r of db.prepare("SELECT * FROM events ORDER BY seq").iterate() as IterableIterator<Row>) {
    const broken = walk.step(r, 0);
    if (broken) return broken;
    if (anchor && r.kind === "journal.pruned") {
      const p = JSON.parse(r.payload) as { throughSeq?: number; anchorHash?: string };
      if (p.throughSeq === anchor.seq && p.anchorHash === anchor.hash) prunedNamed = true;
    }
  }
  const { seq: lastSeq, hash: lastHash } = walk.last;
  const head = db.prepare("SELECT seq, hash FROM head").get() as { seq: number; hash: string } | undefined;
  if (head && (head.seq !== lastSeq || head.hash !== lastHash))
    return { ok: false, events: walk.count, seq: lastSeq + 1, problem: `the journal ends at event ${lastSeq}, but event ${head.seq} was written (events at the end were removed)` };
  if (!prunedNamed) return { ok: false, events: walk.count, seq: anchor!.seq, problem: `the chain starts after event ${anchor!.seq}, but no journal.pruned event records that prune` };
  return { ok: true, events: walk.count, chains: 1, head: lastHash };
}
