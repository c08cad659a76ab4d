import { lstatSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { isWithin } from "../policy/paths.js";
import type { LaunchPlan } from "../policy/plan.js";
import { inView, type PresetEntry, presetFor } from "./exec-hints.js";
import { fmt, own, type Text } from "./output.js";

/**
 * `vak exec --explain`: after the run, what the command tried to reach and
 * could not, each with the flag or profile that would grant it: paths it
 * looked up that are not in its view but are on the host (the guard reports
 * lookups that missed, native/guard_explain.c; each is checked again here, on
 * the host, since the command chose it), the refusals already printed, the
 * PATH entries and variables left out. Never applies anything, never reads a
 * file's contents; de-duplicated by directory and bounded.
 */
export const MAX_EXPLAIN_DIRS = 20;
const MAX_NAMES_PER_DIR = 3;

interface Place {
  ops: Set<string>;
  names: Set<string>;
  more: boolean;
  /** The directory itself was looked up (listed, opened): granting it is what would help. */
  self: boolean;
}

export class Explain {
  private readonly dirs = new Map<string, Place>();
  private overflow = 0;
  /** The guard stopped reporting (its bound): more may have missed. */
  private truncated = false;
  /** Lines already said during the run (refusals), repeated in the summary. */
  private readonly said: Text[] = [];

  constructor(
    private readonly plan: LaunchPlan,
    private readonly home: string = homedir(),
  ) {}

  /** A lookup that missed inside: kept when the path is on the host and outside the view. */
  missing(op: string, path: string, more?: boolean): void {
    if (more) this.truncated = true;
    if (!path.startsWith("/")) return;
    const abs = resolve(path);
    // The kernel's own trees are the sandbox's (or absent) by design, never a grant to suggest: Node and Python
    // look up cgroup limits in /sys/fs/cgroup at every start.
    if (inView(this.plan, abs) || /^\/(proc|dev|sys)\//.test(abs)) return;
    const st = lstatSync(abs, { throwIfNoEntry: false });
    if (!st) return;
    const dir = st.isDirectory() ? abs : dirname(abs);
    let p = this.dirs.get(dir);
    if (!p) {
      if (this.dirs.size >= MAX_EXPLAIN_DIRS) return void (this.overflow += 1);
      p = { ops: new Set(), names: new Set(), more: false, self: false };
      this.dirs.set(dir, p);
    }
    p.ops.add(op);
    if (abs === dir) return void (p.self = true);
    const name = abs.slice(dir.length + 1);
    if (p.names.size < MAX_NAMES_PER_DIR) p.names.add(name);
    else if (!p.names.has(name)) p.more = true;
  }

  alsoSaid(line: Text): void {
    if (this.said.length < MAX_EXPLAIN_DIRS) this.said.push(line);
  }

  /**
   * The summary's lines, without the "vak: " prefix: Texts whose values (the
   * paths, names and variables the command chose) the output module redacts
   * and neutralises one by one.
   */
  lines(presets: PresetEntry[], droppedEnv: readonly string[]): Text[] {
    const out: Text[] = [];
    const orProfile = (p: string | undefined) => (p ? fmt`, or --profile ${p}` : own(""));
    for (const [dir, p] of this.dirs) {
      const names = p.names.size ? fmt` (${[...p.names].join(", ")}${p.more ? ", …" : ""})` : own("");
      // A file looked up in the home directory, a top-level one (/etc) or above: grant that file, not the whole
      // directory (~/.gitconfig is not a reason to show ~/.ssh), and name the preset that shows it.
      const files = [...p.names].map((n) => join(dir, n));
      const narrow = files.length > 0 && !p.more && !p.self && (dirname(dir) === dir || dirname(dir) === "/" || isWithin(this.home, dir));
      const grant = narrow ? files.join(",") : dir;
      const profile = narrow ? files.map((f) => presetFor(f, presets)).find(Boolean) : presetFor(dir, presets);
      out.push(fmt`  not in the view: ${dir}${names}, by ${[...p.ops].sort().join(", ")}: --allow-read ${grant}${orProfile(profile)}`);
    }
    if (this.overflow) out.push(fmt`  … and ${this.overflow} more paths outside the view in other directories`);
    if (this.truncated) out.push(own("  … and the sandbox stopped reporting lookups that missed after its bound: there may be more"));
    for (const l of this.said) out.push(fmt`  ${l}`);
    for (const d of this.plan.pathDropped) out.push(fmt`  left out of PATH: ${d}: --allow-read ${d}${orProfile(presetFor(d, presets))}`);
    for (const l of droppedEnv) out.push(fmt`  ${l}`);
    return [
      own(out.length ? "--explain: what the command tried to reach and could not (nothing was granted):" : "--explain: the command reached for nothing outside its grants"),
      ...out,
    ];
  }
}
