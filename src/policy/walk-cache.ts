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
 * Times in milliseconds with their fraction, as lstat gives them: a change
 * after the record is at least RACY_MS later than what it holds, far above the
 * fraction's precision.
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
 * The held-path walk's cache of directories (ARCHITECTURE.md, "Held paths"),
 * kept by the resident host for every run it serves: a directory's share is
 * taken from it while an lstat shows the directory as it was when read
 * (device, inode, ctime, mtime: a ctime no user can set, changed by every
 * entry made, removed or renamed in it), so a walk of an unchanged tree costs
 * one lstat per directory instead of a listing. A share is never recorded for
 * a directory changed within RACY_MS of the clock, on a file system not known
 * to keep ctime (TRUSTED_FS), or that could not be read. Link counts are not
 * cached: a hard link made elsewhere changes no directory here, so protected
 * files are looked at on every walk (held.ts), as is everything read from a
 * file (git configuration, hooks, what runners name).
 */
export class WalkCache {
  private readonly records = new Map<string, DirRecord>();
  private readonly trustedDev = new Map<number, boolean>();
  hits = 0;
  misses = 0;

  /** Called before each root is walked. A device's file system is looked at again on each walk (a device number can be reused by another mount). */
  beginRoot(): void {
    if (this.records.size > MAX_RECORDS) this.records.clear();
    this.trustedDev.clear();
  }

  /**
   * The share of dir: the recorded one while dir is unchanged, else read()'s,
   * recorded when it can be trusted later. The lstat comes before the
   * listing, so a change between the two is a different ctime next time.
   */
  share(dir: string, context: string, read: () => DirShare | Unlisted): DirShare | Unlisted {
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
    if (typeof share === "object" && st?.isDirectory() && this.trusted(dir, st) && !racy(st))
      this.records.set(dir, { dev: st.dev, ino: st.ino, ctime: st.ctimeMs, mtime: st.mtimeMs, context, share });
    else if (rec) this.records.delete(dir);
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
}

function racy(st: Stats): boolean {
  const now = Date.now();
  return st.ctimeMs > now - RACY_MS || st.mtimeMs > now - RACY_MS;
}
