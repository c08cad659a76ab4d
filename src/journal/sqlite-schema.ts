import Database from "better-sqlite3";
import { VakError } from "../policy/errors.js";
import type { ChainRow } from "./chain.js";
import type { Actor, EventKind, Payload, StoredEvent } from "./events.js";

/**
 * The journal's tables, as SQLite holds them (one chain: seq runs through every session). Events are append-only (the
 * triggers refuse UPDATE, and DELETE outside a prune); events_fts indexes
 * their payloads for search; head and anchors let verify() notice events
 * removed at the end or a prune that is not on the record.
 */
export const SCHEMA = `
CREATE TABLE IF NOT EXISTS sessions (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  started TEXT NOT NULL,
  title TEXT NOT NULL,
  workspace TEXT
);
CREATE TABLE IF NOT EXISTS events (
  seq INTEGER PRIMARY KEY,
  session TEXT NOT NULL REFERENCES sessions(id),
  session_seq INTEGER NOT NULL,
  time TEXT NOT NULL,
  kind TEXT NOT NULL,
  actor TEXT NOT NULL,
  generation INTEGER NOT NULL,
  payload TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL,
  UNIQUE (session, session_seq)
);
CREATE INDEX IF NOT EXISTS events_time ON events(time);
CREATE TABLE IF NOT EXISTS head (one INTEGER PRIMARY KEY CHECK (one = 1), seq INTEGER NOT NULL, hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS anchors (seq INTEGER PRIMARY KEY, hash TEXT NOT NULL, pruned_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pruning (one INTEGER);
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
  BEGIN SELECT RAISE(ABORT, 'the journal is append-only: events cannot be changed'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events WHEN NOT EXISTS (SELECT 1 FROM pruning)
  BEGIN SELECT RAISE(ABORT, 'the journal is append-only: events are removed only by vak journal prune'); END;
CREATE VIRTUAL TABLE IF NOT EXISTS events_fts USING fts5(payload, content='events', content_rowid='seq');
CREATE TRIGGER IF NOT EXISTS events_fts_insert AFTER INSERT ON events
  BEGIN INSERT INTO events_fts(rowid, payload) VALUES (new.seq, new.payload); END;
CREATE TRIGGER IF NOT EXISTS events_fts_delete AFTER DELETE ON events
  BEGIN INSERT INTO events_fts(events_fts, rowid, payload) VALUES ('delete', old.seq, old.payload); END;
`;

/** One row of the events table: the hashed fields and the two links. */
export interface Row extends ChainRow {
  prev_hash: string;
  hash: string;
}

export type Db = Database.Database;

export function toStored(r: Row): StoredEvent {
  return {
    seq: r.seq, session: r.session, sessionSeq: r.session_seq, time: r.time, kind: r.kind as EventKind,
    actor: JSON.parse(r.actor) as Actor, generation: r.generation, payload: JSON.parse(r.payload) as Payload,
    prevHash: r.prev_hash, hash: r.hash,
  };
}

/** The error every journal failure becomes: it names the file and why, and says that nothing runs unrecorded. */
export function journalError(path: string, e: unknown, verb = "written"): VakError {
  const code = (e as { code?: string }).code;
  const what = code === "SQLITE_FULL" ? "the disk is full" : code?.startsWith("SQLITE_READONLY") ? "it is read-only" : (e as Error).message.split("\n")[0];
  return new VakError("journal", `the journal at ${path} could not be ${verb} (${what}); nothing runs unrecorded`);
}
