import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { pgTarget } from "../../src/journal/pg-connect.js";
import { PgJournal } from "../../src/journal/pg-journal.js";
import { SessionWriter } from "../../src/journal/session-writer.js";
import { type TestDatabase, testDatabase } from "../support/pg.js";

// PostgreSQL only: what one chain per session needs that SQLite's single chain
// does not (the shared suite is journal.test.ts).
describe("PostgreSQL chains", () => {
  let db: TestDatabase;
  beforeEach(async () => {
    db = await testDatabase();
  });
  afterEach(() => db.drop());
  const open = () => PgJournal.open({ target: pgTarget({ url: db.writerUrl, what: "test" }), ingest: false });

  it("two hosts committing to one chain at once are serialised by its advisory lock: no fork, no lost commit", async () => {
    const a = await open();
    const b = await open();
    const w = a.startSession({ kind: "test", title: "shared chain" });
    await w.started;
    // Another host holds a writer for the same session (as a host taking over a session would).
    const w2 = new SessionWriter(b, w.id, 1000);
    const all = [];
    for (let i = 0; i < 40; i++) {
      all.push(w.append("tool.result", { component: "a" }, 1, { op: "a", ok: true, i }));
      all.push(w2.append("tool.result", { component: "b" }, 1, { op: "b", ok: true, i }));
      if (i % 4 === 0) await new Promise((r) => setImmediate(r));
    }
    const stored = await Promise.all(all);
    expect(new Set(stored.map((e) => e.seq)).size).toBe(80);
    expect(await a.verify()).toMatchObject({ ok: true, events: 81 });
    await a.close();
    await b.close();
  });

  it("the chain of sessions catches a whole session removed with its events and heads", async () => {
    const j = await open();
    const ids = [];
    for (const t of ["one", "two", "three"]) {
      const s = j.startSession({ kind: "test", title: t });
      await s.end("ok");
      ids.push(s.id);
    }
    expect(await j.verify()).toMatchObject({ ok: true });
    for (const t of ["events", "heads", "sessions"]) await db.admin(`ALTER TABLE vak.${t} DISABLE TRIGGER USER`);
    await db.admin("DELETE FROM vak.events WHERE chain = $1", [ids[1]]);
    await db.admin("DELETE FROM vak.heads WHERE chain = $1", [ids[1]]);
    await db.admin("DELETE FROM vak.sessions WHERE id = $1", [ids[1]]);
    for (const t of ["events", "heads", "sessions"]) await db.admin(`ALTER TABLE vak.${t} ENABLE TRIGGER USER`);
    const v = await j.verify();
    expect(v.ok).toBe(false);
    if (!v.ok) expect(v.problem).toMatch(/on the chain of sessions are missing \(removed\)|does not follow from the session before it/);
    await j.close();
  });

  it("an anchor that no journal.pruned event records is caught (a prefix removed behind a forged anchor)", async () => {
    const j = await open();
    const s = j.startSession({ kind: "test", title: "anchored" });
    for (let i = 0; i < 3; i++) await s.append("tool.result", { component: "x" }, 1, { op: "x", ok: true, i });
    const second = (await j.events(s.id))[1]!;
    await db.admin("ALTER TABLE vak.events DISABLE TRIGGER USER");
    await db.admin("DELETE FROM vak.events WHERE chain = $1 AND seq <= 2", [s.id]);
    await db.admin("ALTER TABLE vak.events ENABLE TRIGGER USER");
    await db.admin("INSERT INTO vak.anchors (chain, seq, hash, prune, pruned_at) VALUES ($1, 2, $2, 'forged', 'now')", [s.id, second.hash]);
    const v = await j.verify();
    expect(v.ok).toBe(false);
    if (!v.ok) expect(v.problem).toMatch(/no journal.pruned event records that prune/);
    await j.close();
  });
});
