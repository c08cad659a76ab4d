import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import pg from "pg";
import { VakError } from "../policy/errors.js";
import { Redactor } from "../secrets/redact.js";
import { recordedJson } from "./bounds.js";
import type { VerifyResult } from "./chain.js";
import { BatchedJournal } from "./batched-journal.js";
import { CommitQueue, type PreparedEvent } from "./commit-queue.js";
import type { Actor, StoredEvent } from "./events.js";
import { ingestSpools } from "./ingest.js";
import type { Committed, Journal, PruneResult, SessionFilter, SessionInfo, Watch } from "./journal.js";
import { anchorsDigest, appendBatch, EVENT_COLUMNS, lockKey, NOTIFY_CHANNEL, type PgEventRow, pgStored, verifyPg } from "./pg-chain.js";
import type { PgTarget } from "./pg-connect.js";
import { checkSchemaVersion } from "./pg-schema.js";
import { parseQuery, phraseQuery, searchTerms, type TsQuery } from "./pg-search.js";
import { newSessionId, type SessionRow } from "./session-writer.js";
import { spoolDir } from "./spool.js";

/**
 * The journal on PostgreSQL, for many hosts sharing one record: one chain per
 * session (pg-chain.ts), the tables and the writer role as `vak journal
 * init-db` creates them (pg-schema.ts). Commits are batched exactly as in
 * SQLite (commit-queue.ts); each is one transaction, and an append settles
 * only once PostgreSQL has answered its COMMIT (synchronous_commit is never
 * left off). Reads use other connections of the same pool.
 */
export interface PgOpenOptions {
  target: PgTarget;
  /** The owner's connection, for prune (the writer role cannot delete); resolved only when needed. */
  admin?: () => PgTarget;
  redactor?: Redactor;
  ingest?: boolean;
  spoolDir?: string;
  /** The name this host goes by in the sessions it starts. */
  host?: string;
}

export class PgJournal extends BatchedJournal implements Journal {
  readonly backend = "postgres";
  readonly location: string;
  readonly redactor: Redactor;
  readonly host: string;
  private readonly pool: pg.Pool;
  protected readonly queue: CommitQueue;

  private constructor(private readonly opts: PgOpenOptions, redactor: Redactor) {
    super();
    this.location = opts.target.location;
    this.redactor = redactor;
    this.host = opts.host ?? hostname();
    this.pool = newPool(opts.target);
    this.queue = new CommitQueue((batch) => this.commit(batch), redactor, (e) => this.error(e), searchTerms);
  }

  static async open(opts: PgOpenOptions): Promise<PgJournal> {
    const redactor = opts.redactor ?? new Redactor();
    for (const s of opts.target.secrets) redactor.add(s);
    const j = new PgJournal(opts, redactor);
    try {
      const enc = await j.pool.query<{ server_encoding: string }>("SHOW server_encoding");
      if (enc.rows[0]?.server_encoding !== "UTF8") throw new VakError("journal", `the journal at ${j.location} is a database in ${enc.rows[0]?.server_encoding}; Vak needs UTF8 (the hashed text must come back as it went in)`);
      let version: string | undefined;
      try {
        version = (await j.pool.query<{ value: string }>("SELECT value FROM vak.meta WHERE key = 'schema'")).rows[0]?.value;
      } catch (e) {
        if ((e as { code?: string }).code !== "42P01") throw e; // undefined_table: no schema yet
      }
      checkSchemaVersion(version, j.location);
      if (opts.ingest !== false) await j.ingestSpools(opts.spoolDir);
      return j;
    } catch (e) {
      await j.pool.end().catch(() => undefined);
      throw e instanceof VakError ? e : j.error(e, "opened");
    }
  }

  /** Every failure as one message that names the database (never its password) and says that nothing runs unrecorded. */
  private error(e: unknown, verb = "written"): VakError {
    if (e instanceof VakError) return e;
    return pgError(e, this.location, this.redactor, verb);
  }

  protected async release(): Promise<void> {
    await this.pool.end();
  }

  private async commit(batch: PreparedEvent[]): Promise<StoredEvent[]> {
    return this.transaction(this.pool, (c) => appendBatch(c, this.host, batch));
  }

  private async transaction<T>(pool: pg.Pool, body: (c: pg.PoolClient) => Promise<T>, begin = "BEGIN"): Promise<T> {
    const c = await pool.connect();
    let broken = false;
    try {
      await c.query(begin);
      const out = await body(c);
      await c.query("COMMIT");
      return out;
    } catch (e) {
      await c.query("ROLLBACK").catch(() => (broken = true));
      throw e;
    } finally {
      c.release(broken);
    }
  }

  async ingestSpools(dir: string = this.opts.spoolDir ?? spoolDir()): Promise<number> {
    return ingestSpools(
      {
        redactor: this.redactor,
        takeRun: (session, row, batches) => this.takeRun(session, row, batches),
      },
      dir,
    );
  }

  /**
   * One whole session (a spooled run, or one copied by migrate) in one
   * transaction, its events as given; false, writing nothing, if the session is
   * in the journal already.
   */
  async takeRun(session: string, row: SessionRow, batches: Iterable<PreparedEvent[]>): Promise<boolean> {
    try {
      return await this.transaction(this.pool, async (c) => {
        if ((await c.query("SELECT 1 FROM vak.sessions WHERE id = $1", [session])).rowCount) return false;
        let first = true;
        for (const b of batches) {
          if (first && b.length) b[0] = { ...b[0]!, newSession: row };
          first = false;
          if (b.length) await appendBatch(c, this.host, b);
        }
        return true;
      });
    } catch (e) {
      throw this.error(e);
    }
  }

  /** A session's events as stored (the exact text that was hashed), for migrate's comparison. */
  async storedRows(sessionId: string): Promise<PgEventRow[]> {
    return this.read(async () => (await this.pool.query<PgEventRow>(`SELECT ${EVENT_COLUMNS} FROM vak.events WHERE chain = $1 ORDER BY seq`, [sessionId])).rows);
  }

  /** Sessions by filter, oldest first: the newest limit of those that match, when there is a limit. */
  private async list(f: SessionFilter): Promise<SessionInfo[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (f.kind === "workload") where.push("pg_catalog.starts_with(s.kind, 'workload:')");
    else if (f.kind) where.push(`s.kind = $${params.push(f.kind)}`);
    if (f.since) where.push(`s.started >= $${params.push(f.since)}`);
    if (f.until) where.push(`s.started <= $${params.push(f.until)}`);
    if (f.idPrefix !== undefined) where.push(`pg_catalog.starts_with(s.id, $${params.push(f.idPrefix)})`);
    const limit = f.limit ? `LIMIT $${params.push(f.limit)}` : "";
    const r = await this.pool.query<{ id: string; kind: string; started: string; title: string; workspace: string | null; host: string; events: string; ended: string | null; end_payload: string | null }>(
      `SELECT s.id, s.kind, s.started, s.title, s.workspace, s.host, s.events, x.time AS ended, x.payload AS end_payload
       FROM (SELECT s.*, n.events FROM vak.sessions s
             CROSS JOIN LATERAL (SELECT pg_catalog.count(*) AS events FROM vak.events e WHERE e.chain = s.id) n
             WHERE n.events > 0 ${where.map((w) => `AND ${w}`).join(" ")}
             ORDER BY s.started DESC, s.reg_seq DESC ${limit}) s
       LEFT JOIN LATERAL (SELECT time, payload FROM vak.events e WHERE e.chain = s.id AND e.kind = 'session.ended' ORDER BY seq DESC LIMIT 1) x ON true
       ORDER BY s.started, s.reg_seq`,
      params,
    );
    return r.rows.map((s) => ({
      id: s.id, kind: s.kind, started: s.started, title: s.title, workspace: s.workspace, host: s.host, events: Number(s.events), ended: s.ended,
      outcome: s.end_payload === null ? null : outcomeOf(s.end_payload),
    }));
  }

  async sessions(filter: SessionFilter = {}): Promise<SessionInfo[]> {
    return this.read(() => this.list(filter));
  }

  async session(id: string): Promise<SessionInfo | undefined> {
    const found = await this.matching(id, 2);
    return found.find((s) => s.id === id) ?? (found.length === 1 ? found[0] : undefined);
  }

  async matching(prefix: string, limit = 10): Promise<SessionInfo[]> {
    if (!/^[0-9a-z-]*$/.test(prefix)) return [];
    const all = await this.sessions({ idPrefix: prefix });
    const exact = all.find((s) => s.id === prefix);
    return (exact ? [exact] : all).slice(-limit);
  }

  async events(sessionId: string, opts: { after?: number; limit?: number } = {}): Promise<StoredEvent[]> {
    return this.read(async () =>
      (await this.pool.query<PgEventRow>(`SELECT ${EVENT_COLUMNS} FROM vak.events WHERE chain = $1 AND session_seq > $2 ORDER BY seq LIMIT $3`, [sessionId, opts.after ?? 0, opts.limit ?? null])).rows.map(pgStored),
    );
  }

  async search(query: string, opts: { session?: string; limit?: number } = {}): Promise<StoredEvent[]> {
    const run = async (q: TsQuery) => {
      // A query with no words (only punctuation) finds nothing, as an empty tsquery would.
      if (q.params[0] === "") return { rows: [] };
      const params: unknown[] = [...q.params];
      const session = opts.session ? `AND chain = $${params.push(opts.session)}` : "";
      const limit = `$${params.push(opts.limit ?? 100)}`;
      return this.pool.query<PgEventRow>(`SELECT ${EVENT_COLUMNS} FROM vak.events WHERE search @@ (${q.sql}) ${session} ORDER BY time, chain, seq LIMIT ${limit}`, params);
    };
    return this.read(async () => {
      const parsed = parseQuery(query);
      let rows: PgEventRow[];
      try {
        rows = (await run(parsed ?? phraseQuery(query))).rows;
      } catch (e) {
        if (!parsed) throw e;
        rows = (await run(phraseQuery(query))).rows;
      }
      return rows.map(pgStored);
    });
  }

  async verify(): Promise<VerifyResult> {
    return this.read(() => this.transaction(this.pool, verifyPg, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  }

  private async read<T>(body: () => Promise<T>): Promise<T> {
    try {
      return await body();
    } catch (e) {
      throw this.error(e, "read");
    }
  }

  /**
   * Removes every chain's events older than before (a prefix of each chain),
   * leaving an anchor where each now starts, and records the prune in the same
   * transaction as a journal.pruned event naming the digest of its anchors.
   * Needs the owner's connection: the writer role cannot delete.
   */
  async prune(before: Date, actor: Actor = { component: "host" }): Promise<PruneResult> {
    await this.queue.flush();
    const adminTarget = this.opts.admin?.();
    for (const s of adminTarget?.secrets ?? []) this.redactor.add(s);
    const admin = adminTarget ? newPool(adminTarget) : this.pool;
    const cutoff = before.toISOString();
    try {
      return await this.transaction(admin, async (c) => {
        await c.query("SET LOCAL vak.pruning = 'on'");
        const chains = (await c.query<{ chain: string }>("SELECT DISTINCT chain FROM vak.events WHERE time < $1", [cutoff])).rows.map((r) => r.chain);
        if (!chains.length) return { events: 0, sessions: 0, throughSeq: 0 };
        const keys = [...new Set(chains.map(lockKey))].sort((a, b) => a - b);
        await c.query("SELECT pg_catalog.count(pg_catalog.pg_advisory_xact_lock($1::int4, k)) FROM (SELECT k FROM pg_catalog.unnest($2::int4[]) AS k ORDER BY k) AS s", [0x56414b31, keys]);
        const cuts = (await c.query<{ chain: string; through: string; hash: string; last: string }>(
          `SELECT t.chain, t.through, e.hash, t.last FROM (
             SELECT c.chain,
               coalesce((SELECT pg_catalog.min(seq) FROM vak.events WHERE chain = c.chain AND time >= $1) - 1, (SELECT pg_catalog.max(seq) FROM vak.events WHERE chain = c.chain)) AS through,
               (SELECT pg_catalog.max(seq) FROM vak.events WHERE chain = c.chain) AS last
             FROM pg_catalog.unnest($2::text[]) AS c(chain)) t
           JOIN vak.events e ON e.chain = t.chain AND e.seq = t.through`,
          [cutoff, chains],
        )).rows.map((r) => ({ chain: r.chain, seq: Number(r.through), hash: r.hash, emptied: r.through === r.last }));
        if (!cuts.length) return { events: 0, sessions: 0, throughSeq: 0 };
        const prune = randomBytes(8).toString("hex");
        const now = new Date().toISOString();
        await c.query("INSERT INTO vak.anchors (chain, seq, hash, prune, pruned_at) SELECT x.c, x.s, x.h, $4, $5 FROM unnest($1::text[], $2::int8[], $3::text[]) AS x(c, s, h)", [
          cuts.map((x) => x.chain), cuts.map((x) => x.seq), cuts.map((x) => x.hash), prune, now,
        ]);
        const del = await c.query("DELETE FROM vak.events e USING unnest($1::text[], $2::int8[]) AS x(c, s) WHERE e.chain = x.c AND e.seq <= x.s", [cuts.map((x) => x.chain), cuts.map((x) => x.seq)]);
        const events = del.rowCount ?? 0;
        const sessions = cuts.filter((x) => x.emptied).length;
        const throughSeq = Math.max(...cuts.map((x) => x.seq));
        const id = newSessionId();
        const ev = (n: number, kind: string, payload: Record<string, unknown>, a: Actor = actor): PreparedEvent => ({
          session: id, session_seq: n, time: now, kind, actor: recordedJson(this.redactor, a), generation: 0, payload: recordedJson(this.redactor, payload),
        });
        await appendBatch(c, this.host, [
          { ...ev(1, "session.started", { kind: "journal", title: "journal maintenance" }), newSession: { kind: "journal", started: now, title: "journal maintenance", workspace: null } },
          ev(2, "journal.pruned", { before: cutoff, events, sessions, chains: cuts.length, throughSeq, prune, anchors: anchorsDigest(cuts) }),
          ev(3, "session.ended", { outcome: "ok" }, { component: "host" }),
        ]);
        return { events, sessions, throughSeq };
      });
    } catch (e) {
      if ((e as { code?: string }).code === "42501")
        throw new VakError("journal", `pruning the journal at ${this.location} needs the database owner's connection (the writer role cannot delete): set [journal] admin_url`);
      throw this.error(e);
    } finally {
      if (admin !== this.pool) await admin.end();
    }
  }

  /** LISTEN: every commit by any host sharing the database, as it is committed. */
  async watch(listener: (c: Committed) => void, onError: (e: Error) => void = () => {}): Promise<Watch> {
    const client = new pg.Client(this.opts.target.config);
    client.on("error", (e) => onError(this.error(e, "read")));
    client.on("notification", (n) => {
      if (n.channel !== NOTIFY_CHANNEL || !n.payload) return;
      try {
        for (const [session, sessionSeq] of JSON.parse(n.payload) as [string, number][]) if (typeof session === "string" && Number.isInteger(sessionSeq)) listener({ session, sessionSeq });
      } catch {
        // not one of ours: anyone who can connect can NOTIFY; listeners re-read the journal anyway
      }
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${NOTIFY_CHANNEL}`);
    } catch (e) {
      await client.end().catch(() => undefined);
      throw this.error(e, "read");
    }
    return { close: () => client.end() };
  }
}

function newPool(t: PgTarget): pg.Pool {
  const pool = new pg.Pool({ ...t.config, max: 4, idleTimeoutMillis: 30_000 });
  // An idle connection that breaks is dropped by the pool; the next query reports the failure.
  pool.on("error", () => undefined);
  return pool;
}

function outcomeOf(payload: string): string | null {
  try {
    const o = (JSON.parse(payload) as { outcome?: unknown }).outcome;
    return typeof o === "string" ? o : null;
  } catch {
    return null;
  }
}

/** A PostgreSQL failure as a message a user can act on, with nothing secret in it. */
export function pgError(e: unknown, location: string, redactor: Redactor, verb: string): VakError {
  const x = e as { code?: string; message?: string };
  const first = redactor.text(String(x.message ?? e).split("\n")[0]!).slice(0, 300);
  const what =
    x.code === "ECONNREFUSED" || x.code === "ENOENT" ? "nothing is listening there"
    : x.code === "28P01" || x.code === "28000" ? `it refused the login: ${first}`
    : x.code === "42501" ? `permission denied: ${first}`
    : x.code === "3D000" ? `no such database: ${first}`
    : first;
  return new VakError("journal", `the journal at ${location} could not be ${verb} (${what}); nothing runs unrecorded`);
}
