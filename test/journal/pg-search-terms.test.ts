import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initDb } from "../../src/journal/pg-admin.js";
import { pgTarget } from "../../src/journal/pg-connect.js";
import { PgJournal } from "../../src/journal/pg-journal.js";
import { searchTerms } from "../../src/journal/pg-search.js";
import { type TestDatabase, testDatabase } from "../support/pg.js";

// PostgreSQL's search terms are made in Vak (pg-search.ts) and stored beside each
// event; the server only parses them. These check that they read back exactly as
// written, that verify notices terms that are not the payload's, that COPY cannot
// plant events either, and that a version 1 database is refused until init-db
// brings it up to date, with every event kept and found.
describe("PostgreSQL search terms", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await testDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });
  const open = () => PgJournal.open({ target: pgTarget({ url: db.writerUrl, what: "test" }), ingest: false });

  it("read back from the server exactly as Vak wrote them, for text at PostgreSQL's bounds", async () => {
    const texts = [
      "",
      "only ... punctuation !!!",
      "Ünïcödé ΣΊΣΥΦΟΣ straße 東京タワー 123abc İstanbul",
      `${"word ".repeat(300)}other`, // more positions than a lexeme keeps
      `${"x ".repeat(17000)}late`, // positions past the last one PostgreSQL stores
      `${"a".repeat(2046)} ${"b".repeat(2047)} ${"é".repeat(1023)} ${"è".repeat(1024)}`, // lexemes at and past the byte limit
      "b a c ab aa a\u0301 z Z \u{1F600}x \uFFFDx \uE000x 𝔘𝔫𝔦 ｗｉｄｅ",
    ];
    for (const t of texts) {
      const payload = JSON.stringify({ t });
      const [row] = await db.admin<{ s: string }>("SELECT $1::pg_catalog.tsvector::text AS s", [searchTerms(payload)]);
      expect(row!.s, t.slice(0, 40)).toBe(searchTerms(payload));
    }
  });

  it("verify names an event whose search terms were changed, though its chain is intact", async () => {
    const j = await open();
    const w = j.startSession({ kind: "exec", title: "terms" });
    await w.append("tool.result", { component: "exec" }, 1, { op: "read", ok: true, text: "the secret plan" });
    await w.end("ok");
    expect(await j.verify()).toMatchObject({ ok: true });
    await db.admin("ALTER TABLE vak.events DISABLE TRIGGER events_no_change");
    await db.admin("UPDATE vak.events SET search = ''::tsvector WHERE chain = $1 AND session_seq = 2", [w.id]);
    await db.admin("ALTER TABLE vak.events ENABLE TRIGGER events_no_change");
    const v = await j.verify();
    expect(v).toMatchObject({ ok: false, session: w.id, sessionSeq: 2 });
    expect(v.ok ? "" : v.problem).toMatch(/search terms are not its payload's/);
    expect(await j.search("plan")).toEqual([]);
    await db.admin("ALTER TABLE vak.events DISABLE TRIGGER events_no_change");
    await db.admin("UPDATE vak.events SET search = $2::tsvector WHERE chain = $1 AND session_seq = 2", [w.id, searchTerms(JSON.stringify({ op: "read", ok: true, text: "the secret plan" }))]);
    await db.admin("ALTER TABLE vak.events ENABLE TRIGGER events_no_change");
    expect(await j.verify()).toMatchObject({ ok: true });
    await j.close();
  });

  it("the writer role cannot plant events on a chain that is no session through COPY either", async () => {
    const c = new pg.Client(pgTarget({ url: db.writerUrl, what: "test" }).config);
    await c.connect();
    const { from } = await import("pg-copy-streams");
    const { pipeline } = await import("node:stream/promises");
    const { Readable } = await import("node:stream");
    try {
      const line = ["no-such-session", 1, 1, "t", "message", "{}", 0, "{}", "0".repeat(64), "0".repeat(64), ""].join("\t") + "\n";
      await expect(pipeline(Readable.from([line]), c.query(from("COPY vak.events (chain, seq, session_seq, time, kind, actor, generation, payload, prev_hash, hash, search) FROM STDIN")))).rejects.toThrow(
        /the session is not in the journal/,
      );
    } finally {
      await c.end();
    }
    expect(await db.admin("SELECT 1 FROM vak.events WHERE chain = 'no-such-session'")).toEqual([]);
  });

  it("a version 1 database is refused with the command that brings it up to date, and init-db does so keeping every event", async () => {
    const j = await open();
    const w = j.startSession({ kind: "exec", title: "old" });
    await w.append("tool.result", { component: "exec" }, 1, { op: "read", ok: true, text: "written before the upgrade, zebra" });
    await w.end("ok");
    await j.close();
    // Version 1 as it was: no search column, the server's own search index over the payload.
    await db.admin(`
      DROP INDEX vak.events_terms;
      ALTER TABLE vak.events DISABLE TRIGGER events_no_change;
      ALTER TABLE vak.events ALTER COLUMN search DROP NOT NULL;
      UPDATE vak.events SET search = NULL;
      ALTER TABLE vak.events ENABLE TRIGGER events_no_change;
      CREATE FUNCTION vak.search_words(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT pg_catalog.regexp_replace(t, '[^[:alnum:]]+', ' ', 'g') $$;
      CREATE FUNCTION vak.search_vector(t text) RETURNS tsvector LANGUAGE sql IMMUTABLE AS $$ SELECT pg_catalog.to_tsvector('pg_catalog.simple'::pg_catalog.regconfig, vak.search_words(t)) $$;
      CREATE INDEX events_search ON vak.events USING gin (vak.search_vector(payload));
      UPDATE vak.meta SET value = '1' WHERE key = 'schema';`);
    await expect(open()).rejects.toThrow(/schema version 1; this Vak needs version 2: .*vak journal init-db --admin-url REF/);
    const r = await initDb(pgTarget({ url: db.adminUrl, what: "test" }), { role: `vak_writer_${db.name.slice("vak_t_".length)}`, grantTo: [db.login] });
    expect(r).toMatchObject({ schemaVersion: 2 });
    expect(r.migrated).toBeGreaterThanOrEqual(3);
    expect(await db.admin("SELECT 1 FROM pg_catalog.pg_proc WHERE proname IN ('search_words', 'search_vector')")).toEqual([]);
    const again = await open();
    expect(await again.verify()).toMatchObject({ ok: true });
    expect((await again.search("zebra")).map((e) => e.session)).toEqual([w.id]);
    // The guard is back: UPDATE is refused again.
    await expect(db.admin("UPDATE vak.events SET payload = '{}'")).rejects.toThrow(/append-only/);
    await again.close();
    // Run again, init-db has nothing to fill in.
    expect((await initDb(pgTarget({ url: db.adminUrl, what: "test" }), { role: `vak_writer_${db.name.slice("vak_t_".length)}`, grantTo: [db.login] })).migrated).toBe(0);
  });
});
