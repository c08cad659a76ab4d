import type { StoredEvent } from "./events.js";
import { type Db, type Row, toStored } from "./schema.js";

/**
 * Reading the journal: its sessions, one session's events, and full-text
 * search over payloads (arguments, results, reasons). Nothing here writes.
 */
export interface SessionInfo {
  id: string;
  kind: string;
  started: string;
  title: string;
  workspace: string | null;
  events: number;
  ended: string | null;
  outcome: string | null;
}

export function listSessions(db: Db): SessionInfo[] {
  return db
    .prepare(
      `SELECT s.id, s.kind, s.started, s.title, s.workspace,
         (SELECT count(*) FROM events e WHERE e.session = s.id) AS events,
         (SELECT e.time FROM events e WHERE e.session = s.id AND e.kind = 'session.ended' ORDER BY e.seq DESC LIMIT 1) AS ended,
         (SELECT json_extract(e.payload, '$.outcome') FROM events e WHERE e.session = s.id AND e.kind = 'session.ended' ORDER BY e.seq DESC LIMIT 1) AS outcome
       FROM sessions s ORDER BY s.started`,
    )
    .all() as SessionInfo[];
}

export function sessionEvents(db: Db, sessionId: string): StoredEvent[] {
  return (db.prepare("SELECT * FROM events WHERE session = ? ORDER BY seq").all(sessionId) as Row[]).map(toStored);
}

/** One session's events after a position in it, at most limit of them: a page. */
export function sessionEventsPage(db: Db, sessionId: string, afterSessionSeq: number, limit: number): StoredEvent[] {
  return (db.prepare("SELECT * FROM events WHERE session = ? AND session_seq > ? ORDER BY seq LIMIT ?").all(sessionId, afterSessionSeq, limit) as Row[]).map(toStored);
}

/** Every session's events after a position in the chain: what a watcher has not seen yet. */
export function eventsAfter(db: Db, seq: number, limit: number): StoredEvent[] {
  return (db.prepare("SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?").all(seq, limit) as Row[]).map(toStored);
}

/** The last event's position in the chain (0 for an empty journal). */
export function lastSeq(db: Db): number {
  return (db.prepare("SELECT coalesce(max(seq), 0) AS n FROM events").get() as { n: number }).n;
}

/** Full-text search over payloads; a query that is not valid FTS syntax is searched for as a phrase. */
export function searchEvents(db: Db, query: string, opts: { session?: string; limit?: number } = {}): StoredEvent[] {
  const run = (q: string) =>
    db
      .prepare(
        `SELECT e.* FROM events_fts f JOIN events e ON e.seq = f.rowid WHERE events_fts MATCH ? ${opts.session ? "AND e.session = ?" : ""} ORDER BY e.seq LIMIT ?`,
      )
      .all(...(opts.session ? [q, opts.session, opts.limit ?? 100] : [q, opts.limit ?? 100])) as Row[];
  let rows: Row[];
  try {
    rows = run(query);
  } catch {
    // Not valid FTS syntax: search for the words as a phrase.
    rows = run(`"${query.replace(/"/g, '""')}"`);
  }
  return rows.map(toStored);
}
