import { createHash, randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, renameSync, unlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import Database from "better-sqlite3";
import { VakError } from "../policy/errors.js";
import { vakDirs } from "../policy/state.js";
import { Redactor } from "../secrets/redact.js";
import { type Actor, checkEvent, type EventKind, type NewEvent, type Payload, type StoredEvent } from "./events.js";
import { MAX_SPOOL_LINE, OPEN_SUFFIX, pendingSpools, type SpoolHeader, type SpoolLine, spoolDir, spoolLines, type SpoolText } from "./spool.js";

/**
 * The journal: an append-only, hash-chained record in SQLite (WAL). Every event
 * carries the hash of the one before it, across all sessions, so that changing,
 * removing or reordering any stored event breaks the chain at that event.
 * Writes are batched into one durable commit per turn of the event loop; an
 * append's promise settles only after its commit, and a failed commit rejects
 * every append in it: callers stop rather than go on unrecorded.
 */
export const GENESIS = "0".repeat(64);

const SCHEMA = `
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

interface Row {
  seq: number;
  session: string;
  session_seq: number;
  time: string;
  kind: string;
  actor: string;
  generation: number;
  payload: string;
  prev_hash: string;
  hash: string;
}

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

export type VerifyResult =
  | { ok: true; events: number; head: string }
  | { ok: false; events: number; seq: number; session?: string; sessionSeq?: number; problem: string };

/** The bytes an event's hash covers: every stored field but the hash itself. */
export function eventHash(prev: string, r: Omit<Row, "hash" | "prev_hash">): string {
  const canonical = JSON.stringify([r.seq, r.session, r.session_seq, r.time, r.kind, r.actor, r.generation, r.payload]);
  return createHash("sha256").update(prev).update("\n").update(canonical).digest("hex");
}

export function defaultJournalPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(vakDirs(env).state, "journal.db");
}

interface Pending {
  session: SessionWriter;
  event: NewEvent;
  resolve: (e: StoredEvent) => void;
  reject: (e: Error) => void;
}

function journalError(path: string, e: unknown, verb = "written"): VakError {
  const code = (e as { code?: string }).code;
  const what = code === "SQLITE_FULL" ? "the disk is full" : code?.startsWith("SQLITE_READONLY") ? "it is read-only" : (e as Error).message.split("\n")[0];
  return new VakError("journal", `the journal at ${path} could not be ${verb} (${what}); nothing runs unrecorded`);
}

export class Journal {
  readonly path: string;
  readonly redactor: Redactor;
  private readonly db: Database.Database;
  private readonly insert: Database.Statement;
  private readonly setHead: Database.Statement;
  private readonly lastEvent: Database.Statement;
  private readonly insertSession: Database.Statement;
  private queue: Pending[] = [];
  private scheduled = false;
  private failed: VakError | undefined;

  private constructor(path: string, db: Database.Database, redactor: Redactor) {
    this.path = path;
    this.db = db;
    this.redactor = redactor;
    this.insert = db.prepare(
      "INSERT INTO events (seq, session, session_seq, time, kind, actor, generation, payload, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?)",
    );
    this.setHead = db.prepare("INSERT INTO head (one, seq, hash) VALUES (1, ?, ?) ON CONFLICT(one) DO UPDATE SET seq = excluded.seq, hash = excluded.hash");
    this.lastEvent = db.prepare("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1");
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

  /** Appends rows to the chain; the caller holds the transaction. */
  private chain(rows: Omit<Row, "seq" | "prev_hash" | "hash">[]): StoredEvent[] {
    const last = this.lastEvent.get() as { seq: number; hash: string } | undefined;
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
            actor: JSON.stringify(this.redactor.value(e.actor)), generation: e.generation, payload: JSON.stringify(this.redactor.value(e.payload)),
          };
        });
        stored = this.chain(rows);
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

  /**
   * Takes spooled runs (see spool.ts) into the chain, oldest first, one commit
   * each, and removes their files. A file is claimed by renaming it, so that two
   * ingesters never take the same run twice; a run whose session is already in
   * the journal (an ingester died between commit and unlink) is only removed.
   * Files are read a line at a time. A line that cannot be taken (damaged, not
   * an event, or over MAX_SPOOL_LINE) is recorded in its place as a refused
   * "journal.ingest" decision, the rest of the run is taken in, the file is kept
   * beside the spool as .partial, and a message says so: one bad file never
   * stops the journal.
   */
  ingestSpools(dir: string = spoolDir()): number {
    let taken = 0;
    for (const found of pendingSpools(dir)) {
      const file = found.replace(/\.ingesting-\d+$/, "");
      const claimed = `${file}.ingesting-${process.pid}`;
      try {
        renameSync(found, claimed);
      } catch {
        continue; // another ingester has it
      }
      const lines = spoolLines(claimed);
      let header: SpoolHeader | undefined;
      try {
        header = (JSON.parse(lines.next().value?.text ?? "") as { header: SpoolHeader }).header;
        if (!header?.session) throw new Error("no header");
      } catch {
        lines.return(undefined);
        renameSync(claimed, `${file}.unreadable`);
        process.stderr.write(`vak: journal: ${file} has no readable header; it is kept as ${file}.unreadable\n`);
        continue;
      }
      const problems: string[] = [];
      const kept = `${file}.partial`;
      try {
        this.takeRun(header, lines, file.endsWith(OPEN_SUFFIX), problems, kept);
      } finally {
        lines.return(undefined); // closes the file, whether or not every line was read
      }
      if (problems.length) {
        renameSync(claimed, kept);
        const shown = problems.slice(0, 3).join("; ") + (problems.length > 3 ? `; and ${problems.length - 3} more` : "");
        process.stderr.write(`vak: journal: took in ${file} in part: ${shown}; each is recorded in its place, and the file is kept as ${kept}\n`);
      } else unlinkSync(claimed);
      taken += 1;
    }
    return taken;
  }

  /** One spooled run into the chain, in one commit. */
  private takeRun(header: SpoolHeader, lines: Iterable<SpoolText>, open: boolean, problems: string[], kept: string): void {
    this.db.transaction(() => {
      if (this.db.prepare("SELECT 1 FROM sessions WHERE id = ?").get(header.session)) return;
      // The spool holds known secrets redacted already; credential shapes are redacted here, on the way in.
      this.insertSession.run(header.session, header.kind, header.started, this.redactor.text(header.title), header.workspace);
      let batch: SpoolLine[] = [];
      let count = 0;
      let last: EventKind | undefined;
      const add = (e: SpoolLine) => {
        batch.push(e);
        last = e.kind;
        if (batch.length >= 1000) flush();
      };
      const flush = () => {
        this.chain(batch.map((e) => ({
          session: header.session, session_seq: ++count, time: e.time, kind: e.kind, actor: JSON.stringify(this.redactor.value(e.actor)),
          generation: e.generation, payload: JSON.stringify(this.redactor.value(e.payload)),
        })));
        batch = [];
      };
      for (const l of lines) {
        if (l.bytes === 0) continue;
        const e = l.text === undefined ? undefined : spoolEvent(l.text);
        if (e) add(e);
        // A torn last line: its write never returned, so it was never acknowledged.
        else if (l.terminated) add(placeholder(l, problems, kept));
      }
      if (open && last !== "session.ended")
        add({ kind: "session.ended", actor: { component: "host" }, generation: 0, time: new Date().toISOString(), payload: { outcome: "interrupted: vak stopped before the run ended" } });
      flush();
    }).immediate();
  }

  // ---- readers ----

  sessions(): SessionInfo[] {
    return this.db
      .prepare(
        `SELECT s.id, s.kind, s.started, s.title, s.workspace,
           (SELECT count(*) FROM events e WHERE e.session = s.id) AS events,
           (SELECT e.time FROM events e WHERE e.session = s.id AND e.kind = 'session.ended' ORDER BY e.seq DESC LIMIT 1) AS ended,
           (SELECT json_extract(e.payload, '$.outcome') FROM events e WHERE e.session = s.id AND e.kind = 'session.ended' ORDER BY e.seq DESC LIMIT 1) AS outcome
         FROM sessions s ORDER BY s.started`,
      )
      .all() as SessionInfo[];
  }

  session(id: string): SessionInfo | undefined {
    return this.sessions().find((s) => s.id === id || s.id.startsWith(id));
  }

  events(sessionId: string): StoredEvent[] {
    return (this.db.prepare("SELECT * FROM events WHERE session = ? ORDER BY seq").all(sessionId) as Row[]).map(toStored);
  }

  /** Full-text search over payloads (arguments, results, reasons). */
  search(query: string, opts: { session?: string; limit?: number } = {}): StoredEvent[] {
    const run = (q: string) =>
      this.db
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

  /** Walks the whole chain and reports the first broken link. */
  verify(): VerifyResult {
    const anchors = this.db.prepare("SELECT seq, hash FROM anchors ORDER BY seq").all() as { seq: number; hash: string }[];
    const anchor = anchors[anchors.length - 1];
    let expectSeq = (anchor?.seq ?? 0) + 1;
    let prev = anchor?.hash ?? GENESIS;
    let count = 0;
    let prunedNamed = anchor === undefined;
    for (const r of this.db.prepare("SELECT * FROM events ORDER BY seq").iterate() as IterableIterator<Row>) {
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
    const head = this.db.prepare("SELECT seq, hash FROM head").get() as { seq: number; hash: string } | undefined;
    if (head && (head.seq !== expectSeq - 1 || head.hash !== prev))
      return { ok: false, events: count, seq: expectSeq, problem: `the journal ends at event ${expectSeq - 1}, but event ${head.seq} was written (events at the end were removed)` };
    if (!prunedNamed) return { ok: false, events: count, seq: anchor!.seq, problem: `the chain starts after event ${anchor!.seq}, but no journal.pruned event records that prune` };
    return { ok: true, events: count, head: prev };
  }

  /**
   * Removes the oldest events (a prefix of the chain) older than before, and
   * records the prune as an event: what went, through which event, and the hash
   * the chain now starts from.
   */
  prune(before: Date, actor: Actor = { component: "host" }): { events: number; sessions: number; throughSeq: number } {
    const cutoff = before.toISOString();
    const first = this.db.prepare("SELECT seq FROM events WHERE time >= ? ORDER BY seq LIMIT 1").get(cutoff) as { seq: number } | undefined;
    const through = (first ? first.seq : ((this.lastEvent.get() as { seq: number } | undefined)?.seq ?? 0) + 1) - 1;
    const anchorRow = this.db.prepare("SELECT hash FROM events WHERE seq = ?").get(through) as { hash: string } | undefined;
    if (through <= 0 || !anchorRow) return { events: 0, sessions: 0, throughSeq: 0 };
    let events = 0;
    let sessions = 0;
    this.db.transaction(() => {
      this.db.prepare("INSERT INTO pruning (one) VALUES (1)").run();
      events = this.db.prepare("DELETE FROM events WHERE seq <= ?").run(through).changes;
      this.db.prepare("DELETE FROM pruning").run();
      sessions = this.db.prepare("DELETE FROM sessions WHERE id NOT IN (SELECT DISTINCT session FROM events)").run().changes;
      this.db.prepare("INSERT OR REPLACE INTO anchors (seq, hash, pruned_at) VALUES (?,?,?)").run(through, anchorRow.hash, new Date().toISOString());
    }).immediate();
    const s = this.startSession({ kind: "journal", title: "journal maintenance", actor });
    s.appendNow("journal.pruned", actor, 0, { before: cutoff, events, sessions, throughSeq: through, anchorHash: anchorRow.hash });
    s.end("ok");
    return { events, sessions, throughSeq: through };
  }
}

/** A spool line as an event the chain can hold, or undefined. */
function spoolEvent(text: string): SpoolLine | undefined {
  try {
    const e = JSON.parse(text) as SpoolLine;
    checkEvent(e);
    return typeof e.time === "string" ? e : undefined;
  } catch {
    return undefined;
  }
}

/** What the chain holds where a spool line could not be taken in. */
function placeholder(l: SpoolText, problems: string[], kept: string): SpoolLine {
  const problem = `line ${l.line} ${l.text === undefined ? `is ${l.bytes} bytes, over the ${MAX_SPOOL_LINE}-byte limit` : "is not a readable event"}`;
  problems.push(problem);
  return {
    kind: "decision", actor: { component: "journal" }, generation: 0, time: new Date().toISOString(),
    payload: { op: "journal.ingest", allowed: false, reason: `${problem}; not taken in (the spool file is kept as ${kept})`, line: l.line, bytes: l.bytes },
  };
}

function toStored(r: Row): StoredEvent {
  return {
    seq: r.seq, session: r.session, sessionSeq: r.session_seq, time: r.time, kind: r.kind as EventKind,
    actor: JSON.parse(r.actor) as Actor, generation: r.generation, payload: JSON.parse(r.payload) as Payload,
    prevHash: r.prev_hash, hash: r.hash,
  };
}

/** One session's writer. */
interface SessionRow {
  kind: string;
  started: string;
  title: string;
  workspace: string | null;
}

export class SessionWriter {
  private seqInSession: number;

  constructor(
    private readonly journal: Journal,
    readonly id: string,
    lastSeq: number,
    private row?: SessionRow,
  ) {
    this.seqInSession = lastSeq;
  }

  /** @internal the sessions row, until a commit has written it */
  unwrittenRow(): SessionRow | undefined {
    return this.row;
  }

  /** @internal */
  rowWritten(): void {
    this.row = undefined;
  }

  /** @internal numbering happens inside the commit */
  nextSeq(): number {
    return ++this.seqInSession;
  }

  /** @internal undoes numbering for a commit that failed */
  rollback(): void {
    this.seqInSession -= 1;
  }

  /** Batched: resolves after the commit that holds it. */
  append(kind: EventKind, actor: Actor, generation: number, payload: Payload): Promise<StoredEvent> {
    return this.journal.enqueue(this, { kind, actor, generation, payload });
  }

  /** Committed before it returns; throws a VakError if it cannot be. */
  appendNow(kind: EventKind, actor: Actor, generation: number, payload: Payload): StoredEvent {
    return this.journal.commitNow(this, { kind, actor, generation, payload });
  }

  end(outcome: string, payload: Payload = {}): StoredEvent {
    return this.appendNow("session.ended", { component: "host" }, 0, { outcome, ...payload });
  }
}
