import { readdirSync } from "node:fs";
import { join } from "node:path";
import { VakError } from "./errors.js";
import { installation } from "./install.js";
import { checkProfile, PROFILE_NAME, type Profile } from "./profile.js";
import { parseToml, readConfigText } from "./profiles-file.js";
import { tomlWhere } from "./toml-where.js";

/**
 * The presets: built-in profiles for everyday toolchains (git, npm, pip,
 * cargo, agent CLIs), one readable TOML file each in the package's presets/
 * directory, with the same keys as a `[profiles.NAME]` table. A preset is read
 * only when it is named (one small file), so that they cost nothing on a
 * run that names none. Vak's installation holds presets/ read-only wherever a
 * writable grant reaches it: what a preset says, the next run grants.
 */
export function presetsDir(): string {
  return installation().presetsDir;
}

/** A preset by name, or undefined when Vak ships none of that name. */
export function loadPreset(name: string, dir: string = presetsDir()): Profile | undefined {
  if (!PROFILE_NAME.test(name)) return undefined;
  const path = join(dir, `${name}.toml`);
  const text = readConfigText(path, false);
  if (text === undefined) return undefined;
  const shown = `presets/${name}.toml`;
  const where = tomlWhere(text);
  const data = parseToml(text, shown);
  const body = checkProfile(data, { file: shown, table: [], origin: "preset", line: where });
  return { name, origin: "preset", file: shown, table: [], body, line: (key) => (key ? where([key]) : 1) };
}

/** Every preset's name, sorted. */
export function presetNames(dir: string = presetsDir()): string[] {
  try {
    return readdirSync(dir)
      .filter((f) => f.endsWith(".toml"))
      .map((f) => f.slice(0, -5))
      .filter((n) => PROFILE_NAME.test(n))
      .sort();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") throw new VakError("internal", `Vak's presets are missing (${dir}); reinstall Vak`);
    throw e;
  }
}

/** Every preset, loaded (for hints: which one would grant what a command missed). */
export function allPresets(dir: string = presetsDir()): Profile[] {
  return presetNames(dir).flatMap((n) => loadPreset(n, dir) ?? []);
}
