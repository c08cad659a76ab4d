import pg from "pg";
import { VakError } from "../policy/errors.js";
import { Redactor } from "../secrets/redact.js";
import type { PgTarget } from "./pg-connect.js";
import { pgError } from "./pg-journal.js";
import { DEFAULT_WRITER_ROLE, PG_SCHEMA, PG_SCHEMA_VERSION, ROLE_NAME, writerGrants } from "./pg-schema.js";

/**
 * `vak journal init-db`: with the database owner's connection, creates (or
 * brings up to date) the vak schema, its tables, triggers and search index,
 * and the writer role hosts connect as: SELECT and INSERT, nothing else. Run
 * again, it changes nothing but the grants and triggers, which it restores.
 */
export interface InitDbResult {
  location: string;
  role: string;
  grantedTo: string[];
  schemaVersion: number;
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
    await c.query(PG_SCHEMA);
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
    return { location: admin.location, role, grantedTo: grantTo, schemaVersion: PG_SCHEMA_VERSION, warnings };
  } catch (e) {
    await c.query("ROLLBACK").catch(() => undefined);
    if (e instanceof VakError) throw e;
    throw pgError(e, admin.location, redactor, "set up");
  } finally {
    await c.end().catch(() => undefined);
  }
}
