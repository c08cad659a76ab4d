import { type Effect, type Op, traitsOf } from "../protocol/ops.js";
import { unhandled } from "../protocol/unhandled.js";

/**
 * Which allowed ops wait for a person, decided on the effect each op kind
 * declares (protocol/ops.ts), never on a list of kind names. Reads of granted
 * paths run; writes and commands ask unless the user's config says "allow";
 * a kind without a declared effect always asks. Nothing here can allow what
 * the grant refuses: the broker asks only about ops already inside it.
 */
export type AskRule = "ask" | "allow";

/**
 * One rule per effect that can change anything: a new effect does not compile until it has one. A net op
 * (web_fetch) is a GET inside the component's network grants, which are its ceiling: it reads, as a read does.
 */
export type ApprovalRules = Record<Exclude<Effect, "read" | "net">, AskRule>;

export const DEFAULT_APPROVAL_RULES: ApprovalRules = { write: "ask", exec: "ask" };

/** Whether an allowed op waits for a person. Only a read, or an effect the rules say "allow" to, runs without asking. */
export function needsApproval(rules: ApprovalRules, op: { kind: string }): boolean {
  const effect = traitsOf(op.kind)?.effect;
  if (effect === undefined) return true;
  switch (effect) {
    case "read": return false;
    case "net": return false;
    case "write": return rules.write !== "allow";
    case "exec": return rules.exec !== "allow";
    default: return unhandled(effect, "effect");
  }
}

/** The exact capability an "allow for this session" answer covers: this op kind on this target, or this exact command. */
export function capabilityOf(op: Op, target: string | undefined): string {
  switch (op.kind) {
    case "tool": return "tool";
    case "exec": return `exec\0${op.command}`;
    // "For this session" covers this one tool of this one server, with any arguments.
    case "mcp": return `mcp\0${op.server}\0${op.tool}`;
    case "fetch": return `fetch\0${op.url}`;
    case "read": case "list": case "glob": case "grep": case "write": case "edit": return `${op.kind}\0${target ?? ""}`;
    default: return unhandled(op, "op kind");
  }
}

/** What the op does, in a line, for the person deciding. */
export function summarizeOp(op: Op, target: string | undefined): string {
  const clip = (s: string, n = 120) => (s.length > n ? `${s.slice(0, n)}…` : s).replace(/\n/g, "⏎");
  switch (op.kind) {
    case "write": return `write ${Buffer.byteLength(op.content)} bytes to ${target}, beginning "${clip(op.content, 300)}"`;
    case "edit": return `edit ${target}: replace "${clip(op.old, 300)}" with "${clip(op.new, 300)}"${op.replaceAll ? " (every occurrence)" : ""}`;
    case "exec": return `run: ${clip(op.command, 2000)}`;
    case "tool": return `run ${target ?? "the component's command"} with input ${clip(op.input, 200)}`;
    case "mcp": return `call ${op.tool} of the MCP server ${op.server} with ${clip(JSON.stringify(op.arguments), 300)}`;
    case "fetch": return `fetch ${clip(op.url, 500)}`;
    case "read": case "list": case "glob": case "grep": return `${op.kind} ${target ?? ""}`;
    default: return unhandled(op, "op kind");
  }
}
