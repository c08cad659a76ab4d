import { closeSync, constants, fstatSync, ftruncateSync, writeSync } from "node:fs";
import { openNoFollow, readAll } from "../fsx.js";
import type { OpResult } from "./result.js";

const MAX_FILE = 16 * 1024 * 1024;

/** Replaces an exact piece of text; it must occur exactly once unless replaceAll is set. */
export function edit(op: { path: string; old: string; new: string; replaceAll?: boolean | undefined }): OpResult {
  const rfd = openNoFollow(op.path, constants.O_RDONLY | constants.O_NONBLOCK);
  let text: string;
  try {
    const st = fstatSync(rfd);
    if (!st.isFile()) return { error: { code: "bad-request", message: `${op.path} is not a regular file` } };
    if (st.size > MAX_FILE) return { error: { code: "too-large", message: `${op.path} is too large to edit (${st.size} bytes)` } };
    text = readAll(rfd, st.size).toString("utf8");
  } finally {
    closeSync(rfd);
  }
  const count = text.split(op.old).length - 1;
  if (count === 0) return { error: { code: "not-found", message: `the text to replace does not occur in ${op.path}` } };
  if (count > 1 && !op.replaceAll)
    return { error: { code: "not-unique", message: `the text to replace occurs ${count} times in ${op.path}; give more context to make it unique, or set replaceAll` } };
  const next = op.replaceAll ? text.split(op.old).join(op.new) : text.replace(op.old, () => op.new);
  const wfd = openNoFollow(op.path, constants.O_WRONLY | constants.O_NONBLOCK);
  try {
    if (!fstatSync(wfd).isFile()) return { error: { code: "changed", message: `${op.path} is no longer a regular file; nothing was written` } };
    ftruncateSync(wfd, 0);
    const bytes = Buffer.from(next, "utf8");
    let done = 0;
    while (done < bytes.length) done += writeSync(wfd, bytes, done, bytes.length - done);
  } finally {
    closeSync(wfd);
  }
  return { output: `replaced ${op.replaceAll ? count : 1} occurrence${count > 1 && op.replaceAll ? "s" : ""} in ${op.path}`, truncated: false, data: { replacements: op.replaceAll ? count : 1 } };
}
