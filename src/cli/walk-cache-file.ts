import { createHash } from "node:crypto";
import { closeSync, constants, existsSync, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { heldShareVersion } from "../policy/held.js";
import { vakDirs } from "../policy/state.js";
import { WalkCache } from "../policy/walk-cache.js";

/** A file larger than this is not read (a tree of some 300,000 directories), nor written. */
const MAX_BYTES = 64 << 20;

/** Files kept, one per root walked: past this, a new one makes room by removing the least recently written. */
const MAX_FILES = 200;

const FORMAT = "vak held-walk cache 1";

interface Saved {
  format: string;
  version: string;
  root: string;
  records: unknown;
}

/**
 * The held-path walk's cache between in-process runs of `vak exec`: a file
 * per walked root in Vak's own cache directory (XDG_CACHE_HOME/vak/held-walk,
 * 0700; masked and guarded in every sandbox), read as the walk reaches the
 * root and written after the plan, when a record was made or dropped. A file
 * of another build of Vak (heldShareVersion), of another root, or that does
 * not parse is ignored, and then written anew: the walk reads the directories
 * itself, as without a cache.
 */
export class WalkCacheFile {
  readonly cache: WalkCache;
  private readonly dir: string;
  private readonly roots: string[] = [];
  private version: string | undefined;

  constructor(env: NodeJS.ProcessEnv) {
    this.dir = join(vakDirs(env).cache, "held-walk");
    this.cache = new WalkCache((root) => this.load(root));
  }

  private file(root: string): string {
    return join(this.dir, `${createHash("sha256").update(root).digest("hex").slice(0, 32)}.json`);
  }

  private load(root: string): void {
    this.roots.push(root);
    this.version ??= heldShareVersion();
    let text: string;
    try {
      const fd = openSync(this.file(root), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      try {
        const st = fstatSync(fd);
        if (!st.isFile() || st.size > MAX_BYTES) return;
        text = readFileSync(fd, "utf8");
      } finally {
        closeSync(fd);
      }
    } catch {
      return; // none yet
    }
    let saved: Partial<Saved>;
    try {
      saved = JSON.parse(text) as Partial<Saved>;
    } catch {
      return;
    }
    if (saved.format !== FORMAT || saved.version !== this.version || saved.root !== root) return;
    this.cache.importRoot(root, saved.records);
  }

  /** Writes the file of each root walked, if the walk changed what is recorded. Never fails a run. */
  save(): void {
    if (!this.cache.changed || !this.version) return;
    this.cache.changed = false;
    try {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    } catch {
      return;
    }
    for (const root of this.roots) {
      const text = JSON.stringify({ format: FORMAT, version: this.version, root, records: this.cache.exportRoot(root) } satisfies Saved);
      if (text.length > MAX_BYTES) continue;
      const file = this.file(root);
      const fresh = !existsSync(file);
      const tmp = `${file}.${process.pid}.tmp`;
      try {
        writeFileSync(tmp, text, { mode: 0o600, flag: "wx" });
        renameSync(tmp, file);
      } catch {
        rmSync(tmp, { force: true });
      }
      if (fresh) this.prune();
    }
  }

  /** Keeps the MAX_FILES most recently written files (a workspace not used for long loses its file first). */
  private prune(): void {
    let names: string[];
    try {
      names = readdirSync(this.dir).filter((n) => n.endsWith(".json"));
    } catch {
      return;
    }
    if (names.length <= MAX_FILES) return;
    const byAge = names.map((n) => ({ n, t: lstatSync(join(this.dir, n), { throwIfNoEntry: false })?.mtimeMs ?? 0 })).sort((a, b) => a.t - b.t);
    for (const { n } of byAge.slice(0, names.length - MAX_FILES)) rmSync(join(this.dir, n), { force: true });
  }
}
