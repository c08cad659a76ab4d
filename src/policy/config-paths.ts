import { existsSync, lstatSync, realpathSync } from "node:fs";
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
 * home directory has only its own), never one a stranger planted (planted()).
 */
export function findProjectConfig(workspace: string, home: string): string | undefined {
  // The workspace is canonical: HOME is compared as written and as it resolves (/home/me with /home a link to /data/home).
  const homes = [home, canonical(home)];
  for (let dir = workspace; ; dir = dirname(dir)) {
    // HOME and its ancestors are never reached from below (a workspace that is HOME itself has its own .vak, and no
    // more): a directory above HOME (its parent, /) is no repository of this user's.
    if (dir !== workspace && homes.some((h) => isWithin(h, dir))) return undefined;
    const candidate = join(dir, ".vak", "config.toml");
    if (present(candidate) && !planted(dir)) return candidate;
    if (existsSync(join(dir, ".git")) || homes.includes(dir) || dir === dirname(dir)) return undefined;
  }
}

function canonical(path: string): string {
  try {
    return realpathSync.native(path);
  } catch {
    return path;
  }
}

/**
 * A `.vak` (or its config.toml) that another user made in a directory that is not theirs: someone who can write
 * in a shared directory (/tmp, a group's directory above the workspace) is not this user's repository, as git's
 * safe.directory holds for .git (CVE-2022-24765). Passed over as if absent: applied, it would refuse every run
 * below it or narrow it as a stranger chose. Made by you, by root, or by the directory's own owner, it counts.
 */
function planted(dir: string): boolean {
  const me = process.getuid?.();
  if (me === undefined) return false;
  const owner = (path: string) => lstatSync(path, { throwIfNoEntry: false })?.uid;
  const foreign = (entry: string, parent: string) => {
    const uid = owner(entry);
    return uid !== undefined && uid !== me && uid !== 0 && uid !== owner(parent);
  };
  try {
    const vak = join(dir, ".vak");
    return foreign(vak, dir) || foreign(join(vak, "config.toml"), vak);
  } catch {
    return false;
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
