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
