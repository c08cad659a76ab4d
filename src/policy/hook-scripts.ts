import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import type { HeldPath } from "./chain.js";
import { pathWords } from "./git-config.js";

/** A hook longer than this is read this far: its commands are at its start. */
const MAX_SCRIPT_BYTES = 1 << 20;
/** How far a script that a hook runs is followed to the scripts it runs. */
const MAX_DEPTH = 4;

/** The text of a regular file (its first MAX_SCRIPT_BYTES, bytes as latin1), or undefined. */
function readScript(file: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch {
    return undefined;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return undefined;
    const buf = Buffer.alloc(Math.min(st.size, MAX_SCRIPT_BYTES));
    let got = 0;
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, got);
      if (n === 0) break;
      got += n;
    }
    return buf.subarray(0, got).toString("latin1");
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
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

/**
 * The hook scripts git runs from these hooks directories, and every file their commands name by path,
 * followed to the scripts those run (hooks run at the top of the worktree, `base`). The hooks are held
 * already (by pattern or as the hooks directory); a script a hook runs by path is as much the host's next
 * command: `.git/hooks/pre-commit` running `./scripts/check.sh` runs it at the user's next commit. Husky's
 * layout (core.hooksPath `.husky/_`, whose hooks run `.husky/NAME`) has its scripts one level up.
 */
export function heldByHooks(hookDirs: readonly string[], base: string): HeldPath[] {
  const held: HeldPath[] = [];
  const seen = new Set<string>();
  const follow = (file: string, from: string, depth: number): void => {
    if (seen.has(file) || depth > MAX_DEPTH) return;
    seen.add(file);
    const text = readScript(file);
    if (text === undefined) return;
    for (const w of pathWords(text)) {
      const p = isAbsolute(w) ? w : w.startsWith("~") ? undefined : resolve(base, w);
      if (p === undefined || p.includes("\0") || isDirectory(p)) continue;
      held.push({ path: p, why: `a file named by ${from}, which git runs` });
      follow(p, from, depth + 1);
    }
  };
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
    for (const n of names) if (!n.endsWith(".sample")) follow(join(d, n), `the hook ${join(d, n)}`, 0);
  }
  return held;
}
