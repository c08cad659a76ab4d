import { closeSync, constants, fstatSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { installation } from "./install.js";
import { checkProfile, PROFILE_NAME, type Profile } from "./profile.js";
import { whereIn } from "./toml-where.js";

/** One preset as the build compiled it: its TOML text, what smol-toml made of it, and the line of every key (tomlLines). */
interface Compiled {
  text: string;
  data: unknown;
  lines: [string, number][];
}

/** Larger than any preset; a file past it is not compared (the TOML path reads it and says what is wrong). */
const MAX_PRESET_BYTES = 1 << 20;

/**
 * The presets as the build compiled them (dist/presets.json, scripts/presets-index.cjs), so that a run naming
 * only presets loads neither the TOML parser nor the configs chunk (~2 ms of `vak exec --profile git`). A
 * compiled preset is used only while presets/NAME.toml holds exactly the text it was compiled from, so the TOML
 * stays the one source: edited since, missing, a link or unreadable, it is not used, and the caller reads the
 * TOML (presets.ts), which also gives the errors. What the compiled data says is checked as the TOML's would be.
 */
export class BuiltPresets {
  private readonly profiles = new Map<string, Profile | undefined>();

  private constructor(
    private readonly compiled: ReadonlyMap<string, Compiled>,
    private readonly dir: string,
  ) {}

  /** undefined when the build made none (running from src without a build, or an older build). */
  static load(dist: string = installation().dist, presetsDir: string = installation().presetsDir): BuiltPresets | undefined {
    try {
      const all = JSON.parse(readFileSync(join(dist, "presets.json"), "utf8")) as Record<string, Compiled>;
      return new BuiltPresets(new Map(Object.entries(all)), presetsDir);
    } catch {
      return undefined;
    }
  }

  names(): string[] {
    return [...this.compiled.keys()].sort();
  }

  /** The preset, checked; undefined when there is no compiled copy that its file still matches. */
  preset(name: string): Profile | undefined {
    if (this.profiles.has(name)) return this.profiles.get(name);
    const c = PROFILE_NAME.test(name) ? this.compiled.get(name) : undefined;
    let p: Profile | undefined;
    if (c && this.current(name, c.text)) {
      const shown = `presets/${name}.toml`;
      const where = whereIn(new Map(c.lines));
      const body = checkProfile(c.data, { file: shown, table: [], origin: "preset", line: where });
      p = { name, origin: "preset", file: shown, table: [], body, line: (key) => (key ? where([key]) : 1) };
    }
    this.profiles.set(name, p);
    return p;
  }

  /**
   * Whether the preset, and every preset it extends, composes from the compiled copies alone: each current.
   * A file shown with its credentials stripped needs no TOML parser (redacted-files.ts).
   */
  plain(name: string, seen: Set<string> = new Set()): boolean {
    if (seen.has(name)) return true;
    seen.add(name);
    const p = this.preset(name);
    return p !== undefined && [...p.body.extends, ...p.body.profiles].every((e) => this.plain(e, seen));
  }

  /** Whether presets/NAME.toml, a regular file and no link, holds exactly `text`. */
  private current(name: string, text: string): boolean {
    let fd: number;
    try {
      fd = openSync(join(this.dir, `${name}.toml`), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch {
      return false;
    }
    try {
      const st = fstatSync(fd);
      if (!st.isFile() || st.size > MAX_PRESET_BYTES) return false;
      return readFileSync(fd, "utf8") === text;
    } catch {
      return false;
    } finally {
      closeSync(fd);
    }
  }
}
