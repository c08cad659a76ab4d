import { type Dirent, lstatSync, readdirSync, realpathSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { holdChain, type HeldPath, linkChain } from "./chain.js";
import { VakError } from "./errors.js";
import { envConfig, heldByConfig, hostConfigFiles, readConfigTree, readGitFile, type GitConfigEntry } from "./git-config.js";
import { heldByHooks, heldByRunners, namesWhatRuns, protectedRoot } from "./hook-scripts.js";
import { dedupe } from "./install-held.js";
import { isWithin } from "./paths.js";
import { HOME_PROTECTED, HOME_RELOCATED, PROTECTED_PATHS, protectedMatch } from "./protected.js";
import type { DirShare, Unlisted, WalkCache } from "./walk-cache.js";

/**
 * Paths held read-only because of what is on disk, not because of their name:
 * what the host will actually run or read as configuration.
 *
 * - The targets of protected names that are links (`.git/hooks/pre-commit ->
 *   ../../scripts/githooks/pre-commit`, `.vscode -> editor/vscode`, `.envrc ->
 *   envrc.sh`, `.claude -> ai/claude`), at any depth, and of links inside a
 *   protected directory; and every link on the way, so none can be re-pointed.
 * - The other names of a protected file that has hard links: a write through
 *   any of them is a write to it.
 * - What every repository's git configuration names (its includes, hooksPath,
 *   fsmonitor, attributes and exclude files, the programs of the commands it
 *   configures), for each repository found in the walked trees or enclosing
 *   them, with the user's and the system's configuration read as the host's
 *   git reads them; and each git directory's own config, hooks and redirects
 *   (also for git directories not named `.git`: bare ones, and those a
 *   `.git` file points to).
 * - The user's own startup files and configuration in the home directory
 *   (HOME_PROTECTED), and where they lead.
 * - Every directory on the user's PATH: a program written there would run on
 *   the host by name (`git`, `vak`, a credential helper).
 *
 * Finding the first three means walking the workspace and the writable grants
 * (the guard cannot know which inode a name of a link or an include leads
 * to). The walk reads directories and never follows a link; it stops, and
 * the run is refused, past MAX_ENTRIES entries or MAX_MS, so that its cost
 * is bounded on any tree (`npm run bench`: about 93 ms for 51,000 files, 1.3 times a plain readdir walk).
 */
export const MAX_ENTRIES = 2_000_000;
export const MAX_MS = 10_000;

/** Protected files read for what they run (heldByRunners): past this many the run is refused, as past the walk's budget. */
const MAX_RUNNERS = 2000;

/** Last components of the protected patterns: only an entry with one of these names can complete a match. */
const LAST = new Set(PROTECTED_PATHS.map((p) => p.pattern.split("/").at(-1)!.toLowerCase()));

interface Found {
  /** Protected entries that are links, and links below protected directories. */
  links: { path: string; pattern: string }[];
  /** Protected regular files with more than one name. */
  multiLinked: { path: string; dev: number; ino: number; nlink: number }[];
  /** `.git` entries (directories or gitdir files), and bare git directories. */
  git: { entry: string; bare: boolean }[];
  /** Directories the walk could not read (a command might still write there): held whole. */
  unreadable: string[];
  /** Protected files whose commands the host runs by itself (`.envrc`, `.mcp.json`, hook managers): what they name is held. */
  runners: { path: string; root: string }[];
  entries: number;
}

class Budget {
  private deadline = Date.now() + MAX_MS;
  entries = 0;
  /** The time given to others between slices (scanHeldSliced) is not the walk's: its deadline moves by it. */
  paused(ms: number): void {
    this.deadline += ms;
  }
  spend(n: number, where: string): void {
    this.entries += n;
    if (this.entries > MAX_ENTRIES || Date.now() > this.deadline)
      throw new VakError(
        "unsupported",
        `the writable paths hold more than Vak can check before a run (${this.entries} entries, stopped at ${where}); it looks for protected names that are links, hard links and git configuration there before a sandbox may write. Grant narrower writable paths`,
      );
  }
}

/** What dir's listing adds to the walk (walk-cache.ts keeps it while the directory is unchanged). */
function readShare(dir: string, inProtected: string | undefined, rootDepth: number): DirShare | Unlisted {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code === "ENOENT" || code === "ENOTDIR" ? "absent" : "unreadable";
  }
  const share = { entries: entries.length, subdirs: [] as [string, string | null][], links: [] as [string, string][], files: [] as [string, string][], git: [] as string[], bare: false };
  const inDotGit = dir.endsWith("/.git");
  let head = false;
  let objects = false;
  let refs = false;
  for (const e of entries) {
    const name = e.name;
    if (name === "HEAD") head = true;
    else if (name === "objects") objects = true;
    else if (name === "refs") refs = true;
    // Only an entry with the last name of some pattern can complete a match; below a protected tree, all do.
    let pattern = inProtected;
    if (!pattern && LAST.has(name.toLowerCase())) pattern = protectedMatch(`${dir}/${name}`, { rootDepth })?.pattern;
    if (name === ".git" && !inProtected) share.git.push(name);
    if (e.isDirectory()) {
      // Git's object store and logs hold nothing git runs; they are most of a large .git.
      if (inDotGit && (name === "objects" || name === "logs" || name === "lfs")) continue;
      const isTree = pattern !== undefined && (pattern === inProtected || PROTECTED_PATHS.find((p) => p.pattern === pattern)?.kind === "tree");
      share.subdirs.push([name, isTree ? pattern! : null]);
    } else if (pattern) {
      if (e.isSymbolicLink()) share.links.push([name, pattern]);
      else if (e.isFile()) share.files.push([name, pattern]);
    }
  }
  share.bare = head && objects && refs && !inDotGit;
  return share;
}

/** Walks root; yields after each directory, so that a caller can give the event loop a turn (scanHeldSliced). */
function* walk(root: string, found: Found, budget: Budget, skip: readonly string[], cache: WalkCache | undefined): Generator<void, void, void> {
  const rootDepth = root.split("/").filter(Boolean).length;
  // Only a skipped directory below this root, or one holding it, can skip anything in it (usually none does).
  const skipHere = skip.filter((x) => isWithin(x, root) || isWithin(root, x));
  cache?.beginRoot();
  const stack: { dir: string; inProtected: string | undefined }[] = [{ dir: root, inProtected: undefined }];
  while (stack.length > 0) {
    const { dir, inProtected } = stack.pop()!;
    const read = () => readShare(dir, inProtected, rootDepth);
    const share = cache ? cache.share(dir, `${rootDepth}:${inProtected ?? ""}`, read) : read();
    if (share === "absent") continue;
    if (share === "unreadable") {
      found.unreadable.push(dir);
      continue;
    }
    budget.spend(share.entries, dir);
    for (const name of share.git) found.git.push({ entry: `${dir}/${name}`, bare: false });
    for (const [name, pattern] of share.links) found.links.push({ path: `${dir}/${name}`, pattern });
    // A protected file's link count is looked at on every walk: a hard link made elsewhere changes no directory here.
    for (const [name, pattern] of share.files) {
      const path = `${dir}/${name}`;
      try {
        const st = lstatSync(path);
        if (st.nlink > 1) found.multiLinked.push({ path, dev: st.dev, ino: st.ino, nlink: st.nlink });
      } catch {
        // gone since the listing
      }
      if (namesWhatRuns(pattern)) {
        if (found.runners.length >= MAX_RUNNERS)
          throw new VakError("unsupported", `the writable paths hold more than ${MAX_RUNNERS} protected files whose commands the host runs (stopped at ${path}); Vak reads each for the scripts it names before a sandbox may write. Grant narrower writable paths`);
        found.runners.push({ path, root: protectedRoot(path, pattern) });
      }
    }
    if (share.bare) found.git.push({ entry: dir, bare: true });
    for (const [name, tree] of share.subdirs) {
      const path = `${dir}/${name}`;
      if (skipHere.length > 0 && skipHere.some((x) => isWithin(path, x))) continue;
      stack.push({ dir: path, inProtected: tree ?? undefined });
    }
    yield;
  }
}

/** The other names of multi-linked protected files inside the roots: a second walk, with a stat per file. */
function* otherNames(roots: readonly string[], wanted: Found["multiLinked"], budget: Budget): Generator<void, HeldPath[], void> {
  const key = (dev: number, ino: number) => `${dev}:${ino}`;
  const want = new Map(wanted.map((w) => [key(w.dev, w.ino), w]));
  const held: HeldPath[] = [];
  for (const root of roots) {
    const stack = [root];
    while (stack.length > 0) {
      const dir = stack.pop()!;
      let entries: Dirent[];
      try {
        entries = readdirSync(dir, { withFileTypes: true });
      } catch {
        continue;
      }
      budget.spend(entries.length, dir);
      for (const e of entries) {
        const path = join(dir, e.name);
        if (e.isDirectory()) stack.push(path);
        else if (e.isFile()) {
          let st;
          try {
            st = lstatSync(path);
          } catch {
            continue;
          }
          const w = st.nlink > 1 ? want.get(key(st.dev, st.ino)) : undefined;
          if (w && path !== w.path) held.push({ path, why: `a hard link to the protected file ${w.path}` });
        }
      }
      yield;
    }
  }
  return held;
}

/** The git directory a `.git` entry stands for, its common directory, and where relative paths in its config start. */
function gitDirs(entry: string, bare: boolean): { gitDir: string; common: string; base: string; held: HeldPath[] } {
  const held: HeldPath[] = [];
  let gitDir = entry;
  let st;
  try {
    st = lstatSync(entry);
  } catch {
    return { gitDir, common: gitDir, base: dirname(entry), held };
  }
  if (!bare && st.isFile()) {
    const text = readGitFile(entry) ?? "";
    const m = /^gitdir: (.*?)[\r\n]*$/s.exec(text);
    if (m?.[1]) {
      gitDir = isAbsolute(m[1]) ? m[1] : resolve(dirname(entry), m[1]);
      // The links on the way to it cannot be re-pointed; inside it, what git trusts is held below (not its index).
      for (const l of linkChain(gitDir).links) held.push({ path: l, why: `a link on the way to the git directory ${entry} points to` });
    }
  }
  let common = gitDir;
  const c = readGitFile(join(gitDir, "commondir"));
  if (c !== undefined) {
    const v = c.replace(/[\r\n]+$/, "");
    if (v) common = isAbsolute(v) ? v : resolve(gitDir, v);
  }
  for (const d of new Set([gitDir, common]))
    for (const name of ["config", "config.worktree", "commondir", "gitdir", "hooks", "info/attributes"])
      held.push({ path: join(d, name), why: `git trusts the ${name} of the git directory ${d}` });
  return { gitDir, common, base: bare ? gitDir : dirname(entry), held };
}

/** Repositories that enclose a root: a workspace can be a subdirectory of one, whose config applies to it. */
function enclosingGit(root: string): string[] {
  const out: string[] = [];
  for (let d = dirname(root); ; d = dirname(d)) {
    try {
      if (lstatSync(join(d, ".git"), { throwIfNoEntry: false })) out.push(join(d, ".git"));
    } catch {
      // none here (ENOTDIR, EACCES)
    }
    if (d === dirname(d)) return out;
  }
}

/** The home's startup files where a variable of the host's environment moves them (HOME_RELOCATED); absolute values only. */
function relocatedHome(env: NodeJS.ProcessEnv, names: readonly string[]): HeldPath[] {
  const out: HeldPath[] = [];
  for (const r of HOME_RELOCATED) {
    const value = env[r.env];
    if (!value) continue;
    for (const base of r.list ? value.split(":") : [value]) {
      if (!isAbsolute(base)) continue;
      for (const name of names) {
        if (name !== r.name && !name.startsWith(`${r.name}/`)) continue;
        const path = join(base, name.slice(r.name.length));
        out.push({ path, why: `${path}: the user's own startup file or configuration (~/${name}, moved there by ${r.env})` });
      }
    }
  }
  return out;
}

export interface HeldFacts {
  home: string;
  env: NodeJS.ProcessEnv;
  /** Vak's own state: never walked (it is masked anyway). */
  stateDirs: readonly string[];
  /** Directories listed by earlier walks, reused while unchanged (walk-cache.ts). */
  walkCache?: WalkCache | undefined;
}

/**
 * Every held path for a plan whose writable roots are `writable` (and whose
 * workspace, perhaps read-only, is `workspace`): links, hard links, git
 * configuration, the home directory's startup files, PATH. Only those a
 * writable root can reach matter; the caller keeps those.
 */
export function scanHeld(workspace: string, writable: readonly string[], host: HeldFacts): HeldScan {
  const steps = scan(workspace, writable, host, new Budget());
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** The event loop gets a turn at least this often during scanHeldSliced. */
export const HELD_SLICE_MS = 10;

/**
 * scanHeld for a process that serves others while it walks (`vak serve`'s sessions, a workload's components, the
 * resident host's runs, MCP servers' plans): the same walk and budget, in slices of HELD_SLICE_MS with a turn of
 * the event loop between them. A writable tree of tens of thousands of directories then costs the others a share
 * of the CPU, never a stall of seconds. MAX_MS counts the walk's own slices, not the turns between them: a host
 * busy serving others does not make a run's walk run out of time (40,000 directories did, at 33,501 entries).
 */
export async function scanHeldSliced(workspace: string, writable: readonly string[], host: HeldFacts, sliceMs = HELD_SLICE_MS): Promise<HeldScan> {
  const budget = new Budget();
  const steps = scan(workspace, writable, host, budget);
  let slice = Date.now();
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
    // The clock at every directory: one may cost a millisecond (a large listing), and a thousand of them a second.
    if (Date.now() - slice < sliceMs) continue;
    const turn = Date.now();
    await new Promise<void>((resolve) => setImmediate(resolve));
    slice = Date.now();
    budget.paused(slice - turn);
  }
}

export interface HeldScan {
  held: HeldPath[];
  entries: number;
}

/** scanHeld's work, yielding after each directory walked (scanHeld runs it in one piece, scanHeldSliced in slices). */
function* scan(workspace: string, writable: readonly string[], host: HeldFacts, budget: Budget): Generator<void, HeldScan, void> {
  if (writable.length === 0) return { held: [], entries: 0 };
  const found: Found = { links: [], multiLinked: [], git: [], unreadable: [], runners: [], entries: 0 };
  const roots = outermost([workspace, ...writable]);
  for (const r of roots) yield* walk(r, found, budget, host.stateDirs, host.walkCache);
  const held: HeldPath[] = [];
  for (const l of found.links) held.push(...holdChain(l.path, `where the protected name ${l.path} (${l.pattern}) leads`));
  for (const u of found.unreadable) held.push({ path: u, why: "a directory Vak could not read to check it for protected links" });
  held.push(...heldByRunners(found.runners));

  // The home directory: startup files and configuration, and where links among them lead. Most are
  // plain files or absent: one lstat each; only links are followed.
  const home = host.home;
  // Resolved, the home directory has no link on its way (unresolvable, it is walked name by name below).
  let realHome = home;
  let homeIsReal = false;
  try {
    realHome = realpathSync.native(home);
    homeIsReal = true;
  } catch {
    // no such directory
  }
  const homeNames = [...PROTECTED_PATHS.filter((p) => !p.pattern.includes("/")).map((p) => p.pattern), ...HOME_PROTECTED.map((p) => p.pattern)];
  // One listing of the home directory (and of .config) says which exist; only those are looked at.
  const present = new Set<string>();
  for (const sub of ["", ".config"])
    try {
      for (const n of readdirSync(sub ? join(realHome, sub) : realHome)) present.add(sub ? `${sub}/${n}` : n);
    } catch {
      // no such directory
    }
  for (const name of homeNames) {
    const p = join(realHome, name);
    const why = `${join(home, name)}: the user's own startup file or configuration`;
    const top = name.split("/").slice(0, name.startsWith(".config/") ? 2 : 1).join("/");
    let st;
    try {
      st = present.has(top) ? lstatSync(p, { throwIfNoEntry: false }) : undefined;
    } catch {
      st = undefined;
    }
    // A name under a directory of the home's own that is absent (.aws/config without ~/.aws) has no link on its
    // way when the home resolved: nothing to walk. Not so under .config, which may itself be a link.
    const linkless = homeIsReal && !top.includes("/") && !present.has(top);
    if (st?.isSymbolicLink() || (st === undefined && name.includes("/") && !linkless)) held.push(...holdChain(p, why));
    else held.push({ path: p, why });
    if (home !== realHome) held.push({ path: join(home, name), why });
    if (st?.isFile() && st.nlink > 1) found.multiLinked.push({ path: p, dev: st.dev, ino: st.ino, nlink: st.nlink });
  }
  // The same files where the host's environment moves them ($XDG_CONFIG_HOME/fish, $AWS_CONFIG_FILE): the host's
  // tools read them there, whatever lies at ~/.config. Walked, as anything under a directory that may be a link.
  for (const r of relocatedHome(host.env, homeNames)) held.push(...holdChain(r.path, r.why));

  // Git: every repository found or enclosing a root, with the host's own configuration.
  const hostEntries: GitConfigEntry[] = [];
  for (const f of hostConfigFiles(host.env, home)) {
    held.push(...holdChain(f, "git configuration the host's git reads"));
    hostEntries.push(...readConfigTree(f, home, held));
  }
  hostEntries.push(...envConfig(host.env));
  const repos = [...found.git, ...roots.flatMap(enclosingGit).map((entry) => ({ entry, bare: false }))];
  const seen = new Set<string>();
  for (const { entry, bare } of repos) {
    if (seen.has(entry)) continue;
    seen.add(entry);
    const g = gitDirs(entry, bare);
    held.push(...g.held);
    const entries = [...hostEntries];
    for (const f of new Set([join(g.common, "config"), join(g.gitDir, "config.worktree")])) entries.push(...readConfigTree(f, home, held));
    const named = heldByConfig(entries, g.base, home);
    held.push(...named);
    // What the hooks run by path (the hooks themselves are held above or by pattern).
    held.push(...heldByHooks([join(g.common, "hooks"), ...named.filter((h) => h.why.startsWith("the hooks directory")).map((h) => h.path)], g.base));
  }

  // PATH: a program planted in any of its directories runs on the host by name.
  // npm and npx put a project's own node_modules/.bin on PATH for its scripts: the project's code, not the host's
  // (`node_modules/.bin/vak` is protected by name).
  // Only a directory a writable root reaches, as spelled or as it resolves, matters.
  for (const d of new Set((host.env.PATH ?? "").split(":"))) {
    if (!d.startsWith("/") || /\/node_modules\/\.bin\/?$/.test(d)) continue;
    const reaches = (x: string) => writable.some((w) => isWithin(x, w) || isWithin(w, x));
    if (!reaches(d) && !reaches(safeReal(d))) continue;
    held.push(...holdChain(d, `${d} is on your PATH: a program written there would run on the host by name`));
  }

  // A held file (a link's target, a file git config names, a hook in a hooks directory it names) with
  // other names is as exposed through them as a protected one.
  for (const h of held) {
    let st;
    try {
      // Most held paths do not exist: no exception for those (one costs more than the lstat).
      st = lstatSync(h.path, { throwIfNoEntry: false });
    } catch {
      continue;
    }
    if (!st) continue;
    if (st.isFile() && st.nlink > 1) found.multiLinked.push({ path: h.path, dev: st.dev, ino: st.ino, nlink: st.nlink });
    else if (st.isDirectory() && h.why.startsWith("the hooks directory"))
      for (const e of safeList(h.path)) {
        const p = `${h.path}/${e}`;
        try {
          const f = lstatSync(p);
          if (f.isFile() && f.nlink > 1) found.multiLinked.push({ path: p, dev: f.dev, ino: f.ino, nlink: f.nlink });
        } catch {
          // gone
        }
      }
  }
  if (found.multiLinked.length > 0) held.push(...(yield* otherNames(outermost(writable), found.multiLinked, budget)));
  return { held: dedupe(held.flatMap((h) => (h.path.includes("\0") ? [] : [h]))), entries: budget.entries };
}

/** Roots with those inside another dropped. */
function outermost(paths: readonly string[]): string[] {
  const real = [...new Set(paths.map((p) => safeReal(p)))];
  return real.filter((p) => !real.some((q) => q !== p && isWithin(p, q)));
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function safeReal(p: string): string {
  try {
    return realpathSync.native(p);
  } catch {
    return p;
  }
}
