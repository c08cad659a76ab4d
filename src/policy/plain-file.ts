import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";

/**
 * The bytes of a regular file the host reads from a repository while it
 * plans (a hook, a script it runs, a denied file, git's pointers), opened
 * without following a link at its last component and without blocking on a
 * fifo. undefined if it cannot be opened or is not a regular file; one larger
 * than max is undefined too, or with head, read to max (its start is what
 * counts). A read that fails after the open throws.
 */
export function readPlainFile(path: string, max: number, head = false): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch {
    return undefined;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || (st.size > max && !head)) return undefined;
    const buf = Buffer.alloc(Math.min(st.size, max));
    let got = 0;
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, got);
      if (n === 0) break;
      got += n;
    }
    return buf.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}
