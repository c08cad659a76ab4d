import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import Database from "better-sqlite3";
import { VakError } from "../policy/errors.js";
import { vakDirs } from "../policy/state.js";
import { Redactor } from "../secrets/redact.js";
import { boundStrings } from "./bounds.js";
import { Chain, verifyChain, type VerifyResult } from "./chain.js";
import { type Actor, checkEvent, type NewEvent, type Payload, type StoredEvent } from "./events.js";
import { ingestSpools } from "./ingest.js";
import { prunePrefix } from "./prune.js";
import { type Db, journalError, SCHEMA } from "./schema.js";
import { eventsAfter, lastSeq, listSessions, searchEvents, sessionEvents, sessionEventsPage, type SessionFilter, type SessionInfo } from "./search.js";
import { type EventSink, SessionWriter } from "./session-writer.js";
import { spoolDir } from "./spool.js";

/**
 * The journal: an append-only, hash-chained record in SQLite (WAL). Every event
 * carries the hash of the one before it, across all sessions (chain.ts), so
 * that changing, removing or reordering any stored event breaks the chain at
 * that event. Writes are batched into one durable commit per turn of the event
 * loop; an append's promise settles only after its commit, and a failed commit
 * rejects every append in it: callers stop rather than go on unrecorded.
 * Each session writes through its SessionWriter (session-writer.ts); spooled
 * runs come in through ingest.ts, reads through search.ts, pruning through prune.ts.
 */
export function defaultJournalPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(vakDirs(env).state, "journal.db");
}

interface Pending {
  session: SessionWriter;
  event: NewEvent;
  resolve: (e: StoredEvent) => void;
  reject: (e: Error) => void;
}

export class Journal implements EventSink {
  readonly path: string;
  readonly redactor: Redactor;
  private readonly db: Db;
  private readonly chain: Chain;
  private readonly insertSession: Database.Statement;
  private queue: Pending[] = [];
  private scheduled = false;
  private failed: VakError | undefined;

  private constructor(path: string, db: Db, redactor: Redactor) {
    this.path = path;
    this.db = db;
    this.redactor = redactor;
    this.chain = new Chain(db);
    this.insertSession = db.prepare("INSERT OR IGNORE INTO sessions (id, kind, started, title, workspace) VALUES (?,?,?,?,?)");
  }

  /** Opens (creating, 0700/0600) the journal. Nothing about it is readable by sandboxes: it lives in Vak's state directory. */
  static open(opts: { path?: string; redactor?: Redactor; ingest?: boolean } = {}): Journal {
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
      const journal = new Journal(path, db, opts.redactor ?? new Redactor());
      if (opts.ingest !== false) journal.ingestSpools(join(dirname(path), "spool"));
      return journal;
    } catch (e) {
      if (e instanceof VakError) throw e;
      throw journalError(path, e, "opened");
    } finally {
      process.umask(old);
    }
  }

  close(): void {
    if (this.queue.length) this.flush();
    this.db.close();
  }

  /** Starts a session and records its start durably before returning (or, with
   *  deferred, with the next commit of this session, which must be appendNow). */
  startSession(info: { kind: string; title: string; workspace?: string; actor?: Actor; payload?: Payload; deferred?: boolean }): SessionWriter {
    const id = `${Date.now().toString(36)}-${randomBytes(5).toString("hex")}`;
    // The session's row goes in with its first commit: one fsync, not two.
    const s = new SessionWriter(this, id, 0, { kind: info.kind, started: new Date().toISOString(), title: this.redactor.text(info.title), workspace: info.workspace ?? null });
    const payload = { kind: info.kind, title: info.title, ...info.payload };
    if (info.deferred) void s.append("session.started", info.actor ?? { component: "host" }, 0, payload).catch(() => undefined);
    else s.appendNow("session.started", info.actor ?? { component: "host" }, 0, payload);
    return s;
  }

  /** Queues an event; resolves once it is durably committed. */
  enqueue(session: SessionWriter, event: NewEvent): Promise<StoredEvent> {
    if (this.failed) return Promise.reject(this.failed);
    checkEvent(event);
    return new Promise((resolve, reject) => {
      this.queue.push({ session, event, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flushSafely());
      }
    });
  }

  /** Commits everything queued, plus event, now; throws if the commit fails. */
  commitNow(session: SessionWriter, event: NewEvent): StoredEvent {
    if (this.failed) throw this.failed;
    checkEvent(event);
    let stored: StoredEvent | undefined;
    this.queue.push({ session, event, resolve: (e) => (stored = e), reject: () => undefined });
    this.flush();
    return stored!;
  }

  private flushSafely(): void {
    try {
      this.flush();
    } catch {
      // every pending append has been rejected with the reason
    }
  }

  /** One durable commit for the whole queue. */
  flush(): void {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    let stored: StoredEvent[] = [];
    try {
      this.db.transaction(() => {
        const rows = batch.map((p) => {
          const row = p.session.unwrittenRow();
          if (row) this.insertSession.run(p.session.id, row.kind, row.started, row.title, row.workspace);
          const e = p.event;
          return {
            session: p.session.id, session_seq: p.session.nextSeq(), time: new Date().toISOString(), kind: e.kind,
            actor: JSON.stringify(boundStrings(this.redactor.value(e.actor))), generation: e.generation, payload: JSON.stringify(boundStrings(this.redactor.value(e.payload))),
          };
        });
        stored = this.chain.append(rows);
      }).immediate();
    } catch (e) {
      for (const p of batch) p.session.rollback();
      this.failed = journalError(this.path, e);
      for (const p of batch) p.reject(this.failed);
      throw this.failed;
    }
    for (const p of batch) p.session.rowWritten();
    batch.forEach((p, i) => p.resolve(stored[i]!));
  }

  /** Takes spooled runs into the chain (ingest.ts). */
  ingestSpools(dir: string = spoolDir()): number {
    return ingestSpools({ db: this.db, chain: this.chain, redactor: this.redactor, insertSession: this.insertSession }, dir);
  }

  sessions(filter: SessionFilter = {}): SessionInfo[] {
    return listSessions(this.db, filter);
  }

  /** The session with this id, or the only one whose id starts with it; undefined when none or several do (see matching()). */
  session(id: string): SessionInfo | undefined {
    const found = this.matching(id, 2);
    return found.find((s) => s.id === id) ?? (found.length === 1 ? found[0] : undefined);
  }

  /** Sessions whose id starts with prefix (an exact id first), at most limit: to refuse an ambiguous id with its candidates. */
  matching(prefix: string, limit = 10): SessionInfo[] {
    if (!/^[0-9a-z-]*$/.test(prefix)) return [];
    const all = listSessions(this.db, { idPrefix: prefix });
    const exact = all.find((s) => s.id === prefix);
    return (exact ? [exact] : all).slice(-limit);
  }

  /** Events after seq, oldest first (for following the journal live). */
  eventsAfter(seq: number, opts: { session?: string | undefined; limit?: number } = {}): StoredEvent[] {
    return eventsAfter(this.db, seq, opts);
  }

  lastSeq(): number {
    return lastSeq(this.db);
  }

  events(sessionId: string): StoredEvent[] {
    return sessionEvents(this.db, sessionId);
  }

  /** A page of one session's events, after a position in it. */
  eventsPage(sessionId: string, afterSessionSeq: number, limit: number): StoredEvent[] {
    return sessionEventsPage(this.db, sessionId, afterSessionSeq, limit);
  }

  /** Full-text search over payloads (arguments, results, reasons). */
  search(query: string, opts: { session?: string; limit?: number } = {}): StoredEvent[] {
    return searchEvents(this.db, query, opts);
  }

  /** Walks the whole chain and reports the first broken link. */
  verify(): VerifyResult {
    return verifyChain(this.db);
  }

  /**
   * Removes the oldest events (a prefix of the chain) older than before, and
   * records the prune as an event: what went, through which event, and the hash
   * the chain now starts from.
   */
  prune(before: Date, actor: Actor = { component: "host" }): { events: number; sessions: number; throughSeq: number } {
    const pruned = prunePrefix(this.db, this.chain, before);
    if (!pruned) return { events: 0, sessions: 0, throughSeq: 0 };
    const { events, sessions, throughSeq } = pruned;
    const s = this.startSession({ kind: "journal", title: "journal maintenance", actor });
    s.appendNow("journal.pruned", actor, 0, { before: pruned.before, events, sessions, throughSeq, anchorHash: pruned.anchorHash });
    s.end("ok");
    return { events, sessions, throughSeq };
  }
}

