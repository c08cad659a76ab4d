import type { StoredEvent } from "./events.js";
import type { SessionFilter, SessionInfo } from "./journal.js";
import { type Db, type Row, toStored } from "./sqlite-schema.js";

/**
 * Reading the SQLite journal: its sessions, one session's events, and full-text
 * search over payloads (arguments, results, reasons). Nothing here writes.
 */
export function listSessions(db: Db, f: SessionFilter = {}): SessionInfo[] {
  const where: string[] = [];
  const args: (string | number)[] = [];
  if (f.kind === "workload") where.push("s.kind LIKE 'workload:%'");
  else if (f.kind) where.push("s.kind = ?"), args.push(f.kind);
  if (f.since) where.push("s.started >= ?"), args.push(f.since);
  if (f.until) where.push("s.started <= ?"), args.push(f.until);
  // Ids are base-36 time and hex: a prefix needs no escaping once it is checked to be only those characters.
  if (f.idPrefix !== undefined) where.push("substr(s.id, 1, ?) = ?"), args.push(f.idPrefix.length, f.idPrefix);
  const newest = `SELECT s.rowid AS rid, s.* FROM sessions s ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY s.started DESC, s.rowid DESC ${f.limit ? "LIMIT ?" : ""}`;
  if (f.limit) args.push(f.limit);
  return db
    .prepare(
      `SELECT s.id, s.kind, s.started, s.title, s.workspace, NULL AS host,
         (SELECT count(*) FROM events e WHERE e.session = s.id) AS events,
         (SELECT e.time FROM events e WHERE e.session = s.id AND e.kind = 'session.ended' ORDER BY e.seq DESC LIMIT 1) AS ended,
         (SELECT json_extract(e.payload, '$.outcome') FROM events e WHERE e.session = s.id AND e.kind = 'session.ended' ORDER BY e.seq DESC LIMIT 1) AS outcome
       FROM (${newest}) s ORDER BY s.started, s.rid`,
    )
    .all(...args) as SessionInfo[];
}

export function sessionEvents(db: Db, sessionId: string, after = 0): StoredEvent[] {
  return (db.prepare("SELECT * FROM events WHERE session = ? AND session_seq > ? ORDER BY seq").all(sessionId, after) as Row[]).map(toStored);
}

/** One session's events after a position in it, at most limit of them: a page. */
export function sessionEventsPage(db: Db, sessionId: string, afterSessionSeq: number, limit: number): StoredEvent[] {
  return (db.prepare("SELECT * FROM events WHERE session = ? AND session_seq > ? ORDER BY seq LIMIT ?").all(sessionId, afterSessionSeq, limit) as Row[]).map(toStored);
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
