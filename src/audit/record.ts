import { existsSync, statfsSync } from "node:fs";
import { dirname } from "node:path";
import type { Journal } from "../journal/journal.js";
import { openJournal } from "../journal/open.js";
import { pendingSpools } from "../journal/spool.js";
import type { AuditContext } from "./context.js";
import type { Check } from "./finding.js";

/**
 * The record: the journal's hash chain verifies end to end, nothing waits in
 * the spool, what is kept matches the retention the user configured, and the
 * disk has room for what comes next (a journal that cannot commit stops every
 * session: fail closed, but better said before).
 */
const GiB = 1024 ** 3;

/** The journal audit reads and --fix records in: the config's PostgreSQL one ([journal] url) unless VAK_JOURNAL names a file, else the SQLite file. */
export function openAuditJournal(ctx: AuditContext): Promise<Journal> {
  if (postgres(ctx)) return openJournal({ config: ctx.config, env: ctx.env, ingest: false });
  return openJournal({ path: ctx.journalPath, ingest: false });
}

const postgres = (ctx: AuditContext) => Boolean(ctx.config?.journal.url && !ctx.env.VAK_JOURNAL);

export async function recordChecks(ctx: AuditContext, now: Date = new Date()): Promise<Check[]> {
  const out: Check[] = [];
  if (postgres(ctx) || existsSync(ctx.journalPath)) {
    let j: Journal | undefined;
    try {
      j = await openAuditJournal(ctx);
      const v = await j.verify();
      if (!v.ok)
        out.push({ id: "record.chain-broken", severity: "critical", path: ctx.journalPath, fixable: false, title: "the journal's hash chain does not verify",
          detail: `at event ${v.seq}${v.session ? ` (session ${v.session}${v.sessionSeq ? `, #${v.sessionSeq}` : ""})` : ""}: ${v.problem}; the record was changed outside Vak`, fix: "keep a copy for investigation (vak journal verify shows the break); nothing rewrites a chain" });
      const days = ctx.config?.journal.retention_days;
      if (days !== undefined) {
        const oldest = (await j.sessions()).reduce<string | undefined>((m, s) => (m === undefined || s.started < m ? s.started : m), undefined);
        if (oldest !== undefined && now.getTime() - Date.parse(oldest) > (days + 1) * 86_400_000)
          out.push({ id: "record.retention", severity: "warn", path: ctx.journalPath, fixable: false, title: "the journal keeps more than its configured retention",
            detail: `journal.retention_days = ${days}, and the oldest session started ${oldest}`, fix: "run: vak journal prune (it records the prune in the chain)" });
      }
    } catch (e) {
      out.push({ id: "record.unreadable", severity: "critical", path: ctx.journalPath, fixable: false, title: "the journal cannot be opened", detail: (e as Error).message, fix: "see the message; vak journal verify says more" });
    } finally {
      await j?.close().catch(() => undefined);
    }
  }
  const backlog = pendingSpools(ctx.spoolDir);
  if (backlog.length)
    out.push({ id: "record.spool-backlog", severity: "warn", path: ctx.spoolDir, fixable: false, title: "events wait in the spool, not yet in the journal",
      detail: `${backlog.length} spool file${backlog.length > 1 ? "s" : ""} of finished or dead sessions in ${ctx.spoolDir}; until ingested they are outside the hash chain`, fix: "run: vak journal list (opening the journal ingests them)" });
  for (let d = dirname(ctx.journalPath); ; d = dirname(d)) {
    if (existsSync(d)) {
      try {
        const s = statfsSync(d);
        const free = s.bavail * s.bsize;
        if (free < GiB)
          out.push({ id: "record.disk-space", severity: free < GiB / 4 ? "critical" : "warn", path: d, fixable: false, title: "little disk space is left for the journal",
            detail: `${(free / 1024 ** 2).toFixed(0)} MiB free on the file system of ${d}; when a commit fails, sessions stop`, fix: "free space, or prune the journal (vak journal prune)" });
      } catch {
        // statfs unsupported here: nothing to say
      }
      break;
    }
    if (d === "/") break;
  }
  return out;
}
