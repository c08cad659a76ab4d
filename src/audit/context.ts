import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { defaultJournalPath } from "../journal/sqlite-journal.js";
import { pinsDir } from "../mcp/pins.js";
import { loadUserConfig, type UserConfig, userConfigPath } from "../policy/config.js";
import { vakDirs } from "../policy/state.js";
import { storePath } from "../secrets/store.js";

/** What every check reads: where Vak's files are, and the user's config (or why it could not be read). */
export interface AuditContext {
  env: NodeJS.ProcessEnv;
  home: string;
  uid: number;
  /** The directory audited as a workspace (the current directory). */
  workspace: string;
  dirs: ReturnType<typeof vakDirs>;
  configPath: string;
  /** The parsed user config; undefined when it does not parse (configError says why). */
  config: UserConfig | undefined;
  configError: string | undefined;
  journalPath: string;
  storePath: string;
  pinsDir: string;
  approvedPath: string;
  spoolDir: string;
}

export function auditContext(env: NodeJS.ProcessEnv = process.env, workspace: string = process.cwd()): AuditContext {
  const dirs = vakDirs(env);
  const configPath = userConfigPath(env);
  let config: UserConfig | undefined;
  let configError: string | undefined;
  try {
    config = loadUserConfig(configPath);
  } catch (e) {
    configError = (e as Error).message;
  }
  const journalPath = env.VAK_JOURNAL || defaultJournalPath(env);
  return {
    env,
    home: homedir(),
    uid: process.getuid?.() ?? 0,
    workspace,
    dirs,
    configPath,
    config,
    configError,
    journalPath,
    storePath: storePath(env),
    pinsDir: pinsDir(env),
    approvedPath: join(dirs.state, "mcp", "approved.json"),
    spoolDir: join(dirname(journalPath), "spool"),
  };
}
