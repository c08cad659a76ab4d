import { loadUserConfig, type UserConfig } from "../policy/config.js";
import type { Redactor } from "../secrets/redact.js";
import type { Journal } from "./journal.js";
import { pgTarget, type PgTarget } from "./pg-connect.js";
import { SqliteJournal } from "./sqlite-journal.js";

/**
 * Opens the journal the user's config names: PostgreSQL when [journal] url is
 * set, else SQLite in Vak's state directory. An explicit path or URL (tests,
 * `vak journal migrate`) wins over the config. node-postgres is loaded only
 * for a PostgreSQL journal.
 */
export interface OpenOptions {
  /** A SQLite file. */
  path?: string;
  /** A postgres:// URL or a reference to one. */
  url?: string;
  redactor?: Redactor;
  /** Take spooled runs in as it opens (the default). */
  ingest?: boolean;
  /** The user's [journal] table, if the caller has loaded the config already. */
  config?: UserConfig;
  env?: NodeJS.ProcessEnv;
}

export async function openJournal(opts: OpenOptions = {}): Promise<Journal> {
  if (opts.path) return SqliteJournal.open({ path: opts.path, redactor: opts.redactor, ingest: opts.ingest });
  const config = opts.url ? undefined : (opts.config ?? loadUserConfig());
  const targets = journalTargets(config, opts);
  if (!targets) return SqliteJournal.open({ redactor: opts.redactor, ingest: opts.ingest });
  const { PgJournal } = await import("./pg-journal.js");
  return PgJournal.open({ ...targets, redactor: opts.redactor, ingest: opts.ingest });
}

/** The PostgreSQL connections the config (or an explicit URL) names, or undefined for SQLite. */
export function journalTargets(config: UserConfig | undefined, opts: { url?: string; env?: NodeJS.ProcessEnv } = {}): { target: PgTarget; admin?: () => PgTarget } | undefined {
  const j = config?.journal;
  const commands = config?.secret_commands;
  const env = opts.env ?? process.env;
  if (opts.url) return { target: pgTarget({ url: opts.url, what: "the journal URL", env, commands }) };
  if (!j?.url) return undefined;
  return {
    target: pgTarget({ url: j.url, password: j.password, what: "[journal] url", env, commands }),
    // Resolved only when needed (init-db, prune): its reference may run a command or read a store.
    admin: j.admin_url ? () => pgTarget({ url: j.admin_url!, password: j.admin_password, what: "[journal] admin_url", env, commands }) : undefined,
  };
}
