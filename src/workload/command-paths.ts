import { accessSync, constants, lstatSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, isAbsolute, join, resolve } from "node:path";
import { isWithin } from "../policy/paths.js";

/**
 * A component's `command` (or `mcp`) as the sandbox will run it. The spec's
 * paths are relative to the workload's workspace, but a component runs in an
 * empty scratch directory that holds only its grants, so `node tools/x.js`
 * would find nothing there. Here each path in the argv is resolved to the file
 * it really names (symlinks followed, as the kernel would), put in the argv
 * as that canonical path, and returned to be bound read-only into the
 * component's sandbox: the sandbox runs exactly the file that was checked.
 *
 * Which words are paths, one rule:
 * - the program (the first word): a path when it contains a `/` (it must be an
 *   executable file); else a name looked up on PATH, which must find one;
 * - any later word made of path characters only (no space, quote or shell
 *   character, not starting with `-`) that starts with `/`, `./`, `../` or
 *   `~/`, or contains a `/` and names something that exists, or contains a `/`
 *   and ends in a file extension (`tools/github.js`): it must exist. Anything
 *   else (`application/json`, `--flag=a/b`, a script for `sh -c`) is left as
 *   it is.
 *
 * A relative path must stay inside the workspace once resolved: one that
 * leads out through `..` or a symlink (a link a repository could plant) is
 * refused; an absolute path says plainly where it goes, and `vak check` shows it.
 *
 * Pure but for the file system reads; the caller turns a Problem into its
 * file, line and field.
 */
export interface ResolvedCommand {
  argv: string[];
  /** Canonical paths to bind read-only, in argv order, without repeats. */
  paths: string[];
}

export interface Problem {
  index: number;
  message: string;
}

const EXPLICIT = /^(\/|\.\/|\.\.\/|~\/)/;
/** Characters a file name in a spec's argv plausibly has; a word with anything else is an argument, not a path. */
const PATHLIKE = /^[^\s'"`$;|&()<>*?\\!{}[\]-][^\s'"`$;|&()<>*?\\!{}[\]]*$/;
const EXTENSION = /\/[^/]*[^/.]\.[A-Za-z0-9]{1,10}$/;

export function resolveCommand(argv: readonly string[], base: string, env: NodeJS.ProcessEnv = process.env): ResolvedCommand | Problem {
  const out: string[] = [];
  const paths: string[] = [];
  const abs = (p: string) => (isAbsolute(p) ? p : p.startsWith("~/") ? join(homedir(), p.slice(2)) : resolve(base, p));
  for (const [i, word] of argv.entries()) {
    if (i === 0 && !word.includes("/")) {
      if (!onPath(word, env)) return { index: 0, message: `${word} is not a program on your PATH (${(env.PATH ?? "").split(delimiter).filter(Boolean).length} directories searched); give its path, or install it` };
      out.push(word);
      continue;
    }
    const isPath = i === 0 || (PATHLIKE.test(word) && (EXPLICIT.test(word) || (word.includes("/") && (exists(abs(word)) || EXTENSION.test(word)))));
    if (!isPath) {
      out.push(word);
      continue;
    }
    let real: string;
    try {
      real = realpathSync(abs(word));
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
      return { index: i, message: `${word} does not exist (${code}; relative paths are relative to the workspace, ${base})` };
    }
    if (!isAbsolute(word) && !word.startsWith("~/") && !isWithin(real, realpathSync(base)))
      return { index: i, message: `${word} leads outside the workspace (to ${real}); a relative path must stay inside it: write the absolute path if that is what you mean` };
    if (i === 0) {
      if (!statSync(real).isFile()) return { index: 0, message: `${word} is not a file` };
      try {
        accessSync(real, constants.X_OK);
      } catch {
        return { index: 0, message: `${word} is not executable (chmod +x ${word}, or run it with its interpreter: ["sh", "${word}"])` };
      }
    }
    out.push(real);
    if (!paths.includes(real)) paths.push(real);
  }
  return { argv: out, paths };
}

/**
 * Are the command's files still what the spec's check resolved? A launch plans
 * its view afresh, resolving links, so a file swapped for a link since the
 * check (by a component that can write there) would be bound wherever the
 * link now points. Checked before each run of the command; a changed one is
 * a refusal, never followed.
 */
export function changedPath(paths: readonly string[]): string | undefined {
  for (const p of paths) {
    try {
      if (lstatSync(p).isSymbolicLink()) return `${p} is now a symbolic link (to ${realpathSync(p)})`;
      if (realpathSync(p) !== p) return `${p} now resolves to ${realpathSync(p)}`;
    } catch (e) {
      return `${p} is gone (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`;
    }
  }
  return undefined;
}

export function isProblem(r: ResolvedCommand | Problem): r is Problem {
  return "message" in r;
}

function exists(p: string): boolean {
  try {
    statSync(p);
    return true;
  } catch {
    return false;
  }
}

/** Is name an executable file in a directory of PATH? */
function onPath(name: string, env: NodeJS.ProcessEnv): boolean {
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (!dir.startsWith("/")) continue;
    const f = join(dir, name);
    try {
      if (statSync(f).isFile()) {
        accessSync(f, constants.X_OK);
        return true;
      }
    } catch {
      // not here
    }
  }
  return false;
}
