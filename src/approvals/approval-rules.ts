import type { Op } from "../protocol/ops.js";

/**
 * Which allowed ops wait for a person. Reads of granted paths run; writes and
 * commands ask unless the user's config says "allow". Nothing here can allow
 * what the grant refuses: the broker asks only about ops already inside it.
 */
export type AskRule = "ask" | "allow";

export interface ApprovalRules {
  write: AskRule;
  exec: AskRule;
}

export const DEFAULT_APPROVAL_RULES: ApprovalRules = { write: "ask", exec: "ask" };

export function needsApproval(policy: ApprovalRules, op: Op): boolean {
  if (op.kind === "write" || op.kind === "edit") return policy.write === "ask";
  if (op.kind === "exec" || op.kind === "tool") return policy.exec === "ask";
  return false;
}

/** The exact capability an "allow for this session" answer covers: this op kind on this target, or this exact command. */
export function capabilityOf(op: Op, target: string | undefined): string {
  if (op.kind === "tool") return "tool";
  return op.kind === "exec" ? `exec\0${op.command}` : `${op.kind}\0${target ?? ""}`;
}

/** What the op does, in a line, for the person deciding. */
export function summarizeOp(op: Op, target: string | undefined): string {
  const clip = (s: string, n = 120) => (s.length > n ? `${s.slice(0, n)}…` : s).replace(/\n/g, "⏎");
  switch (op.kind) {
    case "write": return `write ${Buffer.byteLength(op.content)} bytes to ${target}, beginning "${clip(op.content, 300)}"`;
    case "edit": return `edit ${target}: replace "${clip(op.old, 300)}" with "${clip(op.new, 300)}"${op.replaceAll ? " (every occurrence)" : ""}`;
    case "exec": return `run: ${clip(op.command, 2000)}`;
    case "tool": return `run ${target ?? "the component's command"} with input ${clip(op.input, 200)}`;
    default: return `${op.kind} ${target ?? ""}`;
  }
}
