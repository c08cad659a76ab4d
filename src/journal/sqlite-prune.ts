import type { SqliteChain } from "./sqlite-chain.js";
import type { Db } from "./sqlite-schema.js";

/**
 * Pruning: the only way events leave the journal. It removes a prefix of the
 * chain (every event older than a time, and the sessions left empty), keeps
 * the hash the chain now starts from as an anchor, and the caller records the
 * prune itself as a journal.pruned event naming that anchor, which verify()
 * requires.
 */
export interface Pruned {
  before: string;
  events: number;
  sessions: number;
  throughSeq: number;
  anchorHash: string;
}

/** Removes the events older than before, in one transaction; undefined when there is nothing to remove. */
export function prunePrefix(db: Db, chain: SqliteChain, before: Date): Pruned | undefined {
  const cutoff = before.toISOString();
  const first = db.prepare("SELECT seq FROM events WHERE time >= ? ORDER BY seq LIMIT 1").get(cutoff) as { seq: number } | undefined;
  const through = (first ? first.seq : (chain.last()?.seq ?? 0) + 1) - 1;
  const anchorRow = db.prepare("SELECT hash FROM events WHERE seq = ?").get(through) as { hash: string } | undefined;
  if (through <= 0 || !anchorRow) return undefined;
  let events = 0;
  let sessions = 0;
  db.transaction(() => {
    db.prepare("INSERT INTO pruning (one) VALUES (1)").run();
    events = db.prepare("DELETE FROM events WHERE seq <= ?").run(through).changes;
    db.prepare("DELETE FROM pruning").run();
    sessions = db.prepare("DELETE FROM sessions WHERE id NOT IN (SELECT DISTINCT session FROM events)").run().changes;
    db.prepare("INSERT OR REPLACE INTO anchors (seq, hash, pruned_at) VALUES (?,?,?)").run(through, anchorRow.hash, new Date().toISOString());
  }).immediate();
  return { before: cutoff, events, sessions, throughSeq: through, anchorHash: anchorRow.hash };
}
