import { closeSync, constants, lstatSync, mkdirSync, openSync, readSync } from "node:fs";
import { createHash } from "node:crypto";

/** O_PATH is not in Node's fs.constants; this is Linux's value. */
const O_PATH = 0o10000000;

export class ChangedError extends Error {
  constructor(path: string) {
    super(`${path} changed while the operation ran (a symbolic link appeared on the path); nothing was done`);
    this.name = "ChangedError";
  }
}

/** The file is not the one a person approved a change of: changed since they were shown it. */
export class NotAsShownError extends Error {
  constructor(path: string, now: string) {
    super(`${path} changed after its diff was shown for approval (${now}); nothing was written: ask again to see it as it is`);
    this.name = "NotAsShownError";
  }
}

/** The SHA-256 of a file's text as the approver's diff showed it (decoded as UTF-8, as the read op does). */
export const textDigest = (data: Buffer): string => createHash("sha256").update(data.toString("utf8"), "utf8").digest("hex");

function components(path: string): string[] {
  const comps = path.split("/").filter((c) => c !== "");
  if (!path.startsWith("/") || comps.some((c) => c === "." || c === "..")) throw new Error(`not a canonical absolute path: ${path}`);
  return comps;
}

/** The name c inside the directory open as fd, as a path the kernel resolves through that fd. */
const at = (fd: number, c: string) => `/proc/self/fd/${fd}/${c}`;

function isLink(fd: number, c: string): boolean {
  try {
    return lstatSync(at(fd, c)).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * Walks the directories of a canonical path one component at a time, each
 * opened relative to the one before and never through a symlink, and calls
 * last() with the final directory's fd. With create, missing directories are
 * made on the way (mkdir never follows its final component).
 */
function walkDirs<T>(path: string, dirs: string[], create: boolean, last: (fd: number) => T): T {
  let dir = openSync("/", O_PATH | constants.O_DIRECTORY);
  try {
    for (const c of dirs) {
      let next: number;
      try {
        next = openSync(at(dir, c), O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === "ENOENT" && create) {
          try {
            mkdirSync(at(dir, c), 0o777);
          } catch (m) {
            if ((m as NodeJS.ErrnoException).code !== "EEXIST") throw m;
          }
          next = openSync(at(dir, c), O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW);
        } else if ((code === "ENOTDIR" || code === "ELOOP") && isLink(dir, c)) throw new ChangedError(path);
        else throw e;
      }
      closeSync(dir);
      dir = next;
    }
    return last(dir);
  } finally {
    closeSync(dir);
  }
}

/**
 * Opens a canonical absolute path without following a symlink anywhere on it.
 * The broker resolved and checked the path; if any component is a symlink now,
 * something swapped it in since, and the open fails rather than go elsewhere.
 */
export function openNoFollow(path: string, flags: number, mode = 0o666): number {
  const comps = components(path);
  const name = comps.pop();
  if (name === undefined) return openSync("/", flags | constants.O_NOFOLLOW, mode);
  return walkDirs(path, comps, false, (dir) => {
    try {
      return openSync(at(dir, name), flags | constants.O_NOFOLLOW, mode);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if ((code === "ELOOP" || code === "ENOTDIR") && isLink(dir, name)) throw new ChangedError(path);
      throw e;
    }
  });
}

/** mkdir -p of a canonical absolute path, never through a symlink. */
export function mkdirNoFollow(path: string): void {
  walkDirs(path, components(path), true, () => undefined);
}

/** Reads size bytes from an open file (fewer if it shrank meanwhile). */
export function readAll(fd: number, size: number): Buffer {
  const buf = Buffer.alloc(size);
  let got = 0;
  while (got < size) {
    const n = readSync(fd, buf, got, size - got, got);
    if (n === 0) break;
    got += n;
  }
  return buf.subarray(0, got);
}
