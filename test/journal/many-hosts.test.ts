import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS } from "../support/journal-backends.js";
import { testDatabase } from "../support/pg.js";

// Many hosts, one record: Vak host processes writing to one journal at once,
// and killed with kill -9 wherever they happen to be (mid-commit, most of the
// time: a writer always has a commit in flight). Real processes, a real
// PostgreSQL server, a real SQLite file.
const WRITER = fileURLToPath(new URL("../support/journal-writer.mjs", import.meta.url));

interface Writer {
  child: ChildProcess;
  /** Every acknowledged event: session → [sessionSeq, n] in the order they were acknowledged. */
  acked: Map<string, [number, number][]>;
  count(): number;
  closed: Promise<void>;
}

function writer(target: string, name: string, sessions: number, limit = 0): Writer {
  const child = spawn(process.execPath, [WRITER, target, name, String(sessions), String(limit)], { stdio: ["ignore", "pipe", "pipe"] });
  const acked = new Map<string, [number, number][]>();
  let total = 0;
  let buf = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => {
    buf += d.toString();
    const lines = buf.split("\n");
    buf = lines.pop()!;
    for (const l of lines) {
      const [word, session, seq, n] = l.split(" ");
      if (word !== "acked") continue;
      const list = acked.get(session!) ?? [];
      list.push([Number(seq), Number(n)]);
      acked.set(session!, list);
      total += 1;
    }
  });
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const closed = new Promise<void>((resolve) => child.on("close", () => resolve()));
  void closed.then(() => {
    if (err.trim() && !child.killed) process.stderr.write(`writer ${name}: ${err}\n`);
  });
  return { child, acked, count: () => total, closed };
}

const until = async (cond: () => boolean, ms = 30_000) => {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
  if (!cond()) throw new Error("timed out");
};

describe.each(BACKENDS.map((b) => [b().name, b] as const))("many hosts, one journal (%s)", (name, make) => {
  const backend = make();
  let target = "";
  let drop: (() => Promise<void>) | undefined;
  beforeEach(async () => {
    await backend.setup();
    if (name === "postgres") {
      // The backend's own database, reached as its login role: hosts are processes here, not this test.
      const db = await testDatabase();
      target = db.writerUrl;
      drop = db.drop;
    } else target = join(backend.state(), "vak", "journal.db");
    // Create the journal before the writers race to.
    await (await (await import("../../src/journal/open.js")).openJournal(name === "postgres" ? { url: target, ingest: false } : { path: target, ingest: false })).close();
  });
  afterEach(async () => {
    await drop?.();
    drop = undefined;
    await backend.teardown();
  });

  /** Every acknowledged event is in the journal, in each session in the order it was acknowledged, and the chain verifies. */
  async function check(writers: Writer[]): Promise<number> {
    const { openJournal } = await import("../../src/journal/open.js");
    const j = await openJournal(name === "postgres" ? { url: target, ingest: false } : { path: target, ingest: false });
    try {
      const v = await j.verify();
      expect(v).toMatchObject({ ok: true });
      let acked = 0;
      for (const w of writers)
        for (const [session, list] of w.acked) {
          const stored = new Map((await j.events(session)).map((e) => [e.sessionSeq, (e.payload as { n?: number }).n]));
          for (const [seq, n] of list) expect(stored.get(seq), `${session} #${seq}`).toBe(n);
          // Nothing reordered: numbering in the session follows the order of acknowledgement.
          const seqs = list.map(([seq]) => seq);
          expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
          acked += list.length;
        }
      return acked;
    } finally {
      await j.close();
    }
  }

  it("two host processes writing at once lose and reorder nothing", async () => {
    const ws = [writer(target, "host-a", 3, 3000), writer(target, "host-b", 3, 3000)];
    await Promise.all(ws.map((w) => w.closed));
    expect(ws.map((w) => w.child.exitCode)).toEqual([0, 0]);
    expect(await check(ws)).toBe(6000);
    const { openJournal } = await import("../../src/journal/open.js");
    const j = await openJournal(name === "postgres" ? { url: target, ingest: false } : { path: target, ingest: false });
    const sessions = await j.sessions();
    await j.close();
    expect(sessions.filter((s) => s.outcome === "ok").map((s) => s.events)).toEqual([1002, 1002, 1002, 1002, 1002, 1002]);
  });

  it("hosts killed with kill -9 at random points, again and again, leave a journal that verifies and holds every acknowledged event", async () => {
    const all: Writer[] = [];
    for (let round = 0; round < 6; round++) {
      const ws = [writer(target, `a${round}`, 2), writer(target, `b${round}`, 2)];
      all.push(...ws);
      await until(() => ws.every((w) => w.count() > 0));
      await new Promise((r) => setTimeout(r, 20 + Math.floor(Math.random() * 400)));
      // One or both, at different moments: a commit of one host is in flight while the other dies.
      ws[0]!.child.kill("SIGKILL");
      if (Math.random() < 0.7) await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 50)));
      ws[1]!.child.kill("SIGKILL");
      await Promise.all(ws.map((w) => w.closed));
      expect(await check(all)).toBeGreaterThan(0);
    }
    // And the journal goes on: a new host writes after them all.
    const after = writer(target, "after", 1, 500);
    await after.closed;
    expect(after.child.exitCode).toBe(0);
    await check([...all, after]);
  });
});
