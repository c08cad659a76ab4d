import { closeSync, constants, fstatSync, ftruncateSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { mkdirNoFollow, openNoFollow } from "../fsx.js";
import type { OpResult } from "./result.js";

/** Writes a whole file, creating it (and its directory) if needed. */
export function write(op: { path: string; content: string }): OpResult {
  mkdirNoFollow(dirname(op.path));
  // Not truncated on open: a FIFO or a device must be refused before anything is done to it.
  const fd = openNoFollow(op.path, constants.O_WRONLY | constants.O_CREAT | constants.O_NONBLOCK, 0o666);
  try {
    if (!fstatSync(fd).isFile()) return { error: { code: "bad-request", message: `${op.path} is not a regular file` } };
    ftruncateSync(fd, 0);
    const bytes = Buffer.from(op.content, "utf8");
    let done = 0;
    while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done);
    return { output: `wrote ${bytes.length} bytes to ${op.path}`, truncated: false, data: { bytes: bytes.length } };
  } finally {
    closeSync(fd);
  }
}
