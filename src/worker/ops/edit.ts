import { closeSync, constants, fstatSync, ftruncateSync, writeSync } from "node:fs";
import { MAX_EDIT_FILE_BYTES, planEdit } from "../../protocol/edit-op.js";
import { NotAsShownError, openNoFollow, readAll, textDigest } from "../fsx.js";
import type { OpResult } from "./result.js";

/**
 * Replaces an exact piece of text; it must occur exactly once unless replaceAll is set. The result is bounded
 * (protocol/edit-op.ts). With a base (an approved edit), the text must still be the text the approver's diff
 * was made from, so the edit writes exactly the diff shown.
 */
export function edit(op: { path: string; old: string; new: string; replaceAll?: boolean | undefined }, base?: string | null): OpResult {
  const rfd = openNoFollow(op.path, constants.O_RDONLY | constants.O_NONBLOCK);
  let text: string;
  let read: { dev: number; ino: number };
  try {
    const st = fstatSync(rfd);
    if (!st.isFile()) return { error: { code: "bad-request", message: `${op.path} is not a regular file` } };
    if (st.size > MAX_EDIT_FILE_BYTES) return { error: { code: "too-large", message: `${op.path} is too large to edit (${st.size} bytes; at most ${MAX_EDIT_FILE_BYTES})` } };
    const data = readAll(rfd, st.size);
    if (base === null || (typeof base === "string" && textDigest(data) !== base)) throw new NotAsShownError(op.path, base === null ? "it was shown as missing and exists now" : "its content is not the content shown");
    text = data.toString("utf8");
    read = { dev: st.dev, ino: st.ino };
  } finally {
    closeSync(rfd);
  }
  const plan = planEdit(text, op, op.path);
  if (!plan.ok) return { error: { code: plan.code, message: plan.message } };
  const wfd = openNoFollow(op.path, constants.O_WRONLY | constants.O_NONBLOCK);
  try {
    const wst = fstatSync(wfd);
    if (!wst.isFile()) return { error: { code: "changed", message: `${op.path} is no longer a regular file; nothing was written` } };
    // Another file renamed into its place since it was read: the edit was planned on other text.
    if (wst.dev !== read.dev || wst.ino !== read.ino) return { error: { code: "changed", message: `${op.path} was replaced while it was edited; nothing was written` } };
    ftruncateSync(wfd, 0);
    const bytes = Buffer.from(plan.text, "utf8");
    let done = 0;
    while (done < bytes.length) done += writeSync(wfd, bytes, done, bytes.length - done);
  } finally {
    closeSync(wfd);
  }
  return { output: `replaced ${plan.count} occurrence${plan.count > 1 ? "s" : ""} in ${op.path}`, truncated: false, data: { replacements: plan.count } };
}
