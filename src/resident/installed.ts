import { lstatSync, readdirSync, type Stats } from "node:fs";
import { join } from "node:path";

/**
 * Vak's installation as the host found it when it started, and whether it still is. The host serves with the
 * code it loaded then (and the chunks of its bundle it loads as runs need them): once the installation changed
 * (an upgrade, a rebuild), a run it served would be the old planner and launcher, a security fix in the new
 * version not applied, or a chunk its code asks for gone. An lstat per path on every request, nothing read.
 */

/**
 * The paths, under the package root, whose change is the installation's. Each way Vak's code is replaced changes
 * one of them: npm writes package.json anew on every install of the package (and a new directory: every path
 * here is then another inode); `npm run build:js` removes dist/ and writes it again; node-gyp's rebuild removes
 * build/, and a relink replaces each binary. A directory's own times change when a name in it is added, removed
 * or replaced; a file's when it is written over in place.
 */
export const WATCHED: readonly string[] = [
  "package.json",
  // The host's bundle: its entry, and (last, below) the directory of the chunks it loads later.
  "dist/resident-host/host.cjs",
  // The in-process CLI, which runs what the host sends back: the host must not serve other code than it.
  "dist/bin/vak.cjs",
  // What every run starts, what the host loaded once (its own addon, the egress gate's engine), and the client
  // that speaks the wire format to it.
  "build/Release/vak-launcher",
  "build/Release/vak-resident.node",
  "build/Release/vak-engine.node",
  "build/Release/vak-client",
];

/** Directories whose names are code: a build writes chunks under new names, or removes them all. */
export const WATCHED_DIRS: readonly string[] = ["dist/resident-host", "dist/bin"];

/** What identifies a file: which one it is (device, inode), and its size and times (ctime cannot be set back). */
export type Stamp = Pick<Stats, "dev" | "ino" | "size" | "mtimeMs" | "ctimeMs"> | undefined;

/** How a path changed between two stamps of it, or undefined if it did not. */
export function stampChange(before: Stamp, now: Stamp): string | undefined {
  if (!before) return now ? "appeared" : undefined;
  if (!now) return "was removed";
  if (now.dev !== before.dev || now.ino !== before.ino) return "was replaced";
  if (now.size !== before.size || now.mtimeMs !== before.mtimeMs || now.ctimeMs !== before.ctimeMs) return "was written";
  return undefined;
}

/** A path's stamp now; undefined when there is none to take (missing, or a parent that is not a directory). */
function stamp(path: string): Stamp {
  try {
    return lstatSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

export class Installed {
  private constructor(
    private readonly paths: readonly string[],
    private readonly stamps: readonly Stamp[],
    /** A path written after the process started: its code, loaded before the stamps were taken, may be the older. */
    private readonly late: string | undefined,
  ) {}

  /**
   * The installation at root as it is now: WATCHED, the in-process CLI's main chunk (dist/bin/start-HASH.cjs), and
   * WATCHED_DIRS, last (a file replaced changes its directory too: the file is what to name). `started`: when
   * this process started (its code was read from then on); a path changed since is a change already.
   */
  static at(root: string, started: number = performance.timeOrigin): Installed {
    let start: string[] = [];
    try {
      start = readdirSync(join(root, "dist", "bin")).filter((n) => /^start-[\w-]+\.cjs$/.test(n)).map((n) => `dist/bin/${n}`);
    } catch {
      // no CLI bundle: dist/bin's own stamp says so
    }
    const paths = [...WATCHED, ...start, ...WATCHED_DIRS].map((p) => join(root, p));
    const stamps = paths.map(stamp);
    // A ctime is the kernel's clock at its tick, never ahead of the time of the change: nothing written before
    // the process started is taken for later.
    return new Installed(paths, stamps, paths.find((_, i) => (stamps[i]?.ctimeMs ?? 0) > started));
  }

  /** Why the installation is no longer the one taken (its first path that changed, and how), or undefined. */
  changed(): string | undefined {
    if (this.late) return `${this.late} was written after this host started`;
    for (let i = 0; i < this.paths.length; i++) {
      const how = stampChange(this.stamps[i], stamp(this.paths[i]!));
      if (how) return `${this.paths[i]} ${how}`;
    }
    return undefined;
  }
}
