import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ClientBase } from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { ChainWalker, eventHash, GENESIS, sha256, type Broken, type VerifyResult } from "./chain.js";
import type { PreparedEvent } from "./commit-queue.js";
import type { EventKind, StoredEvent } from "./events.js";
import { searchTerms } from "./pg-search.js";
import type { SessionRow } from "./session-writer.js";

/**
 * PostgreSQL's chains: one per session, so that hosts sharing a database
 * never wait on each other's events. A commit takes an advisory lock per chain
 * it appends to (in one order, so two commits cannot deadlock), inside its
 * transaction, and reads each chain's end only once it holds the lock; a
 * commit that starts sessions also takes the lock of the chain of sessions.
 * The locks go with the transaction, so a host killed mid-commit leaves
 * nothing half-written and nothing locked.
 */
const LOCK_CLASS_CHAIN = 0x56414b31; // "VAK1"
const LOCK_CLASS_SESSIONS = 0x56414b30; // "VAK0"
export const NOTIFY_CHANNEL = "vak_journal";
/** The chain of sessions, in heads. */
export const SESSIONS_CHAIN = "";

export function lockKey(chain: string): number {
  return createHash("sha256").update(chain).digest().readInt32BE(0);
}

/** A session's entry on the chain of sessions: what its hash covers. */
export function sessionHash(prev: string, s: { reg_seq: number; id: string; host: string } & SessionRow): string {
  return sha256(`${prev}\n${JSON.stringify([s.reg_seq, s.id, s.host, s.kind, s.started, s.title, s.workspace])}`);
}

/** Text PostgreSQL can hold as it was hashed: well-formed, without NUL. */
export function pgText(s: string): string {
  return s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]|\0/g, "\uFFFD");
}

export interface PgEventRow {
  chain: string;
  seq: string | number;
  session_seq: string | number;
  time: string;
  kind: string;
  actor: string;
  generation: number;
  payload: string;
  prev_hash: string;
  hash: string;
}

export function pgStored(r: PgEventRow): StoredEvent {
  return {
    seq: Number(r.seq), session: r.chain, sessionSeq: Number(r.session_seq), time: r.time, kind: r.kind as EventKind,
    actor: JSON.parse(r.actor) as StoredEvent["actor"], generation: r.generation, payload: JSON.parse(r.payload) as StoredEvent["payload"],
    prevHash: r.prev_hash, hash: r.hash,
  };
}

/**
 * Appends a batch inside the caller's transaction: locks, then the sessions it
 * starts, then each chain's events after that chain's end, then the heads, and
 * a notification for listeners (delivered only if the transaction commits).
 */
export async function appendBatch(c: ClientBase, host: string, batch: PreparedEvent[]): Promise<StoredEvent[]> {
  const chains = [...new Set(batch.map((p) => p.session))];
  const keys = [...new Set(chains.map(lockKey))].sort((a, b) => a - b);
  await c.query("SELECT pg_catalog.count(pg_catalog.pg_advisory_xact_lock($1::int4, k)) FROM (SELECT k FROM pg_catalog.unnest($2::int4[]) AS k ORDER BY k) AS s", [LOCK_CLASS_CHAIN, keys]);
  const starting = batch.filter((p) => p.newSession);
  if (starting.length) await registerSessions(c, host, starting.map((p) => ({ id: p.session, ...p.newSession! })));
  const ends = await chainEnds(c, chains);
  const lines: string[] = [];
  const stored: StoredEvent[] = [];
  for (const p of batch) {
    const end = ends.get(p.session)!;
    const row = { seq: end.seq + 1, session: p.session, session_seq: p.session_seq, time: p.time, kind: p.kind, actor: p.actor, generation: p.generation, payload: p.payload };
    const hash = eventHash(end.hash, row);
    lines.push(copyLine([p.session, row.seq, row.session_seq, row.time, row.kind, row.actor, row.generation, row.payload, end.hash, hash, p.search ?? searchTerms(row.payload)]));
    stored.push(pgStored({ ...row, chain: p.session, prev_hash: end.hash, hash }));
    ends.set(p.session, { seq: row.seq, hash });
  }
  // COPY rather than an INSERT of arrays: the server parses each value once, not an array literal and then its elements.
  await pipeline(Readable.from([lines.join("")]), c.query(copyFrom(`COPY vak.events (${EVENT_COLUMNS}, search) FROM STDIN`)));
  await c.query("INSERT INTO vak.heads (chain, seq, hash) SELECT * FROM unnest($1::text[], $2::int8[], $3::text[])", [
    chains, chains.map((ch) => ends.get(ch)!.seq), chains.map((ch) => ends.get(ch)!.hash),
  ]);
  await c.query("SELECT pg_catalog.pg_notify($1, n) FROM pg_catalog.unnest($2::text[]) AS n", [NOTIFY_CHANNEL, notifications(chains.map((ch) => [ch, lastSessionSeq(stored, ch)]))]);
  return stored;
}

/** The events table's columns as every read takes them (search is left out: verify alone reads it). */
export const EVENT_COLUMNS = "chain, seq, session_seq, time, kind, actor, generation, payload, prev_hash, hash";

/** One row in COPY's text format: tab-separated, with backslash, tab and line breaks escaped. */
function copyLine(values: (string | number)[]): string {
  return values.map((v) => (typeof v === "number" ? String(v) : COPY_SPECIAL.test(v) ? v.replace(COPY_ESCAPES, (ch) => COPY_ESCAPE[ch]!) : v)).join("\t") + "\n";
}
const COPY_SPECIAL = /[\\\t\n\r]/;
const COPY_ESCAPES = /[\\\t\n\r]/g;
const COPY_ESCAPE: Record<string, string> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r" };

function lastSessionSeq(stored: StoredEvent[], chain: string): number {
  for (let i = stored.length - 1; i >= 0; i--) if (stored[i]!.session === chain) return stored[i]!.sessionSeq;
  return 0;
}

/** [[session, sessionSeq]…] as JSON texts under NOTIFY's 8000-byte limit. */
function notifications(pairs: [string, number][]): string[] {
  const out: string[] = [];
  for (let i = 0; i < pairs.length; i += 100) out.push(JSON.stringify(pairs.slice(i, i + 100)));
  return out;
}

/** Adds sessions to the chain of sessions, under its lock. */
async function registerSessions(c: ClientBase, host: string, rows: ({ id: string } & SessionRow)[]): Promise<void> {
  await c.query("SELECT pg_catalog.pg_advisory_xact_lock($1::int4, 0)", [LOCK_CLASS_SESSIONS]);
  const last = (await c.query<{ reg_seq: string; hash: string }>("SELECT reg_seq, hash FROM vak.sessions ORDER BY reg_seq DESC LIMIT 1")).rows[0];
  let seq = Number(last?.reg_seq ?? 0);
  let prev = last?.hash ?? GENESIS;
  const cols = { id: [] as string[], seq: [] as number[], host: [] as string[], kind: [] as string[], started: [] as string[], title: [] as string[], ws: [] as (string | null)[], prev: [] as string[], hash: [] as string[] };
  for (const r of rows) {
    seq += 1;
    const s = { reg_seq: seq, id: r.id, host: pgText(host), kind: pgText(r.kind), started: r.started, title: pgText(r.title), workspace: r.workspace === null ? null : pgText(r.workspace) };
    const hash = sessionHash(prev, s);
    cols.id.push(s.id); cols.seq.push(seq); cols.host.push(s.host); cols.kind.push(s.kind); cols.started.push(s.started); cols.title.push(s.title); cols.ws.push(s.workspace); cols.prev.push(prev); cols.hash.push(hash);
    prev = hash;
  }
  await c.query(
    `INSERT INTO vak.sessions (id, reg_seq, host, kind, started, title, workspace, prev_hash, hash)
     SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])`,
    [cols.id, cols.seq, cols.host, cols.kind, cols.started, cols.title, cols.ws, cols.prev, cols.hash],
  );
  await c.query("INSERT INTO vak.heads (chain, seq, hash) VALUES ($1, $2, $3)", [SESSIONS_CHAIN, seq, prev]);
}

/** Each chain's end, read under its lock: its last event, else its latest anchor, else its session's own hash. */
async function chainEnds(c: ClientBase, chains: string[]): Promise<Map<string, { seq: number; hash: string }>> {
  const r = await c.query<{ chain: string; e_seq: string | null; e_hash: string | null; a_seq: string | null; a_hash: string | null; s_hash: string | null }>(
    `SELECT c.chain, e.seq AS e_seq, e.hash AS e_hash, a.seq AS a_seq, a.hash AS a_hash, s.hash AS s_hash
     FROM pg_catalog.unnest($1::text[]) AS c(chain)
     LEFT JOIN LATERAL (SELECT seq, hash FROM vak.events WHERE chain = c.chain ORDER BY seq DESC LIMIT 1) e ON true
     LEFT JOIN LATERAL (SELECT seq, hash FROM vak.anchors WHERE chain = c.chain ORDER BY seq DESC LIMIT 1) a ON true
     LEFT JOIN vak.sessions s ON s.id = c.chain`,
    [chains],
  );
  const ends = new Map<string, { seq: number; hash: string }>();
  for (const x of r.rows) {
    if (x.s_hash === null) throw new Error(`session ${x.chain} is not in the journal`);
    const e = x.e_seq === null ? undefined : { seq: Number(x.e_seq), hash: x.e_hash! };
    const a = x.a_seq === null ? undefined : { seq: Number(x.a_seq), hash: x.a_hash! };
    ends.set(x.chain, e && (!a || e.seq > a.seq) ? e : (a ?? { seq: 0, hash: x.s_hash }));
  }
  return ends;
}

/** What a prune's anchors are named by: the digest its journal.pruned event carries. */
export function anchorsDigest(anchors: { chain: string; seq: number; hash: string }[]): string {
  return sha256(JSON.stringify([...anchors].sort((a, b) => (a.chain < b.chain ? -1 : a.chain > b.chain ? 1 : 0)).map((a) => [a.chain, a.seq, a.hash])));
}

const PAGE = 5000;

/**
 * Walks the chain of sessions, every session's chain (a page at a time, in
 * the order of the (chain, seq) index), every head and every anchor, and
 * reports the first broken link. The caller holds one snapshot (REPEATABLE
 * READ) for all of it, so that commits landing meanwhile are not mistaken for
 * a chain whose heads ran ahead of its events.
 */
export async function verifyPg(c: ClientBase): Promise<VerifyResult> {
  // The chain of sessions.
  const sessions = (await c.query<{ id: string; reg_seq: string; host: string; kind: string; started: string; title: string; workspace: string | null; prev_hash: string; hash: string }>(
    "SELECT * FROM vak.sessions ORDER BY reg_seq",
  )).rows;
  let prev = GENESIS;
  const sessionHashes = new Map<string, string>();
  for (const [i, s] of sessions.entries()) {
    const seq = Number(s.reg_seq);
    const at = { ok: false as const, events: 0, seq, session: s.id };
    if (seq !== i + 1) return { ...at, problem: seq > i + 1 ? `sessions ${i + 1} to ${seq - 1} on the chain of sessions are missing (removed)` : `session ${seq} on the chain of sessions is out of order` };
    if (s.prev_hash !== prev) return { ...at, problem: `session ${s.id} does not follow from the session before it on the chain of sessions (one of them was changed, removed or reordered)` };
    if (sessionHash(prev, { ...s, reg_seq: seq }) !== s.hash) return { ...at, problem: `session ${s.id} was changed after it was written (its hash does not match its row)` };
    prev = s.hash;
    sessionHashes.set(s.id, s.hash);
  }
  const sessionsHead = { seq: sessions.length, hash: prev };

  const anchors = new Map<string, { seq: number; hash: string; prune: string }>();
  const prunes = new Map<string, { chain: string; seq: number; hash: string }[]>();
  for (const a of (await c.query<{ chain: string; seq: string; hash: string; prune: string }>("SELECT chain, seq, hash, prune FROM vak.anchors ORDER BY chain, seq")).rows) {
    const x = { chain: a.chain, seq: Number(a.seq), hash: a.hash };
    anchors.set(a.chain, { ...x, prune: a.prune });
    prunes.set(a.prune, [...(prunes.get(a.prune) ?? []), x]);
  }

  // Every session's chain, in one ordered scan.
  const ends = new Map<string, { seq: number; hash: string }>();
  const namedPrunes = new Set<string>();
  let events = 0;
  let walk: ChainWalker | undefined;
  let chain: string | undefined;
  const finish = () => {
    if (walk && chain !== undefined) {
      ends.set(chain, walk.last);
      events += walk.count;
    }
  };
  for (let after: [string, number] = ["", 0]; ; ) {
    const rows = (await c.query<PgEventRow & { search: string }>(`SELECT ${EVENT_COLUMNS}, search FROM vak.events WHERE (chain, seq) > ($1, $2) ORDER BY chain, seq LIMIT $3`, [after[0], after[1], PAGE])).rows;
    for (const r of rows) {
      if (r.chain !== chain) {
        finish();
        chain = r.chain;
        const anchor = anchors.get(r.chain);
        const start = anchor ?? { seq: 0, hash: sessionHashes.get(r.chain) ?? GENESIS };
        walk = new ChainWalker(start, ` of session ${r.chain}`);
      }
      const broken = walk!.step({ ...r, seq: Number(r.seq), session: r.chain, session_seq: Number(r.session_seq) }, events);
      if (broken) return broken;
      if (r.search !== searchTerms(r.payload))
        return { ok: false, events: events + walk!.count, seq: Number(r.seq), session: r.chain, sessionSeq: Number(r.session_seq), problem: `event ${r.seq} of session ${r.chain}: its search terms are not its payload's (they were changed, so a search would miss it or find it wrongly)` };
      if (r.kind === "journal.pruned") {
        const p = JSON.parse(r.payload) as { prune?: string; anchors?: string };
        if (p.prune && prunes.has(p.prune) && anchorsDigest(prunes.get(p.prune)!) === p.anchors) namedPrunes.add(p.prune);
      }
    }
    if (rows.length < PAGE) break;
    const last = rows[rows.length - 1]!;
    after = [last.chain, Number(last.seq)];
  }
  finish();

  // A session with no events left and no anchor lost them; every anchor must be a recorded prune.
  for (const s of sessions) {
    if (!ends.has(s.id)) {
      const a = anchors.get(s.id);
      if (!a) return { ok: false, events, seq: 1, session: s.id, sessionSeq: 1, problem: `session ${s.id} has no events left, and no prune removed them (they were removed)` };
      ends.set(s.id, { seq: a.seq, hash: a.hash });
    }
  }
  for (const [prune, list] of prunes)
    if (!namedPrunes.has(prune)) return { ok: false, events, seq: list[0]!.seq, session: list[0]!.chain, problem: `the chain of session ${list[0]!.chain} starts after event ${list[0]!.seq}, but no journal.pruned event records that prune` };

  const heads = await checkHeads(c, ends, sessionsHead, events);
  if (heads) return heads;
  return { ok: true, events, chains: sessions.length, head: sessionsHead.hash };
}

/** Each chain's latest head must be its end; every other head must name an event that is still there (or pruned). */
async function checkHeads(
  c: ClientBase, ends: Map<string, { seq: number; hash: string }>, sessionsHead: { seq: number; hash: string }, events: number,
): Promise<Broken | undefined> {
  const latest = await c.query<{ chain: string; seq: string; hash: string }>("SELECT DISTINCT ON (chain) chain, seq, hash FROM vak.heads ORDER BY chain, seq DESC");
  for (const h of latest.rows) {
    const end = h.chain === SESSIONS_CHAIN ? sessionsHead : ends.get(h.chain);
    const seq = Number(h.seq);
    if (!end || end.seq !== seq || end.hash !== h.hash) {
      const what = h.chain === SESSIONS_CHAIN ? "the chain of sessions" : `the chain of session ${h.chain}`;
      return { ok: false, events, seq: (end?.seq ?? 0) + 1, session: h.chain || undefined, problem: `${what} ends at ${h.chain === SESSIONS_CHAIN ? "session" : "event"} ${end?.seq ?? 0}, but ${seq} was written (${h.chain === SESSIONS_CHAIN ? "sessions" : "events"} at the end were removed)` };
    }
  }
  for (const id of ends.keys())
    if (!latest.rows.some((h) => h.chain === id)) return { ok: false, events, seq: 0, session: id, problem: `the chain of session ${id} has no head (its heads were removed)` };
  const stray = await c.query<{ chain: string; seq: string }>(
    `SELECT h.chain, h.seq FROM vak.heads h LEFT JOIN vak.events e ON e.chain = h.chain AND e.seq = h.seq
     WHERE h.chain <> '' AND e.hash IS DISTINCT FROM h.hash
     AND h.seq > coalesce((SELECT max(a.seq) FROM vak.anchors a WHERE a.chain = h.chain), 0) LIMIT 1`,
  );
  const s = stray.rows[0];
  if (s) return { ok: false, events, seq: Number(s.seq), session: s.chain, problem: `event ${s.seq} of session ${s.chain} was committed, but is not there as it was written (removed or changed)` };
  return undefined;
}
