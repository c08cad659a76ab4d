import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openJournal } from "../../src/journal/open.js";
import { type TestDatabase, testDatabase } from "../support/pg.js";
import { baseEnv, runVak } from "../support/vak.js";

// vak journal migrate: a SQLite journal copied into PostgreSQL, its chain verified on both sides.
describe("vak journal migrate", () => {
  let db: TestDatabase;
  let dir: string;
  let path: string;
  beforeEach(async () => {
    db = await testDatabase();
    dir = mkdtempSync(join(tmpdir(), "vak-migrate-"));
    path = join(dir, "journal.db");
  });
  afterEach(async () => {
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });
  const migrate = (...args: string[]) => runVak(["journal", "migrate", "--json", "--from", path, "--to", db.writerUrl, ...args], { cwd: "/", env: baseEnv({ XDG_STATE_HOME: dir, XDG_CONFIG_HOME: join(dir, "config") }) });

  async function sqliteJournal(): Promise<string[]> {
    const j = await openJournal({ path, ingest: false });
    const ids: string[] = [];
    for (const t of ["old", "one", "two"]) {
      const s = j.startSession({ kind: "exec", title: `run ${t}` });
      await s.append("decision", { component: "exec" }, 1, { op: "openat", allowed: false, reason: `protected path .envrc (${t})`, path: "/ws/.envrc", odd: "\u0000 \ud800 \u202e" });
      await s.end("ok");
      ids.push(s.id);
      if (t === "old") await j.prune(new Date(Date.now() + 1)); // a journal that has been pruned migrates too
    }
    await j.close();
    return ids;
  }

  it("copies every session with its events' stored text, and both chains verify", async () => {
    const ids = await sqliteJournal();
    const r = await migrate();
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { sessions: number; copied: number; events: number; sqliteHead: string };
    expect(out).toMatchObject({ sessions: 3, copied: 3 });
    const pgj = await openJournal({ url: db.writerUrl, ingest: false });
    const sq = await openJournal({ path, ingest: false });
    try {
      expect(await pgj.verify()).toMatchObject({ ok: true });
      for (const id of ids.slice(1)) {
        const a = (await sq.events(id)).map(({ seq: _s, hash: _h, prevHash: _p, ...e }) => e);
        const b = (await pgj.events(id)).map(({ seq: _s, hash: _h, prevHash: _p, ...e }) => e);
        expect(b).toEqual(a);
      }
      const migrated = (await pgj.sessions()).find((s) => s.title === "journal migration")!;
      expect((await pgj.events(migrated.id)).find((e) => e.kind === "journal.migrated")!.payload).toMatchObject({ from: path, head: out.sqliteHead });
      expect(await pgj.search("envrc")).toHaveLength(2);
    } finally {
      await pgj.close();
      await sq.close();
    }
    // Again: nothing is copied twice, and what is there is compared anew.
    const again = await migrate();
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ copied: 0 });
  });

  it("a SQLite journal that does not verify is refused, and nothing is copied", async () => {
    await sqliteJournal();
    const raw = new Database(path);
    raw.exec("DROP TRIGGER events_no_update");
    raw.prepare("UPDATE events SET payload = replace(payload, 'one', 'ONE')").run();
    raw.close();
    const r = await migrate();
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/does not verify .*nothing was copied/);
    expect(await db.admin("SELECT * FROM vak.sessions")).toEqual([]);
  });
});
