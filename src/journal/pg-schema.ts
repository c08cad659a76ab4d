import { VakError } from "../policy/errors.js";

/**
 * The journal's tables in PostgreSQL, in a schema of their own (vak), as
 * `vak journal init-db` creates them with the database owner's connection.
 *
 * - sessions: one row per session, and together a chain of their own (reg_seq,
 *   prev_hash, hash), serialised by one advisory lock taken only when a session
 *   starts: removing or changing a whole session breaks it.
 * - events: one chain per session (chain = the session's id; seq its place on
 *   the chain; UNIQUE (chain, seq)), the first event following from the
 *   session's own hash. actor and payload are the JSON text that was hashed,
 *   stored as text: the hash is recomputed from these exact characters, never
 *   from a JSONB rendering.
 * - heads: every commit's end on each chain it touched ('' is the chain of
 *   sessions), insert-only: events removed at the end of a chain are missed by
 *   the chain itself, but not by its heads.
 * - anchors: where a pruned chain now starts, each named by a journal.pruned event.
 *
 * events.search holds each payload's words as Vak splits them (pg-search.ts),
 * under a GIN index; verify checks them against the payload. They are not on
 * the chain: a search is a way in, the chain is the proof.
 *
 * Every event's chain must be a session (a statement-level trigger, once per
 * INSERT or COPY, instead of a row-level foreign key).
 *
 * Triggers refuse UPDATE and DELETE (row) and TRUNCATE (statement: row triggers
 * do not fire on TRUNCATE) on every table but meta; DELETE of events is let
 * through only inside `vak journal prune`'s transaction (vak.pruning), which
 * needs the owner anyway, since the writer role holds only SELECT and INSERT.
 *
 * Version 2 (this one) moved search from an index over vak.search_vector(payload),
 * computed by the server on every insert, to the search column; init-db brings a
 * version 1 database up to it (migrateSearch() in pg-admin.ts).
 */
export const PG_SCHEMA_VERSION = 2;

/** The role hosts write as, unless init-db is told otherwise. */
export const DEFAULT_WRITER_ROLE = "vak_writer";

export const ROLE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * The search index's pending list, in kB (PostgreSQL's default is 4096).
 * Autovacuum merges it into the index off the commit path, unless inserts
 * fill it first: then the insert that finds it full merges it inside its
 * commit (2.4 s for 32 MB here). Measured interleaved, 32 MB cost the server
 * 10-11 µs an event against 23-33 for 4 MB and 20-41 for 1 MB.
 */
const GIN_PENDING_KB = 32768;

export const PG_SCHEMA = `
CREATE SCHEMA IF NOT EXISTS vak;
CREATE TABLE IF NOT EXISTS vak.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS vak.sessions (
  id text PRIMARY KEY,
  reg_seq bigint NOT NULL UNIQUE,
  host text NOT NULL,
  kind text NOT NULL,
  started text NOT NULL,
  title text NOT NULL,
  workspace text,
  prev_hash text NOT NULL,
  hash text NOT NULL
);
CREATE TABLE IF NOT EXISTS vak.events (
  chain text NOT NULL,
  seq bigint NOT NULL,
  session_seq bigint NOT NULL,
  time text NOT NULL,
  kind text NOT NULL,
  actor text NOT NULL,
  generation integer NOT NULL,
  payload text NOT NULL,
  prev_hash text NOT NULL,
  hash text NOT NULL,
  search tsvector NOT NULL,
  UNIQUE (chain, seq)
);
-- Version 1 had no search column: added here, filled by init-db (migrateSearch), then made NOT NULL (PG_SCHEMA_END).
ALTER TABLE vak.events ADD COLUMN IF NOT EXISTS search tsvector;
CREATE INDEX IF NOT EXISTS events_time ON vak.events (time);
-- No index of kind: every read by kind is within one session, through (chain, seq); one index fewer per event.
DROP INDEX IF EXISTS vak.events_kind;
CREATE TABLE IF NOT EXISTS vak.heads (chain text NOT NULL, seq bigint NOT NULL, hash text NOT NULL, PRIMARY KEY (chain, seq));
CREATE TABLE IF NOT EXISTS vak.anchors (
  chain text NOT NULL, seq bigint NOT NULL, hash text NOT NULL, prune text NOT NULL, pruned_at text NOT NULL,
  PRIMARY KEY (chain, seq)
);

-- Every event's chain is a session: checked once per INSERT statement over the chains it names (a row-level
-- foreign key locks the session's row once per event, the largest cost of a batch after the search index).
-- Sessions are never deleted (the triggers below), so the check made at insert holds for good.
ALTER TABLE vak.events DROP CONSTRAINT IF EXISTS events_chain_fkey;
CREATE OR REPLACE FUNCTION vak.events_have_sessions() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE orphan text;
BEGIN
  SELECT n.chain INTO orphan FROM (SELECT DISTINCT chain FROM new_events) AS n
    WHERE NOT EXISTS (SELECT 1 FROM vak.sessions AS s WHERE s.id = n.chain) LIMIT 1;
  IF orphan IS NOT NULL THEN
    RAISE EXCEPTION 'event of session % refused: the session is not in the journal', orphan USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS events_have_sessions ON vak.events;
CREATE TRIGGER events_have_sessions AFTER INSERT ON vak.events REFERENCING NEW TABLE AS new_events
  FOR EACH STATEMENT EXECUTE FUNCTION vak.events_have_sessions();

CREATE OR REPLACE FUNCTION vak.refuse_change() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
  IF TG_OP = 'DELETE' AND TG_TABLE_NAME = 'events' AND current_setting('vak.pruning', true) = 'on' THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'the journal is append-only: % on vak.% is refused%', TG_OP, TG_TABLE_NAME,
    CASE WHEN TG_TABLE_NAME = 'events' AND TG_OP = 'DELETE' THEN ' (events are removed only by vak journal prune)' ELSE '' END;
END $$;
DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['sessions', 'events', 'heads', 'anchors'] LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON vak.%I', t || '_no_change', t);
    EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON vak.%I FOR EACH ROW EXECUTE FUNCTION vak.refuse_change()', t || '_no_change', t);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON vak.%I', t || '_no_truncate', t);
    EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON vak.%I FOR EACH STATEMENT EXECUTE FUNCTION vak.refuse_change()', t || '_no_truncate', t);
  END LOOP;
END $$;
`;

/**
 * What init-db runs once every event has its search terms: the column made
 * NOT NULL, its index, and version 1's search index and functions removed.
 */
export const PG_SCHEMA_END = `
ALTER TABLE vak.events ALTER COLUMN search SET NOT NULL;
DROP INDEX IF EXISTS vak.events_search;
DROP FUNCTION IF EXISTS vak.search_vector(text);
DROP FUNCTION IF EXISTS vak.search_words(text);
-- A large pending list: an insert appends its words to it, and autovacuum (not the commit) merges them into the index.
CREATE INDEX IF NOT EXISTS events_terms ON vak.events USING gin (search) WITH (gin_pending_list_limit = ${GIN_PENDING_KB});
ALTER INDEX vak.events_terms SET (gin_pending_list_limit = ${GIN_PENDING_KB});
INSERT INTO vak.meta (key, value) VALUES ('schema', '${PG_SCHEMA_VERSION}') ON CONFLICT (key) DO UPDATE SET value = excluded.value;
`;

/** The writer role's grants: read everything, insert into sessions, events and heads, nothing else. */
export function writerGrants(role: string): string {
  if (!ROLE_NAME.test(role)) throw new VakError("bad-input", `${role}: a role name is lower-case letters, digits and _ (at most 63)`);
  return `
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '${role}') THEN CREATE ROLE ${role} NOLOGIN; END IF;
END $$;
REVOKE ALL ON SCHEMA vak FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA vak FROM PUBLIC, ${role};
REVOKE ALL ON FUNCTION vak.refuse_change() FROM PUBLIC;
REVOKE ALL ON FUNCTION vak.events_have_sessions() FROM PUBLIC;
GRANT USAGE ON SCHEMA vak TO ${role};
GRANT SELECT, INSERT ON vak.sessions, vak.events, vak.heads TO ${role};
GRANT SELECT ON vak.anchors, vak.meta TO ${role};
`;
}

/** Refuses a database whose schema this Vak does not know, or none at all, with what to run. */
export function checkSchemaVersion(found: string | undefined, location: string): void {
  if (found === undefined)
    throw new VakError("journal", `the journal at ${location} has no Vak schema; create it once with the database owner: vak journal init-db --admin-url REF`);
  if (Number(found) < PG_SCHEMA_VERSION)
    throw new VakError("journal", `the journal at ${location} has schema version ${found}; this Vak needs version ${PG_SCHEMA_VERSION}: bring it up to date once with the database owner (every event is kept): vak journal init-db --admin-url REF`);
  if (Number(found) !== PG_SCHEMA_VERSION)
    throw new VakError("journal", `the journal at ${location} has schema version ${found}; this Vak knows version ${PG_SCHEMA_VERSION} (a newer Vak made it: use that one)`);
}
