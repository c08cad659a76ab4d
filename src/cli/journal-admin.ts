import { pgTarget, type PgTarget } from "../journal/pg-connect.js";
import { loadUserConfig } from "../policy/config.js";
import { VakError } from "../policy/errors.js";
import { fmt, processOutput } from "./output.js";

/**
 * The PostgreSQL journal's two administrative commands: `vak journal init-db`
 * (the schema, triggers and writer role, with the owner's connection) and
 * `vak journal migrate` (a SQLite journal copied in, verified on both sides).
 * URLs given here follow the config's rules: no password written out (argv
 * is visible to every process on the machine); name one by reference.
 */
// Locations come from the config (a URL without its password) and warnings from the database: values, through the output's neutraliser.
const out = () => processOutput().out;

function target(given: string | undefined, fromConfig: "url" | "admin_url", flag: string): PgTarget {
  const config = loadUserConfig();
  const j = config.journal;
  const commands = config.secret_commands;
  if (given) return pgTarget({ url: given, what: flag, commands });
  const url = j[fromConfig];
  if (!url) throw new VakError("bad-input", `no PostgreSQL journal is configured: pass ${flag} (a postgres:// URL without a password, or env:NAME / secret:NAME), or set [journal] ${fromConfig} in ~/.config/vak/config.toml`);
  return pgTarget({ url, password: fromConfig === "url" ? j.password : j.admin_password, what: `[journal] ${fromConfig}`, commands });
}

export async function journalInitDb(opts: { adminUrl?: string; role?: string; grantTo?: string[]; json?: boolean }): Promise<number> {
  const { initDb } = await import("../journal/pg-admin.js");
  const r = await initDb(target(opts.adminUrl, "admin_url", "--admin-url"), { role: opts.role, grantTo: opts.grantTo });
  if (opts.json) return out().json(r), 0;
  if (r.migrated) out().line(fmt`brought the journal up to schema version ${r.schemaVersion}: the search terms of ${r.migrated} events were filled in (nothing on the chain changed)`);
  out().line(fmt`the journal's schema (version ${r.schemaVersion}) is ready at ${r.location}; hosts write as role ${r.role} (SELECT and INSERT only)${r.grantedTo.length ? fmt`, granted to ${r.grantedTo.join(", ")}` : ""}`);
  for (const w of r.warnings) out().line(fmt`warning: ${w}`);
  if (!r.grantedTo.length) out().line(fmt`grant it to the login role hosts use: vak journal init-db --grant-to NAME (or GRANT ${r.role} TO NAME)`);
  return 0;
}

export async function journalMigrate(opts: { to?: string; from?: string; json?: boolean }): Promise<number> {
  const { PgJournal } = await import("../journal/pg-journal.js");
  const { migrateSqlite } = await import("../journal/migrate.js");
  const { defaultJournalPath } = await import("../journal/sqlite-journal.js");
  const from = opts.from ?? (process.env.VAK_JOURNAL || defaultJournalPath());
  const to = await PgJournal.open({ target: target(opts.to, "url", "--to"), ingest: false });
  try {
    const r = await migrateSqlite(from, to);
    if (opts.json) return out().json({ from, to: to.location, ...r }), 0;
    out().line(fmt`copied ${r.copied} of ${r.sessions} sessions (${r.events} events) from ${from} to ${to.location}`);
    out().line(fmt`the SQLite chain verified (head ${r.sqliteHead}); the PostgreSQL journal verifies (head ${r.pgHead}), and every copied event matches its original`);
    return 0;
  } finally {
    await to.close();
  }
}
