import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { Journal } from "../../src/journal/journal.js";
import { openJournal } from "../../src/journal/open.js";
import type { Redactor } from "../../src/secrets/redact.js";
import { type TestDatabase, testDatabase } from "./pg.js";

/**
 * The journal's two backends behind one harness, so that the journal's tests
 * run unchanged against each: a fresh journal, and, for the tampering tests,
 * the SQL an attacker with the file (SQLite) or the owner's connection
 * (PostgreSQL) would run, guards removed. Rows are named backend-neutrally, by
 * session and number within it.
 */
export type Field = "payload" | "time" | "kind" | "actor" | "generation";

export interface Backend {
  readonly name: "sqlite" | "postgres";
  /** A fresh, empty journal (and a state directory for its spool). */
  setup(): Promise<void>;
  teardown(): Promise<void>;
  open(opts?: { ingest?: boolean; redactor?: Redactor }): Promise<Journal>;
  /** Where `vak` finds this journal: the environment for a `vak` process (state, config). */
  env(): Record<string, string>;
  /** The state directory (the spool is below it). */
  state(): string;
  change(session: string, sessionSeq: number, field: Field, f: (v: string) => string): Promise<void>;
  remove(session: string, sessionSeqs: number[]): Promise<void>;
  swap(session: string, a: number, b: number): Promise<void>;
  /** Tries UPDATE, DELETE and TRUNCATE through SQL with the tables' owner (guards in place); the errors, in that order. */
  refusals(): Promise<string[]>;
  allPayloads(): Promise<string>;
  /** From now on, a commit holding an event whose payload contains text fails (as a full disk would). */
  failCommitsWith(text: string): Promise<void>;
}

const errorOf = async (f: () => unknown): Promise<string> => {
  try {
    await f();
    return "no error";
  } catch (e) {
    return (e as Error).message;
  }
};

export function sqliteBackend(): Backend {
  let dir = "";
  const path = () => join(dir, "vak", "journal.db");
  const raw = <T>(f: (db: Database.Database) => T): T => {
    const db = new Database(path());
    try {
      db.pragma("foreign_keys = OFF");
      db.exec("DROP TRIGGER IF EXISTS events_no_update; DROP TRIGGER IF EXISTS events_no_delete;");
      return f(db);
    } finally {
      db.close();
    }
  };
  const seqOf = (db: Database.Database, session: string, n: number) => (db.prepare("SELECT seq FROM events WHERE session = ? AND session_seq = ?").get(session, n) as { seq: number }).seq;
  return {
    name: "sqlite",
    async setup() {
      dir = mkdtempSync(join(tmpdir(), "vak-journal-sqlite-"));
    },
    async teardown() {
      rmSync(dir, { recursive: true, force: true });
    },
    open: (opts = {}) => openJournal({ path: path(), ...opts }),
    env: () => ({ XDG_STATE_HOME: dir, XDG_CONFIG_HOME: join(dir, "config") }),
    state: () => dir,
    async change(session, n, field, f) {
      raw((db) => {
        const v = String((db.prepare(`SELECT ${field} AS v FROM events WHERE session = ? AND session_seq = ?`).get(session, n) as { v: unknown }).v);
        db.prepare(`UPDATE events SET ${field} = ? WHERE session = ? AND session_seq = ?`).run(field === "generation" ? Number(f(v)) : f(v), session, n);
      });
    },
    async remove(session, ns) {
      raw((db) => {
        for (const n of ns) db.prepare("DELETE FROM events WHERE session = ? AND session_seq = ?").run(session, n);
      });
    },
    async swap(session, a, b) {
      raw((db) => {
        const [sa, sb] = [seqOf(db, session, a), seqOf(db, session, b)];
        db.prepare("UPDATE events SET seq = -1 WHERE seq = ?").run(sa);
        db.prepare("UPDATE events SET seq = ? WHERE seq = ?").run(sa, sb);
        db.prepare("UPDATE events SET seq = ? WHERE seq = -1").run(sb);
      });
    },
    async refusals() {
      const db = new Database(path());
      try {
        return [
          await errorOf(() => db.prepare("UPDATE events SET payload = '{}' WHERE seq = 2").run()),
          await errorOf(() => db.prepare("DELETE FROM events WHERE seq = 2").run()),
          // SQLite has no TRUNCATE: an unqualified DELETE is its truncate, and a row trigger sees it.
          await errorOf(() => db.prepare("DELETE FROM events").run()),
        ];
      } finally {
        db.close();
      }
    },
    async allPayloads() {
      const db = new Database(path(), { readonly: true });
      try {
        return (db.prepare("SELECT payload FROM events").all() as { payload: string }[]).map((r) => r.payload).join("\n");
      } finally {
        db.close();
      }
    },
    async failCommitsWith(text) {
      const db = new Database(path());
      try {
        db.prepare(`CREATE TRIGGER fail_commit BEFORE INSERT ON events WHEN instr(NEW.payload, ?) > 0 BEGIN SELECT RAISE(ABORT, 'the disk is full'); END`.replace("?", `'${text.replace(/'/g, "''")}'`)).run();
      } finally {
        db.close();
      }
    },
  };
}

export function postgresBackend(): Backend {
  let db: TestDatabase | undefined;
  let dir = "";
  const it = () => {
    if (!db) throw new Error("the PostgreSQL backend was not set up");
    return db;
  };
  /** As the owner, with the tables' triggers off for this one statement list. */
  const tamper = async (sql: string, params: unknown[] = []) => {
    const d = it();
    await d.admin("ALTER TABLE vak.events DISABLE TRIGGER USER");
    try {
      await d.admin(sql, params);
    } finally {
      await d.admin("ALTER TABLE vak.events ENABLE TRIGGER USER");
    }
  };
  return {
    name: "postgres",
    async setup() {
      db = await testDatabase();
      dir = mkdtempSync(join(tmpdir(), "vak-journal-pg-"));
      mkdirSync(join(dir, "config", "vak"), { recursive: true });
      writeFileSync(join(dir, "config", "vak", "config.toml"), `[journal]\nurl = "${db.writerUrl}"\nadmin_url = "${db.adminUrl}"\n`);
    },
    async teardown() {
      await db?.drop();
      db = undefined;
      rmSync(dir, { recursive: true, force: true });
    },
    open: async (opts = {}) => {
      const { PgJournal } = await import("../../src/journal/pg-journal.js");
      const { pgTarget } = await import("../../src/journal/pg-connect.js");
      return PgJournal.open({
        target: pgTarget({ url: it().writerUrl, what: "test" }), admin: () => pgTarget({ url: it().adminUrl, what: "test" }),
        spoolDir: join(dir, "vak", "spool"), ...opts,
      });
    },
    env: () => ({ XDG_STATE_HOME: dir, XDG_CONFIG_HOME: join(dir, "config") }),
    state: () => dir,
    async change(session, n, field, f) {
      const v = String((await it().admin<{ v: unknown }>(`SELECT ${field} AS v FROM vak.events WHERE chain = $1 AND session_seq = $2`, [session, n]))[0]!.v);
      await tamper(`UPDATE vak.events SET ${field} = $1 WHERE chain = $2 AND session_seq = $3`, [f(v), session, n]);
    },
    async remove(session, ns) {
      await tamper("DELETE FROM vak.events WHERE chain = $1 AND session_seq = ANY($2::int8[])", [session, ns]);
    },
    async swap(session, a, b) {
      const seq = async (n: number) => Number((await it().admin<{ seq: string }>("SELECT seq FROM vak.events WHERE chain = $1 AND session_seq = $2", [session, n]))[0]!.seq);
      const [sa, sb] = [await seq(a), await seq(b)];
      await tamper("UPDATE vak.events SET seq = -1 WHERE chain = $1 AND seq = $2", [session, sa]);
      await tamper("UPDATE vak.events SET seq = $2 WHERE chain = $1 AND seq = $3", [session, sa, sb]);
      await tamper("UPDATE vak.events SET seq = $2 WHERE chain = $1 AND seq = -1", [session, sb]);
    },
    async refusals() {
      const d = it();
      return [
        await errorOf(() => d.admin("UPDATE vak.events SET payload = '{}'")),
        await errorOf(() => d.admin("DELETE FROM vak.events")),
        await errorOf(() => d.admin("TRUNCATE vak.events CASCADE")),
      ];
    },
    async allPayloads() {
      return (await it().admin<{ payload: string }>("SELECT payload FROM vak.events")).map((r) => r.payload).join("\n");
    },
    async failCommitsWith(text) {
      await it().admin(`CREATE FUNCTION vak.fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF strpos(NEW.payload, ${"'" + text.replace(/'/g, "''") + "'"}) > 0 THEN RAISE EXCEPTION 'could not extend file: No space left on device'; END IF; RETURN NEW; END $$`);
      await it().admin("CREATE TRIGGER fail_commit BEFORE INSERT ON vak.events FOR EACH ROW EXECUTE FUNCTION vak.fail_commit()");
    },
  };
}

export const BACKENDS = [sqliteBackend, postgresBackend];
