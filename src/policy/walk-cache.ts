import { lstatSync, type Stats, statfsSync } from "node:fs";

/**
 * What one directory adds to the held-path walk (held.ts), worked out from its
 * listing alone: the same for as long as the listing is the same.
 */
export interface DirShare {
  /** Entries listed, for the walk's budget. */
  entries: number;
  /** Subdirectories to walk, with the protected tree each is in (null: none). */
  subdirs: readonly (readonly [name: string, inProtected: string | null])[];
  /** Protected names that are links, and links below protected directories, with the pattern. */
  links: readonly (readonly [name: string, pattern: string])[];
  /** Protected regular files, with the pattern: their link counts are looked at on every walk. */
  files: readonly (readonly [name: string, pattern: string])[];
  /** `.git` entries here (directories or gitdir files) outside protected trees. */
  git: readonly string[];
  /** This directory is a bare git directory (HEAD, objects, refs). */
  bare: boolean;
}

/** A directory the walk could not list: gone (or not a directory), or unreadable (held whole). */
export type Unlisted = "absent" | "unreadable";

/**
 * Times in milliseconds with their fraction, as lstat gives them: a change after the record is at least
 * RACY_MS later than what it holds, far above the fraction's precision.
 */
interface DirRecord {
  dev: number;
  ino: number;
  ctime: number;
  mtime: number;
  /** The walk's context the share was worked out in (the root's depth, the protected tree). */
  context: string;
  share: DirShare;
}

/**
 * A directory's ctime is trusted only once it is this much older than the
 * clock: a change in the same tick as the listing (coarse timestamps: a
 * jiffy, two seconds on FAT) could leave it as it was, so a directory changed
 * that recently is read again next time.
 */
const RACY_MS = 3000;

/**
 * File systems whose directories' ctime changes with every entry made,
 * removed or renamed in them, and whose lstat answers from the inode itself.
 * Elsewhere (NFS, whose client caches attributes; FUSE, which may report any
 * time; overlayfs) every directory is read on every walk.
 */
const TRUSTED_FS = new Set([
  0xef53, // ext2/3/4
  0x58465342, // xfs
  0x9123683e, // btrfs
  0x01021994, // tmpfs
  0x2fc12fc1, // zfs
  0xf2f52010, // f2fs
  0xca451a4e, // bcachefs
]);

/** Past this many directories the cache is emptied before a walk (the resident host serves many trees). */
const MAX_RECORDS = 500_000;

/**
 * The held-path walk's cache of directories (ARCHITECTURE.md, "Held paths"):
 * a directory's share is taken from it while an lstat shows the directory as
 * it was when read (device, inode, ctime, mtime: a ctime no user can set,
 * changed by every entry made, removed or renamed in it), so a walk of an
 * unchanged tree costs one lstat per directory instead of a listing. A share
 * is never recorded for a directory changed within RACY_MS of the clock, on a
 * file system not known to keep ctime (TRUSTED_FS), or that could not be
 * read. Links counts are not cached: a hard link made elsewhere changes no
 * directory here, so protected files are looked at on every walk (held.ts).
 * It lives in the resident host for its life, or in a file of Vak's own cache
 * directory between in-process runs (src/cli/walk-cache-file.ts); both are
 * out of every sandbox's reach (Vak's state directories are masked and
 * guarded).
 */
export class WalkCache {
  private readonly records = new Map<string, DirRecord>();
  private readonly trustedDev = new Map<number, boolean>();
  /** Directories this cache was asked for since the last walk began, by root (what a file of a root keeps). */
  private readonly seen = new Map<string, Set<string>>();
  private readonly begun = new Set<string>();
  private root = "";
  hits = 0;
  misses = 0;
  /** Whether a record was made or dropped since the last save. */
  changed = false;

  /** load: called the first time a root is walked, to import what a file holds for it (src/cli/walk-cache-file.ts). */
  constructor(private readonly load?: (root: string) => void) {}

  /** Called before each root is walked. */
  beginRoot(root: string): void {
    if (this.records.size > MAX_RECORDS) {
      this.records.clear();
      this.changed = true;
    }
    this.root = root;
    this.seen.set(root, new Set());
    if (this.begun.has(root)) return;
    this.begun.add(root);
    this.load?.(root);
  }

  /**
   * The share of dir: the recorded one while dir is unchanged, else read()'s,
   * recorded when it can be trusted later. The lstat comes before the
   * listing, so a change between the two is a different ctime next time.
   */
  share(dir: string, context: string, read: () => DirShare | Unlisted): DirShare | Unlisted {
    this.seen.get(this.root)?.add(dir);
    let st: Stats | undefined;
    try {
      st = lstatSync(dir, { throwIfNoEntry: false });
    } catch {
      st = undefined;
    }
    const rec = this.records.get(dir);
    if (st && rec && rec.context === context && rec.dev === st.dev && rec.ino === st.ino && rec.ctime === st.ctimeMs && rec.mtime === st.mtimeMs && st.isDirectory()) {
      this.hits++;
      return rec.share;
    }
    this.misses++;
    const share = read();
    if (typeof share === "object" && st?.isDirectory() && this.trusted(dir, st) && !racy(st)) {
      this.records.set(dir, { dev: st.dev, ino: st.ino, ctime: st.ctimeMs, mtime: st.mtimeMs, context, share });
      this.changed = true;
    } else if (rec) {
      this.records.delete(dir);
      this.changed = true;
    }
    return share;
  }

  private trusted(dir: string, st: Stats): boolean {
    let ok = this.trustedDev.get(st.dev);
    if (ok === undefined) {
      try {
        ok = TRUSTED_FS.has(statfsSync(dir).type);
      } catch {
        ok = false;
      }
      this.trustedDev.set(st.dev, ok);
    }
    return ok;
  }

  /** The records of the directories under root asked for since its walk began, as plain data (for a file). */
  exportRoot(root: string): SavedRecord[] {
    const out: SavedRecord[] = [];
    for (const dir of this.seen.get(root) ?? []) {
      const r = this.records.get(dir);
      if (!r) continue;
      const rel = dir === root ? "" : dir.slice(root.length + 1);
      const s = r.share;
      out.push([rel, r.dev, r.ino, r.ctime, r.mtime, r.context, s.entries, s.subdirs, s.links, s.files, s.git, s.bare]);
    }
    return out;
  }

  /** Records read back from a file for root; false (nothing taken) if any of them is not as exportRoot writes them. */
  importRoot(root: string, saved: unknown): boolean {
    if (!Array.isArray(saved)) return false;
    const taken: [string, DirRecord][] = [];
    for (const r of saved) {
      const rec = parseRecord(r);
      if (!rec) return false;
      taken.push([rec[0] === "" ? root : `${root}/${rec[0]}`, rec[1]]);
    }
    for (const [dir, rec] of taken) this.records.set(dir, rec);
    return true;
  }

  get size(): number {
    return this.records.size;
  }
}

export type SavedRecord = [
  rel: string, dev: number, ino: number, ctime: number, mtime: number, context: string,
  entries: number, subdirs: DirShare["subdirs"], links: DirShare["links"], files: DirShare["files"], git: DirShare["git"], bare: boolean,
];

function racy(st: Stats): boolean {
  const now = Date.now();
  return st.ctimeMs > now - RACY_MS || st.mtimeMs > now - RACY_MS;
}

const isTime = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x) && x >= 0;
const isName = (x: unknown): x is string => typeof x === "string" && x.length > 0 && !x.includes("/") && !x.includes("\0") && x !== "." && x !== "..";
const isPairs = (x: unknown, second: (y: unknown) => boolean): x is [string, string][] =>
  Array.isArray(x) && x.every((p) => Array.isArray(p) && p.length === 2 && isName(p[0]) && second(p[1]));

/** One saved record, checked field by field; undefined if anything is off. */
function parseRecord(r: unknown): [string, DirRecord] | undefined {
  if (!Array.isArray(r) || r.length !== 12) return undefined;
  const [rel, dev, ino, ctime, mtime, context, entries, subdirs, links, files, git, bare] = r as unknown[];
  if (typeof rel !== "string" || rel.includes("\0") || rel.startsWith("/") || rel.split("/").some((c) => rel !== "" && !isName(c))) return undefined;
  if (!isTime(dev) || !isTime(ino) || !isTime(ctime) || !isTime(mtime)) return undefined;
  if (typeof context !== "string" || typeof entries !== "number" || !Number.isSafeInteger(entries) || entries < 0 || typeof bare !== "boolean") return undefined;
  if (!isPairs(subdirs, (y) => y === null || typeof y === "string") || !isPairs(links, (y) => typeof y === "string") || !isPairs(files, (y) => typeof y === "string")) return undefined;
  if (!Array.isArray(git) || !git.every(isName)) return undefined;
  return [
    rel,
    {
      dev, ino, ctime, mtime, context,
      share: { entries, subdirs, links, files, git, bare } as DirShare,
    },
  ];
}
