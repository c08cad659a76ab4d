import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { PgJournal } from "../../src/journal/pg-journal.js";
import { pgTarget } from "../../src/journal/pg-connect.js";
import { scratch, type Scratch } from "../support/fs.js";
import { type TestDatabase, testDatabase } from "../support/pg.js";
import { type Served, serve } from "../support/serve.js";

// Many hosts, one record, one browser: a `vak serve` whose journal is a real
// PostgreSQL lists the sessions another host writes there, and its live feed
// carries that host's events as they are committed (LISTEN/NOTIFY, then read
// back from the chain).
describe("vak serve on a shared PostgreSQL journal", () => {
  let db: TestDatabase;
  let s: Scratch;
  let srv: Served;
  beforeAll(async () => {
    db = await testDatabase();
    s = scratch();
    srv = await serve({ workspace: s.ws, config: `[journal]\nurl = "${db.writerUrl}"\n` });
  });
  afterAll(async () => {
    await srv?.close();
    s?.cleanup();
    await db?.drop();
  });

  const api = async (path: string) => {
    const r = await fetch(`${srv.url}api/${path}`, { headers: { Authorization: `Bearer ${srv.token}` } });
    return (await r.json()) as Record<string, unknown>;
  };

  it("lists another host's session, and its live feed carries that host's events as they are committed", async () => {
    const ws = new WebSocket(`${srv.url.replace(/^http/, "ws")}api/ws`, { headers: { Authorization: `Bearer ${srv.token}` } });
    const seen: { session: string; kind: string; payload: Record<string, unknown> }[] = [];
    ws.on("message", (d) => {
      const m = JSON.parse(String(d)) as { type: string; events?: typeof seen };
      if (m.type === "events") seen.push(...m.events!);
    });
    await new Promise<void>((resolve, reject) => (ws.once("open", () => resolve()), ws.once("error", reject)));
    const other = await PgJournal.open({ target: pgTarget({ url: db.writerUrl, what: "test" }), ingest: false, host: "other-host" });
    try {
      const w = other.startSession({ kind: "exec", title: "a run on another host" });
      await w.append("tool.result", { component: "exec" }, 1, { op: "read", ok: true, marker: "from-the-other-host" });
      const until = async (what: string, cond: () => boolean | Promise<boolean>) => {
        for (const end = Date.now() + 15_000; !(await cond()); await new Promise((r) => setTimeout(r, 50)))
          if (Date.now() > end) throw new Error(`timed out waiting for ${what}; vak serve said: ${srv.stderr()}`);
      };
      await until("the live event", () => seen.some((e) => e.session === w.id && e.payload.marker === "from-the-other-host"));
      const list = (await api("sessions")).sessions as { id: string; title: string; live: boolean }[];
      expect(list.find((x) => x.id === w.id)).toMatchObject({ title: "a run on another host", live: false });
      // Nothing of it twice, and in order.
      const mine = seen.filter((e) => e.session === w.id).map((e) => e.kind);
      expect(mine).toEqual(["session.started", "tool.result"]);
      await w.end("ok");
      await until("the session's end", () => seen.some((e) => e.session === w.id && e.kind === "session.ended"));
      expect(seen.filter((e) => e.session === w.id).map((e) => e.kind)).toEqual(["session.started", "tool.result", "session.ended"]);
      const events = (await api(`sessions/${w.id}/events?limit=2`)).events as { kind: string }[];
      expect(events.map((e) => e.kind)).toEqual(["session.started", "tool.result"]);
      expect((await api("journal/verify")).ok).toBe(true);
    } finally {
      ws.close();
      await other.close();
    }
  });
});
