import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteJournal } from "../../src/journal/sqlite-journal.js";

// SQLite's commits go to a writer thread once a journal knows where the chain
// ends (src/journal/sqlite-writer.ts). Another connection writing in between
// (another host process on the same file, here a second journal in this one)
// must never be chained over: the thread writes only if the chain still ends
// where this journal left it, and otherwise the batch is chained again from
// the end read under the write lock.
describe("SQLite's writer thread and other writers on the same file", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "vak-sqlite-writer-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("two journals on one file, committing in turn and at once, fork nothing and lose nothing", async () => {
    const path = join(dir, "journal.db");
    const a = await SqliteJournal.open({ path, ingest: false });
    const b = await SqliteJournal.open({ path, ingest: false });
    const sa = a.startSession({ kind: "exec", title: "a" });
    const sb = b.startSession({ kind: "exec", title: "b" });
    await Promise.all([sa.started, sb.started]);
    const acked: [string, number][] = [];
    for (let round = 0; round < 20; round++) {
      // In turn: each journal's remembered end is stale after the other's commit.
      await sa.append("tool.result", { component: "agent" }, 1, { op: "read", ok: true, n: round }).then((e) => acked.push([e.session, e.sessionSeq]));
      await sb.append("tool.result", { component: "agent" }, 1, { op: "read", ok: true, n: round }).then((e) => acked.push([e.session, e.sessionSeq]));
      // At once: both threads race for the write lock.
      await Promise.all([
        ...Array.from({ length: 50 }, (_, i) => sa.append("tool.result", { component: "agent" }, 1, { op: "read", ok: true, n: round, i }).then((e) => acked.push([e.session, e.sessionSeq]))),
        ...Array.from({ length: 50 }, (_, i) => sb.append("tool.result", { component: "agent" }, 1, { op: "read", ok: true, n: round, i }).then((e) => acked.push([e.session, e.sessionSeq]))),
      ]);
    }
    await Promise.all([sa.end("ok"), sb.end("ok")]);
    await Promise.all([a.close(), b.close()]);

    const j = await SqliteJournal.open({ path, ingest: false });
    try {
      expect(await j.verify()).toMatchObject({ ok: true, events: 2 * (1 + 20 * 51 + 1) });
      for (const s of [sa, sb]) {
        const seqs = (await j.events(s.id)).map((e) => e.sessionSeq);
        expect(seqs).toEqual(Array.from({ length: 1 + 20 * 51 + 1 }, (_, i) => i + 1));
      }
      expect(acked).toHaveLength(2 * 20 * 51);
    } finally {
      await j.close();
    }
  });
});
