import { lstatSync, readlinkSync, realpathSync } from "node:fs";
import { resolve } from "node:path";
import { sandboxEnv, sandboxPath } from "./env.js";
import { VakError } from "./errors.js";
import type { Grants, Mode } from "./grants.js";
import { DEFAULT_MAX_PROCS, type Limits } from "./limits.js";
import { canonicalDir, canonicalGrant, canonicalMaybe, exists, expandHome, isWithin } from "./paths.js";
import type { HeldPath } from "./chain.js";
import { deniedLinks } from "./deny-read.js";
import { credentialPaths, hiddenStores, type StorePath } from "./host-credentials.js";
import { refuseCommittedDenied } from "./deny-read-git.js";
import { scanHeld, scanHeldSliced } from "./held.js";
import { dedupe, type InstallFacts, installHeld, OWN_INSTALL } from "./install-held.js";
import { PROTECTED_PATHS, protectedMatch } from "./protected.js";
import type { WalkCache } from "./walk-cache.js";
import { proxyEnv, RELAY_PORT } from "./proxy-env.js";
import type { NetGrants } from "./net-grants.js";
import {
  PRIVATE_HOME_BYTES, PRIVATE_SHM, PRIVATE_TMP, RUNTIME_DEVICES, RUNTIME_DIRS, RUNTIME_ETC, SANDBOX_HOSTNAME,
  synthesizedEtc,
} from "./runtime-set.js";

/** How the sandbox is built: namespaces (the full view), reduced (Landlock and
 *  seccomp only, where user namespaces are unavailable), container (the same
 *  launcher and plan as namespaces, run inside a Docker or Podman container:
 *  src/sandbox/container.ts), or none (full access). */
export type SandboxKind = "namespaces" | "reduced" | "container" | "none";

/** Why a mount is in the plan, where something else must tell them apart (the container backend takes these from its image). */
export const RUNTIME_WHY = "runtime";
export const NODE_RUNTIME_WHY = "the Node.js runtime Vak runs on";

export type MountOp =
  | { kind: "ro" | "rw" | "mask" | "dir" | "dev"; path: string; why: string }
  | { kind: "tmpfs"; path: string; bytes: number; why: string }
  | { kind: "symlink"; path: string; target: string; why: string }
  | { kind: "file"; path: string; content: string; why: string };

export interface ProtectRule {
  /**
   * abs: an absolute path, never changed; noread: also never read (a --deny-read path the view masks:
   * native/guard_noread.c); nolinks: a host tool's state, where only regular files and directories are made
   * (native/guard_links.c).
   */
  kind: "tree" | "file" | "abs" | "noread" | "nolinks";
  pattern: string;
}

/** What the host knows about itself; passed in so that decide() stays testable. */
export interface HostFacts {
  home: string;
  uid: number;
  gid: number;
  user: string;
  shell: string;
  env: NodeJS.ProcessEnv;
  /** Vak's own config, state and caches: never reachable from a sandbox. */
  stateDirs: readonly string[];
  /** The Node.js installation Vak runs on, so that `node` works inside. */
  nodePrefix: string;
  /** The directory of the fetch preload (dist/preload), bound read-only when there is a network grant. */
  preloadDir?: string | undefined;
  /** Vak's own installation: held read-only wherever a writable grant could reach it. */
  install?: InstallFacts | undefined;
  /** The held-path walk's directories from earlier walks, reused while unchanged (walk-cache.ts). */
  walkCache?: WalkCache | undefined;
  /** Where the host keeps its credential stores (host-credentials.ts), when already worked out for this home and environment. */
  credentials?: readonly StorePath[] | undefined;
}

export interface PlanInput {
  mode: Mode;
  sandbox: SandboxKind;
  workspace: string;
  cwd?: string | undefined;
  grants: Grants;
  limits: Limits;
  command: readonly string[];
  /** Vak's own files the command needs (the worker's code), read-only. */
  runtime?: readonly string[] | undefined;
  /** Network grants; without any allow rule the sandbox has no network at all. */
  net?: NetGrants | undefined;
  /** For reduced mode: host directories the caller created for TMPDIR and HOME. */
  scratch?: { tmp: string; home: string } | undefined;
  /** Held paths already found for the same workspace and grants (a broker's exec reuses its write plan's). */
  held?: readonly HeldPath[] | undefined;
  /** The held-path walk done ahead, in slices (heldAhead): taken where it walked this plan's roots. */
  heldAhead?: HeldAhead | undefined;
  /** Files written into the view (never on the host): a profile's `files`, credential-stripped copies. */
  files?: readonly { path: string; content: string; why: string }[] | undefined;
  /** Variables set inside (a profile's set_env); Vak's own (PATH, HOME, the proxy) cannot be among them. */
  setEnv?: Readonly<Record<string, string>> | undefined;
  /** Files a profile named to be read and shown as they are (an allow_read_redacted file with nothing to strip): a credential store named so is shown. */
  named?: readonly string[] | undefined;
}

/** What scanHeld found (or how it refused) for a workspace and its writable roots, walked ahead of decide(). */
export interface HeldAhead {
  workspace: string;
  writable: readonly string[];
  found: readonly HeldPath[] | Error;
}

export interface LaunchPlan {
  mode: Mode;
  sandbox: SandboxKind;
  workspace: string;
  cwd: string;
  command: string[];
  mounts: MountOp[];
  protect: ProtectRule[];
  env: Record<string, string>;
  limits: Limits;
  /** Applied when limits.maxProcs is unset, and only where the host can hold it. */
  defaultMaxProcs: number;
  /** Canonical grants, for reports and `vak doctor`. */
  grants: { read: string[]; write: string[]; denyRead: string[]; denyWrite: string[]; noLinks: string[]; env: string[] };
  network: Network;
  /** Directories of the host's PATH left out of the sandbox's PATH, because the sandbox cannot see them. */
  pathDropped: string[];
  /**
   * Paths held read-only (absolute guard rules) because of what they are, not
   * their name: Vak's own installation, where protected links and git
   * configuration lead, other names of protected files, PATH. Only those a
   * writable grant can reach.
   */
  held: HeldPath[];
  /**
   * The host's credential stores a grant covers only as a parent (host-credentials.ts): masked where they
   * exist, never made where they do not. Each with what it is and the grant that shows it.
   */
  hidden: HeldPath[];
}

/** No network at all, or the egress gate reached through the relay on the sandbox's loopback. */
export type Network = { kind: "none" } | { kind: "gate"; port: number; grants: NetGrants };

/** The launcher's limit on protection rules (native/launcher.h MAX_RULES), less room for deny rules. */
const MAX_PROTECT_RULES = 2000;

const depth = (p: string): number => (p === "/" ? 0 : p.split("/").length - 1);

/**
 * Turns a mode, grants and a workspace into the exact launch plan: every path
 * canonical, deny beating allow, the runtime set, protected paths and Vak's own
 * state held back. Reads the file system only to canonicalise and classify.
 */
export function decide(input: PlanInput, host: HostFacts): LaunchPlan {
  const { workspace, cwd, g, read, write, denyRead, denyWrite, noLinks, access } = granted(input);
  if (!access) {
    return {
      mode: input.mode, sandbox: "none", workspace, cwd, command: [...input.command], mounts: [], protect: [],
      env: { ...host.env } as Record<string, string>, limits: input.limits, defaultMaxProcs: 0,
      grants: { read, write, denyRead, denyWrite, noLinks, env: [...g.env] }, network: { kind: "none" }, held: [], hidden: [], pathDropped: [],
    };
  }

  const reduced = input.sandbox === "reduced";
  const mounts: MountOp[] = [];
  const protect: ProtectRule[] = PROTECTED_PATHS.map((p) => ({ kind: p.kind, pattern: p.pattern }));
  const covered = (p: string) => [...access.keys()].some((a) => isWithin(p, a));

  // The runtime set.
  for (const p of [...RUNTIME_DIRS, ...RUNTIME_ETC]) if (!covered(p)) addRuntime(p, mounts, reduced);
  if (host.nodePrefix && !RUNTIME_DIRS.some((d) => isWithin(host.nodePrefix, d)) && exists(host.nodePrefix))
    mounts.push({ kind: "ro", path: host.nodePrefix, why: NODE_RUNTIME_WHY });
  for (const d of RUNTIME_DEVICES) if (exists(d)) mounts.push({ kind: "dev", path: d, why: "device" });
  for (const r of input.runtime ?? []) if (!covered(r) && exists(r)) mounts.push({ kind: "ro", path: r, why: "Vak's worker code" });

  let tmp: string = PRIVATE_TMP.path;
  let home = host.home;
  if (reduced) {
    if (!input.scratch) throw new VakError("internal", "reduced mode needs scratch directories");
    tmp = input.scratch.tmp;
    home = input.scratch.home;
    mounts.push({ kind: "rw", path: tmp, why: "private TMPDIR" });
    mounts.push({ kind: "rw", path: home, why: "private HOME" });
  } else {
    const etc = synthesizedEtc({ name: host.user, uid: host.uid, gid: host.gid, home: host.home, shell: host.shell });
    for (const [path, content] of Object.entries(etc))
      if (!covered(path)) mounts.push({ kind: "file", path, content, why: "synthesized" });
    if (!covered(PRIVATE_TMP.path)) mounts.push({ kind: "tmpfs", path: PRIVATE_TMP.path, bytes: PRIVATE_TMP.bytes, why: "private /tmp" });
    mounts.push({ kind: "tmpfs", path: PRIVATE_SHM.path, bytes: PRIVATE_SHM.bytes, why: "private /dev/shm" });
    // An empty private HOME, unless a grant already provides the home directory.
    if (!covered(host.home)) mounts.push({ kind: "tmpfs", path: host.home, bytes: PRIVATE_HOME_BYTES, why: "private empty HOME" });
  }

  for (const [path, a] of access) mounts.push({ kind: a, path, why: path === workspace ? "workspace" : "grant" });

  // Deny inside a grant: hide (read) or freeze (write) what exists; the guard
  // refuses creating or changing what does not exist yet.
  // A masked path's reads are refused by name too (with a line, not an empty file), and so are its other
  // hard links in the grants, which are masked as well (deny-read.ts).
  const deniedInView: string[] = [];
  // The runtime set too (/usr holds npm's global npmrc, pip's sys.prefix/pip.conf): a deny there was not enforced.
  const shown = (d: string) => covered(d) || mounts.some((m) => m.kind === "ro" && isWithin(d, m.path));
  for (const d of denyRead) {
    if (!shown(d)) continue;
    if (reduced) throw new VakError("unsupported", `--deny-read ${d}: reduced mode cannot hide a path inside a grant; grant narrower paths instead`);
    if (exists(d)) {
      mounts.push({ kind: "mask", path: d, why: "--deny-read" });
      deniedInView.push(d);
    }
    protect.push({ kind: exists(d) ? "noread" : "abs", pattern: d });
  }
  // The host's credential stores under a grant of a parent: hidden like a --deny-read, never made (host-credentials.ts).
  const stores = hiddenStores(host.credentials ?? credentialPaths(host.home, host.env), access, () => (input.named ?? []).flatMap((p) => {
    try {
      return [canonicalMaybe(p, workspace, "allow_read_redacted")];
    } catch {
      return [];
    }
  }));
  const own = (p: string) => denyRead.some((d) => isWithin(p, d)) || host.stateDirs.some((s) => isWithin(p, s));
  const hidden = [...stores.masked, ...stores.absent, ...stores.opened.map((o) => ({ path: o.path, why: o.why }))].filter((h) => !own(h.path));
  const hiddenWhy = new Map(hidden.map((h) => [h.path, h.why]));
  for (const h of stores.masked) {
    if (own(h.path)) continue;
    if (reduced) throw new VakError("unsupported", `${h.path}: ${h.why}; reduced mode cannot hide a path inside a grant; run from a narrower directory, or grant the store by name`);
    mounts.push({ kind: "mask", path: h.path, why: "a host credential store" });
    protect.push({ kind: "noread", pattern: h.path });
    deniedInView.push(h.path);
  }
  for (const h of stores.absent) if (!own(h.path)) protect.push({ kind: "abs", pattern: h.path });
  // A store a grant reaches inside of: read-only, its other entries masked above, the granted part bound on top.
  for (const o of stores.opened) {
    if (own(o.path)) continue;
    if (!reduced) mounts.push({ kind: "ro", path: o.path, why: "a host credential store, shown only where granted by name" });
    if (!o.writableInside) protect.push({ kind: "abs", pattern: o.path });
  }
  const ruleOf = (d: string) => (hiddenWhy.has(d) ? "is a host credential store Vak hides" : "--deny-read denies");
  // The content too: a denied file that git holds is readable as a blob (deny-read-git.ts).
  if (deniedInView.length > 0)
    refuseCommittedDenied(deniedInView, (p) => covered(p) && !denyRead.some((r) => isWithin(p, r)) && !deniedInView.some((r) => isWithin(p, r)), (d) => (hiddenWhy.has(d) ? `${d} (a host credential store Vak hides; --allow-read ${d} shows it)` : `--deny-read ${d}`));
  const links = deniedInView.length > 0 ? deniedLinks(deniedInView, [...access.keys()], ruleOf).held : [];
  for (const l of links) {
    mounts.push({ kind: "mask", path: l.path, why: l.why });
    protect.push({ kind: "noread", pattern: l.path });
  }
  for (const d of denyWrite) {
    if (!covered(d)) continue;
    if (!reduced && exists(d) && !access.has(d) && !denyRead.some((r) => isWithin(d, r))) mounts.push({ kind: "ro", path: d, why: "--deny-write" });
    protect.push({ kind: "abs", pattern: d });
  }

  // What the host will run or read that no name says: held wherever a writable grant reaches it.
  const writable = writableOf(access);
  const reach = (p: string) => writable.some((w) => isWithin(p, w) || isWithin(w, p));
  const ahead = input.heldAhead;
  const scanned = ahead && ahead.workspace === workspace && ahead.writable.join("\0") === writable.join("\0") ? ahead.found : undefined;
  if (scanned instanceof Error) throw scanned;
  const found = input.held ?? [...(host.install ? installHeld(host.install, writable) : []), ...(scanned ?? scanHeld(workspace, writable, host).held)];
  // A path a protected pattern already covers keeps the pattern's rule (and its clearer message).
  const byPattern = (p: string) => {
    const root = writable.filter((w) => isWithin(p, w)).sort((a, b) => b.length - a.length)[0];
    return root !== undefined && protectedMatch(p, { rootDepth: depth(root) }) !== undefined;
  };
  // A held path that only grants strictly inside it reach (`~/.codex/sessions` in a held `~/.codex`) is not
  // held: those grants are an explicit decision for that part of it, and no other part of it is writable.
  // Vak's own installation stays held whatever a grant says.
  const coveredByGrant = (p: string) => writable.some((w) => isWithin(p, w));
  const held = dedupe([...found]).filter(
    (h) => reach(h.path) && (coveredByGrant(h.path) || h.why === OWN_INSTALL) && !byPattern(h.path) && !host.stateDirs.some((s) => isWithin(h.path, s)),
  );
  for (const h of held) {
    protect.push({ kind: "abs", pattern: h.path });
    // Vak's own files also get a read-only mount where they are plain directories inside a writable grant.
    if (!reduced && !access.has(h.path) && h.why === OWN_INSTALL && isPlainDir(h.path)) mounts.push({ kind: "ro", path: h.path, why: OWN_INSTALL });
  }

  // A host tool's state: the tool on the host later writes there and follows what it finds, so the sandbox makes
  // only regular files and directories there (native/guard_links.c). Only where something is writable.
  const stateRoots = noLinks.filter((p) => writable.some((w) => isWithin(p, w) || isWithin(w, p)));
  // The tool on the host walks the path as written (CODEX_HOME=/w/.codex, /w/.codex -> codex-home), not the
  // resolved one: where they differ, the written one gets the rule too, so that no directory or link on its way
  // is moved or replaced (a link swapped for one to a directory holding links of the sandbox's choosing).
  const written = g.noLinks.map((p) => resolve(workspace, expandHome(p))).filter((p) => !noLinks.includes(p) && writable.some((w) => isWithin(p, w) || isWithin(w, p)));
  for (const p of [...new Set([...stateRoots, ...written])]) protect.push({ kind: "nolinks", pattern: p });

  if (protect.length + host.stateDirs.length + denyRead.length + denyWrite.length > MAX_PROTECT_RULES)
    throw new VakError("unsupported", `the writable grants reach ${held.length} paths Vak must hold read-only (links to protected files, git configuration, Vak's own files), more than the sandbox can carry (${MAX_PROTECT_RULES} rules); grant narrower writable paths`);

  // Vak's own state: never readable or writable from inside, even if a grant covers it.
  for (const s of host.stateDirs) {
    protect.push({ kind: "abs", pattern: s });
    if (!covered(s) || !exists(s)) continue;
    if (reduced) throw new VakError("unsupported", `a grant covers Vak's own state ${s}; reduced mode cannot hide it; grant narrower paths`);
    mounts.push({ kind: "mask", path: s, why: "Vak's own state" });
  }

  const network: Network = input.net && input.net.allow.length > 0 ? { kind: "gate", port: RELAY_PORT, grants: input.net } : { kind: "none" };
  if (network.kind === "gate" && reduced)
    throw new VakError("unsupported", "--allow-net: reduced mode has no private network namespace, so it cannot guarantee that traffic goes only through the egress gate");
  const preload = network.kind === "gate" && host.preloadDir && exists(host.preloadDir) ? host.preloadDir : undefined;
  if (preload && !covered(preload)) mounts.push({ kind: "ro", path: preload, why: "fetch-through-proxy preload for Node" });

  for (const f of input.files ?? []) {
    if (reduced) throw new VakError("unsupported", `${f.why}: reduced mode has no view of its own to write ${f.path} into; run with namespaces`);
    const over = mounts.find((m) => (m.kind === "ro" || m.kind === "rw" || m.kind === "mask") && isWithin(f.path, m.path));
    if (over) throw new VakError("bad-input", `${f.why}: ${f.path} is written into the view, but ${over.path} (${over.why}) is bound from the host there; grant narrower paths`);
    if (mounts.some((m) => m.path === f.path)) throw new VakError("bad-input", `${f.why}: ${f.path} is already in the view`);
    mounts.push({ kind: "file", path: f.path, content: f.content, why: f.why });
  }

  const ordered = orderMounts(mounts);
  const visible = (dir: string) => isVisible(dir, access) || ordered.some((m) => (m.kind === "ro" || m.kind === "rw") && isWithin(dir, m.path));
  // A PATH entry that is a link to a visible directory (/bin -> usr/bin) is not dropped.
  const pathDropped = (host.env.PATH ?? "").split(":").filter((d) => d.startsWith("/") && !visible(d) && !visible(realpathOr(d)));
  const env = sandboxEnv({
    host: host.env, allow: g.env, home, user: host.user, cwd, tmp,
    path: sandboxPath(host.env.PATH, visible), shell: host.shell,
  });
  Object.assign(env, input.setEnv ?? {});
  if (network.kind === "gate") {
    Object.assign(env, proxyEnv(network.port));
    if (preload) env.NODE_OPTIONS = `--require ${preload}/fetch-proxy.cjs`;
  }
  return {
    mode: input.mode, sandbox: input.sandbox, workspace, cwd, command: [...input.command], mounts: ordered, protect, env,
    limits: input.limits, defaultMaxProcs: DEFAULT_MAX_PROCS,
    grants: {
      read: [...access].filter(([, a]) => a === "ro").map(([p]) => p),
      write: [...access].filter(([, a]) => a === "rw").map(([p]) => p),
      denyRead, denyWrite, noLinks: stateRoots, env: [...g.env],
    },
    network,
    held: [...held, ...links],
    hidden,
    pathDropped: [...new Set(pathDropped)],
  };
}

/**
 * decide()'s first step: the canonical workspace, cwd and grants, and where each path is granted (none for
 * full access), with the same refusals. Also what heldAhead() walks.
 */
function granted(input: PlanInput) {
  if (input.command.length === 0 || !input.command[0]) throw new VakError("bad-input", "no command given; usage: vak exec [options] -- CMD [ARGS...]");
  const workspace = canonicalDir(input.workspace, "--workspace");
  const cwd = input.cwd ? canonicalDir(input.cwd, "--cwd") : workspace;
  const g = input.grants;
  // A repository config's relative path must still resolve inside its repository: it was checked when the config was
  // read, but this plan may come later (each command of an agent session), after a sandbox made the path a link.
  const grant = (p: string, flag: string): string => {
    const real = canonicalGrant(p, workspace, flag);
    for (const c of g.confined ?? []) {
      if (c.path !== p || isWithin(real, c.root)) continue;
      if (c.what === undefined)
        throw new VakError("path-escapes", `${flag} ${p}: a path of the repository config, which now leads out of the repository (to ${real}); it grants nothing outside ${c.root}`);
      throw new VakError("path-escapes", `${flag} ${p}: ${c.what} ${c.root}, now leads to ${real} (a link was made on its way); it grants nothing there`);
    }
    return real;
  };
  const read = g.read.map((p) => grant(p, "--allow-read"));
  const write = g.write.map((p) => grant(p, "--allow-write"));
  const denyRead = g.denyRead.map((p) => canonicalMaybe(p, workspace, "--deny-read"));
  const denyWrite = g.denyWrite.map((p) => canonicalMaybe(p, workspace, "--deny-write"));
  const noLinks = g.noLinks.map((p) => canonicalMaybe(p, workspace, "state_dirs"));
  const canonical = { workspace, cwd, g, read, write, denyRead, denyWrite, noLinks };
  if (input.mode === "full-access") return { ...canonical, access: undefined };
  if (input.sandbox === "none") throw new VakError("internal", "a restricted mode needs a sandbox");
  if (workspace === "/") throw new VakError("path-too-broad", "--workspace /: would grant the whole file system; choose a project directory");

  // The workspace itself, by mode; then explicit grants. Write wins over read for the same path.
  const access = new Map<string, "ro" | "rw">();
  access.set(workspace, input.mode === "workspace-write" ? "rw" : "ro");
  for (const p of read) if (!access.has(p)) access.set(p, "ro");
  for (const p of write) access.set(p, "rw");

  // Deny beats allow: a grant inside a denied path is dropped or made read-only.
  for (const [p, a] of [...access]) {
    if (denyRead.some((d) => isWithin(p, d))) access.delete(p);
    else if (a === "rw" && denyWrite.some((d) => isWithin(p, d))) access.set(p, "ro");
  }
  const deniedBy = denyRead.find((d) => isWithin(workspace, d));
  if (deniedBy) throw new VakError("bad-input", `the workspace ${workspace} is covered by --deny-read ${deniedBy}; nothing could run`);
  if (!isVisible(cwd, access)) throw new VakError("bad-input", `--cwd ${cwd}: not inside any granted path`);
  return { ...canonical, access };
}

/** The writable roots of a plan: where the held-path walk looks. */
const writableOf = (access: ReadonlyMap<string, "ro" | "rw">) => [...access].filter(([, a]) => a === "rw").map(([p]) => p);

/**
 * The held-path walk of a plan (scanHeld), done ahead of decide() in slices (scanHeldSliced), for a process that
 * serves others meanwhile (a broker's sessions, the resident host, MCP servers): decide() takes it, through
 * PlanInput.heldAhead, where its own workspace and writable roots are the same, and walks again otherwise (the
 * file system changed in between). Undefined where decide() walks nothing or refuses the input first.
 */
export async function heldAhead(input: PlanInput, host: HostFacts): Promise<HeldAhead | undefined> {
  if (input.held) return undefined;
  let workspace: string;
  let writable: string[];
  try {
    const g = granted(input);
    if (!g.access) return undefined;
    (workspace = g.workspace), (writable = writableOf(g.access));
  } catch {
    return undefined; // decide() refuses it, with the same error
  }
  try {
    return { workspace, writable, found: (await scanHeldSliced(workspace, writable, host)).held };
  } catch (e) {
    // Refused by decide(), where scanHeld would have thrown it.
    return { workspace, writable, found: e instanceof Error ? e : new Error(String(e)) };
  }
}

/** decide(), its held-path walk done first in slices (heldAhead): the same plan, or the same refusal. */
export async function decideSliced(input: PlanInput, host: HostFacts): Promise<LaunchPlan> {
  const ahead = await heldAhead(input, host);
  return decide(ahead ? { ...input, heldAhead: ahead } : input, host);
}

function realpathOr(p: string): string {
  try {
    return realpathSync.native(p);
  } catch {
    return p;
  }
}

function isPlainDir(p: string): boolean {
  try {
    return lstatSync(p, { throwIfNoEntry: false })?.isDirectory() ?? false;
  } catch {
    return false;
  }
}

function isVisible(p: string, access: Map<string, "ro" | "rw">): boolean {
  return [...access.keys()].some((a) => isWithin(p, a));
}

/** Adds one runtime path as the host has it: a symlink stays a symlink, anything else is bound read-only. */
function addRuntime(p: string, mounts: MountOp[], reduced: boolean): void {
  let st;
  try {
    st = lstatSync(p, { throwIfNoEntry: false });
  } catch {
    return;
  }
  if (!st) return;
  if (st.isSymbolicLink()) {
    // In reduced mode there is no view to put a symlink in; its target is granted where it is.
    if (!reduced) mounts.push({ kind: "symlink", path: p, target: readlinkSync(p), why: RUNTIME_WHY });
    return;
  }
  mounts.push({ kind: "ro", path: p, why: RUNTIME_WHY });
}

/**
 * Parents before children, so that a grant nested in another is mounted on top
 * of it. Equal paths cannot occur (the map above merged them).
 */
function orderMounts(mounts: MountOp[]): MountOp[] {
  return mounts
    .map((m, i) => ({ m, i }))
    .sort((a, b) => depth(a.m.path) - depth(b.m.path) || a.i - b.i)
    .map(({ m }) => m);
}

export { SANDBOX_HOSTNAME };
