import { basename, dirname } from "node:path";
import { readConfigText, shownPath } from "./config-text.js";
import { canonicalMaybe, isWithin } from "./paths.js";
import { stripCredentials } from "./strip-credentials.js";
import { stripGitConfig } from "./strip-git-config.js";

/**
 * The copies written into a sandbox's view for a profile's `allow_read_redacted`: each file read on the host
 * and stripped of its credentials, never bound. A git config file (by its name: `.gitconfig`, `gitconfig`,
 * `git/config`, and any name with gitconfig in it) is read with git's grammar (strip-git-config.ts), and every
 * file it includes is shown the same way, at its own path, so that git inside reads no included file as the host
 * holds it. An include is not followed (its line is removed) where that cannot hold: its target lies in a path
 * another grant binds from the host or a denied one, is not a regular file or cannot be read, or the includes
 * nest deeper than git's 10 or number more than 32. A target that does not exist stays named (git skips it).
 * Other files go through strip-credentials.ts. Needs no TOML parser: `vak exec --profile git` stays cheap.
 */
export interface RedactedCopy {
  path: string;
  content: string;
  /** Where a credential was ("line 3 (http.extraheader: …)"): never its content. */
  removed: string[];
  /** The file whose include brought it in, as a person reads it. */
  includedBy?: string | undefined;
  /** The path given whose copy brought it in (itself, for one of those). */
  top: string;
}

export interface RedactContext {
  home: string;
  /** Canonical paths bound from the host (the workspace, the grants, the runtime set): an included copy cannot go there. Asked only for an include. */
  bound: () => readonly string[];
  /** Canonical denied paths: nothing in them is read for an include. Asked only for an include. */
  denied: () => readonly string[];
}

const MAX_INCLUDE_DEPTH = 10;
const MAX_INCLUDED = 32;

export function isGitConfigPath(path: string): boolean {
  const name = basename(path).toLowerCase();
  return name.includes("gitconfig") || (name === "config" && basename(dirname(path)) === "git");
}

/**
 * The copies for these paths (each as its grant expands it), and for what the git config files among them
 * include. A path that does not exist is left out; one that cannot be read is an error, as before a run.
 */
export function redactedCopies(paths: readonly string[], ctx: RedactContext): RedactedCopy[] {
  const out: RedactedCopy[] = [];
  // Every copy's path, the top files' first: an include of one of them names a copy there already.
  const shown = new Set(paths);
  let included = 0;
  let bound: readonly string[] | undefined;
  let denied: readonly string[] | undefined;

  const canon = (p: string): string | undefined => {
    try {
      return canonicalMaybe(p, "/", "include");
    } catch {
      return undefined;
    }
  };
  let top = "";
  const whyNot = (target: string | undefined, includer: string, depth: number): string | undefined => {
    if (target === undefined) return "its path is not certain (~user, %(prefix), ., .. or //)";
    if (shown.has(target)) return undefined;
    const real = canon(target);
    denied ??= ctx.denied();
    bound ??= ctx.bound();
    if (denied.some((d) => isWithin(target, d) || (real !== undefined && isWithin(real, d)))) return "inside a denied path";
    if (bound.some((b) => isWithin(target, b))) return "inside a path bound from the host, which shows it as it is";
    if (depth >= MAX_INCLUDE_DEPTH) return `includes nested deeper than git's ${MAX_INCLUDE_DEPTH}`;
    if (included >= MAX_INCLUDED) return `more than ${MAX_INCLUDED} included files`;
    let text: string | undefined;
    try {
      text = readConfigText(target);
    } catch (e) {
      return (e as Error).message;
    }
    if (text === undefined) return undefined;
    included++;
    shown.add(target);
    copy(target, text, depth + 1, true, shownPath(includer, ctx.home));
    return undefined;
  };
  // The including file first, then what it includes, in git's order.
  const copy = (path: string, text: string, depth: number, git: boolean, includedBy?: string) => {
    const c: RedactedCopy = { path, content: "", removed: [], includedBy, top };
    out.push(c);
    const s = git ? stripGitConfig(text, path, { home: ctx.home, include: (t) => whyNot(t, path, depth) }) : stripCredentials(text);
    c.content = s.text;
    c.removed = s.removed;
  };
  for (const path of paths) {
    const text = readConfigText(path);
    top = path;
    if (text !== undefined) copy(path, text, 0, isGitConfigPath(path));
  }
  return out;
}
