import { type Dirent, lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { HeldPath } from "./chain.js";
import { VakError } from "./errors.js";
import { isWithin } from "./paths.js";

/**
 * The other names of what `--deny-read` hides inside the view. A mask covers
 * one name; a hard link elsewhere in a grant is the same file under another
 * name, and would show its content. So for every denied file with more than
 * one link (and every such file below a denied directory) the granted trees
 * are searched for its other names, which are masked and refused like the
 * denied path itself. Inside the sandbox no new link can be made (the real
 * file is reachable by no name there), so what exists at planning is all.
 *
 * Searched: the workspace and the explicit grants. Not searched: the runtime
 * set (`/usr`, `/etc`, …, read-only system trees): a link there needs write
 * access to them, and walking them on every run would cost more than the run.
 * Bounded: past MAX_ENTRIES entries the run is refused, never let through.
 */
export const MAX_ENTRIES = 2_000_000;

interface Inode {
  path: string;
  /** What hides it, for the link's line ("--deny-read denies"). */
  rule: string;
  dev: number;
  ino: number;
}

/** Multi-linked regular files at or below one denied path. */
function multiLinked(denied: string, rule: string, budget: { entries: number }): Inode[] {
  let st;
  try {
    st = lstatSync(denied, { throwIfNoEntry: false });
  } catch {
    return [];
  }
  if (!st) return [];
  if (st.isFile()) return st.nlink > 1 ? [{ path: denied, rule, dev: st.dev, ino: st.ino }] : [];
  if (!st.isDirectory()) return [];
  const out: Inode[] = [];
  eachFile(denied, [], budget, (path, f) => {
    if (f.nlink > 1) out.push({ path, rule, dev: f.dev, ino: f.ino });
  });
  return out;
}

function eachFile(root: string, skip: readonly string[], budget: { entries: number }, visit: (path: string, st: { nlink: number; dev: number; ino: number }) => void): void {
  const stack = [root];
  while (stack.length > 0) {
    const dir = stack.pop()!;
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      continue;
    }
    budget.entries += entries.length;
    if (budget.entries > MAX_ENTRIES)
      throw new VakError("unsupported", `--deny-read: a denied file has other hard links, and the grants hold more than Vak can search for them (${budget.entries} entries, stopped at ${dir}); grant narrower paths, or remove the other links`);
    for (const e of entries) {
      const path = join(dir, e.name);
      if (skip.some((s) => isWithin(path, s))) continue;
      if (e.isDirectory()) stack.push(path);
      else if (e.isFile()) {
        try {
          const f = lstatSync(path);
          visit(path, f);
        } catch {
          // gone since the listing
        }
      }
    }
  }
}

/**
 * Other names, inside `roots`, of the files the denied paths hide. Pure of
 * the plan: reads the file system only. `denied` are the --deny-read paths
 * inside the view (canonical); `roots` the workspace and the grants.
 */
export function deniedLinks(denied: readonly string[], roots: readonly string[], ruleOf: (path: string) => string = () => "--deny-read denies"): { held: HeldPath[]; entries: number } {
  const budget = { entries: 0 };
  const want = new Map<string, Inode>();
  for (const d of denied) for (const f of multiLinked(d, ruleOf(d), budget)) want.set(`${f.dev}:${f.ino}`, f);
  if (want.size === 0) return { held: [], entries: budget.entries };
  const held: HeldPath[] = [];
  const seen = new Set<string>();
  const outer = roots.filter((r) => !roots.some((q) => q !== r && isWithin(r, q)));
  for (const root of outer)
    eachFile(root, denied, budget, (path, st) => {
      const w = st.nlink > 1 ? want.get(`${st.dev}:${st.ino}`) : undefined;
      if (!w || seen.has(path)) return;
      seen.add(path);
      held.push({ path, why: `a hard link to ${w.path}, which ${w.rule}: the same file under another name` });
    });
  return { held, entries: budget.entries };
}
