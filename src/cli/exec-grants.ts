import { closeSync, constants, mkdirSync, openSync } from "node:fs";
import { homedir } from "node:os";
import { dirname } from "node:path";
import { compose, type Composition, type FlagGrants, type Granted, type ProjectConfig } from "../policy/compose.js";
import { findProjectConfig, userConfigPath } from "../policy/config-paths.js";
import { VakError } from "../policy/errors.js";
import type { Grants, Mode } from "../policy/grants.js";
import type { Limits } from "../policy/limits.js";
import { shownPath } from "../policy/config-text.js";
import { canonicalDir, canonicalMaybe, exists, isWithin } from "../policy/paths.js";
import { BuiltPresets } from "../policy/presets-built.js";
import type { LimitKey } from "../policy/profile.js";
import type { ProfilesFile } from "../policy/profiles-file.js";
import { redactedCopies } from "../policy/redacted-files.js";
import { RUNTIME_DIRS, RUNTIME_ETC } from "../policy/runtime-set.js";
import type { LoadedProject } from "../policy/trust.js";

/** The flags that carry grants, as commander gives them. */
export interface GrantOptions {
  mode?: string | undefined;
  workspace?: string | undefined;
  allowRead?: string[];
  allowWrite?: string[];
  denyRead?: string[];
  denyWrite?: string[];
  allowNet?: string[];
  denyNet?: string[];
  allowEnv?: string[];
  secret?: string[];
  profile?: string[];
  timeout?: number;
  maxOutput?: number;
  maxProcs?: number;
  maxMemory?: number;
  maxFileSize?: number;
  maxCpu?: number;
}

/** Everything a run's grants come from, resolved: what decide() takes, and where each piece came from. */
export interface ResolvedGrants {
  composition: Composition;
  mode: Mode;
  workspace: string;
  grants: Grants;
  limits: Limits;
  allowNet: string[];
  denyNet: string[];
  secrets: string[];
  setEnv: Record<string, string>;
  files: { path: string; content: string; why: string }[];
  /** Credential-stripped copies: the file and the lines removed (never their content); includedBy for a file a git config includes. */
  redacted: { path: string; removed: string[]; source: Granted; includedBy?: string | undefined }[];
  /** Redacted files shown as they are (inside a bound path, nothing to strip): named by a profile, so a credential store among them is shown. */
  named: string[];
  user?: ProfilesFile | undefined;
  project?: LoadedProject | undefined;
  /** Lines for stderr before the run: what a repository config asked for and did not get, and the like. */
  notes: string[];
}

const LIMIT_FLAGS: Record<LimitKey, keyof GrantOptions> = {
  timeout: "timeout", max_output: "maxOutput", max_procs: "maxProcs", max_memory: "maxMemory", max_file_size: "maxFileSize", max_cpu: "maxCpu",
};

/**
 * Flags, the user's config ([exec] and profiles), presets and the
 * repository's config, composed into one run's grants. `execDefaults` is false
 * for an agent session, which takes named profiles only.
 */
export async function resolveGrants(opts: GrantOptions, ctx: GrantContext): Promise<ResolvedGrants> {
  const built = BuiltPresets.load();
  const needed = configNeeded(opts, ctx, built);
  return resolveGrantsWith(needed ? await import("./exec-config.js") : undefined, opts, ctx, built);
}

type GrantContext = { execDefaults: boolean; env?: NodeJS.ProcessEnv; home?: string };
type ConfigFiles = typeof import("./exec-config.js");

/**
 * Whether a config file is there to read, or a profile that the compiled presets cannot give alone (the TOML
 * parser and the presets' files load only then).
 */
function configNeeded(opts: GrantOptions, ctx: GrantContext, built: BuiltPresets | undefined): boolean {
  const env = ctx.env ?? process.env;
  const workspace = canonicalDir(opts.workspace ?? process.cwd(), "--workspace");
  if (exists(userConfigPath(env)) || findProjectConfig(workspace, ctx.home ?? homedir()) !== undefined) return true;
  return (opts.profile ?? []).some((p) => !built?.plain(p));
}

/** resolveGrants with the config module given (an agent session loads it statically: its start-up is not exec's). */
export function resolveGrantsWith(loaded: ConfigFiles | undefined, opts: GrantOptions, ctx: GrantContext, built?: BuiltPresets): ResolvedGrants {
  const env = ctx.env ?? process.env;
  const home = ctx.home ?? homedir();
  const workspace = canonicalDir(opts.workspace ?? process.cwd(), "--workspace");
  if (opts.mode !== undefined && opts.mode !== "read-only" && opts.mode !== "workspace-write" && opts.mode !== "full-access")
    throw new VakError("bad-input", `--mode ${opts.mode}: read-only or workspace-write`);
  const flags: FlagGrants = {
    mode: opts.mode === "full-access" ? undefined : (opts.mode as Mode | undefined),
    profiles: opts.profile ?? [],
    lists: {
      allow_read: opts.allowRead ?? [], allow_write: opts.allowWrite ?? [], deny_read: opts.denyRead ?? [], deny_write: opts.denyWrite ?? [],
      allow_net: opts.allowNet ?? [], deny_net: opts.denyNet ?? [], allow_env: opts.allowEnv ?? [], secrets: opts.secret ?? [],
    },
    // --timeout arrives in milliseconds (it takes 90s, 10m); a profile's timeout, like the plan's key, is in seconds.
    limits: Object.fromEntries(Object.entries(LIMIT_FLAGS).flatMap(([k, f]) => (opts[f] !== undefined ? [[k, k === "timeout" ? (opts[f] as number) / 1000 : (opts[f] as number)]] : []))),
  };
  // The TOML parser and the presets load only when there is a config file or a profile to read.
  const userPath = userConfigPath(env);
  const found = findProjectConfig(workspace, home);
  const needed = exists(userPath) || found !== undefined || flags.profiles.length > 0;
  const files = needed ? loaded : undefined;
  // A preset from the build's compiled copy while its file still says the same; else from its TOML.
  const preset = (n: string) => built?.preset(n) ?? files?.loadPreset(n);
  const user = files?.loadUserProfiles(userPath);
  const notes: string[] = [];
  let project: LoadedProject | undefined;
  if (found && files) {
    project = files.loadProject(found, files.readTrust());
    // Fail closed: a repository config Vak cannot read whole may hold deny rules; running without them would widen the run.
    if (project.broken) throw new VakError("bad-input", unreadableProject(project.broken));
  }
  const composition = compose({
    flags, user, project: project?.config as ProjectConfig | undefined, execDefaults: ctx.execDefaults, workspace, env, home,
    preset, presetNames: () => files?.presetNames() ?? built?.names() ?? [],
  });
  notes.push(...composition.ignored);
  const L = composition.lists;
  const values = (xs: Granted[]) => xs.map((x) => x.value);

  // Credential-stripped copies of the files a profile shows that way, and of what the git config among them include.
  const viewFiles: ResolvedGrants["files"] = [];
  const redacted: ResolvedGrants["redacted"] = [];
  const named: string[] = [];
  if (L.allow_read_redacted.length > 0) {
    const canon = (p: string) => {
      try {
        return [canonicalMaybe(p, workspace, "allow_read")];
      } catch {
        return [];
      }
    };
    const ctx = {
      home,
      bound: () => [workspace, ...[...L.allow_read, ...L.allow_write].flatMap((g) => canon(g.value)), ...RUNTIME_DIRS, ...RUNTIME_ETC],
      denied: () => L.deny_read.flatMap((g) => canon(g.value)),
    };
    // Inside a path bound from the host (the runtime set's /usr, a directory granted whole), no copy can be written:
    // the file is shown as it is where it holds no credential, and not at all where it holds one (nvm's
    // versions/node/*/etc/npmrc, a virtualenv's pip.conf, /usr/local/etc/npmrc).
    const bound = ctx.bound();
    const inside = (p: string) => {
      const real = canon(p); // once, not once for each bound path (the runtime set is about 40)
      return bound.some((b) => isWithin(p, b) || real.some((r) => isWithin(r, b)));
    };
    const toCopy: Granted[] = [];
    for (const g of L.allow_read_redacted) {
      if (!inside(g.value)) toCopy.push(g);
      else if (redactedCopies([g.value], ctx).some((c) => c.removed.length > 0)) L.deny_read.push({ ...g });
      else named.push(g.value);
    }
    const copies = redactedCopies(values(toCopy), ctx);
    for (const c of copies) {
      viewFiles.push({ path: c.path, content: c.content, why: `${shownPath(c.path, home)}${c.includedBy ? ` (included by ${c.includedBy})` : ""}, credentials removed` });
      redacted.push({ path: c.path, removed: c.removed, source: L.allow_read_redacted.find((g) => g.value === c.top)!, includedBy: c.includedBy });
    }
  }
  for (const [path, g] of composition.files) viewFiles.push({ path, content: g.value, why: `files ${path}` });

  const limits: Limits = {};
  const lim = composition.limits;
  if (lim.timeout) limits.timeoutMs = Math.round(lim.timeout.value * 1000);
  if (lim.max_output) limits.maxOutputBytes = lim.max_output.value;
  if (lim.max_procs) limits.maxProcs = lim.max_procs.value;
  if (lim.max_memory) limits.maxMemoryBytes = lim.max_memory.value;
  if (lim.max_file_size) limits.maxFileBytes = lim.max_file_size.value;
  if (lim.max_cpu) limits.maxCpuSeconds = lim.max_cpu.value;

  return {
    composition, mode: composition.mode, workspace,
    grants: {
      read: values(L.allow_read), write: values(L.allow_write), denyRead: values(L.deny_read), denyWrite: values(L.deny_write),
      noLinks: [...values(L.state_dirs), ...values(L.state_files)], env: values(L.allow_env),
      confined: [...L.allow_read, ...L.allow_write].flatMap((g) => (g.root ? [{ path: g.value, root: g.root }] : [])),
    },
    limits, allowNet: values(L.allow_net), denyNet: values(L.deny_net), secrets: values(L.secrets),
    setEnv: Object.fromEntries([...composition.setEnv].map(([k, g]) => [k, g.value])),
    files: viewFiles, redacted, named, user, project, notes,
  };
}

/** The refusal for a repository config that cannot be read: what is wrong with it (file:line: key), that nothing ran, and what to do. */
export function unreadableProject(why: string): string {
  return `${why}. Nothing was run: a repository config that cannot be read is refused, not skipped, since its deny rules would be lost; fix the file or remove it (\`vak trust\` shows it)`;
}

/** Makes the state directories and files a profile names that do not exist yet: directories 0700, empty files 0600, no link followed at the end. */
export function createStatePaths(list: Composition["create"]): void {
  for (const x of list) {
    try {
      if (x.kind === "dir") {
        mkdirSync(x.path, { recursive: true, mode: 0o700 });
        continue;
      }
      mkdirSync(dirname(x.path), { recursive: true, mode: 0o700 });
      try {
        closeSync(openSync(x.path, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW, 0o600));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      }
    } catch (e) {
      // A link on the way that leads nowhere, a file where a directory should be: said, not an internal error.
      const err = e as NodeJS.ErrnoException;
      throw new VakError("bad-input", `${x.kind === "dir" ? "state_dirs" : "state_files"} ${x.path} cannot be made (${err.code ?? err.message}): something on its way is a file, or a link that leads nowhere; nothing was run`);
    }
  }
}
