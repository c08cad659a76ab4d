import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Journal } from "../../src/journal/journal.js";

describe("journal", () => {
  let dir: string;
  let path: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "vak-journal-"));
    path = join(dir, "state", "journal.db");
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** A journal with two interleaved sessions and some events. */
  async function populated(): Promise<Journal> {
    const j = Journal.open({ path });
    const a = j.startSession({ kind: "exec", title: "one" });
    const b = j.startSession({ kind: "exec", title: "two" });
    await Promise.all([
      a.append("decision", { component: "exec" }, 1, { op: "openat", allowed: false, reason: "protected path .envrc", path: "/ws/.envrc" }),
      b.append("egress", { component: "web" }, 1, { method: "GET", asked: "http://x.test/", decision: "denied", reason: "no grant" }),
      a.append("worker.exited", { component: "exec" }, 1, { code: 0 }),
    ]);
    a.end("ok");
    b.end("ok");
    return j;
  }

  it("records sessions and events in order, and verifies", async () => {
    const j = await populated();
    const [one] = j.sessions();
    expect(one).toMatchObject({ title: "one", events: 4, outcome: "ok" });
    expect(j.events(one!.id).map((e) => e.kind)).toEqual(["session.started", "decision", "worker.exited", "session.ended"]);
    expect(j.verify()).toMatchObject({ ok: true, events: 7 });
    j.close();
  });

  it("finds events by full-text search over payloads", async () => {
    const j = await populated();
    const hits = j.search("envrc");
    expect(hits).toHaveLength(1);
    expect(hits[0]!.payload).toMatchObject({ path: "/ws/.envrc" });
    j.close();
  });

  it("refuses UPDATE and DELETE through SQL", async () => {
    (await populated()).close();
    const raw = new Database(path);
    expect(() => raw.prepare("UPDATE events SET payload = '{}' WHERE seq = 2").run()).toThrow(/append-only/);
    expect(() => raw.prepare("DELETE FROM events WHERE seq = 2").run()).toThrow(/append-only/);
    raw.close();
  });

  /** Opens the file behind the journal's back, with its guards removed, as an attacker would. */
  function tamper(sql: (db: Database.Database) => void): void {
    const raw = new Database(path);
    raw.pragma("foreign_keys = OFF");
    raw.exec("DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete;");
    sql(raw);
    raw.close();
  }

  it("a changed byte in any stored event breaks verification at that event", async () => {
    (await populated()).close();
    for (const field of ["payload", "time", "kind", "actor", "session"]) {
      rmSync(dir, { recursive: true, force: true });
      (await populated()).close();
      tamper((db) => {
        const row = db.prepare(`SELECT ${field} AS v FROM events WHERE seq = 4`).get() as { v: string };
        const v = row.v;
        const changed = v.slice(0, -2) + String.fromCharCode(v.charCodeAt(v.length - 2) ^ 1) + v.slice(-1);
        db.prepare(`UPDATE events SET ${field} = ? WHERE seq = 4`).run(changed);
      });
      const j = Journal.open({ path });
      const v = j.verify();
      expect(v.ok, field).toBe(false);
      if (!v.ok) {
        expect(v.seq).toBe(4);
        expect(v.problem).toContain("event 4");
      }
      j.close();
    }
  });

  it("a deleted row breaks verification and is named", async () => {
    (await populated()).close();
    tamper((db) => db.prepare("DELETE FROM events WHERE seq = 5").run());
    const j = Journal.open({ path });
    const v = j.verify();
    expect(v).toMatchObject({ ok: false, seq: 6 });
    if (!v.ok) expect(v.problem).toContain("events 5 to 5 are missing");
    j.close();
  });

  it("removing the last events is detected too", async () => {
    (await populated()).close();
    tamper((db) => db.prepare("DELETE FROM events WHERE seq >= 7").run());
    const j = Journal.open({ path });
    const v = j.verify();
    expect(v.ok).toBe(false);
    if (!v.ok) expect(v.problem).toContain("events at the end were removed");
    j.close();
  });

  it("reordered rows break verification", async () => {
    (await populated()).close();
    tamper((db) => {
      db.exec("UPDATE events SET seq = 1000 WHERE seq = 3; UPDATE events SET seq = 3 WHERE seq = 4; UPDATE events SET seq = 4 WHERE seq = 1000;");
    });
    const j = Journal.open({ path });
    const v = j.verify();
    expect(v).toMatchObject({ ok: false, seq: 3 });
    j.close();
  });

  it("prune removes only old events, records itself, and the journal still verifies", async () => {
    const j = await populated();
    const cut = new Date(Date.now() + 1000);
    await new Promise((r) => setTimeout(r, 5));
    const r = j.prune(cut);
    expect(r.events).toBe(7);
    const kinds = j.sessions().map((s) => s.kind);
    expect(kinds).toEqual(["journal"]);
    expect(j.search("pruned").length + j.events(j.sessions()[0]!.id).filter((e) => e.kind === "journal.pruned").length).toBeGreaterThan(0);
    expect(j.verify()).toMatchObject({ ok: true });
    j.close();
  });

  it("secret shapes are redacted before they are written", async () => {
    const j = Journal.open({ path });
    const s = j.startSession({ kind: "exec", title: "t" });
    s.appendNow("tool.result", { component: "exec" }, 1, { op: "read", ok: true, text: "key sk-abcdefghijklmnopqrstuvwxyz0123 and Bearer abcdefghijklmnop" });
    j.close();
    const raw = new Database(path);
    const all = (raw.prepare("SELECT payload FROM events").all() as { payload: string }[]).map((r) => r.payload).join("\n");
    raw.close();
    expect(all).not.toContain("sk-abcdefghijklmnopqrstuvwxyz0123");
    expect(all).not.toContain("abcdefghijklmnop");
    expect(all).toContain("[REDACTED]");
  });
});
