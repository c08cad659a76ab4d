import { closeSync, constants, type Dirent, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { openNoFollow } from "../fsx.js";

/** Directories no search descends into: version control internals. */
const SKIP = new Set([".git", ".hg", ".svn"]);

/**
 * Walks a tree without following symlinks (each directory is opened afresh
 * with no link on its path, so a directory swapped for a link mid-walk is
 * skipped), yielding files as paths relative to root. Stops after max
 * entries so that a huge tree cannot stall the worker.
 */
export function* walk(root: string, max = 200_000): Generator<string> {
  const stack = [root];
  let seen = 0;
  while (stack.length) {
    const dir = stack.pop()!;
    let entries: Dirent[];
    try {
      const fd = openNoFollow(dir, constants.O_RDONLY | constants.O_DIRECTORY);
      try {
        entries = readdirSync(`/proc/self/fd/${fd}`, { withFileTypes: true });
      } finally {
        closeSync(fd);
      }
    } catch (e) {
      // The root must open (a link there is a swap, reported as such); below it, what cannot be opened is skipped.
      if (dir === root) throw e;
      continue;
    }
    for (const e of entries) {
      if (++seen > max) return;
      const p = join(dir, e.name);
      if (e.isDirectory()) {
        if (!SKIP.has(e.name)) stack.push(p);
      } else if (e.isFile()) yield relative(root, p);
    }
  }
}

/** A glob (`*`, `?`, `**`, `{a,b}`, `[...]`) as a regular expression over '/'-separated paths. */
export function globToRegExp(glob: string): RegExp {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === "*") {
      if (glob[i + 1] === "*") {
        const slash = glob[i + 2] === "/";
        re += slash ? "(?:.*/)?" : ".*";
        i += slash ? 2 : 1;
      } else re += "[^/]*";
    } else if (c === "?") re += "[^/]";
    else if (c === "{") {
      const end = glob.indexOf("}", i);
      if (end < 0) re += "\\{";
      else {
        re += `(?:${glob.slice(i + 1, end).split(",").map((s) => s.replace(/[.+^$()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")).join("|")})`;
        i = end;
      }
    } else if (c === "[") {
      const end = glob.indexOf("]", i);
      if (end < 0) re += "\\[";
      else {
        re += `[${glob.slice(i + 1, end).replace(/^!/, "^").replace(/\\/g, "\\\\")}]`;
        i = end;
      }
    } else re += c.replace(/[.+^$()|\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}
