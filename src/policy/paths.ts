import { lstatSync, readdirSync, realpathSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { VakError } from "./errors.js";

/** True when child is parent itself or lies below it (both canonical). */
export function isWithin(child: string, parent: string): boolean {
  if (parent === "/") return child.startsWith("/");
  return child === parent || child.startsWith(parent + sep);
}

/**
 * The existing paths an absolute path names when a component of it is `*`, each entry of that directory: a
 * preset's deny_read of `~/.gemini/extensions/*` then `/.env` is every extension's .env
 * the host holds now. A path with no `*` is itself.
 */
export function starPaths(p: string): string[] {
  const parts = p.split("/");
  const at = parts.indexOf("*");
  if (at < 0) return [p];
  const dir = parts.slice(0, at).join("/") || "/";
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return [];
  }
  return names.flatMap((n) => {
    const head = join(dir, n);
    const rest = parts.slice(at + 1);
    const whole = rest.length ? `${head}/${rest.join("/")}` : head;
    if (!rest.includes("*")) {
      try {
        lstatSync(whole);
        return [whole];
      } catch {
        return [];
      }
    }
    return starPaths(whole);
  });
}

export function expandHome(p: string): string {
  if (p === "~") return homedir();
  if (p.startsWith("~/")) return join(homedir(), p.slice(2));
  return p;
}

function checkSpelling(p: string, flag: string): void {
  if (p === "") throw new VakError("bad-input", `${flag}: empty path`);
  if (p.includes("\0")) throw new VakError("bad-input", `${flag}: path contains a NUL byte`);
}

/** Canonical form of a directory that must exist (the workspace). */
export function canonicalDir(p: string, flag: string): string {
  checkSpelling(p, flag);
  const abs = resolve(expandHome(p));
  let real: string;
  try {
    real = realpathSync.native(abs);
  } catch (e) {
    throw notFound(flag, abs, e);
  }
  if (!lstatSync(real).isDirectory()) throw new VakError("bad-input", `${flag}: ${real} is not a directory`);
  return real;
}

function notFound(flag: string, abs: string, e: unknown): VakError {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === "ENOENT" || code === "ENOTDIR")
    return new VakError("path-not-found", `${flag} ${abs}: no such file or directory; create it first or fix the path`);
  return new VakError("bad-input", `${flag} ${abs}: cannot be resolved (${code ?? String(e)})`);
}

/**
 * Resolves a grant path to the file it names: relative paths against the
 * workspace, then realpath. A relative path must stay inside the workspace
 * after resolution, so that a repository symlink cannot turn "./data" into a
 * grant of the user's home.
 */
export function canonicalGrant(p: string, workspace: string, flag: string): string {
  checkSpelling(p, flag);
  const expanded = expandHome(p);
  const relativeGiven = !isAbsolute(expanded);
  const abs = resolve(workspace, expanded);
  if (relativeGiven && !isWithin(abs, workspace))
    throw new VakError("path-escapes", `${flag} ${p}: resolves outside the workspace (${abs}); give an absolute path if you mean it`);
  let real: string;
  try {
    real = realpathSync.native(abs);
  } catch (e) {
    throw notFound(flag, abs, e);
  }
  if (relativeGiven && !isWithin(real, workspace))
    throw new VakError(
      "path-escapes",
      `${flag} ${p}: is a symbolic link to ${real}, outside the workspace; grant ${real} explicitly if you mean it`,
    );
  if (real === "/") throw new VakError("path-too-broad", `${flag} ${p}: would grant the whole file system; grant narrower paths`);
  return real;
}

/**
 * Canonical form of a path that may not exist yet (deny rules): realpath of the
 * longest existing prefix, with the missing components appended.
 */
export function canonicalMaybe(p: string, workspace: string, flag: string): string {
  checkSpelling(p, flag);
  const abs = resolve(workspace, expandHome(p));
  const missing: string[] = [];
  let cur = abs;
  for (;;) {
    try {
      const real = realpathSync.native(cur);
      return missing.length ? join(real, ...missing.reverse()) : real;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" && code !== "ENOTDIR") throw notFound(flag, abs, e);
      const parent = dirname(cur);
      if (parent === cur) throw notFound(flag, abs, e);
      missing.push(relative(parent, cur));
      cur = parent;
    }
  }
}

export function exists(p: string): boolean {
  try {
    return lstatSync(p, { throwIfNoEntry: false }) !== undefined;
  } catch {
    return false;
  }
}
