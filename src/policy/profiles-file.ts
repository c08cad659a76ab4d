import { parse, TomlError } from "smol-toml";
import { readConfigText, shownPath } from "./config-text.js";
import { VakError } from "./errors.js";
import { checkProfile, keyError, PROFILE_NAME, type Profile, type ProfileOrigin } from "./profile.js";
import { userConfigPath } from "./config-paths.js";
import { tomlWhere } from "./toml-where.js";

/**
 * The profile tables of a config file: `[exec]` and `[profiles.NAME]`, each
 * checked with the line of every key. Used for the user's config (the
 * trusted tier, where every other section belongs to `loadUserConfig`) and
 * for a repository's `.vak/config.toml` (untrusted, where nothing else may
 * appear). Reading this is on `vak exec`'s start-up path: smol-toml and a
 * hand-written check, no zod.
 */
export interface ProfilesFile {
  /** The path as given, and as a person reads it (~ for the home directory). */
  path: string;
  shown: string;
  text: string;
  exec?: Profile | undefined;
  profiles: Map<string, Profile>;
  /** Top-level keys other than exec and profiles, with their lines. */
  other: { key: string; line: number | undefined }[];
}

/** The sections of the user's config (config.ts's schema has one key for each; a test keeps the two equal). */
export const USER_CONFIG_SECTIONS = ["journal", "model", "providers", "secret_commands", "mcp_servers", "approvals", "egress", "server", "exec", "profiles"] as const;
/** Sections of a repository config that another part of Vak reads, under its own approval (MCP proposals: `vak mcp approve`). */
export const PROJECT_ELSEWHERE = ["mcp_servers"] as const;

/** Parses TOML, naming the line of a syntax error. */
export function parseToml(text: string, shown: string): Record<string, unknown> {
  try {
    return parse(text) as Record<string, unknown>;
  } catch (e) {
    if (e instanceof TomlError) throw new VakError("bad-input", `${shown}:${e.line}: not valid TOML: ${e.message.split("\n")[0]!.replace(/^Invalid TOML document: /, "")}`);
    throw new VakError("bad-input", `${shown}: not valid TOML: ${(e as Error).message.split("\n")[0]}`);
  }
}

/** The profile tables of one config file's text. `tier` decides the origins (and so the trust) of what is in it. */
export function parseProfilesFile(path: string, text: string, tier: "user" | "project"): ProfilesFile {
  const shown = shownPath(path);
  const data = parseToml(text, shown);
  const where = tomlWhere(text);
  const make = (name: string, table: string[], origin: ProfileOrigin, raw: unknown): Profile => {
    const body = checkProfile(raw, { file: shown, table, origin, line: where });
    return { name, origin, file: shown, table, body, line: (key) => where(key ? [...table, key] : table) };
  };
  const out: ProfilesFile = { path, shown, text, profiles: new Map(), other: [] };
  for (const [key, value] of Object.entries(data)) {
    if (key === "exec") out.exec = make("[exec]", ["exec"], tier === "user" ? "exec" : "project-exec", value);
    else if (key === "profiles") {
      if (typeof value !== "object" || value === null || Array.isArray(value)) throw keyError(shown, where(["profiles"]), ["profiles"], "must be tables: [profiles.NAME]");
      for (const [name, raw] of Object.entries(value)) {
        if (!PROFILE_NAME.test(name)) throw keyError(shown, where(["profiles", name]), ["profiles", name], "not a profile name (letters, digits, . _ -)");
        out.profiles.set(name, make(name, ["profiles", name], tier === "user" ? "profile" : "project-profile", raw));
      }
    } else if (tier === "user" && !(USER_CONFIG_SECTIONS as readonly string[]).includes(key))
      throw keyError(shown, where([key]), [key], `unknown section; the sections are ${USER_CONFIG_SECTIONS.join(", ")}`);
    else if (tier === "project" && (PROJECT_ELSEWHERE as readonly string[]).includes(key)) continue;
    // A section of the user's config is named as ignored; one no version of Vak knows may be a newer Vak's rule, so it is an error.
    else if (tier === "project" && !(USER_CONFIG_SECTIONS as readonly string[]).includes(key))
      throw keyError(shown, where([key]), [key], `unknown section; a repository config holds [exec], [profiles.NAME] and [mcp_servers]`);
    else out.other.push({ key, line: where([key]) });
  }
  return out;
}

export { userConfigPath };
export { MAX_CONFIG_BYTES, readConfigText, shownPath } from "./config-text.js";

/**
 * The profile tables of the user's config ([exec], [profiles.NAME]), without
 * zod: what `vak exec` reads on every start. undefined when there is no config.
 */
export function loadUserProfiles(path: string = userConfigPath()): ProfilesFile | undefined {
  const text = readConfigText(path);
  return text === undefined ? undefined : parseProfilesFile(path, text, "user");
}
