import { lstatSync, readlinkSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { isWithin } from "../policy/paths.js";
import type { HeldPath } from "../policy/chain.js";
import { protectedMatch } from "../policy/protected.js";

/**
 * The broker's path rules, checked before any worker starts. The worker then
 * opens exactly the path returned here without following any symlink, and the
 * worker's sandbox holds the same grants: a path that changes in between is
 * caught twice (invariant 7).
 *
 * A refusal is no oracle of the host: a path is resolved one component at a
 * time, and nothing outside the grants (and the directories above them) is
 * ever looked at. A path, or a symbolic link on it, that leads out of them is
 * refused with one message, whether what it leads to exists, is a link, a
 * directory or unreadable, and without saying where it leads.
 */
export interface GrantView {
  /** Canonical roots, from the launch plan (decide()). */
  read: readonly string[];
  write: readonly string[];
  denyRead: readonly string[];
  denyWrite: readonly string[];
  /** Vak's own state: never a target. */
  stateDirs: readonly string[];
  /** Held paths from the plan (Vak's install, where protected links and git config lead): never written. */
  held?: readonly HeldPath[] | undefined;
}

export type Access = "read" | "write";
export type Target = { ok: true; path: string; root: string } | { ok: false; rule: string; message: string };

const depth = (p: string) => p.split("/").filter(Boolean).length;
/** As the kernel: a path that needs more links than this does not resolve. */
const MAX_LINKS = 40;

function deepestRoot(path: string, roots: readonly string[]): string | undefined {
  return roots.filter((r) => isWithin(path, r)).sort((a, b) => b.length - a.length)[0];
}

type Resolved = { ok: true; path: string; exists: boolean; viaLink: boolean } | { ok: false; outside: true; viaLink: boolean } | { ok: false; outside: false; code: string };

/**
 * Resolves an absolute, normalised path as the kernel would (every symbolic
 * link on it replaced by its target), looking only at paths within the roots
 * or above them (a directory on the way to a grant). What does not exist yet
 * is kept as named. Leaving that territory stops the walk: outside.
 */
function resolveWithin(abs: string, roots: readonly string[]): Resolved {
  const inTerritory = (p: string) => roots.some((r) => isWithin(p, r) || isWithin(r, p));
  const queue = abs.split("/").filter(Boolean);
  let cur = "/";
  let links = 0;
  let viaLink = false;
  let missing = false;
  while (queue.length) {
    const c = queue.shift()!;
    if (c === ".") continue;
    if (c === "..") {
      cur = dirname(cur);
      continue;
    }
    const next = join(cur, c);
    if (!inTerritory(next)) return { ok: false, outside: true, viaLink };
    if (missing) {
      cur = next;
      continue;
    }
    let link: string | undefined;
    try {
      const st = lstatSync(next);
      if (st.isSymbolicLink()) link = readlinkSync(next);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? "EIO";
      if (code !== "ENOENT" && code !== "ENOTDIR") return { ok: false, outside: false, code };
      missing = true;
      cur = next;
      continue;
    }
    if (link === undefined) {
      cur = next;
      continue;
    }
    if (++links > MAX_LINKS) return { ok: false, outside: false, code: "ELOOP" };
    viaLink = true;
    queue.unshift(...link.split("/").filter(Boolean));
    if (isAbsolute(link)) cur = "/";
  }
  return { ok: true, path: cur, exists: !missing, viaLink };
}

/**
 * Resolves a path an op names (relative to the workspace) to the file it
 * would touch, and checks it against the grants. access "write" applies the
 * protected paths too; mayCreate says the op would create the file if it is
 * missing (a protected name is then refused as an entry, existing or not).
 */
export function resolveTarget(workspace: string, grants: GrantView, raw: string, access: Access, mayCreate = false): Target {
  // Anything but "read" is checked as a write (the unknown gets the stricter rules).
  const writing = access !== "read";
  const asked = isAbsolute(raw) ? resolve(raw) : resolve(workspace, raw);
  const grant = `--allow-${writing ? "write" : "read"}`;
  const roots = [...grants.read, ...grants.write];
  const r = resolveWithin(asked, roots);
  if (!r.ok && r.outside)
    return r.viaLink
      ? { ok: false, rule: "outside-grants", message: `${raw}: a symbolic link on this path leads outside the workspace and every grant, and is not followed; grant what it leads to with ${grant}, or name the real path` }
      : { ok: false, rule: "outside-grants", message: `${raw}: it is outside the workspace and every grant; grant it with ${grant} ${asked}` };
  if (!r.ok) return { ok: false, rule: "unresolvable", message: `${raw} cannot be resolved (${r.code === "ELOOP" ? "a loop of symbolic links" : r.code})` };
  const target = r.path;
  const readRoot = deepestRoot(target, roots);
  if (!readRoot) return { ok: false, rule: "outside-grants", message: `${raw}: it is outside the workspace and every grant; grant it with ${grant} ${asked}` };
  for (const s of grants.stateDirs)
    if (isWithin(target, s)) return { ok: false, rule: "vak-state", message: `${target} is Vak's own state; no tool may touch it` };
  if (grants.denyRead.some((d) => isWithin(target, d)))
    return { ok: false, rule: "outside-grants", message: `${target}: it is covered by a --deny-read rule; grant it with ${grant} ${target}` };
  if (!writing) return { ok: true, path: target, root: readRoot };
  const writeRoot = deepestRoot(target, grants.write);
  // A read grant nested in a writable one makes that subtree read-only.
  const nestedRead = grants.read.find((g) => isWithin(target, g) && (!writeRoot || g.length > writeRoot.length));
  if (!writeRoot || nestedRead || grants.denyWrite.some((d) => isWithin(target, d)))
    return { ok: false, rule: "read-only", message: `${target} is granted read-only; grant it with --allow-write ${target}` };
  // As the guard holds them: at and below, and (for a new entry) at an ancestor.
  const h = grants.held?.find((x) => isWithin(target, x.path) || (mayCreate && !r.exists && isWithin(x.path, target)));
  if (h) return { ok: false, rule: "held", message: `${target} is held read-only: ${h.why}` };
  const p = protectedMatch(target, { rootDepth: depth(writeRoot), entry: mayCreate && !r.exists });
  if (p) return { ok: false, rule: `protected:${p.pattern}`, message: `${target} is a protected path (${p.pattern}: ${p.why})` };
  return { ok: true, path: target, root: writeRoot };
}
