import { MAX_OP_CONTENT_BYTES } from "./ops.js";

/**
 * What an edit op does to a file's text, decided the same way where it runs
 * (the worker) and where it is shown before it runs (an approval's diff), with
 * its size bounded before the new text is built: one replace_all over a small
 * file cannot make a huge one.
 */
export const MAX_EDIT_FILE_BYTES = 16 * 1024 * 1024;

export type EditPlan =
  | { ok: true; text: string; count: number }
  | { ok: false; code: "not-found" | "not-unique" | "too-large"; message: string };

function occurrences(text: string, old: string, stopAt: number): number {
  let n = 0;
  for (let i = text.indexOf(old); i >= 0 && n < stopAt; i = text.indexOf(old, i + old.length)) n += 1;
  return n;
}

/** The text an edit makes of `text` (the file `where`), or why it cannot. */
export function planEdit(text: string, op: { old: string; new: string; replaceAll?: boolean | undefined }, where: string): EditPlan {
  const count = occurrences(text, op.old, op.replaceAll ? Number.MAX_SAFE_INTEGER : 2);
  if (count === 0) return { ok: false, code: "not-found", message: `the text to replace does not occur in ${where}` };
  if (count > 1 && !op.replaceAll)
    return { ok: false, code: "not-unique", message: `the text to replace occurs more than once in ${where}; give more context to make it unique, or set replace_all` };
  const n = op.replaceAll ? count : 1;
  const before = Buffer.byteLength(text);
  const after = before + n * (Buffer.byteLength(op.new) - Buffer.byteLength(op.old));
  if (after > MAX_EDIT_FILE_BYTES || after - before > MAX_OP_CONTENT_BYTES)
    return {
      ok: false, code: "too-large",
      message: `the edit (${n} replacement${n === 1 ? "" : "s"}) would make ${where} ${after} bytes (it is ${before}); an edit may make a file at most ${MAX_EDIT_FILE_BYTES} bytes and grow it by at most ${MAX_OP_CONTENT_BYTES}; nothing was changed`,
    };
  return { ok: true, text: op.replaceAll ? text.split(op.old).join(op.new) : text.replace(op.old, () => op.new), count: n };
}
