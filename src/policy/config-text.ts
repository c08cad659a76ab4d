/**
 * A config file's text, read safely, and a path as a person reads it: for the config files (profiles-file.ts)
 * and for the files a profile shows without their credentials (redacted-files.ts), which need no TOML parser.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import { homedir } from "node:os";
import { VakError } from "./errors.js";

/** Config files are small; a bigger one is refused rather than read. */
export const MAX_CONFIG_BYTES = 256 * 1024;

export function shownPath(path: string, home: string = homedir()): string {
  return home !== "/" && path.startsWith(home + "/") ? `~${path.slice(home.length)}` : path;
}

/**
 * Reads a config file without following a final link into a FIFO or a device:
 * a regular file of at most MAX_CONFIG_BYTES. undefined when it does not exist.
 */
export function readConfigText(path: string, follow = true): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | (follow ? 0 : constants.O_NOFOLLOW));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw new VakError("bad-input", `${shownPath(path)}: cannot be read (${code === "ELOOP" ? "it is a symbolic link" : (e as Error).message})`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new VakError("bad-input", `${shownPath(path)}: not a regular file`);
    if (st.size > MAX_CONFIG_BYTES) throw new VakError("bad-input", `${shownPath(path)}: over ${MAX_CONFIG_BYTES} bytes; a config file is never that big`);
    const buf = Buffer.alloc(st.size);
    let got = 0;
    while (got < st.size) {
      const n = readSync(fd, buf, got, st.size - got, got);
      if (n === 0) break;
      got += n;
    }
    const text = buf.subarray(0, got).toString("utf8");
    if (text.includes("\uFFFD")) throw new VakError("bad-input", `${shownPath(path)}: not UTF-8`);
    return text;
  } finally {
    closeSync(fd);
  }
}
