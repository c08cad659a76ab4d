import { existsSync, lstatSync } from "node:fs";
import { dirname, join } from "node:path";
import { isWithin } from "./paths.js";
import { vakDirs } from "./state.js";

/**
 * Where the files that carry grants are: the user's config (trusted), a
 * repository's `.vak/config.toml` (untrusted until `vak trust`), and the trust
 * records. Only paths and existence here, so that a `vak exec` with none of
 * these files loads no TOML parser.
 */
export function userConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(vakDirs(env).config, "config.toml");
}

export function trustFilePath(env: NodeJS.ProcessEnv = process.env): string {
  return join(vakDirs(env).state, "trust.json");
}

/**
 * The repository config that applies to a workspace: `.vak/config.toml` in it
 * or in the nearest directory above, up to the repository's top (a directory
 * with .git), never the home directory or above it (a workspace that is the
 * home directory has only its own).
 */
export function findProjectConfig(workspace: string, home: string): string | undefined {
  for (let dir = workspace; ; dir = dirname(dir)) {
    // HOME and its ancestors are never reached from below (a workspace that is HOME itself has its own .vak, and no
    // more): a directory above HOME (its parent, /) is no repository of this user's.
    if (dir !== workspace && isWithin(home, dir)) return undefined;
    const candidate = join(dir, ".vak", "config.toml");
    if (present(candidate)) return candidate;
    if (existsSync(join(dir, ".git")) || dir === home || dir === dirname(dir)) return undefined;
  }
}

/**
 * Is something at this path, even a link that leads nowhere or an entry we may not look at? A repository config
 * that is there but cannot be read must be found, so that it is refused rather than passed over in silence.
 */
function present(path: string): boolean {
  try {
    return lstatSync(path, { throwIfNoEntry: false }) !== undefined;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== "ENOTDIR";
  }
}
