import Database from "better-sqlite3";
import type { StoredEvent } from "../../src/journal/events.js";
import type { SessionInfo } from "../../src/journal/journal.js";
import { listSessions, searchEvents, sessionEvents } from "../../src/journal/sqlite-search.js";

/**
 * Reads a SQLite journal file as it is on disk, synchronously, for tests of
 * other layers that check what `vak` processes recorded (the journal's own
 * tests go through the Journal interface, on both backends).
 */
export function readJournal(path: string): { sessions(): SessionInfo[]; events(id: string): StoredEvent[]; search(q: string): StoredEvent[]; close(): void } {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  return { sessions: () => listSessions(db), events: (id) => sessionEvents(db, id), search: (q) => searchEvents(db, q), close: () => db.close() };
}
