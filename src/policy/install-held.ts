import { lstatSync, readdirSync, readFileSync } from "node:fs";
import { basename, dirname, join, sep } from "node:path";
import { holdChain, type HeldPath } from "./chain.js";
import { exists, isWithin } from "./paths.js";

/**
 * Vak's own installation, as paths to hold read-only in every sandbox.
 *
 * Vak runs on the host with the user's authority, so a file it executes or
 * loads that a sandbox could write is a way out of every sandbox the next
 * time Vak starts (the runc CVE-2019-5736 class). Installed in a project
 * (`node_modules/vak`, as `npx vak` uses), Vak lives inside the workspace that
 * sandboxes are given to write. Held, as the guard holds an absolute rule:
 * the path and everything below it, and entries at each of its ancestors, so
 * that neither a file, nor a rename over it, nor the replacement of a parent
 * directory gets through:
 *
 * - the package: all of it when installed under a node_modules; in a checkout
 *   (a project of its own), what runs: package.json, bin/, dist/, build/ (the
 *   launcher and the engine addon), node_modules/ and presets/ (the built-in
 *   profiles: what they say, the next run grants);
 * - every package it loads at run time (better-sqlite3 and its addon for the
 *   CLI; all the dependencies for the library), found the way Node finds
 *   them, and every place Node looks for one before the place it is found
 *   (a copy planted there would be loaded first);
 * - the launchers that lead to it: the script Node was started with and each
 *   link on the way to it (`node_modules/.bin/vak`, `/usr/bin/vak`), and the
 *   `.bin/vak` beside the package;
 * - the Node binary that runs it, and the global packages beside it (npm and
 *   npx themselves, which `npx vak` runs first).
 *
 * A `node_modules/vak` or `.bin/vak` planted where none exists yet is refused
 * by name (`src/policy/protected.ts`), at any depth; so are names on the
 * user's PATH (`held.ts`).
 */
export const OWN_INSTALL = "Vak's own installation";

export interface InstallFacts {
  /** The package root of the running Vak (realpath). */
  packageRoot: string;
  /** process.execPath */
  execPath: string;
  /** process.argv[1]: the script Node was asked to run. */
  script?: string | undefined;
  /** The Node installation prefix (dirname(dirname(execPath))). */
  nodePrefix: string;
}

interface Manifest {
  name?: string;
  bin?: string | Record<string, string>;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

function manifest(dir: string, cache?: Map<string, Manifest | undefined>): Manifest | undefined {
  if (cache?.has(dir)) return cache.get(dir);
  const m = readManifest(dir);
  cache?.set(dir, m);
  return m;
}

function readManifest(dir: string): Manifest | undefined {
  try {
    const v: unknown = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    return typeof v === "object" && v !== null ? (v as Manifest) : undefined;
  } catch {
    return undefined;
  }
}

/** A sanity bound on the dependency walk: Vak has eight dependencies and they a few dozen between them. */
const MAX_PACKAGES = 400;

/** Where Node finds `name` for code in fromDir, and every place it looks first. */
function findPackage(fromDir: string, name: string): { found: string | undefined; before: string[] } {
  const before: string[] = [];
  for (let dir = fromDir; ; dir = dirname(dir)) {
    // The ES module resolver looks in node_modules/node_modules too; the CommonJS one skips it. Every level counts.
    const candidate = join(dir, "node_modules", name);
    if (exists(join(candidate, "package.json"))) return { found: candidate, before };
    before.push(candidate);
    if (dir === dirname(dir)) return { found: undefined, before };
  }
}

/** The first component of `absent` that does not exist: what would have to be created first. */
function firstMissing(absent: string): string {
  let missing = absent;
  for (let up = dirname(missing); up !== missing && !exists(up); up = dirname(up)) missing = up;
  return missing;
}

/**
 * The directories in which Node finds Vak's dependencies (every node_modules
 * from the package up to /), when all of them are plain directories whose
 * entries are no links: then every dependency lies in one of them, and a
 * grant that overlaps none of them cannot reach any. undefined when that
 * cannot be said cheaply (a link among them): then the caller walks.
 */
function dependencyDirs(root: string): string[] | undefined {
  const dirs: string[] = [];
  for (let a = root; ; a = dirname(a)) {
    const nm = join(a, "node_modules");
    let entries;
    try {
      // No exception for the usual case, none here: it would cost more than the lstat.
      const st = lstatSync(nm, { throwIfNoEntry: false });
      if (st && !st.isDirectory()) return undefined;
      entries = st ? readdirSync(nm, { withFileTypes: true }) : undefined;
    } catch {
      entries = undefined; // none here
    }
    if (entries) {
      dirs.push(nm);
      for (const e of entries) {
        if (e.isSymbolicLink()) return undefined;
        if (!e.name.startsWith("@") || !e.isDirectory()) continue;
        try {
          if (readdirSync(join(nm, e.name), { withFileTypes: true }).some((x) => x.isSymbolicLink())) return undefined;
        } catch {
          return undefined;
        }
      }
    }
    if (a === dirname(a)) return dirs;
  }
}

const overlaps = (a: string, b: string) => isWithin(a, b) || isWithin(b, a);

/**
 * The held paths of Vak's installation that any of `writable` could reach.
 * The dependency walk (a few milliseconds) is skipped when no writable root
 * overlaps the package or a directory its dependencies can be in.
 */
export function installHeld(f: InstallFacts, writable: readonly string[]): HeldPath[] {
  if (writable.length === 0) return [];
  const root = f.packageRoot.endsWith(sep) && f.packageRoot !== sep ? f.packageRoot.slice(0, -1) : f.packageRoot;
  const depDirs = dependencyDirs(root);
  const walk = !depDirs || writable.some((w) => overlaps(w, root) || depDirs.some((d) => overlaps(w, d)));
  return allInstallHeld(f, root, walk).filter((h) => writable.some((w) => overlaps(w, h.path)));
}

function allInstallHeld(f: InstallFacts, root: string, walkDependencies: boolean): HeldPath[] {
  const out: HeldPath[] = [];
  const installed = root.split(sep).includes("node_modules");
  const own = OWN_INSTALL;
  if (installed) out.push({ path: root, why: own });
  else for (const p of ["package.json", "bin", "dist", "build", "node_modules", "presets"]) out.push({ path: join(root, p), why: own });

  // The packages Vak loads, breadth first from its own manifest.
  const packages = new Set<string>([root]);
  const queue = walkDependencies ? [root] : [];
  const cache = new Map<string, Manifest | undefined>();
  while (queue.length > 0 && packages.size < MAX_PACKAGES) {
    const dir = queue.shift()!;
    const m = manifest(dir, cache);
    for (const name of [...Object.keys(m?.dependencies ?? {}), ...Object.keys(m?.optionalDependencies ?? {})]) {
      const { found, before } = findPackage(dir, name);
      for (const b of before) if (![...packages].some((p) => b === p || b.startsWith(p + sep))) out.push({ path: firstMissing(b), why: `where Node would look for ${name}, which Vak loads, first` });
      if (!found) continue;
      const chain = holdChain(found, `${name}, which Vak loads`);
      out.push(...chain);
      const real = chain.at(-1)!.path;
      if (!packages.has(real)) {
        packages.add(real);
        queue.push(real);
      }
    }
  }

  // The launchers that lead to it.
  if (f.script) out.push(...holdChain(f.script, "the launcher that started Vak"));
  const holder = basename(dirname(root)).startsWith("@") ? dirname(dirname(root)) : dirname(root);
  if (installed) out.push(...holdChain(join(holder, ".bin", "vak"), "the launcher `npx vak` runs"));

  // The Node that runs it, and npm/npx beside it.
  out.push(...holdChain(f.execPath, "the Node.js binary Vak runs on"));
  const globals = join(f.nodePrefix, "lib", "node_modules");
  if (exists(globals)) out.push({ path: globals, why: "Node's global packages (npm and npx, which start `npx vak`)" });
  for (const b of ["npm", "npx", "corepack", "vak"]) {
    const p = join(f.nodePrefix, "bin", b);
    if (exists(p)) out.push(...holdChain(p, `${b}, which starts Vak`));
  }
  return dedupe(out);
}

export function dedupe(held: HeldPath[]): HeldPath[] {
  const seen = new Map<string, HeldPath>();
  for (const h of held) if (!seen.has(h.path)) seen.set(h.path, h);
  return [...seen.values()];
}
