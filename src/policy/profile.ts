import { ENV_NAME } from "./env.js";
import { VakError } from "./errors.js";
import { parseSecretGrant } from "./secret-ref.js";
import { parseDuration, parseSeconds, parseSize, UnitError } from "./units.js";

/**
 * A profile: grants with a name. The same keys serve `[exec]` (the defaults
 * of every `vak exec`), `[profiles.NAME]` in the user's config, the presets
 * that ship with Vak (presets/*.toml), a repository's `.vak/config.toml`, and
 * a workload component's `profiles = [...]`. Each key is a `vak exec` flag in
 * snake_case, plus the few that only a file can say (set_env, files,
 * allow_read_redacted, state_dirs).
 *
 * Checked by hand, not with zod: `vak exec` reads profiles on every start, and
 * loading zod costs more than the sandbox. Unknown keys are refused, naming
 * the file, the line and the key, so that a typo never leaves a grant out.
 */
export type KeyKind =
  | "text" | "names" | "mode" | "paths" | "hosts" | "env-patterns" | "env-table" | "secrets" | "file-table" | "seconds" | "bytes" | "count";

/** Every key, what it holds, and where it may appear. */
export const PROFILE_KEYS = {
  description: { kind: "text", where: "profile", help: "one line: what the profile is for" },
  commands: { kind: "names", where: "profile", help: "the programs it is for (for hints: their variables, where they live)" },
  extends: { kind: "names", where: "profile", help: "profiles whose grants this one adds to" },
  profiles: { kind: "names", where: "use", help: "profiles applied here" },
  mode: { kind: "mode", where: "any", help: "read-only or workspace-write (full access is only ever a flag)" },
  allow_read: { kind: "paths", where: "any", help: "readable paths (--allow-read); a path that does not exist is skipped" },
  allow_write: { kind: "paths", where: "any", help: "writable paths (--allow-write); a path that does not exist is skipped" },
  deny_read: { kind: "paths", where: "any", help: "never readable (--deny-read)" },
  deny_write: { kind: "paths", where: "any", help: "never writable (--deny-write)" },
  allow_read_redacted: { kind: "paths", where: "any", help: "files shown with their credentials removed (tokens, passwords, user:password@ in URLs; a git config file by git's grammar, with what it includes)" },
  state_dirs: { kind: "paths", where: "any", help: "a tool's own state directories, which the tool on the host writes too: created (0700) if missing, then writable, with only regular files and directories made there (no link, FIFO or socket)" },
  state_files: { kind: "paths", where: "any", help: "a tool's own state files (locks, caches): created empty (0600) if missing, then writable, never replaced by a link" },
  allow_net: { kind: "hosts", where: "any", help: "reachable through the egress gate (--allow-net)" },
  deny_net: { kind: "hosts", where: "any", help: "never reachable (--deny-net)" },
  allow_env: { kind: "env-patterns", where: "any", help: "host variables passed (--allow-env); NAME or PREFIX_*" },
  set_env: { kind: "env-table", where: "any", help: "variables set inside: NAME = \"value\" (~ and ${NAME} expand as in paths)" },
  secrets: { kind: "secrets", where: "any", help: "secrets by reference (--secret NAME=REF)" },
  files: { kind: "file-table", where: "any", help: "files written into the view (never on the host): \"/abs/path\" = \"content\"" },
  timeout: { kind: "seconds", where: "any", help: "--timeout: seconds, or \"90s\", \"10m\", \"1h30m\"" },
  max_output: { kind: "bytes", where: "any", help: "--max-output: bytes, or \"50M\", \"1G\" (powers of 1024)" },
  max_procs: { kind: "count", where: "any", help: "--max-procs" },
  max_memory: { kind: "bytes", where: "any", help: "--max-memory: bytes, or \"512M\", \"2G\" (powers of 1024)" },
  max_file_size: { kind: "bytes", where: "any", help: "--max-file-size: bytes, or \"100M\" (powers of 1024)" },
  max_cpu: { kind: "seconds", where: "any", help: "--max-cpu: whole seconds, or \"90s\", \"10m\"" },
} as const satisfies Record<string, { kind: KeyKind; where: "any" | "profile" | "use"; help: string }>;
export type ProfileKey = keyof typeof PROFILE_KEYS;

export const LIMIT_KEYS = ["timeout", "max_output", "max_procs", "max_memory", "max_file_size", "max_cpu"] as const;
export type LimitKey = (typeof LIMIT_KEYS)[number];
export const LIST_KEYS = ["allow_read", "allow_write", "deny_read", "deny_write", "allow_read_redacted", "state_dirs", "state_files", "allow_net", "deny_net", "allow_env", "secrets"] as const;
export type ListKey = (typeof LIST_KEYS)[number];

export interface ProfileBody {
  description?: string | undefined;
  commands: string[];
  extends: string[];
  profiles: string[];
  mode?: "read-only" | "workspace-write" | undefined;
  lists: Record<ListKey, string[]>;
  setEnv: Record<string, string>;
  files: Record<string, string>;
  limits: Partial<Record<LimitKey, number>>;
}

/** What kind of table a profile came from: it decides which keys it may hold and how far it is trusted. */
export type ProfileOrigin = "exec" | "profile" | "preset" | "project-exec" | "project-profile";

export interface Profile {
  /** The profile's name; "[exec]" for the defaults table. */
  name: string;
  origin: ProfileOrigin;
  /** The file it is in, as the user knows it (~ for the home directory). */
  file: string;
  /** The key path of its table in that file: ["profiles", "work"], ["exec"], [] for a preset. */
  table: string[];
  body: ProfileBody;
  /** The line of a key (or of the table when the key is absent). */
  line(key?: string): number | undefined;
}

export const PROFILE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const PATTERN = /^[A-Za-z_][A-Za-z0-9_]*\*?$/;

/**
 * Variables that describe the sandbox, set by Vak last: a profile or a flag
 * cannot pass the host's value or set its own. PATH is the host's PATH less
 * the directories the sandbox cannot see (said when it matters).
 */
export const VAK_SET_ENV: ReadonlySet<string> = new Set(["PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "TMPDIR"]);
/** Variables Vak points at the egress gate when there is a network grant. */
const PROXY_ENV = new Set(["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy", "NODE_OPTIONS"]);

/** Why a variable cannot be passed or set, or undefined when it can. */
export function reservedEnv(name: string): string | undefined {
  if (name === "PATH")
    return "PATH inside is always the host's PATH less the directories the sandbox cannot see (vak names those it drops); grant a directory with --allow-read DIR (or a profile: --profile python, rust) to keep it on PATH";
  if (VAK_SET_ENV.has(name)) return `${name} describes the sandbox (its private HOME, TMPDIR, user and working directory); Vak sets it`;
  if (PROXY_ENV.has(name)) return `${name} is Vak's: with a network grant it points at the egress gate, and without one nothing can be reached`;
  return undefined;
}

export const MAX_FILE_CONTENT = 64 * 1024;

function emptyBody(): ProfileBody {
  const lists = Object.fromEntries(LIST_KEYS.map((k) => [k, [] as string[]])) as unknown as Record<ListKey, string[]>;
  return { commands: [], extends: [], profiles: [], lists, setEnv: {}, files: {}, limits: {} };
}

/** A checked error for a key: file:line: table.key: message. */
export function keyError(file: string, line: number | undefined, path: readonly string[], message: string): VakError {
  return new VakError("bad-input", `${file}${line ? `:${line}` : ""}: ${path.join(".") || "(top level)"}: ${message}`);
}

const isTable = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);

/**
 * Checks one profile table. `origin` decides which keys belong: `extends`
 * and the descriptive keys in a profile or preset, `profiles` where profiles
 * are used ([exec]).
 */
export function checkProfile(raw: unknown, ctx: { file: string; table: string[]; origin: ProfileOrigin; line: (path: readonly string[]) => number | undefined }): ProfileBody {
  const at = (key: string | undefined, message: string, extra: string[] = []) => {
    const path = key === undefined ? ctx.table : [...ctx.table, key, ...extra];
    return keyError(ctx.file, ctx.line(path), path, message);
  };
  if (!isTable(raw)) throw at(undefined, "must be a table of grants");
  const body = emptyBody();
  const isProfile = ctx.origin === "profile" || ctx.origin === "preset" || ctx.origin === "project-profile";
  for (const [key, value] of Object.entries(raw)) {
    const spec = (PROFILE_KEYS as Record<string, { kind: KeyKind; where: string }>)[key];
    if (!spec) throw at(key, `unknown key; the keys are ${Object.keys(PROFILE_KEYS).filter((k) => placeOk(k, isProfile)).join(", ")}`);
    if (!placeOk(key, isProfile))
      throw at(key, isProfile ? "a profile adds to others with `extends`, not `profiles`" : "`extends` belongs in a [profiles.NAME] table; here, name the profiles to apply with `profiles`");
    const strings = (check?: (s: string) => string | undefined, list: unknown = value): string[] => {
      if (!Array.isArray(list)) throw at(key, "must be a list of strings");
      return list.map((v, i) => {
        if (typeof v !== "string" || v === "") throw at(key, `item ${i + 1} must be a non-empty string`);
        if (v.includes("\0")) throw at(key, `item ${i + 1} contains a NUL byte`);
        const problem = check?.(v);
        if (problem) throw at(key, `${JSON.stringify(v)}: ${problem}`);
        return v;
      });
    };
    switch (spec.kind) {
      case "text":
        if (typeof value !== "string" || value.length > 300) throw at(key, "must be a string of at most 300 characters");
        body.description = value;
        break;
      case "names": {
        // One profile may be written as a string: extends = "git" is extends = ["git"].
        const names = strings((s) => (PROFILE_NAME.test(s) ? undefined : "not a name (letters, digits, . _ -)"), typeof value === "string" && key !== "commands" ? [value] : value);
        if (key === "commands") body.commands = names;
        else if (key === "extends") body.extends = names;
        else body.profiles = names;
        break;
      }
      case "mode":
        if (value === "full-access") throw at(key, "full access is never a default: it is only ever the explicit flag --full-access");
        if (value !== "read-only" && value !== "workspace-write") throw at(key, 'must be "read-only" or "workspace-write"');
        body.mode = value;
        break;
      case "paths":
      case "hosts":
      case "secrets":
        body.lists[key as ListKey] = strings(spec.kind === "secrets" ? secretProblem : undefined);
        break;
      case "env-patterns":
        body.lists.allow_env = strings((s) => {
          if (!PATTERN.test(s)) return "not a variable name, or a prefix ending in * (PIP_*)";
          return s.endsWith("*") ? undefined : reservedEnv(s);
        });
        break;
      case "env-table":
        if (!isTable(value)) throw at(key, 'must be a table: NAME = "value"');
        for (const [name, v] of Object.entries(value)) {
          if (!ENV_NAME.test(name)) throw at(key, "not a variable name", [name]);
          const reserved = reservedEnv(name);
          if (reserved) throw at(key, reserved, [name]);
          if (typeof v !== "string" || v.includes("\0") || v.length > 4096) throw at(key, "must be a string (at most 4096 characters, no NUL)", [name]);
          body.setEnv[name] = v;
        }
        break;
      case "file-table":
        if (!isTable(value)) throw at(key, 'must be a table: "/absolute/path" = "content"');
        for (const [path, v] of Object.entries(value)) {
          const problem = viewFileProblem(path);
          if (problem) throw at(key, problem, [path]);
          if (typeof v !== "string" || v.includes("\0") || Buffer.byteLength(v) > MAX_FILE_CONTENT) throw at(key, `must be a string of at most ${MAX_FILE_CONTENT} bytes, no NUL`, [path]);
          body.files[path] = v;
        }
        break;
      case "seconds":
      case "bytes":
      case "count":
        body.limits[key as LimitKey] = limitValue(key, spec.kind, value, (m) => at(key, m));
        break;
    }
  }
  return body;
}

/**
 * A limit as the flags take it: a positive whole number (bytes, seconds, a
 * count), or for sizes and durations the same text the flag accepts ("50M",
 * "10m"), with the flag's message for a bad one. timeout is in seconds and
 * may be fractional ("1.5s"), as --timeout; max_cpu is whole seconds.
 */
function limitValue(key: string, kind: "seconds" | "bytes" | "count", value: unknown, error: (message: string) => VakError): number {
  const unit = kind === "bytes" ? " of bytes" : kind === "seconds" ? " of seconds" : "";
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value) || value <= 0) throw error(`must be a positive whole number${unit}${kind === "count" ? "" : `, or a string such as ${kind === "bytes" ? '"50M"' : '"10m"'}`}`);
    return value;
  }
  if (typeof value !== "string" || kind === "count") throw error(`must be a positive whole number${unit}${kind === "count" ? "" : `, or a string such as ${kind === "bytes" ? '"50M"' : '"10m"'}`}`);
  try {
    if (kind === "bytes") return parseSize(value);
    return key === "max_cpu" ? parseSeconds(value) : parseDuration(value) / 1000;
  } catch (e) {
    if (e instanceof UnitError) throw error(`${JSON.stringify(value)}: ${e.message}`);
    throw e;
  }
}

function placeOk(key: string, isProfile: boolean): boolean {
  const where = (PROFILE_KEYS as Record<string, { where: string }>)[key]?.where;
  return where === "any" || (where === "profile" ? isProfile : !isProfile);
}

/** What is wrong with a secret grant (NAME=REF[@HOST,HOST]), in the words --secret would use, if anything. */
function secretProblem(spec: string): string | undefined {
  try {
    parseSecretGrant(spec, "it");
    return undefined;
  } catch (e) {
    if (e instanceof VakError) return e.message.replace(/^it: /, "");
    throw e;
  }
}

/** Why a path cannot be a file written into the view, if it cannot. */
export function viewFileProblem(path: string): string | undefined {
  if (!path.startsWith("/") || path.includes("\0")) return "must be an absolute path";
  const parts = path.split("/").slice(1);
  if (parts.some((p) => p === "" || p === "." || p === "..")) return "must be a plain absolute path (no //, . or ..)";
  if (["proc", "dev", "sys"].includes(parts[0]!)) return "/proc, /dev and /sys are the kernel's";
  return undefined;
}
