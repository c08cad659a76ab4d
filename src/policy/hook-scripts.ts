import { lstatSync, readdirSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import type { HeldPath } from "./chain.js";
import { pathWords } from "./git-config.js";
import { readPlainFile } from "./plain-file.js";

/** A hook longer than this is read this far: its commands are at its start. */
const MAX_SCRIPT_BYTES = 1 << 20;
/** How far a script that a hook runs is followed to the scripts it runs. */
const MAX_DEPTH = 4;

/** The text of a regular file (its first MAX_SCRIPT_BYTES, bytes as latin1), or undefined. */
function readScript(file: string): string | undefined {
  try {
    return readPlainFile(file, MAX_SCRIPT_BYTES, true)?.toString("latin1");
  } catch {
    return undefined;
  }
}

/** A directory a hook names is its tools' data (`eslint src/`), not a program: only files and names not there yet are held. */
function isDirectory(p: string): boolean {
  try {
    return lstatSync(p, { throwIfNoEntry: false })?.isDirectory() ?? false;
  } catch {
    return false;
  }
}

/** Follows the files a script's or a config's commands name by path (relative to each base) to the scripts those name. */
class Follower {
  readonly held: HeldPath[] = [];
  private readonly seen = new Set<string>();

  follow(file: string, bases: readonly string[], from: string, depth = 0): void {
    if (this.seen.has(file) || depth > MAX_DEPTH) return;
    this.seen.add(file);
    const text = readScript(file);
    if (text === undefined) return;
    for (const w of pathWords(text)) {
      if (w.startsWith("~")) continue;
      for (const p of isAbsolute(w) ? [w] : bases.map((b) => resolve(b, w))) {
        if (p.includes("\0") || isDirectory(p)) continue;
        this.held.push({ path: p, why: `a file named by ${from}, which the host runs` });
        this.follow(p, bases, from, depth + 1);
      }
    }
  }
}

/**
 * The hook scripts git runs from these hooks directories, and every file their commands name by path,
 * followed to the scripts those run (hooks run at the top of the worktree, `base`). The hooks are held
 * already (by pattern or as the hooks directory); a script a hook runs by path is as much the host's next
 * command: `.git/hooks/pre-commit` running `./scripts/check.sh` runs it at the user's next commit. Husky's
 * layout (core.hooksPath `.husky/_`, whose hooks run `.husky/NAME`) has its scripts one level up.
 */
export function heldByHooks(hookDirs: readonly string[], base: string): HeldPath[] {
  const f = new Follower();
  const dirs = new Set<string>();
  for (const d of hookDirs) {
    dirs.add(d);
    if (basename(d) === "_" && basename(dirname(d)) === ".husky") dirs.add(dirname(d));
  }
  for (const d of dirs) {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      continue;
    }
    for (const n of names) if (!n.endsWith(".sample")) f.follow(join(d, n), [base], `the hook ${join(d, n)}`);
  }
  return f.held;
}

/**
 * Protected files whose commands the host runs by itself (on cd, at a commit, when an agent or an editor
 * opens the folder, before a package manager runs): `.envrc` sourcing `./env.sh`, `.mcp.json` starting
 * `node ./mcp/server.js`, a pre-commit `entry: scripts/lint.sh`. What they name by path is held, relative
 * to the file's directory and to the directory the protected name sits in (`.claude/settings.json` names
 * paths from the project's top). Prose (Markdown prompts, skills) names source files, not commands: not read.
 */
export function heldByRunners(files: readonly { path: string; root: string }[]): HeldPath[] {
  const f = new Follower();
  for (const { path, root } of files)
    if (RUNNER_FILE.test(basename(path)) && !USER_RUN.has(basename(path).toLowerCase())) f.follow(path, [...new Set([dirname(path), root])], path);
  return f.held;
}

/**
 * Protected patterns whose files are not commands the host runs by itself: git's own (its config and hooks
 * are read as git does, git-config.ts and heldByHooks), Vak's, keys, an IDE's project model (it names every
 * source file), bundled JavaScript, a toolchain's name.
 */
const NOT_RUNNERS = /^(\.git|\.vak$|node_modules\/|\.ssh$|\.gnupg$|\.idea$|\.yarn\/|rust-toolchain|\.lfsconfig$)/i;

/** Whether a protected pattern's files are read for the paths they name (heldByRunners). */
export const namesWhatRuns = (pattern: string): boolean => !NOT_RUNNERS.test(pattern);

/** The directory a protected name sits in, for the path (at or below it) that the pattern matched. */
export function protectedRoot(path: string, pattern: string): string {
  const comps = path.split("/");
  const first = pattern.split("/")[0]!.toLowerCase();
  for (let i = comps.length - 1; i > 0; i--) if (comps[i]!.toLowerCase() === first) return comps.slice(0, i).join("/") || "/";
  return dirname(path);
}

/** Configs that run only when the user asks (an editor's debug launch: running the project), whose paths are the project's sources. */
const USER_RUN = new Set(["launch.json"]);

/** Config and script files by name: no extension (`.envrc`, a husky hook), or a config or shell format. */
const RUNNER_FILE = /^(\.?[^.]+|.*\.(json|jsonc|json5|toml|ya?ml|sh|bash|zsh|fish|rc|conf|cfg|ini))$/i;
