import { structuredPatch } from "diff";
import { exactLine, exactLines } from "../text/exact.js";

/**
 * What a person deciding an approval is shown: the whole op, never clipped.
 * A command as it will run; a command tool's input; for a write or an edit, a
 * diff of the file as it is against the file as it would be. Rendered exactly
 * (src/text/exact.ts), so that nothing in it can hide; a view may be long, and
 * the terminal shows it a page at a time, saying how much is left.
 */
export type ApprovalView =
  | { kind: "command"; command: string }
  | { kind: "tool"; command: string; input: string }
  /** before: the file now (null: it does not exist); note: why it could not be compared, when it could not. */
  | { kind: "file"; path: string; before: string | null; after: string; note?: string | undefined }
  | { kind: "text"; text: string };

/** Diffs of more change than this are not worked out (a diff is quadratic in the worst case): the new content is shown whole. */
const DIFF_TIMEOUT_MS = 300;

function fileLines(v: Extract<ApprovalView, { kind: "file" }>): string[] {
  const size = (s: string) => `${Buffer.byteLength(s)} bytes`;
  const head = [`--- ${exactLine(v.path)} ${v.before === null ? "(does not exist yet)" : `(now, ${size(v.before)})`}`, `+++ ${exactLine(v.path)} (after, ${size(v.after)})`];
  if (v.note) head.push(`(${v.note}; the new content, whole:)`);
  if (v.before === null || v.note) return [...head, ...exactLines(v.after).map((l) => `+${l}`)];
  const patch = structuredPatch(v.path, v.path, v.before, v.after, "", "", { context: 3, timeout: DIFF_TIMEOUT_MS });
  if (!patch) return [...head, "(the change is too large to compare; the new content, whole:)", ...exactLines(v.after).map((l) => `+${l}`)];
  if (!patch.hunks.length) return [...head, "(no change: the file already holds exactly this)"];
  const out = head;
  for (const h of patch.hunks) {
    out.push(`@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@`);
    // Each line keeps its diff mark (" ", "-", "+", or "\" for "no newline at end of file"); its text is rendered exactly.
    for (const l of h.lines) out.push(l.startsWith("\\") ? l : `${l[0]}${exactLine(l.slice(1))}`);
  }
  return out;
}

/** The view as lines, each rendered exactly; the first lines say what it is. */
export function viewLines(v: ApprovalView): string[] {
  switch (v.kind) {
    case "command": return exactLines(v.command);
    case "tool": return [`input to ${exactLine(v.command)}:`, ...exactLines(v.input)];
    case "file": return fileLines(v);
    case "text": return exactLines(v.text);
    default: {
      const unknown: never = v;
      return [`(a view Vak does not know how to show: ${exactLine(JSON.stringify(unknown))})`];
    }
  }
}
