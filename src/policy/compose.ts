import { envHoldsCredential } from "./strip-credentials.js";
import { realpathSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { VakError } from "./errors.js";
import { expandValue } from "./expand.js";
import type { Mode } from "./grants.js";
import { DEFAULT_MAX_PROCS } from "./limits.js";
import { isWithin, starPaths } from "./paths.js";
import { keyError, LIMIT_KEYS, LIST_KEYS, type LimitKey, type ListKey, type Profile, reservedEnv } from "./profile.js";
import type { ProfilesFile } from "./profiles-file.js";

/**
 * Where each grant of a run comes from, and the grants themselves: flags,
 * the profiles named with --profile (and what they extend), a trusted
 * repository config, and the user's `[exec]` defaults, in that order of
 * precedence. Lists add up (deny still beats allow, in decide()); a scalar
 * (the mode, a limit) is taken from the most specific layer that sets it,
 * and among several profiles the narrowest. An untrusted repository config
 * only narrows: its deny rules, a read-only mode and its limits (as
 * ceilings) apply; everything else in it is ignored, and said.
 *
 * Reads the file system only to see which paths exist (a profile's path that
 * does not exist is skipped, and shown so); creates nothing (state
 * directories to create are returned for the caller to make).
 */
export type Source =
  | { kind: "flag"; flag: string }
  | { kind: "profile"; profile: Profile; key: string; via?: string | undefined }
  | { kind: "default" };

export interface Granted {
  /** As it applies: a path expanded (absolute, or relative to the workspace), a host rule, a variable name, NAME=REF. */
  value: string;
  /** As written, when it differs (a pattern, a ${…}). */
  written?: string | undefined;
  source: Source;
  /** A repository config's relative path: the repository it must stay in, whenever it is resolved (decide()'s grants.confined). */
  root?: string | undefined;
}

export interface Composition {
  mode: Mode;
  modeSource: Source;
  lists: Record<ListKey, Granted[]>;
  setEnv: Map<string, Granted>;
  files: Map<string, Granted>;
  limits: Partial<Record<LimitKey, { value: number; source: Source }>>;
  /** Entries that do not apply here, and why (a path that does not exist, a variable not set). */
  skipped: (Granted & { why: string })[];
  /** State directories and files that do not exist yet: the caller creates them (0700, or an empty 0600 file) before the run. */
  create: { path: string; kind: "dir" | "file" }[];
  /** The profiles applied, in order. */
  applied: Profile[];
  /** What the repository config asked for and did not get, as lines for stderr (an untrusted config's: a heading, then one line per entry, bounded). */
  ignored: string[];
}

export interface ProjectConfig {
  file: ProfilesFile;
  /** The directory holding .vak/: relative paths in it resolve here, and must stay here. */
  root: string;
  trusted: boolean;
  /** Trusted once, and edited since: the file at this path has a trust record for other content. */
  changed?: boolean | undefined;
}

export interface FlagGrants {
  mode?: Mode | undefined;
  lists: Partial<Record<ListKey, string[]>>;
  limits: Partial<Record<LimitKey, number>>;
  profiles: string[];
}

export interface ComposeInput {
  flags: FlagGrants;
  user?: ProfilesFile | undefined;
  project?: ProjectConfig | undefined;
  /** Whether the user's (and a trusted project's) [exec] defaults apply: `vak exec` yes, an agent session no. */
  execDefaults: boolean;
  workspace: string;
  env: NodeJS.ProcessEnv;
  home: string;
  preset: (name: string) => Profile | undefined;
  /** Every preset's name, for the message about an unknown profile (listed only then). */
  presetNames: () => string[];
}

const FLAG_OF: Record<ListKey, string> = {
  allow_read: "--allow-read", allow_write: "--allow-write", deny_read: "--deny-read", deny_write: "--deny-write",
  allow_read_redacted: "(none)", state_dirs: "(none)", state_files: "(none)", allow_net: "--allow-net", deny_net: "--deny-net",
  allow_env: "--allow-env", secrets: "--secret",
};
const NARROWING: readonly ListKey[] = ["deny_read", "deny_write", "deny_net"];
const PATH_KEYS: readonly ListKey[] = ["allow_read", "allow_write", "deny_read", "deny_write", "allow_read_redacted", "state_dirs", "state_files"];
const STATE: readonly ListKey[] = ["state_dirs", "state_files"];
const MUST_EXIST: readonly ListKey[] = ["allow_read", "allow_write", "allow_read_redacted"];
/** Keys whose profile paths may hold `*` as a whole component (paths.ts's starPaths). */
const STAR_KEYS: readonly ListKey[] = ["deny_read", "allow_read_redacted"];

/** How deep `extends` may nest: a chain of thousands in a repository's file made `vak trust` run for minutes. */
export const MAX_EXTENDS_DEPTH = 32;

/** The profiles a name stands for, what they extend first; cycles, unknown names and nesting past MAX_EXTENDS_DEPTH are errors naming where. */
export function expandProfiles(
  names: readonly { name: string; from: string; at?: { p: Profile; key: string } | undefined }[],
  lookup: (name: string) => Profile | undefined,
  known: () => string[],
  proposed: (name: string) => string = () => "",
): { profile: Profile; via: string }[] {
  const out: { profile: Profile; via: string }[] = [];
  const done = new Set<Profile>();
  // The names from the one being expanded down to here: one array, pushed and popped (a copy per step was quadratic).
  const chain: string[] = [];
  const visit = (name: string, from: string, at?: { p: Profile; key: string }) => {
    const p = lookup(name);
    if (!p) {
      const msg = `${name}: no such profile${proposed(name)}; the profiles are ${known().join(", ") || "(none)"}`;
      if (at) throw keyError(at.p.file, at.p.line(at.key), [...at.p.table, at.key], msg);
      throw new VakError("bad-input", `${from} ${msg}`);
    }
    // The line that closes the cycle (the extends that named this profile again), or that nests too deep.
    const w = at ?? { p, key: "extends" };
    if (chain.includes(name)) throw keyError(w.p.file, w.p.line(w.key), [...w.p.table, w.key], `extends itself: ${[...chain, name].join(" → ")}`);
    if (done.has(p)) return;
    if (chain.length >= MAX_EXTENDS_DEPTH)
      throw keyError(w.p.file, w.p.line(w.key), [...w.p.table, w.key], `extends nests deeper than ${MAX_EXTENDS_DEPTH} profiles: ${[...chain.slice(0, 3), "…", name].join(" → ")}`);
    chain.push(name);
    for (const e of p.body.extends) visit(e, from, { p, key: "extends" });
    chain.pop();
    done.add(p);
    out.push({ profile: p, via: from });
  };
  for (const n of names) visit(n.name, n.from, n.at);
  return out;
}

function emptyLists(): Record<ListKey, Granted[]> {
  return Object.fromEntries(LIST_KEYS.map((k) => [k, [] as Granted[]])) as unknown as Record<ListKey, Granted[]>;
}

const rank = (m: Mode): number => (m === "read-only" ? 0 : 1);

export function compose(input: ComposeInput): Composition {
  const c: Composition = {
    mode: "workspace-write", modeSource: { kind: "default" }, lists: emptyLists(), setEnv: new Map(), files: new Map(),
    limits: {}, skipped: [], create: [], applied: [], ignored: [],
  };
  const project = input.project;
  const trustedProject = project?.trusted ? project : undefined;
  const userProfiles = input.user?.profiles ?? new Map<string, Profile>();
  const projectProfiles = trustedProject?.file.profiles ?? new Map<string, Profile>();
  const lookup = (name: string): Profile | undefined => userProfiles.get(name) ?? input.preset(name) ?? projectProfiles.get(name);
  const known = () => [...new Set([...userProfiles.keys(), ...projectProfiles.keys(), ...input.presetNames()])];
  // A profile that only an untrusted repository config has: say so, and how to trust it, rather than only "no such profile".
  const proposed = (name: string): string => {
    const p = project && !project.trusted ? project.file.profiles.get(name) : undefined;
    if (!p) return "";
    return ` you or Vak define: ${p.file}:${p.line() ?? "?"} proposes it, but that repository config is not trusted${project!.changed ? " (it changed since you trusted it)" : ""}; review it and trust it with \`vak trust\``;
  };

  // A repository cannot shadow the user's profiles or Vak's presets.
  for (const [name, p] of projectProfiles)
    if (userProfiles.has(name) || input.preset(name)) c.ignored.push(`${p.file}:${p.line() ?? "?"}: [profiles.${name}] ignored: ${userProfiles.has(name) ? "a profile of yours" : "a preset"} has that name`);

  // 1. Flags.
  for (const key of LIST_KEYS) for (const v of input.flags.lists[key] ?? []) add(c, key, { value: v, source: { kind: "flag", flag: FLAG_OF[key] } }, input, undefined);
  for (const name of input.flags.lists.allow_env ?? []) {
    const why = reservedEnv(name);
    if (why) throw new VakError("bad-input", `--allow-env ${name}: ${why}`);
  }
  for (const k of LIMIT_KEYS) if (input.flags.limits[k] !== undefined) c.limits[k] = { value: input.flags.limits[k]!, source: { kind: "flag", flag: `--${k.replace(/_/g, "-")}` } };
  if (input.flags.mode) {
    c.mode = input.flags.mode;
    c.modeSource = { kind: "flag", flag: "--mode" };
  }

  // 2. Named profiles, 3. a trusted repository's [exec], 4. the user's [exec]: each with the profiles it names.
  const layers: { profiles: { profile: Profile; via: string }[] }[] = [];
  layers.push({ profiles: expandProfiles(input.flags.profiles.map((n) => ({ name: n, from: "--profile" })), lookup, known, proposed) });
  for (const exec of [input.execDefaults ? trustedProject?.file.exec : undefined, input.execDefaults ? input.user?.exec : undefined]) {
    if (!exec) continue;
    const named = exec.body.profiles.map((n) => ({ name: n, from: exec.name, at: { p: exec, key: "profiles" } }));
    layers.push({ profiles: [...expandProfiles(named, lookup, known, proposed), { profile: exec, via: exec.name }] });
  }
  const applied = new Set<Profile>();
  for (const layer of layers) {
    let layerMode: { mode: Mode; source: Source } | undefined;
    const layerLimits: Partial<Record<LimitKey, { value: number; source: Source }>> = {};
    for (const { profile, via } of layer.profiles) {
      if (applied.has(profile)) continue;
      applied.add(profile);
      c.applied.push(profile);
      const base = profile.origin.startsWith("project") ? project!.root : undefined;
      for (const key of LIST_KEYS)
        for (const v of profile.body.lists[key]) add(c, key, { value: v, source: { kind: "profile", profile, key, via } }, input, base);
      for (const [name, v] of Object.entries(profile.body.setEnv)) {
        if (c.setEnv.has(name)) continue;
        // A value may name the home directory and host variables, as paths do; one whose variable is not set is not set.
        const e = expandValue(v, input.env, input.home, vakVars(input));
        const source: Source = { kind: "profile", profile, key: "set_env", via };
        if (e.ok) c.setEnv.set(name, { value: e.value, written: e.value === v ? undefined : v, source });
        else c.skipped.push({ value: `${name}=${v}`, source, why: e.why });
      }
      for (const [path, v] of Object.entries(profile.body.files))
        if (!c.files.has(path)) c.files.set(path, { value: v, source: { kind: "profile", profile, key: "files", via } });
      const m = profile.body.mode;
      if (m && (!layerMode || rank(m) < rank(layerMode.mode))) layerMode = { mode: m, source: { kind: "profile", profile, key: "mode", via } };
      for (const k of LIMIT_KEYS) {
        const v = profile.body.limits[k];
        if (v !== undefined && (layerLimits[k] === undefined || v < layerLimits[k]!.value)) layerLimits[k] = { value: v, source: { kind: "profile", profile, key: k, via } };
      }
    }
    if (layerMode && c.modeSource.kind === "default") {
      c.mode = layerMode.mode;
      c.modeSource = layerMode.source;
    }
    for (const k of LIMIT_KEYS) if (c.limits[k] === undefined && layerLimits[k]) c.limits[k] = layerLimits[k];
  }

  // An untrusted repository config: only what narrows. A trusted one's [exec] narrows an agent session as much.
  if (project && !project.trusted) narrowBy(c, project, input);
  else if (trustedProject?.file.exec && !input.execDefaults) narrowWith(c, trustedProject.file.exec, trustedProject.root, input);
  return c;
}

/**
 * An [exec]'s deny rules and read-only mode, applied: while its file is untrusted (narrowBy, via "untrusted"),
 * and, trusted, in an agent session, where the rest of a trusted [exec] is vak exec's alone: trusting a file
 * never lifts a narrowing it asks for.
 */
function narrowWith(c: Composition, exec: Profile, root: string, input: ComposeInput, via?: "untrusted"): void {
  const source = (key: string): Source => ({ kind: "profile", profile: exec, key, ...(via ? { via } : {}) });
  for (const key of NARROWING) for (const v of exec.body.lists[key]) add(c, key, { value: v, source: source(key) }, input, root);
  if (exec.body.mode === "read-only" && c.mode !== "read-only") {
    c.mode = "read-only";
    c.modeSource = source("mode");
  }
}

/** What a limit is when no layer sets it, where that is not "none": an untrusted config's limit must be lower still. */
const UNSET_LIMIT: Partial<Record<LimitKey, number>> = { max_procs: DEFAULT_MAX_PROCS };

/** At most this many of an untrusted repository config's ignored entries are listed one by one; `vak trust` shows them all. */
export const MAX_IGNORED_SHOWN = 12;

function narrowBy(c: Composition, project: ProjectConfig, input: ComposeInput): void {
  const exec = project.file.exec;
  const name = project.file.shown;
  const ignored: { line: number | undefined; what: string }[] = [];
  const skip = (line: number | undefined, what: string) => ignored.push({ line, what });
  if (exec) {
    for (const key of LIST_KEYS) if (exec.body.lists[key].length && !NARROWING.includes(key)) skip(exec.line(key), key);
    // Asked for while the run is read-only already (a flag, a layer before): a widening, ignored.
    if (exec.body.mode === "workspace-write" && c.mode === "read-only") skip(exec.line("mode"), "mode");
    narrowWith(c, exec, project.root, input, "untrusted");
    // Limits are vak exec's (an agent session refuses any, and has its own per command), as a trusted [exec] is.
    for (const k of input.execDefaults ? LIMIT_KEYS : []) {
      const v = exec.body.limits[k];
      if (v === undefined) continue;
      // A ceiling only: below what the run has already, or below Vak's own default where a limit has one (an unset
      // max_procs is DEFAULT_MAX_PROCS, not unlimited; setting it higher would widen).
      const ceiling = c.limits[k]?.value ?? UNSET_LIMIT[k];
      if (ceiling === undefined || v < ceiling) c.limits[k] = { value: v, source: { kind: "profile", profile: exec, key: k, via: "untrusted" } };
      else skip(exec.line(k), `${k} = ${v}, not below ${ceiling}`);
    }
    if (exec.body.profiles.length) skip(exec.line("profiles"), `profiles = [${exec.body.profiles.join(", ")}]`);
    if (Object.keys(exec.body.setEnv).length) skip(exec.line("set_env"), "set_env");
    if (Object.keys(exec.body.files).length) skip(exec.line("files"), "files");
  }
  for (const [n, p] of project.file.profiles) skip(p.line(), `[profiles.${n}]`);
  for (const o of project.file.other) skip(o.line, `[${o.key}], which only your own config can say`);
  if (!ignored.length) return;
  // One line per entry, in the file's order, bounded: a long list on one line is not read.
  ignored.sort((a, b) => (a.line ?? Infinity) - (b.line ?? Infinity));
  c.ignored.push(`${name} is not trusted${project.changed ? " (it changed since you trusted it)" : ""}: only its deny rules, read-only mode and limits apply; ignored until you review and trust it with \`vak trust\`:`);
  for (const x of ignored.slice(0, MAX_IGNORED_SHOWN)) c.ignored.push(`  line ${x.line ?? "?"}: ${x.what}`);
  if (ignored.length > MAX_IGNORED_SHOWN) c.ignored.push(`  … and ${ignored.length - MAX_IGNORED_SHOWN} more (\`vak trust\` shows the whole file)`);
}

/** The names Vak defines for a profile's paths and values (expand.ts): the run's workspace. */
const vakVars = (input: ComposeInput): Record<string, string> => ({ VAK_WORKSPACE: isAbsolute(input.workspace) ? input.workspace : "" });

/**
 * The host variables a repository config's path may name: where things are. Any other would put what a
 * variable holds (a token) into a path that --print-plan, vak trust and the guard's refusals print, chosen
 * by whoever wrote the repository.
 */
const REPO_PATH_VARS = /^(HOME|TMPDIR|XDG_[A-Z]+_(HOME|DIR)|VAK_WORKSPACE)$/;

function add(c: Composition, key: ListKey, g: Granted, input: ComposeInput, projectRoot: string | undefined): void {
  const fromProfile = g.source.kind === "profile";
  if (fromProfile && PATH_KEYS.includes(key)) {
    const other = projectRoot ? [...g.value.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1]!).find((n) => !REPO_PATH_VARS.test(n)) : undefined;
    if (other) return void c.skipped.push({ ...g, why: `a repository config's path may name HOME, TMPDIR, XDG_*_HOME or VAK_WORKSPACE, not ${other}` });
    const e = expandValue(g.value, input.env, input.home, vakVars(input));
    if (!e.ok) return void c.skipped.push({ ...g, why: e.why });
    let value = e.value;
    if (STAR_KEYS.includes(key) && isAbsolute(value) && value.split("/").includes("*")) {
      // Each entry the host holds now: `~/.gemini/extensions/*/.env` is every extension's.
      for (const p of starPaths(value)) add(c, key, { ...g, value: p, written: g.written ?? g.value }, input, projectRoot);
      return;
    }
    if (projectRoot && !isAbsolute(value)) {
      // A repository's relative path is relative to the repository, and stays inside it.
      value = resolve(projectRoot, value);
      if (!isWithin(value, projectRoot)) return void c.skipped.push({ ...g, why: `outside the repository (${value})` });
    }
    const abs = isAbsolute(value) ? value : resolve(input.workspace, value);
    if (MUST_EXIST.includes(key) || STATE.includes(key)) {
      let real: string | undefined;
      try {
        real = realpathSync.native(abs);
      } catch {
        real = undefined;
      }
      if (projectRoot && real && !isAbsolute(e.value) && !isWithin(real, projectRoot)) return void c.skipped.push({ ...g, why: `a link out of the repository (${real})` });
      if (!real && STATE.includes(key)) {
        if (!c.create.some((x) => x.path === abs)) c.create.push({ path: abs, kind: key === "state_dirs" ? "dir" : "file" });
      }
      else if (!real) return void c.skipped.push({ ...g, value: abs, written: g.value, why: "does not exist" });
    }
    g = { ...g, value: projectRoot ? abs : value, written: e.value === g.value && !projectRoot ? undefined : g.value, root: projectRoot && !isAbsolute(e.value) ? projectRoot : undefined };
  }
  if (key === "allow_env" && g.value.endsWith("*")) {
    // A prefix: the host's variables that start with it, now.
    // A variable that looks like a credential is not passed by a pattern: name it (or make it a --secret).
    const prefix = g.value.slice(0, -1);
    for (const name of Object.keys(input.env).sort()) {
      const v = input.env[name];
      if (!name.startsWith(prefix) || v === undefined || reservedEnv(name)) continue;
      if (envHoldsCredential(name, v)) c.skipped.push({ ...g, value: name, written: g.value, why: `looks like a credential; pass it by name (allow_env = ["${name}"]) or as a secret` });
      else push(c, key, { ...g, value: name, written: g.value });
    }
    return;
  }
  if (STATE.includes(key)) {
    // Writable, and kept under its own key too: a host tool's state, where the sandbox makes no link (decide()'s noLinks).
    push(c, "allow_write", { ...g });
    push(c, key, { ...g });
    return;
  }
  push(c, key, g);
}

function push(c: Composition, key: ListKey, g: Granted): void {
  if (!c.lists[key].some((x) => x.value === g.value)) c.lists[key].push(g);
}

/** A set_env value that names a host variable (`${NAME}`, beyond the workspace Vak defines): its value is the host's, and may be a secret. */
export const fromHostEnv = (g: Granted): boolean => Boolean(g.written && /\$\{(?!VAK_WORKSPACE\})/.test(g.written));

/** How a person reads a source: the flag, or the profile and its file:line. */
export function describeSource(s: Source): string {
  switch (s.kind) {
    case "flag": return s.flag;
    case "default": return "default";
    case "profile": {
      const p = s.profile;
      const at = `${p.file}:${p.line(s.key) ?? "?"}`;
      if (p.origin === "exec") return `[exec] ${at}`;
      if (p.origin === "project-exec") return `${s.via === "untrusted" ? "untrusted repository config (narrows only)" : "repository config (trusted)"} ${at}`;
      if (p.origin === "preset") return `profile ${p.name} (preset ${at})`;
      if (p.origin === "project-profile") return `profile ${p.name} (repository, trusted, ${at})`;
      return `profile ${p.name} (${at})`;
    }
  }
}
