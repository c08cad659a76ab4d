import { createHash } from "node:crypto";
import type Database from "better-sqlite3";
import type { StoredEvent } from "./events.js";
import { type Db, type Row, toStored } from "./schema.js";

/**
 * The hash chain: one chain through every event of every session. Each row
 * holds the hash of the row before it and its own hash over all its fields,
 * so changing, removing or reordering any stored event breaks the chain at
 * that event; the head row catches events removed at the end, and an anchor
 * (left by a prune) is where a pruned chain starts.
 */
export const GENESIS = "0".repeat(64);

/** The bytes an event's hash covers: every stored field but the hash itself. */
export function eventHash(prev: string, r: Omit<Row, "hash" | "prev_hash">): string {
  const canonical = JSON.stringify([r.seq, r.session, r.session_seq, r.time, r.kind, r.actor, r.generation, r.payload]);
  return createHash("sha256").update(prev).update("\n").update(canonical).digest("hex");
}

export type VerifyResult =
  | { ok: true; events: number; head: string }
  | { ok: false; events: number; seq: number; session?: string; sessionSeq?: number; problem: string };

/** Appends to the chain; the caller holds the transaction. */
export class Chain {
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
  append(rows: Omit<Row, "seq" | "prev_hash" | "hash">[]): StoredEvent[] {
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
export function verifyChain(db: Db): VerifyResult {
  const anchors = db.prepare("SELECT seq, hash FROM anchors ORDER BY seq").all() as { seq: number; hash: string }[];
  const anchor = anchors[anchors.length - 1];
  let expectSeq = (anchor?.seq ?? 0) + 1;
  let prev = anchor?.hash ?? GENESIS;
  let count = 0;
  let prunedNamed = anchor === undefined;
  for (const r of db.prepare("SELECT * FROM events ORDER BY seq").iterate() as IterableIterator<Row>) {
    const where = { seq: r.seq, session: r.session, sessionSeq: r.session_seq, events: count };
    if (r.seq !== expectSeq)
      return { ok: false, ...where, problem: r.seq > expectSeq ? `events ${expectSeq} to ${r.seq - 1} are missing (removed)` : `event ${r.seq} is out of order` };
    if (r.prev_hash !== prev) return { ok: false, ...where, problem: `event ${r.seq} does not follow from event ${r.seq - 1} (one of them was changed, removed or reordered)` };
    if (eventHash(prev, r) !== r.hash) return { ok: false, ...where, problem: `event ${r.seq} was changed after it was written (its hash does not match its contents)` };
    if (anchor && r.kind === "journal.pruned") {
      const p = JSON.parse(r.payload) as { throughSeq?: number; anchorHash?: string };
      if (p.throughSeq === anchor.seq && p.anchorHash === anchor.hash) prunedNamed = true;
    }
    prev = r.hash;
    expectSeq += 1;
    count += 1;
  }
  const head = db.prepare("SELECT seq, hash FROM head").get() as { seq: number; hash: string } | undefined;
  if (head && (head.seq !== expectSeq - 1 || head.hash !== prev))
    return { ok: false, events: count, seq: expectSeq, problem: `the journal ends at event ${expectSeq - 1}, but event ${head.seq} was written (events at the end were removed)` };
  if (!prunedNamed) return { ok: false, events: count, seq: anchor!.seq, problem: `the chain starts after event ${anchor!.seq}, but no journal.pruned event records that prune` };
  return { ok: true, events: count, head: prev };
}
