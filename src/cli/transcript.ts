import { structuredPatch } from "diff";
import type { AgentEvent, RunResult } from "../agent/agent.js";
import { unhandled } from "../protocol/unhandled.js";
import { clipped, fmt, own, type Output, Text } from "./output.js";

/** Prints a run as it happens: the model's text, each tool call, and what came of it; everything through the output's redactor and neutraliser. */
export function transcriptPrinter(out: Output): (e: AgentEvent) => void {
  return (e) => {
    const who = prefix(e.component);
    switch (e.type) {
      case "text": return out.text(e.delta);
      case "tool-call": {
        const edit = e.name === "edit_file" ? editOf(e.args) : undefined;
        if (!edit) return out.line(fmt`${who}▸ ${e.name} ${clip(JSON.stringify(e.args) ?? "", 200)}`);
        out.line(fmt`${who}▸ ${e.name} ${clip(edit.path, 200)}${own(edit.all ? " (every occurrence)" : "")}`);
        return editDiff(out, edit);
      }
      case "tool-result": {
        const run = e.ok && e.name === "exec" ? commandResult(e.text) : undefined;
        if (run) return commandTail(out, who, run);
        return out.line(e.ok ? fmt`${who}  ✓ ${firstLines(e.text)}` : fmt`${who}  ✗ ${clip(e.text, 300)}`);
      }
      default: return unhandled(e, "agent event");
    }
  };
}

/** Who did it: nothing for the main agent or a workload's harness, [component] for the rest (a component's name is the spec's; a task's is Vak's). */
export function prefix(component: string): Text {
  return component === "agent" || component === "harness" ? own("") : fmt`[${component}] `;
}

/** One line of hostile text, cut at n characters (once redacted), saying how much was left out. */
function clip(s: string, n: number): Text {
  return clipped(s.replace(/\s*\n\s*/g, " ⏎ "), n);
}

function firstLines(s: string): Text {
  const lines = s.split("\n");
  return lines.length > 3 ? fmt`${clip(lines.slice(0, 3).join("\n"), 300)}${own(` … (${lines.length} lines)`)}` : clip(s, 300);
}

/** Lines of an edit's diff, or of a command's output, shown in the transcript; the journal keeps the call whole. */
const SHOWN_LINES = 12;
/** The lines of a command's output shown: its end, where a failing test run says what failed. */
const TAIL_LINES = 6;

function editOf(args: unknown): { path: string; old: string; new: string; all: boolean } | undefined {
  const a = args as { path?: unknown; old_text?: unknown; new_text?: unknown; replace_all?: unknown } | null;
  if (!a || typeof a.path !== "string" || typeof a.old_text !== "string" || typeof a.new_text !== "string") return undefined;
  return { path: a.path, old: a.old_text, new: a.new_text, all: a.replace_all === true };
}

/**
 * An edit as the diff of the text it replaces against its replacement, each
 * line after the margin (the text is the model's), bounded: the approval
 * screen shows the whole change against the file, the journal the whole call.
 */
function editDiff(out: Output, edit: { old: string; new: string }): void {
  const patch = structuredPatch("", "", edit.old, edit.new, "", "", { context: 2, timeout: 300 });
  const lines = patch
    ? patch.hunks.flatMap((h) => h.lines.filter((l) => !l.startsWith("\\")))
    : [...edit.old.split("\n").map((l) => `-${l}`), ...edit.new.split("\n").map((l) => `+${l}`)];
  for (const l of lines.slice(0, SHOWN_LINES)) out.line(fmt`${clip(l, 200)}`);
  if (lines.length > SHOWN_LINES) out.line(fmt`${own(`  … (+${lines.length - SHOWN_LINES} lines of the diff)`)}`);
}

/** A command's output and its exit status, from the text the exec tool answers (agent.ts outcomeText: the status is its last line). */
function commandResult(text: string): { lines: string[]; status: string; ok: boolean } | undefined {
  const m = /(?:^|\n)\[exit code (-?\d+|none)(, timed out)?\]$/.exec(text);
  if (!m) return undefined;
  const body = text.slice(0, m.index);
  return { lines: body ? body.replace(/\n$/, "").split("\n") : [], status: `exit ${m[1]}${m[2] ?? ""}`, ok: m[1] === "0" && !m[2] };
}

/** ✓ or ✗ by the command's exit status, then the end of its output, each line after the margin. */
function commandTail(out: Output, who: Text, run: { lines: string[]; status: string; ok: boolean }): void {
  const n = run.lines.length;
  const shown = run.lines.slice(-TAIL_LINES);
  const what = n === 0 ? "no output" : n > TAIL_LINES ? `${n} lines, the last ${TAIL_LINES}:` : `${n} line${n === 1 ? "" : "s"}:`;
  out.line(fmt`${who}  ${own(`${run.ok ? "✓" : "✗"} ${run.status} · ${what}`)}`);
  for (const l of shown) out.line(fmt`${clip(l, 300)}`);
}

/**
 * Tool calls Vak refused, as opposed to ones that failed on their own (a file
 * not found, a malformed call, a timeout): outside the grants, not approved,
 * revoked by a policy change, or not run because Vak could not run it safely.
 */
const REFUSALS = new Set(["denied", "not-approved", "revoked", "sandbox-setup", "journal"]);
export function isRefusal(code: string): boolean {
  return REFUSALS.has(code);
}

/** The end of a run: what happened, and everything that was refused or failed. */
export function printSummary(out: Output, r: RunResult, session: string | undefined): void {
  const refused = r.refused.filter((x) => isRefusal(x.code)).length;
  const failed = r.refused.length - refused;
  out.line(fmt`${own(`\n── ${r.outcome}: ${r.turns} model turn${r.turns === 1 ? "" : "s"}, ${r.toolCalls} tool call${r.toolCalls === 1 ? "" : "s"}, ${refused} refused${failed ? `, ${failed} failed` : ""}`)}`);
  if (r.error) out.line(fmt`   model error: ${r.error}`);
  for (const x of r.refused) out.line(fmt`   ✗ ${prefix(x.component)}${x.tool}: ${clip(x.message, 300)}`);
  if (session) out.line(fmt`   the record: vak journal show ${own(session)}`);
}
