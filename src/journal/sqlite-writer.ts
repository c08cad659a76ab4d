import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/**
 * SQLite's commits off the event loop: a thread with a connection of its own
 * to the same file writes a batch the main thread has already chained, so
 * that the fsync (and FTS5's indexing) runs on the other core while the main
 * thread redacts and hashes the next batch, and the host (the agent, the
 * broker, `vak serve`) is not stopped for the length of a commit.
 *
 * The thread decides nothing: it checks, inside its IMMEDIATE transaction
 * (SQLite's write lock), that the chain ends exactly where the main thread
 * chained from (seq and hash), and writes only then. If anyone else wrote
 * since (another process, a prune, an ingest), it writes nothing and answers
 * with the end it found; the caller then commits on its own connection, where
 * the end is read under the lock. So a chain is never extended from a guessed
 * end, and a failed commit leaves nothing behind: the transaction is the unit.
 *
 * The thread's code is this module's text (it needs only better-sqlite3 and
 * the statements it is given), so it runs the same from the sources and from
 * the bundle.
 */

export interface WriterRows {
  /** Sessions first committed in this batch: id, kind, started, title, workspace. */
  sessions: [string, string, string, string, string | null][];
  /** Where the chain must end before these rows go in. */
  after: { seq: number; hash: string };
  /** seq, session, session_seq, time, kind, actor, generation, payload, prev_hash, hash. */
  events: [number, string, number, string, string, string, number, string, string, string][];
}

export type WriterAnswer = { ok: true } | { ok: false; stale: { seq: number; hash: string } } | { ok: false; error: { message: string; code?: string } };

const SOURCE = String.raw`
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.sqlite);
let db;
try {
  db = new Database(workerData.path, { fileMustExist: true });
  db.pragma("synchronous = FULL");
  db.pragma("foreign_keys = ON");
  db.pragma("busy_timeout = 5000");
} catch (e) {
  db = { failed: e };
}
const prepared = db.failed ? undefined : {
  session: db.prepare(workerData.sql.session),
  event: db.prepare(workerData.sql.event),
  head: db.prepare(workerData.sql.head),
  last: db.prepare(workerData.sql.last),
  anchor: db.prepare(workerData.sql.anchor),
};
const write = prepared && db.transaction((m) => {
  const end = prepared.last.get() || prepared.anchor.get() || { seq: 0, hash: workerData.genesis };
  if (end.seq !== m.after.seq || end.hash !== m.after.hash) return { ok: false, stale: { seq: end.seq, hash: end.hash } };
  for (const s of m.sessions) prepared.session.run(...s);
  for (const e of m.events) prepared.event.run(...e);
  const last = m.events[m.events.length - 1];
  if (last) prepared.head.run(last[0], last[9]);
  return { ok: true };
});
parentPort.on("message", (m) => {
  let answer;
  try {
    if (db.failed) throw db.failed;
    answer = write.immediate(m);
  } catch (e) {
    answer = { ok: false, error: { message: String((e && e.message) || e), code: e && typeof e.code === "string" ? e.code : undefined } };
  }
  parentPort.postMessage(answer);
});
`;

export interface WriterSql {
  session: string;
  event: string;
  head: string;
  last: string;
  anchor: string;
}

/** One writer thread for one journal file; commits are sent one at a time (the commit queue holds at most one in flight). */
export class SqliteWriter {
  private readonly worker: Worker;
  private waiting: { resolve: (a: WriterAnswer) => void; reject: (e: Error) => void } | undefined;
  private dead: Error | undefined;

  constructor(path: string, sql: WriterSql, genesis: string) {
    const sqlite = createRequire(import.meta.url).resolve("better-sqlite3");
    this.worker = new Worker(SOURCE, { eval: true, workerData: { path, sql, genesis, sqlite } });
    this.worker.unref();
    this.worker.on("message", (a: WriterAnswer) => this.settle((w) => w.resolve(a)));
    this.worker.on("error", (e) => this.end(e));
    this.worker.on("exit", (code) => this.end(new Error(`the journal's writer thread stopped (exit ${code})`)));
  }

  private settle(f: (w: NonNullable<SqliteWriter["waiting"]>) => void): void {
    const w = this.waiting;
    this.waiting = undefined;
    this.worker.unref();
    if (w) f(w);
  }

  private end(e: Error): void {
    this.dead ??= e;
    this.settle((w) => w.reject(this.dead!));
  }

  /** Writes the rows if the chain still ends at rows.after; rejects only if the thread itself failed. */
  write(rows: WriterRows): Promise<WriterAnswer> {
    if (this.dead) return Promise.reject(this.dead);
    if (this.waiting) return Promise.reject(new Error("the journal's writer thread was sent a second commit while one was in flight"));
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      // Referenced while a commit is in flight: the process does not exit with an acknowledged write still on its way.
      this.worker.ref();
      this.worker.postMessage(rows);
    });
  }

  async close(): Promise<void> {
    this.dead ??= new Error("the journal is closed");
    await this.worker.terminate();
  }
}
