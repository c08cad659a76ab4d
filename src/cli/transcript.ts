import type { AgentEvent, RunResult } from "../agent/agent.js";
import { visible } from "./visible.js";

/** Prints a run as it happens: the model's text, each tool call, and what came of it; everything redacted. */
export function transcriptPrinter(out: NodeJS.WritableStream, redactText: (s: string) => string): (e: AgentEvent) => void {
  const redact = (s: string) => visible(redactText(s));
  let midLine = false;
  const line = (s: string) => {
    if (midLine) out.write("\n");
    midLine = false;
    out.write(`${s}\n`);
  };
  return (e) => {
    const who = prefix(e.component);
    if (e.type === "text") {
      out.write(redact(e.delta));
      midLine = !e.delta.endsWith("\n");
    } else if (e.type === "tool-call") line(`${who}▸ ${e.name} ${clip(redact(JSON.stringify(e.args) ?? ""), 200)}`);
    else if (e.ok) line(`${who}  ✓ ${firstLines(redact(e.text))}`);
    else line(`${who}  ✗ ${clip(redact(e.text), 300)}`);
  };
}

/** Who did it: nothing for the main agent or a workload's harness, [component] for the rest. */
export function prefix(component: string): string {
  return component === "agent" || component === "harness" ? "" : `[${component}] `;
}

function clip(s: string, n: number): string {
  const one = s.replace(/\s*\n\s*/g, " ⏎ ");
  return one.length > n ? `${one.slice(0, n)}…` : one;
}

function firstLines(s: string): string {
  const lines = s.split("\n");
  const head = lines.slice(0, 3).join("\n    ");
  return lines.length > 3 ? `${clip(head, 300)} … (${lines.length} lines)` : clip(head, 300);
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
export function printSummary(out: NodeJS.WritableStream, r: RunResult, session: string | undefined): void {
  const refused = r.refused.filter((x) => isRefusal(x.code)).length;
  const failed = r.refused.length - refused;
  out.write(`\n── ${r.outcome}: ${r.turns} model turn${r.turns === 1 ? "" : "s"}, ${r.toolCalls} tool call${r.toolCalls === 1 ? "" : "s"}, ${refused} refused${failed ? `, ${failed} failed` : ""}\n`);
  if (r.error) out.write(`   model error: ${visible(r.error)}\n`);
  for (const x of r.refused) out.write(`   ✗ ${prefix(x.component)}${visible(x.tool)}: ${visible(clip(x.message, 300))}\n`);
  if (session) out.write(`   the record: vak journal show ${session}\n`);
}
