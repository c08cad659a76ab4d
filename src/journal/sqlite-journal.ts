import { chmodSync, existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import Database from "better-sqlite3";
import { VakError } from "../policy/errors.js";
import { vakDirs } from "../policy/state.js";
import { Redactor } from "../secrets/redact.js";
import type { VerifyResult } from "./chain.js";
import { BatchedJournal } from "./batched-journal.js";
import { CommitQueue, type PreparedEvent } from "./commit-queue.js";
import type { Actor, StoredEvent } from "./events.js";
import { ingestSpools } from "./ingest.js";
import type { Committed, Journal, PruneResult, SessionFilter, SessionInfo, Watch } from "./journal.js";
import type { SessionRow } from "./session-writer.js";
import { spoolDir } from "./spool.js";
import { CHAIN_SQL, type ChainEnd, link, SqliteChain, verifySqlite } from "./sqlite-chain.js";
import { prunePrefix } from "./sqlite-prune.js";
import { type Db, journalError, SCHEMA } from "./sqlite-schema.js";
import { listSessions, searchEvents, sessionEvents, sessionEventsPage } from "./sqlite-search.js";
import { SqliteWriter } from "./sqlite-writer.js";
import { GENESIS } from "./chain.js";

/**
 * The embedded journal: SQLite (WAL) in Vak's state directory, one hash chain
 * through every event of every session (sqlite-chain.ts). Commits are
 * batched (commit-queue.ts): one fsync for everything appended while the
 * commit before was in flight. better-sqlite3 is synchronous, so once this
 * journal knows where the chain ends (after its first commit), commits go to
 * a writer thread (sqlite-writer.ts), which writes a batch only if the chain
 * still ends there; otherwise (another process wrote, a prune, an ingest) the
 * batch is committed here, on this connection, from the end read under the
 * write lock.
 */
export function defaultJournalPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(vakDirs(env).state, "journal.db");
}

/** How often a watcher looks for commits made by other processes. */
const WATCH_POLL_MS = 200;

export class SqliteJournal extends BatchedJournal implements Journal {
  readonly backend = "sqlite";
  readonly location: string;
  readonly redactor: Redactor;
  private readonly db: Db;
  private readonly chain: SqliteChain;
  private readonly insertSession: Database.Statement;
  protected readonly queue: CommitQueue;
  /** Where this journal's last commit left the chain; undefined until one has, and after anything else wrote. */
  private chainEnd: ChainEnd | undefined;
  private writer: SqliteWriter | undefined;

  private constructor(
    readonly path: string,
    db: Db,
    redactor: Redactor,
  ) {
    super();
    this.location = path;
    this.db = db;
    this.redactor = redactor;
    this.chain = new SqliteChain(db);
    this.insertSession = db.prepare(CHAIN_SQL.session);
    this.queue = new CommitQueue((batch) => this.commit(batch), redactor, (e) => journalError(this.path, e));
  }

  /** Opens (creating, 0700/0600) the journal. Nothing about it is readable by sandboxes: it lives in Vak's state directory. */
  static async open(opts: { path?: string; redactor?: Redactor; ingest?: boolean } = {}): Promise<SqliteJournal> {
    const journal = SqliteJournal.openSync(opts);
    if (opts.ingest !== false) await journal.ingestSpools(join(dirname(journal.path), "spool"));
    return journal;
  }

  private static openSync(opts: { path?: string; redactor?: Redactor }): SqliteJournal {
    const path = opts.path ?? defaultJournalPath();
    const old = process.umask(0o077);
    try {
      mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
      const fresh = !existsSync(path);
      const db = new Database(path);
      if (fresh) chmodSync(path, 0o600);
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = FULL");
      db.pragma("foreign_keys = ON");
      db.pragma("busy_timeout = 5000");
      if ((db.pragma("user_version", { simple: true }) as number) < 1) {
        db.exec(SCHEMA);
        db.pragma("user_version = 1");
      }
      return new SqliteJournal(path, db, opts.redactor ?? new Redactor());
    } catch (e) {
      if (e instanceof VakError) throw e;
      throw journalError(path, e, "opened");
    } finally {
      process.umask(old);
    }
  }

  protected async release(): Promise<void> {
    await this.writer?.close();
    this.db.close();
  }

  /** One durable commit (the caller is the commit queue): on the writer thread when the chain's end is known, else here. */
  private commit(batch: PreparedEvent[]): StoredEvent[] | Promise<StoredEvent[]> {
    const after = this.chainEnd;
    this.chainEnd = undefined;
    return after ? this.commitThere(batch, after) : this.commitHere(batch);
  }

  private commitHere(batch: PreparedEvent[]): StoredEvent[] {
    const stored = this.db.transaction(() => {
      for (const p of batch) if (p.newSession) this.insertRow(p.session, p.newSession);
      return this.chain.append(batch.map(({ newSession: _n, ...row }) => row));
    }).immediate();
    const last = stored[stored.length - 1];
    if (last) this.chainEnd = { seq: last.seq, hash: last.hash };
    return stored;
  }

  private async commitThere(batch: PreparedEvent[], after: ChainEnd): Promise<StoredEvent[]> {
    const l = link(after, batch.map(({ newSession: _n, ...row }) => row));
    const sessions = batch.filter((p) => p.newSession).map((p): [string, string, string, string, string | null] => [p.session, p.newSession!.kind, p.newSession!.started, p.newSession!.title, p.newSession!.workspace]);
    this.writer ??= new SqliteWriter(this.path, CHAIN_SQL, GENESIS);
    const writing = this.writer.write({ sessions, after, events: l.values });
    const stored = l.stored(); // while the thread writes
    const answer = await writing;
    if (answer.ok) {
      this.chainEnd = l.end;
      return stored;
    }
    if ("stale" in answer) return this.commitHere(batch);
    throw Object.assign(new Error(answer.error.message), { code: answer.error.code });
  }

  private insertRow(id: string, row: SessionRow): void {
    this.insertSession.run(id, row.kind, row.started, row.title, row.workspace);
  }

  async ingestSpools(dir: string = spoolDir()): Promise<number> {
    const n = await ingestSpools(
      {
        redactor: this.redactor,
        takeRun: (session, row, batches) => {
          try {
            this.chainEnd = undefined;
            this.db.transaction(() => {
              if (this.db.prepare("SELECT 1 FROM sessions WHERE id = ?").get(session)) return;
              this.insertRow(session, row);
              for (const b of batches) this.chain.append(b);
            }).immediate();
          } catch (e) {
            throw journalError(this.path, e);
          }
        },
      },
      dir,
    );
    return n;
  }

  async sessions(filter: SessionFilter = {}): Promise<SessionInfo[]> {
    return listSessions(this.db, filter);
  }

  async session(id: string): Promise<SessionInfo | undefined> {
    const found = await this.matching(id, 2);
    return found.find((s) => s.id === id) ?? (found.length === 1 ? found[0] : undefined);
  }

  async matching(prefix: string, limit = 10): Promise<SessionInfo[]> {
    // Ids are base-36 time and hex: anything else matches none (and needs no escaping in the query).
    if (!/^[0-9a-z-]*$/.test(prefix)) return [];
    const all = listSessions(this.db, { idPrefix: prefix });
    const exact = all.find((s) => s.id === prefix);
    return (exact ? [exact] : all).slice(-limit);
  }

  async events(sessionId: string, opts: { after?: number; limit?: number } = {}): Promise<StoredEvent[]> {
    return opts.limit === undefined ? sessionEvents(this.db, sessionId, opts.after ?? 0) : sessionEventsPage(this.db, sessionId, opts.after ?? 0, opts.limit);
  }

  async search(query: string, opts: { session?: string; limit?: number } = {}): Promise<StoredEvent[]> {
    return searchEvents(this.db, query, opts);
  }

  async verify(): Promise<VerifyResult> {
    // One read transaction: one snapshot for the events and the head, whoever commits meanwhile.
    return this.db.transaction(() => verifySqlite(this.db))();
  }

  /**
   * Removes the oldest events (a prefix of the chain) older than before, and
   * records the prune as an event: what went, through which event, and the hash
   * the chain now starts from.
   */
  async prune(before: Date, actor: Actor = { component: "host" }): Promise<PruneResult> {
    await this.queue.flush();
    this.chainEnd = undefined;
    const pruned = prunePrefix(this.db, this.chain, before);
    if (!pruned) return { events: 0, sessions: 0, throughSeq: 0 };
    const { events, sessions, throughSeq } = pruned;
    const s = this.startSession({ kind: "journal", title: "journal maintenance", actor });
    await s.append("journal.pruned", actor, 0, { before: pruned.before, events, sessions, throughSeq, anchorHash: pruned.anchorHash });
    await s.end("ok");
    return { events, sessions, throughSeq };
  }

  /** Commits (of this process or another) are found by polling SQLite's data_version on a connection of the watcher's own. */
  async watch(listener: (c: Committed) => void): Promise<Watch> {
    const reader = new Database(this.path, { readonly: true, fileMustExist: true });
    const version = () => reader.pragma("data_version", { simple: true }) as number;
    let seen = version();
    let lastSeq = (reader.prepare("SELECT max(seq) AS s FROM events").get() as { s: number | null }).s ?? 0;
    const timer = setInterval(() => {
      const v = version();
      if (v === seen) return;
      seen = v;
      const rows = reader.prepare("SELECT session, max(session_seq) AS q, max(seq) AS s FROM events WHERE seq > ? GROUP BY session").all(lastSeq) as { session: string; q: number; s: number }[];
      for (const r of rows) {
        lastSeq = Math.max(lastSeq, r.s);
        listener({ session: r.session, sessionSeq: r.q });
      }
    }, WATCH_POLL_MS);
    timer.unref();
    return {
      close: async () => {
        clearInterval(timer);
        reader.close();
      },
    };
  }
}
