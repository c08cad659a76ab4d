import { lstatSync, realpathSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { isWithin } from "../policy/paths.js";
import type { HeldPath } from "../policy/chain.js";
import { protectedMatch } from "../policy/protected.js";

/**
 * The broker's path rules, checked before any worker starts. The worker then
 * opens exactly the path returned here without following any symlink, and the
 * worker's sandbox holds the same grants: a path that changes in between is
 * caught twice (invariant 7).
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

export type Target = { ok: true; path: string; root: string } | { ok: false; rule: string; message: string };

const depth = (p: string) => p.split("/").filter(Boolean).length;

function deepestRoot(path: string, roots: readonly string[]): string | undefined {
  return roots.filter((r) => isWithin(path, r)).sort((a, b) => b.length - a.length)[0];
}

/** Realpath of what exists, with the missing tail appended (for a file about to be created). */
function canonicalParent(dir: string): string | undefined {
  const missing: string[] = [];
  let cur = dir;
  for (;;) {
    try {
      return join(realpathSync.native(cur), ...missing.reverse());
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" && code !== "ENOTDIR") return undefined;
      const up = dirname(cur);
      if (up === cur) return undefined;
      missing.push(basename(cur));
      cur = up;
    }
  }
}

/**
 * Resolves a path an op names (relative to the workspace) to the file it
 * would touch, and checks it against the grants. access "write" applies the
 * protected paths too; mayCreate says the op would create the file if it is
 * missing (a protected name is then refused as an entry, existing or not).
 */
export function resolveTarget(workspace: string, grants: GrantView, raw: string, access: "read" | "write", mayCreate = false): Target {
  const abs = isAbsolute(raw) ? resolve(raw) : resolve(workspace, raw);
  const parent = canonicalParent(dirname(abs));
  if (!parent) return { ok: false, rule: "unresolvable", message: `${raw}: its directory cannot be resolved` };
  let target = abs === "/" ? "/" : join(parent, basename(abs));
  let isLink = false;
  let exists = false;
  try {
    isLink = lstatSync(target).isSymbolicLink();
    exists = true;
  } catch {
    // does not exist (yet)
  }
  if (isLink) {
    let real: string;
    try {
      real = realpathSync.native(target);
    } catch {
      return { ok: false, rule: "dangling-link", message: `${raw} is a symbolic link to nothing` };
    }
    const root = deepestRoot(real, access === "write" ? grants.write : [...grants.read, ...grants.write]);
    if (!root) return { ok: false, rule: "link-leaves-grant", message: `${raw} is a symbolic link to ${real}, which is outside every grant; it is not followed` };
    target = real;
  }
  for (const s of grants.stateDirs)
    if (isWithin(target, s)) return { ok: false, rule: "vak-state", message: `${target} is Vak's own state; no tool may touch it` };
  const readRoot = deepestRoot(target, [...grants.read, ...grants.write]);
  if (!readRoot || grants.denyRead.some((d) => isWithin(target, d))) {
    const why = readRoot ? `it is covered by a --deny-read rule` : `it is outside the workspace and every grant`;
    return { ok: false, rule: "outside-grants", message: `${target}: ${why}; grant it with --allow-${access} ${target}` };
  }
  if (access === "read") return { ok: true, path: target, root: readRoot };
  const writeRoot = deepestRoot(target, grants.write);
  // A read grant nested in a writable one makes that subtree read-only.
  const nestedRead = grants.read.find((r) => isWithin(target, r) && (!writeRoot || r.length > writeRoot.length));
  if (!writeRoot || nestedRead || grants.denyWrite.some((d) => isWithin(target, d)))
    return { ok: false, rule: "read-only", message: `${target} is granted read-only; grant it with --allow-write ${target}` };
  // As the guard holds them: at and below, and (for a new entry) at an ancestor.
  const h = grants.held?.find((x) => isWithin(target, x.path) || (mayCreate && !exists && isWithin(x.path, target)));
  if (h) return { ok: false, rule: "held", message: `${target} is held read-only: ${h.why}` };
  const p = protectedMatch(target, { rootDepth: depth(writeRoot), entry: mayCreate && !exists });
  if (p) return { ok: false, rule: `protected:${p.pattern}`, message: `${target} is a protected path (${p.pattern}: ${p.why})` };
  return { ok: true, path: target, root: writeRoot };
}
