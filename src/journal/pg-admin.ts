import pg from "pg";
import { VakError } from "../policy/errors.js";
import { Redactor } from "../secrets/redact.js";
import type { PgTarget } from "./pg-connect.js";
import { pgError } from "./pg-journal.js";
import type { ClientBase } from "pg";
import { DEFAULT_WRITER_ROLE, PG_SCHEMA, PG_SCHEMA_END, PG_SCHEMA_VERSION, ROLE_NAME, writerGrants } from "./pg-schema.js";
import { searchTerms } from "./pg-search.js";

/**
 * `vak journal init-db`: with the database owner's connection, creates (or
 * brings up to date) the vak schema, its tables, triggers and search index,
 * and the writer role hosts connect as: SELECT and INSERT, nothing else. Run
 * again, it changes nothing but the grants and triggers, which it restores,
 * and brings an older schema up to date (version 1: every event's search
 * terms are filled in, in the same transaction).
 */
export interface InitDbResult {
  location: string;
  role: string;
  grantedTo: string[];
  schemaVersion: number;
  /** Events whose search terms this run filled in (a version 1 database brought up to date). */
  migrated: number;
  /** Login roles that hold more than the writer role (a superuser, the owner): hosts should not connect as them. */
  warnings: string[];
}

export async function initDb(admin: PgTarget, opts: { role?: string; grantTo?: string[] } = {}): Promise<InitDbResult> {
  const role = opts.role ?? DEFAULT_WRITER_ROLE;
  const grantTo = opts.grantTo ?? [];
  for (const r of [role, ...grantTo]) if (!ROLE_NAME.test(r)) throw new VakError("bad-input", `${r}: a role name is lower-case letters, digits and _ (at most 63)`);
  const redactor = new Redactor();
  for (const s of admin.secrets) redactor.add(s);
  const c = new pg.Client(admin.config);
  const warnings: string[] = [];
  try {
    await c.connect();
    const enc = (await c.query<{ server_encoding: string }>("SHOW server_encoding")).rows[0]?.server_encoding;
    if (enc !== "UTF8") throw new VakError("journal", `the database at ${admin.location} is in ${enc}; Vak needs UTF8 (create it with ENCODING 'UTF8')`);
    await c.query("BEGIN");
    await c.query("SELECT pg_catalog.pg_advisory_xact_lock(1447117615, 0)"); // two init-db at once: one after the other
    const hasMeta = (await c.query<{ t: string | null }>("SELECT pg_catalog.to_regclass('vak.meta')::text AS t")).rows[0]?.t;
    const version = hasMeta ? Number((await c.query<{ value: string }>("SELECT value FROM vak.meta WHERE key = 'schema'")).rows[0]?.value ?? 0) : 0;
    if (version > PG_SCHEMA_VERSION) throw new VakError("journal", `the journal at ${admin.location} has schema version ${version}; this Vak knows version ${PG_SCHEMA_VERSION} (a newer Vak made it: use that one)`);
    await c.query(PG_SCHEMA);
    const migrated = await migrateSearch(c);
    await c.query(PG_SCHEMA_END);
    await c.query(writerGrants(role));
    for (const login of grantTo) {
      const r = (await c.query<{ rolsuper: boolean; rolcanlogin: boolean }>("SELECT rolsuper, rolcanlogin FROM pg_catalog.pg_roles WHERE rolname = $1", [login])).rows[0];
      if (!r) throw new VakError("bad-input", `--grant-to ${login}: no such role (create it first: CREATE ROLE ${login} LOGIN PASSWORD '…')`);
      if (r.rolsuper) warnings.push(`${login} is a superuser: it can change or remove anything, whatever the journal's grants say; let hosts connect as a role of their own`);
      await c.query(`GRANT ${role} TO ${login}`);
    }
    const owner = (await c.query<{ owner: string }>("SELECT pg_catalog.pg_get_userbyid(nspowner) AS owner FROM pg_catalog.pg_namespace WHERE nspname = 'vak'")).rows[0]?.owner;
    if (owner && grantTo.includes(owner)) warnings.push(`${owner} owns the journal's tables: it can drop the triggers; let hosts connect as a role of their own`);
    await c.query("COMMIT");
    return { location: admin.location, role, grantedTo: grantTo, schemaVersion: PG_SCHEMA_VERSION, migrated, warnings };
  } catch (e) {
    await c.query("ROLLBACK").catch(() => undefined);
    if (e instanceof VakError) throw e;
    throw pgError(e, admin.location, redactor, "set up");
  } finally {
    await c.end().catch(() => undefined);
  }
}

/**
 * Version 1 to 2: fills in the search terms of every event that has none,
 * a page at a time, with the guard against UPDATE lifted for this transaction
 * only (the owner's; the writer role has no UPDATE at all). Only the search
 * column is written: nothing the chain covers changes.
 */
async function migrateSearch(c: ClientBase): Promise<number> {
  if (!(await c.query("SELECT 1 FROM vak.events WHERE search IS NULL LIMIT 1")).rowCount) return 0;
  await c.query("ALTER TABLE vak.events DISABLE TRIGGER events_no_change");
  let n = 0;
  for (let after: [string, string] = ["", "0"]; ; ) {
    const rows = (await c.query<{ chain: string; seq: string; payload: string }>(
      `SELECT chain, seq, payload FROM vak.events WHERE (chain, seq) > ($1, $2) AND search IS NULL ORDER BY chain, seq LIMIT 2000`, after,
    )).rows;
    if (!rows.length) break;
    await c.query("UPDATE vak.events e SET search = x.t::pg_catalog.tsvector FROM unnest($1::text[], $2::int8[], $3::text[]) AS x(c, s, t) WHERE e.chain = x.c AND e.seq = x.s", [
      rows.map((r) => r.chain), rows.map((r) => r.seq), rows.map((r) => searchTerms(r.payload)),
    ]);
    n += rows.length;
    after = [rows[rows.length - 1]!.chain, rows[rows.length - 1]!.seq];
  }
  await c.query("ALTER TABLE vak.events ENABLE TRIGGER events_no_change");
  return n;
}
