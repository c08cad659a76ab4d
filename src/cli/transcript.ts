import type { AgentEvent, RunResult } from "../agent/agent.js";
import { unhandled } from "../protocol/unhandled.js";
import { fmt, own, type Output, Text } from "./output.js";

/** Prints a run as it happens: the model's text, each tool call, and what came of it; everything through the output's redactor and neutraliser. */
export function transcriptPrinter(out: Output): (e: AgentEvent) => void {
  return (e) => {
    const who = prefix(e.component);
    switch (e.type) {
      case "text": return out.text(e.delta);
      case "tool-call": return out.line(fmt`${who}▸ ${e.name} ${clip(JSON.stringify(e.args) ?? "", 200)}`);
      case "tool-result": return out.line(e.ok ? fmt`${who}  ✓ ${firstLines(e.text)}` : fmt`${who}  ✗ ${clip(e.text, 300)}`);
      default: return unhandled(e, "agent event");
    }
  };
}

/** Who did it: nothing for the main agent or a workload's harness, [component] for the rest (a component's name is the spec's; a task's is Vak's). */
export function prefix(component: string): Text {
  return component === "agent" || component === "harness" ? own("") : fmt`[${component}] `;
}

/** One line of hostile text, cut at n characters, saying how much was left out. */
function clip(s: string, n: number): Text {
  const one = s.replace(/\s*\n\s*/g, " ⏎ ");
  return one.length > n ? fmt`${one.slice(0, n)}${own(`… (+${one.length - n} characters)`)}` : fmt`${one}`;
}

function firstLines(s: string): Text {
  const lines = s.split("\n");
  return lines.length > 3 ? fmt`${clip(lines.slice(0, 3).join("\n"), 300)}${own(` … (${lines.length} lines)`)}` : clip(s, 300);
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
