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

/** Appends to the chain; the caller holds the transaction. */
export class SqliteChain {
  private readonly insert: Database.Statement;
  private readonly setHead: Database.Statement;
  private readonly lastEvent: Database.Statement;

  constructor(private readonly db: Db) {
    this.insert = db.prepare(
      "INSERT INTO events (seq, session, session_seq, time, kind, actor, generation, payload, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?)",
    );
    this.setHead = db.prepare("INSERT INTO head (one, seq, hash) VALUES (1, ?, ?) ON CONFLICT(one) DO UPDATE SET seq = excluded.seq, hash = excluded.hash");
    this.lastEvent = db.prepare("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1");
  }

  /** The last event in the chain, if any. */
  last(): { seq: number; hash: string } | undefined {
    return this.lastEvent.get() as { seq: number; hash: string } | undefined;
  }

  /** Appends rows after the last event (or the latest anchor, or genesis), and moves the head. */
  append(rows: NewRow[]): StoredEvent[] {
    const last = this.last();
    const anchor = last ? undefined : (this.db.prepare("SELECT seq, hash FROM anchors ORDER BY seq DESC LIMIT 1").get() as { seq: number; hash: string } | undefined);
    let seq = last?.seq ?? anchor?.seq ?? 0;
    let prev = last?.hash ?? anchor?.hash ?? GENESIS;
    const stored: StoredEvent[] = [];
    for (const r of rows) {
      seq += 1;
      const ev = { ...r, seq };
      const hash = eventHash(prev, ev);
      this.insert.run(ev.seq, ev.session, ev.session_seq, ev.time, ev.kind, ev.actor, ev.generation, ev.payload, prev, hash);
      stored.push(toStored({ ...ev, prev_hash: prev, hash }));
      prev = hash;
    }
    this.setHead.run(seq, prev);
    return stored;
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
