import { closeSync, constants, fstatSync, ftruncateSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { mkdirNoFollow, NotAsShownError, openNoFollow, readAll, textDigest } from "../fsx.js";
import type { OpResult } from "./result.js";

/**
 * Writes a whole file, creating it (and its directory) if needed. With a base (an approved write), the file
 * must still be what the approver was shown: absent for null, else text of that digest, checked on the
 * descriptor that is then written.
 */
export function write(op: { path: string; content: string }, base?: string | null): OpResult {
  mkdirNoFollow(dirname(op.path));
  // Not truncated on open: a FIFO or a device must be refused before anything is done to it.
  const flags = base === null ? constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL : base === undefined ? constants.O_WRONLY | constants.O_CREAT : constants.O_RDWR;
  let fd: number;
  try {
    fd = openNoFollow(op.path, flags | constants.O_NONBLOCK, 0o666);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (base === null && code === "EEXIST") throw new NotAsShownError(op.path, "it was shown as a new file and exists now");
    if (typeof base === "string" && code === "ENOENT") throw new NotAsShownError(op.path, "it no longer exists");
    throw e;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { error: { code: "bad-request", message: `${op.path} is not a regular file` } };
    if (typeof base === "string" && textDigest(readAll(fd, st.size)) !== base) throw new NotAsShownError(op.path, "its content is not the content shown");
    ftruncateSync(fd, 0);
    const bytes = Buffer.from(op.content, "utf8");
    let done = 0;
    while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done, done);
    return { output: `wrote ${bytes.length} bytes to ${op.path}`, truncated: false, data: { bytes: bytes.length } };
  } finally {
    closeSync(fd);
  }
}
