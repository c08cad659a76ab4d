import { lstatSync, readlinkSync } from "node:fs";
import { dirname, isAbsolute, normalize, resolve } from "node:path";

/** A path the plan holds read-only in every sandbox, and why (for the refusal a command sees). */
export interface HeldPath {
  readonly path: string;
  readonly why: string;
}

const MAX_LINKS = 40;

/**
 * Every name on the way to what `path` leads to: each symbolic link met while
 * resolving it (so that none can be re-pointed), and the place it ends (which
 * may not exist yet: then it is the resolved existing part with the rest
 * appended, the path a command would create). Resolves the way the kernel
 * does, one component at a time, so that `a/link/../b` ends where the kernel
 * would end, not where the string folds to.
 */
export function linkChain(path: string): { links: string[]; end: string; loop: boolean } {
  const links: string[] = [];
  let pending = normalize(resolve(path)).split("/").filter(Boolean);
  let cur = "/";
  let followed = 0;
  while (pending.length > 0) {
    const comp = pending.shift()!;
    if (comp === ".") continue;
    if (comp === "..") {
      cur = dirname(cur);
      continue;
    }
    // Plain concatenation: path.join normalises on every call, and this runs per component.
    const next = cur === "/" ? `/${comp}` : `${cur}/${comp}`;
    let target: string | undefined;
    // Missing from here on: the rest is what would be created.
    const missing = () => ({ links, end: pending.length ? `${next}/${pending.join("/")}` : next, loop: false });
    try {
      // No exception for a missing path: most held paths do not exist, and an exception costs ~20 µs.
      const st = lstatSync(next, { throwIfNoEntry: false });
      if (!st) return missing();
      if (st.isSymbolicLink()) target = readlinkSync(next);
    } catch {
      return missing();
    }
    if (target === undefined) {
      cur = next;
      continue;
    }
    links.push(next);
    if (++followed > MAX_LINKS) return { links, end: next, loop: true };
    pending = [...target.split("/").filter(Boolean), ...pending];
    if (isAbsolute(target)) cur = "/";
  }
  return { links, end: cur, loop: false };
}

/** The path itself, every link on the way, and where it ends, each with the same reason. */
export function holdChain(path: string, why: string): HeldPath[] {
  const { links, end } = linkChain(path);
  const out: HeldPath[] = [{ path: resolve(path), why }];
  for (const l of links) out.push({ path: l, why: `${why} (a link on the way to it)` });
  if (end !== out[0]!.path) out.push({ path: end, why });
  return out;
}
