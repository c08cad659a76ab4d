import { existsSync } from "node:fs";
import Database from "better-sqlite3";
import { VakError } from "../policy/errors.js";
import type { PreparedEvent } from "./commit-queue.js";
import type { PgJournal } from "./pg-journal.js";
import { verifySqlite } from "./sqlite-chain.js";
import type { Row } from "./sqlite-schema.js";

/**
 * `vak journal migrate --to postgres://…`: copies a SQLite journal into
 * PostgreSQL. SQLite's one chain cannot be carried over as it is (PostgreSQL
 * keeps one chain per session), so the copy is proved instead: the SQLite
 * chain must verify before anything is copied; each session goes in with its
 * events' stored text exactly as SQLite holds it (time, kind, actor, payload,
 * numbering in the session), chained anew; the PostgreSQL journal must verify
 * afterwards, and every copied event is read back and compared, field by field,
 * with its SQLite original. A journal.migrated event records where the copy
 * came from and the SQLite head it verified to. A session already in the
 * target (a migration run again) is not copied twice, but still compared.
 */
export interface MigrateResult {
  sessions: number;
  copied: number;
  events: number;
  sqliteHead: string;
  pgHead: string;
}

export async function migrateSqlite(path: string, to: PgJournal): Promise<MigrateResult> {
  if (!existsSync(path)) throw new VakError("bad-input", `there is no SQLite journal at ${path}`);
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const v = db.transaction(() => verifySqlite(db))();
    if (!v.ok) throw new VakError("journal", `the SQLite journal at ${path} does not verify (event ${v.seq}: ${v.problem}); nothing was copied`);
    const sessions = db.prepare("SELECT id, kind, started, title, workspace FROM sessions ORDER BY started, id").all() as { id: string; kind: string; started: string; title: string; workspace: string | null }[];
    const rowsOf = db.prepare("SELECT * FROM events WHERE session = ? ORDER BY seq");
    let copied = 0;
    let events = 0;
    for (const s of sessions) {
      const rows = rowsOf.all(s.id) as Row[];
      if (!rows.length) continue;
      const prepared = rows.map((r): PreparedEvent => ({ session: s.id, session_seq: r.session_seq, time: r.time, kind: r.kind, actor: r.actor, generation: r.generation, payload: r.payload }));
      const batches = function* () {
        for (let i = 0; i < prepared.length; i += 5000) yield prepared.slice(i, i + 5000);
      };
      if (await to.takeRun(s.id, { kind: s.kind, started: s.started, title: s.title, workspace: s.workspace }, batches())) copied += 1;
      const back = await to.storedRows(s.id);
      const same = back.length === rows.length && back.every((b, i) => {
        const r = rows[i]!;
        return Number(b.session_seq) === r.session_seq && b.time === r.time && b.kind === r.kind && b.actor === r.actor && b.generation === r.generation && b.payload === r.payload;
      });
      if (!same) throw new VakError("journal", `session ${s.id} in ${to.location} differs from the SQLite original (it was there before this migration, with other events); the migration stopped`);
      events += rows.length;
    }
    const record = to.startSession({ kind: "journal", title: "journal migration" });
    await record.append("journal.migrated", { component: "host" }, 0, { from: path, events, sessions: sessions.length, copied, head: v.head });
    await record.end("ok");
    const after = await to.verify();
    if (!after.ok) throw new VakError("journal", `the journal at ${to.location} does not verify after the copy (${after.problem})`);
    return { sessions: sessions.length, copied, events, sqliteHead: v.head, pgHead: after.head };
  } finally {
    db.close();
  }
}
