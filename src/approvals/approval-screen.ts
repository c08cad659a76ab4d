import type { ApprovalRequest } from "./approval-gate.js";
import { type ApprovalView, viewLines } from "./approval-view.js";
import { exactLines } from "../text/exact.js";

/**
 * What a person deciding an approval is shown, wherever they decide: the
 * terminal prompt (src/cli/approver.ts) and the browser's card
 * (src/server/approval-card.ts) both render this, so the two cannot drift.
 * A headline in Vak's words; the whole op as exact lines (the command, the
 * input, or for a write or an edit the diff against the file as it is now),
 * never clipped, shown a page at a time with what is left counted; and the
 * exact scope of "allow for this session". Every string the op holds is
 * redacted before it is rendered exactly (src/text/exact.ts).
 */
export interface ApprovalScreen {
  headline: string;
  kind: ApprovalView["kind"];
  lines: string[];
  /** What "allow for this session" would let run later without asking, rendered exactly. */
  scope: string;
}

/** Lines shown before the first question, and how many each "more" shows. */
export const FIRST_PAGE = 40;
export const PAGE = 200;

export function approvalScreen(r: Pick<ApprovalRequest, "view" | "op" | "scope">, redact: (s: string) => string): ApprovalScreen {
  const view = redactView(r.view, redact);
  return { headline: headline(r.op, view), kind: view.kind, lines: viewLines(view), scope: exactLines(redact(r.scope)).join(" ⏎ ") };
}

/** What is not shown yet, counted (the same words in the terminal and the browser). */
export function notShownYet(lines: readonly string[], shown: number): string | undefined {
  const left = lines.length - shown;
  if (left <= 0) return undefined;
  const chars = lines.slice(shown).reduce((a, l) => a + l.length, 0);
  return `… ${left} more line${left === 1 ? "" : "s"} of it not shown yet (${chars} characters)`;
}

function redactView(v: ApprovalView, redact: (s: string) => string): ApprovalView {
  switch (v.kind) {
    case "command": return { kind: "command", command: redact(v.command) };
    case "tool": return { kind: "tool", command: redact(v.command), input: redact(v.input) };
    case "file": return { kind: "file", path: redact(v.path), before: v.before === null ? null : redact(v.before), after: redact(v.after), note: v.note };
    case "text": return { kind: "text", text: redact(v.text) };
    default: return v;
  }
}

/** What is asked, in Vak's words (the op's own text is the view below it). */
function headline(op: string, v: ApprovalView): string {
  switch (v.kind) {
    case "command": return "wants to run this command:";
    case "tool": return "wants to run its command:";
    case "file": return op === "edit" ? "wants to edit a file; the change, as a diff:" : "wants to write a file; the change, as a diff:";
    default: return `asks about ${op}:`;
  }
}
