import { closeSync, constants, fstatSync, ftruncateSync, writeSync } from "node:fs";
import { MAX_EDIT_FILE_BYTES, planEdit } from "../../protocol/edit-op.js";
import { openNoFollow, readAll } from "../fsx.js";
import type { OpResult } from "./result.js";

/** Replaces an exact piece of text; it must occur exactly once unless replaceAll is set. The result is bounded (protocol/edit-op.ts). */
export function edit(op: { path: string; old: string; new: string; replaceAll?: boolean | undefined }): OpResult {
  const rfd = openNoFollow(op.path, constants.O_RDONLY | constants.O_NONBLOCK);
  let text: string;
  try {
    const st = fstatSync(rfd);
    if (!st.isFile()) return { error: { code: "bad-request", message: `${op.path} is not a regular file` } };
    if (st.size > MAX_EDIT_FILE_BYTES) return { error: { code: "too-large", message: `${op.path} is too large to edit (${st.size} bytes; at most ${MAX_EDIT_FILE_BYTES})` } };
    text = readAll(rfd, st.size).toString("utf8");
  } finally {
    closeSync(rfd);
  }
  const plan = planEdit(text, op, op.path);
  if (!plan.ok) return { error: { code: plan.code, message: plan.message } };
  const wfd = openNoFollow(op.path, constants.O_WRONLY | constants.O_NONBLOCK);
  try {
    if (!fstatSync(wfd).isFile()) return { error: { code: "changed", message: `${op.path} is no longer a regular file; nothing was written` } };
    ftruncateSync(wfd, 0);
    const bytes = Buffer.from(plan.text, "utf8");
    let done = 0;
    while (done < bytes.length) done += writeSync(wfd, bytes, done, bytes.length - done);
  } finally {
    closeSync(wfd);
  }
  return { output: `replaced ${plan.count} occurrence${plan.count > 1 ? "s" : ""} in ${op.path}`, truncated: false, data: { replacements: plan.count } };
}
